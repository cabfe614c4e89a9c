import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addressKey } from '../../src/http/client-address.js';
import {
  formatRateLimit,
  parseRateLimit,
  parseRetryAfter,
  pauseRequested,
  policyWindow,
  retryAfterSeconds,
  sfString,
} from '../../src/http/headers.js';

describe('RateLimit-Policy windows', () => {
  it.each([
    [20, 40, 40, 2],
    [100, 200, 200, 2],
    [1000, 10, 1000, 1],
    [3, 10, 12, 4],
    [0.1, 1, 1, 10],
  ])('rate %d, burst %d -> q=%d;w=%d', (rate, burst, quota, windowSeconds) => {
    expect(policyWindow(rate, burst)).toEqual({ quota, windowSeconds });
  });

  it('never advertises more than the bucket admits in a window from empty, nor less than the burst when w is whole', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 1, max: 100_000 }), (rate, burst) => {
        const { quota, windowSeconds } = policyWindow(rate, burst);
        expect(windowSeconds).toBeGreaterThanOrEqual(1);
        expect(quota).toBeLessThanOrEqual(rate * windowSeconds); // q/w never overstates the rate
        expect(quota).toBeGreaterThanOrEqual(Math.min(burst, rate * windowSeconds));
      }),
    );
  });
});

describe('RateLimit and Retry-After', () => {
  it('formats admitted and refused decisions', () => {
    const decision = { allowed: true, remaining: 9.7, retryAfterMs: 0, resetAfterMs: 1501, limit: 40 };
    expect(formatRateLimit('default', decision)).toBe('"default";r=9;t=2');
    expect(formatRateLimit('a"b', { ...decision, allowed: false, remaining: 0, retryAfterMs: 1 })).toBe(
      '"a\\"b";r=0;t=1',
    );
    expect(retryAfterSeconds(0)).toBe(1);
    expect(retryAfterSeconds(1000)).toBe(1);
    expect(retryAfterSeconds(1000.5)).toBe(2);
    expect(() => sfString('é')).toThrow(/printable ASCII/);
  });

  it('parses Retry-After as seconds or an HTTP date (relative to the Date field)', () => {
    expect(parseRetryAfter('120', undefined, 0)).toBe(120_000);
    const date = 'Wed, 21 Oct 2026 07:28:00 GMT';
    expect(parseRetryAfter('Wed, 21 Oct 2026 07:28:30 GMT', date, 0)).toBe(30_000);
    expect(parseRetryAfter('Wed, 21 Oct 2026 07:28:30 GMT', undefined, Date.parse(date) + 10_000)).toBe(20_000);
    expect(parseRetryAfter('Wed, 21 Oct 2026 07:27:00 GMT', date, 0)).toBe(0);
    expect(parseRetryAfter('soon', undefined, 0)).toBeUndefined();
    expect(parseRetryAfter('-5', undefined, 0)).toBeUndefined();
  });

  it('parses RateLimit lists and ignores malformed ones', () => {
    expect(parseRateLimit('"default";r=0;t=30, "daily";r=999')).toEqual([
      { policy: 'default', remaining: 0, resetSeconds: 30 },
      { policy: 'daily', remaining: 999, resetSeconds: undefined },
    ]);
    expect(parseRateLimit('"x";r=1;t=2;pk=:AAEC:')).toEqual([{ policy: 'x', remaining: 1, resetSeconds: 2 }]);
    expect(parseRateLimit('p;r=3')).toEqual([{ policy: 'p', remaining: 3, resetSeconds: undefined }]);
    expect(parseRateLimit('"x";t=2')).toBeUndefined(); // r is required
    expect(parseRateLimit('"x";r=-1')).toBeUndefined();
    expect(parseRateLimit('"x";r=1.5')).toBeUndefined();
    expect(parseRateLimit('"x";r=1;t=soon')).toBeUndefined();
    expect(parseRateLimit('"x";r=1, "y"')).toBeUndefined(); // one bad item spoils the field
    expect(parseRateLimit('')).toBeUndefined();
    expect(parseRateLimit(undefined)).toBeUndefined();
  });

  // Draft -07's one-field form, which stacked draft-7 limiters and the adaptive client read.
  it.each([
    ['limit=40, remaining=39, reset=1', 39, 1],
    ['limit=40,remaining=0,reset=12', 0, 12],
    ['reset=5, remaining=7, limit=9', 7, 5],
    ['remaining=3', 3, undefined],
    ['limit=40, remaining=5;w=1, reset=2', 5, 2],
    ['remaining=9, remaining=4', 4, undefined],
    ['limit=40, remaining=5, reset=2, policy="x"', 5, 2],
  ])('parses the draft -7 dictionary %j as one item', (field, remaining, resetSeconds) => {
    expect(parseRateLimit(field)).toEqual([{ policy: '', remaining, resetSeconds }]);
  });

  it.each([
    'limit=10', // remaining is required
    'limit=40, remaining=-1, reset=1',
    'limit=40, remaining=1.5',
    'limit=40, remaining="5"',
    'limit=40, remaining=5, reset=soon',
    'Remaining=5', // a dictionary key is lowercase
    '"p";r=1, remaining=5', // a list item beside a dictionary member
  ])('ignores the malformed draft -7 field %j', (field) => {
    expect(parseRateLimit(field)).toBeUndefined();
  });

  it('asks for a pause from Retry-After first, else from RateLimit items with r=0', () => {
    expect(pauseRequested({ 'retry-after': '3', ratelimit: '"d";r=0;t=10' }, 0)).toEqual({
      delayMs: 3000,
      source: 'retry-after',
    });
    expect(pauseRequested({ ratelimit: '"a";r=0;t=4, "b";r=0;t=9, "c";r=5;t=60' }, 0)).toEqual({
      delayMs: 9000,
      source: 'ratelimit',
    });
    expect(pauseRequested({ ratelimit: '"a";r=3;t=4' }, 0)).toBeUndefined();
    expect(pauseRequested({ ratelimit: 'limit=5, remaining=0, reset=4' }, 0)).toEqual({
      delayMs: 4000,
      source: 'ratelimit',
    });
    expect(pauseRequested({}, 0)).toBeUndefined();
  });
});

describe('addressKey', () => {
  it.each([
    ['192.0.2.1', '192.0.2.1'],
    ['::ffff:192.0.2.1', '192.0.2.1'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:DB8:0:0:1:2:3:4', '2001:db8:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['64:ff9b::192.0.2.33', '64:ff9b:0:0::/64'], // NAT64 is IPv6 (client-address.test.ts has the full table)
    ['', ''],
  ])('%s -> %s', (address, key) => {
    expect(addressKey(address)).toBe(key);
  });
});
