/**
 * The default key: which address is the client (the forwarding chain walked
 * from the right, stopping at the first untrusted hop), and how an address
 * becomes a key (an IPv4 address written as IPv6 folded to it, every other
 * IPv6 address, NAT64's included, grouped by `ipv6Subnet`). Unit cases first (some ported from
 * express-rate-limit's test/library/ip-key-generator-test.ts, v8.6.2, with
 * our deliberate differences marked), then the frameworks' own `trust proxy`
 * against real Express 5 and Fastify 5 apps.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { addressKey, clientAddress, compileTrust } from '../../src/http/client-address.js';
import type { HttpDecisionMessage } from '../../src/http/messages.js';
import { type App, FRAMEWORKS, startApp } from './apps.js';
import { agent, call } from './support.js';

describe('addressKey: an IPv4 address written as IPv6', () => {
  it.each([
    ['1.2.3.4', '1.2.3.4'],
    ['::ffff:1.2.3.4', '1.2.3.4'], // IPv4-mapped, dotted
    ['::ffff:102:304', '1.2.3.4'], // IPv4-mapped, hex (was 0:0:0:0::/64, shared with ::1 and ::)
    ['::FFFF:0102:0304', '1.2.3.4'],
    ['0:0:0:0:0:ffff:102:304', '1.2.3.4'],
    ['::ffff:1.2.3.4%eth0', '1.2.3.4'],
    ['::1.2.3.4', '1.2.3.4'], // IPv4-compatible (deprecated), dotted
    ['::102:304', '1.2.3.4'], // IPv4-compatible, hex: the same address (express-rate-limit: ::/56)
  ])('%s -> %s', (address, key) => {
    expect(addressKey(address)).toBe(key);
    expect(addressKey(address, 56)).toBe(key); // whatever the IPv6 prefix
    expect(addressKey(address, 128)).toBe(key);
  });

  it("keeps IPv6's own addresses in the compatible range (:: and ::1) as IPv6, in any spelling", () => {
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('::')).toBe('0:0:0:0::/64');
    expect(addressKey('::0.0.0.1')).toBe('0:0:0:0::/64'); // ::1 written dotted
    expect(addressKey('::1', 128)).toBe('0:0:0:0:0:0:0:1/128');
  });

  it('does not fold an IPv6 address that merely ends in a dotted quad, nor a NAT64 local-use prefix', () => {
    // Its low bits are the client's own choice: keying on them would put it with an unrelated IPv4 client.
    expect(addressKey('2001:db8:1234:5678::1.2.3.4', 56)).toBe('2001:db8:1234:5600::/56');
    expect(addressKey('2001:db8:1234:5678::1.2.3.4')).toBe(addressKey('2001:db8:1234:5678::102:304'));
    expect(addressKey('2001:db8::1.2.3.4')).not.toBe('1.2.3.4');
    expect(addressKey('64:ff9b:1::1.2.3.4')).toBe('64:ff9b:1:0::/64'); // RFC 8215: the operator's layout
  });

  it("keeps a translator's IPv6 address as IPv6: NAT64's 64:ff9b::/96 and SIIT's ::ffff:0:0:0/96", () => {
    // express-rate-limit's case: 64:ff9b::1.2.3.4 and 1.2.3.4 are separate keys (there 64:ff9b::/56).
    expect(addressKey('64:ff9b::1.2.3.4')).toBe('64:ff9b:0:0::/64');
    expect(addressKey('64:ff9b::1.2.3.4', 56)).toBe('64:ff9b:0:0::/56');
    expect(addressKey('64:ff9b::102:304')).toBe(addressKey('64:ff9b::1.2.3.4'));
    expect(addressKey('64:ff9b::1.2.3.4', 128)).toBe('64:ff9b:0:0:0:0:102:304/128');
    expect(addressKey('::ffff:0:1.2.3.4')).toBe('0:0:0:0::/64');
    for (const address of ['64:ff9b::1.2.3.4', '64:ff9b::102:304', '::ffff:0:1.2.3.4']) {
      for (const bits of [56, 64, 128]) expect(addressKey(address, bits)).not.toBe('1.2.3.4');
    }
  });
});

describe('addressKey: IPv6 grouped by ipv6Subnet', () => {
  const full = '0123:4567:89ab:cdef:0123:4567:89ab:cdef';
  it.each([
    [64, '123:4567:89ab:cdef::/64'],
    [56, '123:4567:89ab:cd00::/56'], // express-rate-limit's default and its result
    [63, '123:4567:89ab:cdee::/63'],
    [48, '123:4567:89ab::/48'],
    [1, '0::/1'],
    [112, '123:4567:89ab:cdef:123:4567:89ab::/112'],
    [128, '123:4567:89ab:cdef:123:4567:89ab:cdef/128'],
  ])('/%d -> %s', (bits, key) => {
    expect(addressKey(full, bits)).toBe(key);
  });

  it('groups a /56 holder into one key with 56, and into 256 with the default 64', () => {
    const keys = (bits: number) =>
      new Set(Array.from({ length: 256 }, (_, i) => addressKey(`2001:db8:1:${(0x4200 + i).toString(16)}::1`, bits)));
    expect(keys(56)).toEqual(new Set(['2001:db8:1:4200::/56']));
    expect(keys(64).size).toBe(256);
  });

  it('writes the /64 key as before (keys kept in a store stay the same)', () => {
    expect(addressKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressKey('2001:DB8:0:0:1:2:3:4')).toBe('2001:db8:0:0::/64');
    expect(addressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressKey('123:ABC::89', 56)).toBe('123:abc:0:0::/56');
    expect(addressKey('')).toBe('');
    expect(addressKey('not-an-address')).toBe('not-an-address');
  });
});

/** A request as clientAddress reads it: a socket peer and headers. */
function request(peer: string, headers: Record<string, string>): IncomingMessage {
  return { socket: { remoteAddress: peer }, headers } as unknown as IncomingMessage;
}

describe('clientAddress: the forwarding chain, from the right', () => {
  it('stops at the first address that is not a trusted proxy, asking about no hop beyond it', () => {
    const chain = Array.from({ length: 1000 }, (_, i) => `198.51.100.${i % 250}`);
    chain.push('203.0.113.7', '10.0.0.2', '10.0.0.1');
    const asked: number[] = [];
    const trust = compileTrust((address, hop) => {
      asked.push(hop);
      return address.startsWith('10.') || address === '127.0.0.1';
    });
    const req = request('127.0.0.1', { 'x-forwarded-for': chain.join(', ') });
    expect(clientAddress(req, trust, 'x-forwarded-for')).toBe('203.0.113.7');
    expect(asked).toEqual([0, 1, 2, 3]);
  });

  it('costs the trusted hops, not the length of the header (a 1 MiB chain)', () => {
    const chain = `${'198.51.100.1, '.repeat(75_000)}203.0.113.7`;
    const req = request('10.0.0.1', { 'x-forwarded-for': chain });
    const list = compileTrust(['10.0.0.0/8']);
    const everyHop = compileTrust(true);
    // The median time of one call, over 7 runs of `calls` calls each.
    const time = (trust: ReturnType<typeof compileTrust>, calls: number): number => {
      const runs: number[] = [];
      for (let i = 0; i < 7; i++) {
        const start = performance.now();
        for (let j = 0; j < calls; j++) clientAddress(req, trust, 'x-forwarded-for');
        runs.push((performance.now() - start) / calls);
      }
      return runs.sort((a, b) => a - b)[3] as number;
    };
    expect(clientAddress(req, list, 'x-forwarded-for')).toBe('203.0.113.7');
    expect(clientAddress(req, everyHop, 'x-forwarded-for')).toBe('198.51.100.1');
    // The list stops after one entry; `true` must read all 75,001. Far apart whatever the machine's load
    // (and few calls of the long walk: under coverage on a loaded machine, 140 of them took 10 s).
    expect(time(list, 20) * 50).toBeLessThan(time(everyHop, 2));
  }, 30_000);

  it('reads hop counts, Forwarded elements, ports, brackets and a non-address entry as before', () => {
    const xff = (value: string, trust: Parameters<typeof compileTrust>[0], peer = '10.0.0.9') =>
      clientAddress(request(peer, { 'x-forwarded-for': value }), compileTrust(trust), 'x-forwarded-for');
    expect(xff('203.0.113.9, 198.51.100.7, 10.0.0.2', 2)).toBe('198.51.100.7');
    expect(xff('203.0.113.9, 198.51.100.7', 10)).toBe('203.0.113.9'); // shorter than the count: the left-most
    expect(xff('[2001:db8::1]:443, 192.0.2.1:8080', true)).toBe('2001:db8::1');
    expect(xff('unknown, 192.0.2.1', true)).toBe('192.0.2.1'); // the walk stops at a non-address
    expect(xff('', true)).toBe('10.0.0.9');
    expect(xff('192.0.2.1', false)).toBe('10.0.0.9');
    expect(xff('192.0.2.1', ['10.0.0.0/8'], '::ffff:10.0.0.9')).toBe('192.0.2.1'); // a mapped peer is trusted too
    expect(xff('192.0.2.1', ['10.0.0.0/8'], '64:ff9b::10.0.0.9')).toBe('64:ff9b::10.0.0.9'); // NAT64 is not 10/8
    const forwarded = request('10.0.0.9', { forwarded: 'for="[2001:db8:cafe::17]:4711";proto=https, For=10.0.0.2' });
    expect(clientAddress(forwarded, compileTrust(['10.0.0.0/8']), 'forwarded')).toBe('2001:db8:cafe::17');
  });
});

describe('trustProxy lists: addresses and CIDR blocks', () => {
  it.each([
    [['10.0.0.0/8'], '10.200.3.4', true],
    [['10.0.0.0/8'], '11.0.0.1', false],
    [['10.0.0.0/8'], '::ffff:10.1.2.3', true], // every spelling of an IPv4 address is that address
    [['192.0.2.1'], '192.0.2.1', true],
    [['192.0.2.1'], '192.0.2.10', false],
    [['::ffff:192.0.2.1'], '192.0.2.1', true],
    [['192.0.2.0/31'], '192.0.2.1', true],
    [['192.0.2.0/31'], '192.0.2.2', false],
    [['::1'], '::1', true],
    [['2001:db8::/32'], '2001:db8:ffff::1', true],
    [['2001:db8::/33'], '2001:db8:8000::1', false],
    [['fe80::1%eth0'], 'fe80::1', true],
    [['0.0.0.0/0'], '203.0.113.9', true],
    [['0.0.0.0/0'], '2001:db8::1', false],
    [['::/0'], '2001:db8::1', true],
    [['10.0.0.0/8', '::1'], 'unknown', false],
  ])('%o trusts %s: %s', (list, address, trusted) => {
    expect(compileTrust(list)?.(address, 1)).toBe(trusted);
  });

  it.each([['10.0.0.0/33'], ['::/129'], ['not-an-ip'], ['10.0.0.0/x'], [42]])('refuses the entry %o', (entry) => {
    expect(() => compileTrust([entry as string])).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'trustProxy' }),
    );
  });
});

describe("the frameworks' own trust proxy, when trustProxy is not given", () => {
  const apps: App[] = [];
  const client = agent();
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });
  afterAll(() => client.close());

  /** The keys decided for requests from 127.0.0.1 carrying these X-Forwarded-For values. */
  async function keysFor(app: App, values: string[]): Promise<Array<{ key: string; status: number }>> {
    const seen: string[] = [];
    const listener = (message: unknown): void => {
      seen.push((message as HttpDecisionMessage).key);
    };
    subscribe('tokenpace:http:decision', listener);
    try {
      const out: Array<{ key: string; status: number }> = [];
      for (const value of values) {
        const reply = await call(`${app.url}/`, { dispatcher: client, headers: { 'x-forwarded-for': value } });
        out.push({ key: seen.at(-1) ?? '', status: reply.status });
      }
      return out;
    } finally {
      unsubscribe('tokenpace:http:decision', listener);
    }
  }

  for (const framework of ['express', 'fastify'] as const) {
    it(`${framework}: two clients behind a trusted loopback proxy get a bucket each`, async () => {
      const app = await startApp(framework, { frameworkTrustProxy: 'loopback', layers: [{ rate: 1, burst: 1 }] });
      apps.push(app);
      expect(await keysFor(app, ['198.51.100.1', '198.51.100.2', '203.0.113.5, 198.51.100.1'])).toEqual([
        { key: '198.51.100.1', status: 200 },
        { key: '198.51.100.2', status: 200 },
        { key: '198.51.100.1', status: 429 }, // the proxy appended .1: what the client wrote before is ignored
      ]);
    });

    it(`${framework}: trustProxy, when given, decides instead of the framework's setting`, async () => {
      const app = await startApp(framework, {
        frameworkTrustProxy: 'loopback',
        layers: [{ rate: 1, burst: 1, trustProxy: false }],
      });
      apps.push(app);
      expect((await keysFor(app, ['198.51.100.1', '198.51.100.2'])).map((r) => r.key)).toEqual([
        '127.0.0.1',
        '127.0.0.1',
      ]);
    });
  }

  for (const framework of FRAMEWORKS) {
    it(`${framework}: without any trust setting, the header is ignored (the socket's peer)`, async () => {
      const app = await startApp(framework, { layers: [{ rate: 1, burst: 1 }] });
      apps.push(app);
      expect(await keysFor(app, ['198.51.100.1', '198.51.100.2'])).toEqual([
        { key: '127.0.0.1', status: 200 },
        { key: '127.0.0.1', status: 429 },
      ]);
    });

    it(`${framework}: ipv6Subnet groups a real IPv6 peer`, async () => {
      const app = await startApp(framework, { host: '::1', layers: [{ rate: 1, burst: 2, ipv6Subnet: 56 }] });
      apps.push(app);
      expect((await keysFor(app, ['x'])).map((r) => r.key)).toEqual(['0:0:0:0::/56']);
    });
  }
});
