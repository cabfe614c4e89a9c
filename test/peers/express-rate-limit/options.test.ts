/**
 * express-rate-limit's own tests, from test/library/options-test.ts of
 * express-rate-limit/express-rate-limit (commit 3828a5b, 8.6.2; MIT License, (c) Nathan Friedly and
 * contributors), against tokenpace's `rateLimit`. tokenpace checks options when the middleware is
 * made and throws a coded error naming the option (ERL logs a validation error and goes on);
 * docs/peer-suites.md lists each case.
 */

import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/errors.js';
import { rateLimit } from '../../../src/http/middleware.js';
import { createServer, erl, request, testClock } from './harness.js';

describe('options test', () => {
  it('should allow an empty options object', () => {
    // tokenpace: refused, saying what to give (ERL: 5 per minute by default).
    expect(() => rateLimit({})).toThrow(/needs either `limiter` or both `rate` and `burst`/);
  });

  it('should ignore options that are set to `undefined`', async () => {
    const { clock } = testClock();
    const app = createServer(
      rateLimit(erl(clock, { limit: 5 }, { key: undefined, skip: undefined, headers: undefined, maxWait: undefined })),
    );
    const response = await request(app);
    expect(response.status).toBe(200);
    expect(response.get('ratelimit')).toBe('"default";r=4;t=12');
  });

  it('should allow the use of pre-6.x headers options', async () => {
    // tokenpace: `headers: false` sends no rate-limit fields (ERL's pre-6.x `headers` alias).
    const { clock } = testClock();
    const app = createServer(rateLimit(erl(clock, {}, { headers: false })));
    const response = await request(app);
    expect(response.status).toBe(200);
    expect(response.get('ratelimit')).toBeUndefined();
    expect(response.get('ratelimit-policy')).toBeUndefined();
  });

  it.each(['max', 'limit'])('should allow the use of the `%s` option', (option) => {
    // tokenpace: refused with what to write instead (`rate` and `burst`), so nothing is ignored.
    expect(() => rateLimit({ [option]: 7 } as never)).toThrow(InvalidOptionError);
    expect(() => rateLimit({ [option]: 7 } as never)).toThrow(/give `rate` and `burst`/);
  });

  it('should not allow the use of an invalid store', () => {
    class InvalidStore {
      invalid = true;
    }
    // tokenpace: the store is the limiter's; a limiter without tryTake/take is refused.
    expect(() => rateLimit({ limiter: new InvalidStore() as never })).toThrow(/limiter/);
  });

  it('should not allow an invalid standardHeaders option', () => {
    // @ts-expect-error Check if TSC can detect an invalid value for this option.
    expect(() => rateLimit({ rate: 1, burst: 1, headers: 'not-a-valid-draft' })).toThrow(InvalidOptionError);
  });

  it('should not allow an invalid logger implemenation to be provided', () => {
    // tokenpace: there is no `logger`; failures are published on `tokenpace:http:error`, and the option
    // is refused with that advice.
    expect(() => rateLimit({ rate: 1, burst: 1, logger: { error: 'invalid logger' } } as never)).toThrow(
      /tokenpace:http:error/,
    );
  });
});
