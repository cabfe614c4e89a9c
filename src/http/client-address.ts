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
 *   (Not given at all, the adapters take the framework's own answer when it
 *   has one: Express's `trust proxy`, Fastify's `trustProxy`.)
 * - `true`: every hop is trusted; the left-most address is the client. Only
 *   safe when every request arrives through a proxy that overwrites the header.
 * - a number n: the n nearest hops are proxies; the client is the address n
 *   places left of the socket's peer (the left-most if the list is shorter).
 * - a list of proxy addresses and CIDR blocks (`['10.0.0.0/8', '::1']`), or a
 *   predicate `(address, hop) => boolean`: walk leftwards while the address at
 *   hop i (0 = the socket's peer) is a trusted proxy.
 *
 * An IPv4 address written as IPv6 (IPv4-mapped `::ffff:a.b.c.d` in any
 * spelling, and the deprecated IPv4-compatible `::a.b.c.d`) is keyed as the
 * IPv4 address. Every other IPv6 address is IPv6, one that carries an IPv4
 * address for a translator (NAT64's `64:ff9b::/96`) included, and IPv6
 * clients are grouped by a prefix, /64 by default (`ipv6Subnet`): one
 * subscriber gets at least a /64 and can pick any address in it, so a
 * per-address key would give each of them 2^64 buckets. docs/http.md says
 * when to choose /56.
 */

import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { InvalidOptionError } from '../errors.js';

/** Which forwarding hops to believe; see the file's opening comment. */
export type TrustProxy = boolean | number | readonly string[] | ((address: string, hop: number) => boolean);

/** The header that carries the forwarded-for chain. */
export type ProxyHeader = 'x-forwarded-for' | 'forwarded';

/** A compiled trust rule: is the address at this hop a proxy we trust? */
export type TrustFn = (address: string, hop: number) => boolean;

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
    // A prefix match over an address's 8 hextets, IPv4 in its mapped form: one rule for both families.
    const blocks = trust.map(trustedBlock);
    return (address) => {
      const hextets = hextetsOf(address);
      return hextets !== undefined && blocks.some((block) => inBlock(hextets, block));
    };
  }
  throw new InvalidOptionError(
    'trustProxy',
    trust,
    'Expected `trustProxy` to be a boolean, a hop count, a list of addresses/CIDR blocks, or a function',
  );
}

/** A trusted address or CIDR block: its first `bits` bits, over an address's 8 hextets (IPv4 as ::ffff:a.b.c.d). */
interface Block {
  readonly hextets: readonly number[];
  readonly bits: number;
}

function trustedBlock(entry: unknown): Block {
  if (typeof entry === 'string') {
    const [address = '', prefix] = entry.split('/');
    // A single address is compared as the addresses it is compared with are: folded (see normalize).
    const hextets = hextetsOf(prefix === undefined ? normalize(address) : address);
    const bits = Number(prefix ?? 128);
    const ipv4 = isIP(address) === 4;
    if (
      hextets !== undefined &&
      Number.isInteger(bits) &&
      bits >= 0 &&
      bits <= (ipv4 && prefix !== undefined ? 32 : 128)
    ) {
      return { hextets, bits: ipv4 && prefix !== undefined ? 96 + bits : bits };
    }
  }
  throw new InvalidOptionError(
    'trustProxy',
    entry,
    `Expected each \`trustProxy\` entry to be an IP address or a CIDR block such as '10.0.0.0/8', got ${String(entry)}`,
  );
}

/** An address's 8 hextets (IPv4 in its mapped form, `::ffff:a.b.c.d`), or undefined if it is not one. */
function hextetsOf(address: string): number[] | undefined {
  const family = isIP(address);
  if (family === 6) return parseIPv6(address);
  if (family !== 4) return undefined;
  const [a = 0, b = 0, c = 0, d = 0] = address.split('.').map(Number); // four octets: isIP has checked the form
  return [0, 0, 0, 0, 0, 0xffff, a * 256 + b, c * 256 + d];
}

function inBlock(hextets: readonly number[], block: Block): boolean {
  for (let i = 0, bits = block.bits; bits > 0; i++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if (((hextets[i] as number) & mask) !== ((block.hextets[i] as number) & mask)) return false;
  }
  return true;
}

/**
 * The client's address as the trust rule allows it to be known: the socket's
 * peer, or the first untrusted hop of the forwarding chain. The header is
 * read from its right end, one entry at a time, and reading stops at the
 * first address that is not a trusted proxy, so a long chain costs only the
 * hops that are trusted (all of them only with `trustProxy: true`). An entry
 * that is not an IP address (`unknown`, an obfuscated identifier) stops the
 * walk: the hop that wrote it is the client as far as we can know.
 */
export function clientAddress(req: IncomingMessage, trust: TrustFn | undefined, header: ProxyHeader): string {
  const peer = req.socket?.remoteAddress ?? '';
  return trust === undefined ? peer : forwardedClient(peer, req.headers[header], trust, header);
}

/**
 * {@link clientAddress} from its parts, for servers without node:http's request (Hono on Bun, Deno,
 * Workers): the socket's peer (`''` if unknown) and the forwarding header's value.
 */
export function forwardedClient(
  peer: string,
  value: string | readonly string[] | undefined,
  trust: TrustFn | undefined,
  header: ProxyHeader,
): string {
  if (trust === undefined || !trust(normalize(peer), 0)) return peer;
  if (value === undefined) return peer;
  const text = typeof value === 'string' ? value : value.join(',');
  const xff = header === 'x-forwarded-for';
  let client = peer;
  let end = text.length;
  for (let hop = 1; ; hop++) {
    const comma = end > 0 ? text.lastIndexOf(',', end - 1) : -1;
    const entry = text.slice(comma + 1, end);
    const address = xff ? stripPort(entry.trim()) : forAddress(entry);
    if (isIP(address) === 0) return client;
    client = address;
    if (comma < 0 || !trust(normalize(address), hop)) return client;
    end = comma;
  }
}

/** The address of one `Forwarded` element's `for=` pair (RFC 7239), quotes and port removed; '' if none. */
function forAddress(element: string): string {
  let value = '';
  for (const pair of element.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0 || pair.slice(0, eq).trim().toLowerCase() !== 'for') continue;
    value = pair.slice(eq + 1).trim();
  }
  if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
  return stripPort(value);
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

/** Strips an IPv6 zone (`%eth0`) and writes an IPv4 address written as IPv6 as the IPv4 address. */
function normalize(address: string): string {
  const zone = address.indexOf('%');
  const bare = zone >= 0 ? address.slice(0, zone) : address;
  if (!bare.includes(':') || isIP(bare) !== 6) return bare;
  const hextets = parseIPv6(bare);
  return embeddedIPv4(hextets) ?? bare;
}

/** The IPv6 prefix length that groups clients by default (see the opening comment and docs/http.md). */
export const DEFAULT_IPV6_SUBNET = 64;

/**
 * The rate-limit key for an address: IPv4 as is; an IPv4 address written as
 * IPv6 as that address; other IPv6 addresses as their prefix of
 * `ipv6Subnet` bits (`2001:db8:1:2::/64`); anything unparseable as is (an
 * empty peer is `''`).
 */
export function addressKey(address: string, ipv6Subnet = DEFAULT_IPV6_SUBNET): string {
  if (!address.includes(':')) return address; // IPv4 (or not an address): the common case, first
  const zone = address.indexOf('%');
  const bare = zone >= 0 ? address.slice(0, zone) : address;
  if (isIP(bare) !== 6) return bare;
  const hextets = parseIPv6(bare);
  const ipv4 = embeddedIPv4(hextets);
  if (ipv4 !== undefined) return ipv4;
  const kept = Math.ceil(ipv6Subnet / 16);
  const parts: string[] = [];
  for (let i = 0; i < kept; i++) {
    const bits = Math.min(16, ipv6Subnet - 16 * i); // 1..16 bits of this hextet are kept
    const mask = (0xffff << (16 - bits)) & 0xffff;
    parts.push(((hextets[i] as number) & mask).toString(16));
  }
  return `${parts.join(':')}${kept < 8 ? '::' : ''}/${ipv6Subnet}`;
}

/**
 * The IPv4 address an IPv6 address is, if it is one written as IPv6:
 * IPv4-mapped `::ffff:0:0/96` (in dotted or hex form: `::ffff:1.2.3.4`,
 * `::ffff:102:304`), as a dual-stack socket reports an IPv4 peer, and the
 * deprecated IPv4-compatible `::/96` (`::1.2.3.4`, but not `::` or `::1`,
 * which are IPv6's own). An address a translator writes for an IPv4 host
 * (NAT64's `64:ff9b::/96`, SIIT's `::ffff:0:0:0/96`) is an IPv6 address: its
 * low 32 bits name a host on the other side, not this client.
 */
function embeddedIPv4(h: readonly number[]): string | undefined {
  const [h0, h1, h2, h3, h4, h5, h6 = 0, h7 = 0] = h;
  if (h0 !== 0 || h1 !== 0 || h2 !== 0 || h3 !== 0 || h4 !== 0) return undefined;
  const mapped = h5 === 0xffff;
  const compatible = h5 === 0 && (h6 !== 0 || h7 > 1);
  if (!(mapped || compatible)) return undefined;
  return `${h6 >> 8}.${h6 & 0xff}.${h7 >> 8}.${h7 & 0xff}`;
}

/** The eight hextets of a valid IPv6 address (without a zone), as numbers. */
function parseIPv6(address: string): number[] {
  let text = address;
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
  return [...left, ...zeros, ...right].map((h) => Number.parseInt(h, 16));
}
