/**
 * Who is the client? The default key of the rate-limit middleware.
 *
 * Without a proxy in front, the client is the peer of the TCP connection
 * (`req.socket.remoteAddress`), and nothing the client sends can change that.
 * Behind proxies, the peer is the nearest proxy and the client's address is in
 * `X-Forwarded-For` (or `Forwarded`, RFC 7239), a header anyone can send. So
 * the header is read only when `trustProxy` says which hops to believe, and
 * then from the right (the nearest hop) to the left, stopping at the first
 * address that is not a trusted proxy: entries further left were written by
 * the client itself and may be lies.
 *
 * `trustProxy`:
 * - `false` (default): the socket's peer; forwarding headers are ignored.
 * - `true`: every hop is trusted; the left-most address is the client. Only
 *   safe when every request arrives through a proxy that overwrites the header.
 * - a number n: the n nearest hops are proxies; the client is the address n
 *   places left of the socket's peer (the left-most if the list is shorter).
 * - a list of proxy addresses and CIDR blocks (`['10.0.0.0/8', '::1']`), or a
 *   predicate `(address, hop) => boolean`: walk leftwards while the address at
 *   hop i (0 = the socket's peer) is a trusted proxy.
 *
 * IPv6 clients are grouped by /64: one subscriber usually gets a whole /64 and
 * can pick any address in it, so a per-address key would give each of them
 * 2^64 buckets. IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) count as the
 * IPv4 address.
 */

import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { InvalidOptionError } from '../errors.js';

/** Which forwarding hops to believe; see the file's opening comment. */
export type TrustProxy = boolean | number | readonly string[] | ((address: string, hop: number) => boolean);

/** The header that carries the forwarded-for chain. */
export type ProxyHeader = 'x-forwarded-for' | 'forwarded';

/** A compiled trust rule: is the address at this hop a proxy we trust? */
type TrustFn = (address: string, hop: number) => boolean;

/** Compiles a `trustProxy` option into a predicate (or `undefined` for "trust nobody"). */
export function compileTrust(trust: TrustProxy | undefined): TrustFn | undefined {
  if (trust === undefined || trust === false) return undefined;
  if (trust === true) return () => true;
  if (typeof trust === 'number') {
    if (!(Number.isInteger(trust) && trust >= 0)) {
      throw new InvalidOptionError(
        'trustProxy',
        trust,
        `Expected \`trustProxy\` hop count to be an integer >= 0, got ${trust}`,
      );
    }
    return (_address, hop) => hop < trust;
  }
  if (typeof trust === 'function') return trust;
  if (Array.isArray(trust)) {
    const list = new BlockList();
    for (const entry of trust) addToBlockList(list, entry);
    return (address) => {
      const family = isIP(address);
      return family !== 0 && list.check(address, family === 6 ? 'ipv6' : 'ipv4');
    };
  }
  throw new InvalidOptionError(
    'trustProxy',
    trust,
    'Expected `trustProxy` to be a boolean, a hop count, a list of addresses/CIDR blocks, or a function',
  );
}

function addToBlockList(list: BlockList, entry: unknown): void {
  if (typeof entry === 'string') {
    const [address = '', prefix] = entry.split('/');
    const family = isIP(address);
    if (family !== 0) {
      const type = family === 6 ? 'ipv6' : 'ipv4';
      if (prefix === undefined) {
        list.addAddress(address, type);
        if (family === 4) list.addAddress(`::ffff:${address}`, 'ipv6');
        return;
      }
      const bits = Number(prefix);
      if (Number.isInteger(bits) && bits >= 0 && bits <= (family === 6 ? 128 : 32)) {
        list.addSubnet(address, bits, type);
        return;
      }
    }
  }
  throw new InvalidOptionError(
    'trustProxy',
    entry,
    `Expected each \`trustProxy\` entry to be an IP address or a CIDR block such as '10.0.0.0/8', got ${String(entry)}`,
  );
}

/** The addresses a forwarding header lists, left (the claimed client) to right (the nearest hop). */
export function forwardedChain(req: IncomingMessage, header: ProxyHeader): string[] {
  const value = req.headers[header];
  if (value === undefined) return [];
  const text = Array.isArray(value) ? value.join(',') : value;
  if (header === 'x-forwarded-for') return text.split(',').map((part) => stripPort(part.trim()));
  const chain: string[] = [];
  for (const element of text.split(',')) {
    let forAddress = '';
    for (const pair of element.split(';')) {
      const eq = pair.indexOf('=');
      if (eq < 0 || pair.slice(0, eq).trim().toLowerCase() !== 'for') continue;
      forAddress = pair.slice(eq + 1).trim();
    }
    if (forAddress.startsWith('"') && forAddress.endsWith('"') && forAddress.length >= 2) {
      forAddress = forAddress.slice(1, -1);
    }
    chain.push(stripPort(forAddress));
  }
  return chain;
}

/** `[2001:db8::1]:80` -> `2001:db8::1`; `192.0.2.1:80` -> `192.0.2.1`; anything else unchanged. */
function stripPort(address: string): string {
  if (address.startsWith('[')) {
    const end = address.indexOf(']');
    return end > 0 ? address.slice(1, end) : address;
  }
  const colon = address.indexOf(':');
  if (colon > 0 && colon === address.lastIndexOf(':')) return address.slice(0, colon);
  return address;
}

/**
 * The client's address as the trust rule allows it to be known: the socket's
 * peer, or the first untrusted hop of the forwarding chain read from the right.
 * An entry that is not an IP address (`unknown`, an obfuscated identifier)
 * stops the walk: the hop that wrote it is the client as far as we can know.
 */
export function clientAddress(req: IncomingMessage, trust: TrustFn | undefined, header: ProxyHeader): string {
  const peer = req.socket?.remoteAddress ?? '';
  if (trust === undefined || !trust(normalize(peer), 0)) return peer;
  const chain = forwardedChain(req, header);
  let client = peer;
  for (let i = chain.length - 1, hop = 1; i >= 0; i--, hop++) {
    const address = chain[i] ?? '';
    if (isIP(address) === 0) return client;
    client = address;
    if (!trust(normalize(address), hop)) return client;
  }
  return client;
}

/** Strips an IPv6 zone (`%eth0`) and turns an IPv4-mapped IPv6 address into the IPv4 one. */
function normalize(address: string): string {
  const zone = address.indexOf('%');
  const bare = zone >= 0 ? address.slice(0, zone) : address;
  const lower = bare.toLowerCase();
  if (lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4) return lower.slice(7);
  return bare;
}

/**
 * The rate-limit key for an address: IPv4 as is, IPv6 as its /64 prefix
 * (`2001:db8:1:2::/64`), anything unparseable as is (an empty peer is `''`).
 */
export function addressKey(address: string): string {
  const bare = normalize(address);
  if (isIP(bare) !== 6) return bare;
  const hextets = expandIPv6(bare);
  return `${hextets.slice(0, 4).join(':')}::/64`;
}

/** The eight hextets of a valid IPv6 address, each without leading zeros. */
function expandIPv6(address: string): string[] {
  let text = address.toLowerCase();
  // An embedded IPv4 tail (::ffff:1.2.3.4 style, any prefix) becomes two hextets.
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const zeros = rest === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((h) => Number.parseInt(h, 16).toString(16));
}
