/**
 * express-rate-limit's own tests, from test/library/validation-test.ts of
 * express-rate-limit/express-rate-limit (commit 3828a5b, 8.6.2; MIT License, (c) Nathan Friedly and
 * contributors): the validations that have an equivalent in tokenpace, which checks its options when
 * the middleware is made and throws a coded error where ERL logs one. ERL's checks of a deployment at
 * run time (a shared store, a request counted twice, a limiter made in a handler, `trust proxy`
 * headers, a key function that reads `req.ip`) have none; docs/peer-suites.md lists them.
 */

import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/errors.js';
import { rateLimit } from '../../../src/http/middleware.js';

const base = { rate: 1, burst: 5 };

describe('validations tests', () => {
  describe('ipv6Subnet', () => {
    const validValues: number[] = [];
    for (let i = 32; i <= 64; i++) validValues.push(i);
    it.each(validValues)('should allow numbers in the 32-64 range: %d', (subnet) => {
      expect(() => rateLimit({ ...base, ipv6Subnet: subnet })).not.toThrow();
    });

    it('should allow false', () => {
      expect(() => rateLimit({ ...base, ipv6Subnet: false })).not.toThrow();
    });

    it.each([31, 65])('should error on numbers below 32 or above 64: %d', (subnet) => {
      // tokenpace: any prefix length from 1 to 128 is accepted (ERL logs an error outside 32-64).
      expect(() => rateLimit({ ...base, ipv6Subnet: subnet })).not.toThrow();
      expect(() => rateLimit({ ...base, ipv6Subnet: 0 })).toThrow(InvalidOptionError);
      expect(() => rateLimit({ ...base, ipv6Subnet: 129 })).toThrow(InvalidOptionError);
    });

    it('should error on non-integer numbers', () => {
      expect(() => rateLimit({ ...base, ipv6Subnet: 48.5 })).toThrow(InvalidOptionError);
    });
  });

  describe('ipv6SubnetOrKeyGenerator', () => {
    it.each([{}, { ipv6Subnet: 64 }, { key: () => 'global' }])(
      'should allow one or the other (or none): %j',
      (options) => {
        expect(() => rateLimit({ ...base, ...options })).not.toThrow();
      },
    );

    it.each([64, false as const])('should warn on both (ipv6Subnet %s)', (ipv6Subnet) => {
      // tokenpace: accepted; `ipv6Subnet` shapes only the default key, and a `key` replaces it.
      expect(() => rateLimit({ ...base, ipv6Subnet, key: () => 'global' })).not.toThrow();
    });
  });

  describe('headersDraftVersion', () => {
    it('should log an error if standardHeaders is an unsupported version', () => {
      expect(() => rateLimit({ ...base, headers: 'draft-2' as never })).toThrow(InvalidOptionError);
    });

    it('should not log an error a valid version is passed as standardHeaders', () => {
      expect(() => rateLimit({ ...base, headers: 'draft-8' })).not.toThrow();
    });
  });

  describe('knownOptions', () => {
    it('should log an error if an unknown option is passed in', () => {
      expect(() => rateLimit({ ...base, windowMS: 100 } as never)).toThrow(InvalidOptionError);
      expect(() => rateLimit({ ...base, windowMS: 100 } as never)).toThrow(/Unknown option `windowMS`/);
    });
  });

  describe('trustProxy', () => {
    it('should log an error on "trust proxy" = true', () => {
      // tokenpace: `trustProxy: true` is accepted (docs/http.md says when it is safe: every request
      // through a proxy that overwrites the header).
      expect(() => rateLimit({ ...base, trustProxy: true })).not.toThrow();
    });
  });
});
