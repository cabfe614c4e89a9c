/**
 * express-rate-limit's own tests, from test/library/ip-key-generator-test.ts of
 * express-rate-limit/express-rate-limit (commit 3828a5b, 8.6.2; MIT License, (c) Nathan Friedly and
 * contributors), against tokenpace's default key: each address is sent as a real request's client (a
 * trusted `X-Forwarded-For`) to a real Express app, and the key is read from `req.rateLimit.key`.
 * `ipv6Subnet: 56` is ERL's default (tokenpace's is 64). tokenpace writes a prefix without
 * compressing its zero groups (`64:ff9b:0:0::/56` where ERL writes `64:ff9b::/56`): the same groups,
 * another spelling (docs/peer-suites.md).
 */

import type { Application } from 'express';
import { describe, expect, it } from 'vitest';
import { rateLimit } from '../../../src/http/middleware.js';
import { createServer, erl, request, testClock } from './harness.js';

const apps = new Map<string, Application>();

/** ERL's `ipKeyGenerator(ip, ipv6Subnet)`: the default key of a request from `ip`. */
async function ipKeyGenerator(ip: string, ipv6Subnet: number | false = 56): Promise<string> {
  const name = String(ipv6Subnet);
  let app = apps.get(name);
  if (app === undefined) {
    const { clock } = testClock();
    app = createServer(rateLimit(erl(clock, { limit: 1000 }, { trustProxy: true, ipv6Subnet })));
    app.get('/key', (req, res) => {
      res.json((req as unknown as { rateLimit: { key: string } }).rateLimit.key);
    });
    apps.set(name, app);
  }
  const reply = await request(app, '/key', { headers: { 'x-forwarded-for': ip } });
  return JSON.parse(reply.text) as string;
}

describe('ipKeyGenerator', () => {
  it('should return an IPv4 address unchanged', async () => {
    expect(await ipKeyGenerator('1.2.3.4')).toBe('1.2.3.4');
    expect(await ipKeyGenerator('1.2.3.4', 16)).toBe('1.2.3.4');
  });

  it('should return an IPv4 address mapped to IPv6 as an IPv4 address', async () => {
    expect(await ipKeyGenerator('::ffff:1.2.3.4')).toBe('1.2.3.4');
    expect(await ipKeyGenerator('::1.2.3.4')).toBe('1.2.3.4');
  });

  it('should return an IPv4 address mapped to IPv6 as an IPv4 address regardless of notation', async () => {
    expect(await ipKeyGenerator('::ffff:102:304')).toBe('1.2.3.4');
    expect(await ipKeyGenerator('::ffff:102:304', 16)).toBe('1.2.3.4');
    expect(await ipKeyGenerator('::ffff:102:304', false)).toBe('1.2.3.4');
    expect(await ipKeyGenerator('::ffff:102:304')).toBe(await ipKeyGenerator('::ffff:1.2.3.4'));
  });

  it('should apply ipv6Subnet to an IPv6 address that merely ends in dotted-quad notation', async () => {
    expect(await ipKeyGenerator('2001:db8:1234:5678::1.2.3.4')).toBe('2001:db8:1234:5600::/56');
    expect(await ipKeyGenerator('64:ff9b::1.2.3.4')).toBe('64:ff9b:0:0::/56'); // ERL: '64:ff9b::/56'
    expect(await ipKeyGenerator('2001:db8:1234:5678::1.2.3.4')).toBe(
      await ipKeyGenerator('2001:db8:1234:5678::102:304'),
    );
    expect(await ipKeyGenerator('2001:db8::1.2.3.4')).not.toBe(await ipKeyGenerator('1.2.3.4'));
  });

  it('should apply ipv6Subnet to addresses in the IPv4-compatible range that are not written in dotted-quad notation', async () => {
    expect(await ipKeyGenerator('::1')).toBe('0:0:0:0::/56'); // ERL: '::/56'
    expect(await ipKeyGenerator('::')).toBe('0:0:0:0::/56'); // ERL: '::/56'
  });

  it('should return an IPv6 address unchanged with ipv6Subnet set to false', async () => {
    // tokenpace: the address as a /128 prefix, its groups without leading zeros (ERL: the text as given).
    expect(await ipKeyGenerator('0123:4567:89ab:cdef:0123:4567:89ab:cdef', false)).toBe(
      '123:4567:89ab:cdef:123:4567:89ab:cdef/128',
    );
  });

  it('should apply ipv6Subnet only a true IPv6 address', async () => {
    expect(await ipKeyGenerator('::1.2.3.4', 16)).toBe('1.2.3.4');
    expect(await ipKeyGenerator('::ffff:1.2.3.4', 16)).toBe('1.2.3.4');
    expect(await ipKeyGenerator('::1.2.3.4', false)).toBe('1.2.3.4');
  });

  it('should apply a default /56 netmask to an IPv6 address', async () => {
    expect(await ipKeyGenerator('0123:4567:89ab:cdef:0123:4567:89ab:cdef')).toBe('123:4567:89ab:cd00::/56');
  });

  it('should apply a /63 netmask to an IPv6 address', async () => {
    expect(await ipKeyGenerator('0123:4567:89ab:cdef:0123:4567:89ab:cdef', 63)).toBe('123:4567:89ab:cdee::/63');
  });

  it('should accept abbreviated IPv6 addresses', async () => {
    expect(await ipKeyGenerator('123:ABC::89')).toBe('123:abc:0:0::/56'); // ERL: '123:abc::/56'
  });

  it('should return an IPv6 address normalized but otherwise unchanged with a /128 netmask', async () => {
    expect(await ipKeyGenerator('0123:4567:89ab:cdef:0123:4567:89ab:cdef', 128)).toBe(
      '123:4567:89ab:cdef:123:4567:89ab:cdef/128',
    );
  });
});
