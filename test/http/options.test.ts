/**
 * rateLimit's options are checked when the middleware is made: the names
 * users bring from express-rate-limit and @fastify/rate-limit give a coded
 * error that names ours (never silently ignored), a misspelt one a
 * suggestion, and a bad value a message that says what to give.
 */

import { describe, expect, it } from 'vitest';
import { InvalidOptionError, NotSupportedError } from '../../src/errors.js';
import { type FastifyReplyLike, type FastifyRequestLike, rateLimitHook } from '../../src/http/fastify.js';
import { rateLimit } from '../../src/http/middleware.js';
import type { RateLimitOptions } from '../../src/http/rate-limit-options.js';
import type { Decision, RateLimitDecider } from '../../src/http/types.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { expectRejection } from '../keyed/contract.js';

/** The error `make` throws, checked to be an InvalidOptionError for `option`. */
function refusal(make: () => unknown, option: string): InvalidOptionError {
  let error: unknown;
  try {
    make();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(InvalidOptionError);
  expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION', option });
  return error as InvalidOptionError;
}

/** Options as plain JavaScript would pass them: any name. */
const loose = (options: Record<string, unknown>): RateLimitOptions => options as RateLimitOptions;

describe('options brought from express-rate-limit and @fastify/rate-limit', () => {
  it.each([
    ['keyGenerator', () => 'k', /`key: \(req\) => string`/],
    ['windowMs', 60_000, /give `rate` and `burst`.*rate: '100\/15min', burst: 100/],
    ['max', 100, /give `rate` and `burst`/],
    ['limit', 100, /give `rate` and `burst`.*algorithm: 'fixed-window'/],
    ['timeWindow', '1 minute', /give `rate` and `burst`/],
    ['handler', () => {}, /`onLimit: \(req, res, info\)/],
    ['message', 'Too many', /answer refusals yourself with `onLimit: /],
    ['statusCode', 429, /answer refusals yourself with `onLimit: /],
    ['errorResponseBuilder', () => ({}), /answer refusals yourself with `onLimit: /],
    ['standardHeaders', 'draft-8', /use `headers`: true or 'draft-11'/],
    ['enableDraftSpec', true, /use `headers`/],
    ['addHeaders', {}, /use `headers`/],
    ['identifier', 'per-ip', /use `policyName`/],
    ['store', {}, /`limiter: new KeyedLimiter\(\{ rate, burst, store \}\)`/],
    ['redis', {}, /`limiter: new KeyedLimiter/],
    ['validate', false, /remove it/],
    ['passOnStoreError', true, /`onError: \(error, req, res, next\) => next\(\)`/],
    ['skipOnError', true, /`onError/],
    ['allowList', ['127.0.0.1'], /`skip: \(req\) => \.\.\.`/],
    ['ban', 3, /not offered/],
  ])('%s', (name, value, hint) => {
    // The issue's own example first: rate and burst given, the peer's option beside them.
    const error = refusal(() => rateLimit(loose({ rate: 1, burst: 2, [name]: value })), name);
    expect(error.message).toMatch(new RegExp(`^Unknown option \`${name}\` for rateLimit options: `));
    expect(error.message).toMatch(hint);
    const options = { rate: 1, burst: 2, [name]: value } as RateLimitOptions<FastifyRequestLike, FastifyReplyLike>;
    refusal(() => rateLimitHook(options), name);
  });

  it("refuses @fastify/rate-limit's boolean `global`, saying how to limit every route", () => {
    const error = refusal(() => rateLimit(loose({ rate: 1, burst: 2, global: true })), 'global');
    expect(error.message).toMatch(/`\{ rate, burst \}`.*fastify\.addHook\('onRequest'/);
  });

  it('suggests the closest name for a misspelt one, and passes undefined extras (a spread)', () => {
    expect(refusal(() => rateLimit(loose({ rate: 1, brust: 2 })), 'brust').message).toMatch(/did you mean `burst`\?/);
    expect(refusal(() => rateLimit(loose({ rate: 1, burst: 2, trustproxy: true })), 'trustproxy').message).toMatch(
      /did you mean `trustProxy`\?/,
    );
    expect(() => rateLimit(loose({ rate: 1, burst: 2, somethingElse: undefined }))).not.toThrow();
  });
});

describe('option values', () => {
  it.each([
    [{ headers: 'draft-9' }, 'headers', /true, false, 'draft-11', 'draft-8', 'draft-7' or 'draft-6'/],
    [{ ipv6Subnet: 0 }, 'ipv6Subnet', /from 1 to 128/],
    [{ ipv6Subnet: 129 }, 'ipv6Subnet', /from 1 to 128/],
    [{ ipv6Subnet: 56.5 }, 'ipv6Subnet', /from 1 to 128/],
    [{ requestPropertyName: '' }, 'requestPropertyName', /non-empty string or false/],
    [{ functionTimeout: 0 }, 'functionTimeout', /above 0/],
    [{ requestWasSuccessful: () => true }, 'requestWasSuccessful', /only with `skipSuccessfulRequests`/],
  ])('%o', (extra, option, message) => {
    expect(refusal(() => rateLimit(loose({ rate: 1, burst: 2, ...extra })), option).message).toMatch(message);
  });

  it('accepts every header style, ipv6Subnet false, and an unbounded functionTimeout', () => {
    for (const headers of [true, false, 'draft-11', 'draft-8', 'draft-7', 'draft-6'] as const) {
      expect(() => rateLimit({ rate: 1, burst: 2, headers, legacyHeaders: true })).not.toThrow();
    }
    expect(() =>
      rateLimit({ rate: 1, burst: 2, ipv6Subnet: false, functionTimeout: Number.POSITIVE_INFINITY }),
    ).not.toThrow();
  });

  it('gives costs back only with a limiter that can: not a window, not a decider without credit', async () => {
    const windowed = new KeyedLimiter({ algorithm: 'fixed-window', limit: 10, window: '1s' });
    expect(
      refusal(() => rateLimit({ limiter: windowed, skipSuccessfulRequests: true }), 'skipSuccessfulRequests').message,
    ).toMatch(/credit\(key, cost\), which a 'fixed-window' limiter does not have/);
    const decider: RateLimitDecider = {
      tryTake: () => Promise.reject(new Error('unused')),
      take: (): Promise<Decision> => Promise.reject(new Error('unused')),
    };
    expect(
      refusal(() => rateLimit({ limiter: decider, skipFailedRequests: true }), 'skipFailedRequests').message,
    ).toMatch(/which this limiter does not have/);
    expect(() =>
      rateLimit({ limiter: new KeyedLimiter({ rate: 1, burst: 2 }), skipFailedRequests: true }),
    ).not.toThrow();
    await expectRejection(windowed.credit('k'), NotSupportedError, { code: 'ERR_NOT_SUPPORTED' }, /fixed-window/);
  });
});

describe('values that would fail every request later are refused when the middleware is made', () => {
  it.each([
    ['key', 'notfn', /Expected `key` to be a function \(req\) => string, got "notfn"/],
    ['cost', 3, /Expected `cost` to be a function/],
    ['skip', true, /Expected `skip` to be a function/],
    ['onLimit', 5, /Expected `onLimit` to be a function \(req, res, info\) => void, got 5/],
    ['onError', 'x', /Expected `onError` to be a function/],
    ['policyName', 5, /Expected `policyName` to be a non-empty string/],
    ['policyName', '', /Expected `policyName` to be a non-empty string/],
    ['clock', {}, /Expected `clock` to have now\(\)/],
    ['wallClock', 1_767_225_600_000, /Expected `wallClock` to be a function returning milliseconds/],
  ])('%s: %j', (option, value, message) => {
    const error = refusal(() => rateLimit(loose({ rate: 1, burst: 2, [option]: value })), option);
    expect(error.message).toMatch(message);
  });

  it('a clock that is not one is refused with a limiter of your own too', () => {
    const limiter = new KeyedLimiter({ rate: 1, burst: 2 });
    refusal(() => rateLimit(loose({ limiter, clock: { now: 5 } })), 'clock');
  });

  it('requestWasSuccessful must be a function', () => {
    const error = refusal(
      () => rateLimit(loose({ rate: 1, burst: 2, skipFailedRequests: true, requestWasSuccessful: 200 })),
      'requestWasSuccessful',
    );
    expect(error.message).toMatch(/\(req, res\) => boolean/);
  });
});
