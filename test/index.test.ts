/**
 * The public contract: every name the docs promise is exported from the
 * package root, and the types of the core API say what they mean (no `any`).
 */

import { describe, expect, expectTypeOf, it } from 'vitest';
import * as tokenpace from '../src/index.js';
import {
  type Clock,
  isTokenpaceError,
  type QueueFullError,
  type Reservation,
  type ReserveOptions,
  TokenBucket,
  type TokenpaceError,
} from '../src/index.js';

describe('public exports', () => {
  // Every value the package root exports, exactly: a new export is a decision, so it shows up here.
  const values = [
    'AbortError',
    'AdaptiveRate',
    'ClosedError',
    'BurstTooSmallError',
    'CostExceedsCapacityError',
    'FixedWindow',
    'InvalidDurationError',
    'InvalidOptionError',
    'InvalidRateError',
    'InvalidSizeError',
    'JobTimeoutError',
    'KeyedLimiter',
    'KeyedScheduler',
    'LeakyBucket',
    'MemoryBandwidthStore',
    'MemoryFleetStore',
    'MemoryStore',
    'MemoryWindowStore',
    'NotSupportedError',
    'PostgresFleetStore',
    'PostgresStore',
    'QueueFullError',
    'RedisBandwidthStore',
    'RedisFleetStore',
    'RedisStore',
    'RedisWindowStore',
    'Scheduler',
    'SlidingWindow',
    'StoreUnavailableError',
    'Throttle',
    'ThrottleGroup',
    'TokenBucket',
    'TokenpaceError',
    'TooManyKeysError',
    'WaitTooLongError',
    'WebThrottle',
    'channelNames',
    'formatDuration',
    'formatRate',
    'formatSize',
    'honoRateLimit',
    'isTokenpaceError',
    'koaRateLimit',
    'parseDuration',
    'parseRate',
    'parseSize',
    'rateLimit',
    'rateLimitHook',
    'srTCM',
    'systemClock',
    'throttleInterceptor',
    'trTCM',
  ];

  it.each(values)('exports %s', (name) => {
    expect(tokenpace).toHaveProperty(name);
  });

  it('exports exactly these values', () => {
    expect(Object.keys(tokenpace).sort()).toEqual([...values].sort());
  });

  it('exports nothing internal', () => {
    for (const internal of [
      'tokensAt',
      'advance',
      'msUntil',
      'checkCost',
      'slackFor',
      'bucketParams',
      'delayUntil',
      'charge',
      'tryCharge',
      'refund',
      'reconfigure',
      'readyAt',
      'startAt',
      'conforms',
      'Watchdog',
    ]) {
      expect(tokenpace).not.toHaveProperty(internal);
    }
  });

  it('types the core API precisely', () => {
    const bucket = new TokenBucket({ rate: '100/s', burst: 200 });
    expectTypeOf(bucket.tryTake).returns.toEqualTypeOf<boolean>();
    expectTypeOf(bucket.delayFor).returns.toEqualTypeOf<number>();
    expectTypeOf(bucket.reserve).returns.toEqualTypeOf<Reservation>();
    expectTypeOf<Reservation['cancelAt']>().parameters.toEqualTypeOf<[nowMs: number]>();
    expectTypeOf<ReserveOptions['maxWait']>().toEqualTypeOf<number | string | undefined>();
    expectTypeOf(bucket.take).returns.toEqualTypeOf<Promise<void>>();
    expectTypeOf(bucket.tokens).toEqualTypeOf<number>();
    expectTypeOf<Clock['now']>().returns.toEqualTypeOf<number>();
    expectTypeOf(tokenpace.parseRate).parameter(0).toEqualTypeOf<number | string>();
    // A compile-time check only (never called): rate is required.
    // @ts-expect-error rate is missing
    const missingRate = () => new TokenBucket({ burst: 1 });
    expectTypeOf(missingRate).toBeFunction();

    const error: unknown = new Error('x');
    if (isTokenpaceError(error, 'ERR_QUEUE_FULL')) expectTypeOf(error).toEqualTypeOf<QueueFullError>();
    if (isTokenpaceError(error)) expectTypeOf(error.code).toEqualTypeOf<TokenpaceError['code']>();
  });
});
