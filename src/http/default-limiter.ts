// Replaced by KeyedLimiter at merge
/**
 * The limiter `rateLimit({ rate, burst, global })` makes for itself: one
 * token bucket per key in a `Map` bounded by `maxKeys`, and an optional
 * global bucket over all keys. A request is admitted only if its key's bucket
 * and the global bucket both hold its cost, and neither is charged when
 * either refuses.
 *
 * Eviction: when a new key arrives at a full map, a bucket that has refilled
 * to full is dropped first (it holds no information: it equals a new one);
 * only if none is found among the oldest few is the oldest key dropped, which
 * forgives that key its debt. No timer is ever needed.
 */

import type { Clock } from '../clock.js';
import { systemClock } from '../clock.js';
import { InvalidOptionError, WaitTooLongError } from '../errors.js';
import { TokenBucket } from '../meters/token-bucket.js';
import type { RateInput, SizeInput } from '../units.js';
import type { DeciderTakeOptions, Decision, RateLimitDecider } from './types.js';

/** Options for {@link createDefaultLimiter}. */
export interface DefaultLimiterOptions {
  rate: RateInput;
  burst: SizeInput;
  global?: { rate: RateInput; burst: SizeInput } | undefined;
  maxKeys?: number | undefined;
  clock?: Clock | undefined;
}

/** How many of the oldest keys are searched for a full bucket before the oldest is dropped. */
const EVICTION_SCAN = 32;
const DEFAULT_MAX_KEYS = 100_000;

/** Builds the in-memory keyed limiter behind the middleware's `rate`/`burst`/`global` options. */
export function createDefaultLimiter(options: DefaultLimiterOptions): RateLimitDecider & {
  readonly rate: number;
  readonly burst: number;
} {
  const clock = options.clock ?? systemClock;
  const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
  if (!(Number.isInteger(maxKeys) && maxKeys > 0)) {
    throw new InvalidOptionError(
      'maxKeys',
      maxKeys,
      `Expected \`maxKeys\` to be an integer > 0, got ${String(maxKeys)}`,
    );
  }
  // One bucket made up front validates rate and burst (and is the template's parameters).
  const probe = new TokenBucket({ rate: options.rate, burst: options.burst, clock });
  const rate = probe.rate;
  const burst = probe.burst;
  const global = options.global ? new TokenBucket({ ...options.global, clock }) : undefined;
  const buckets = new Map<string, TokenBucket>();

  const bucketFor = (key: string): TokenBucket => {
    let bucket = buckets.get(key);
    if (bucket === undefined) {
      if (buckets.size >= maxKeys) evict();
      bucket = new TokenBucket({ rate, burst, clock });
      buckets.set(key, bucket);
    }
    return bucket;
  };

  const evict = (): void => {
    let scanned = 0;
    for (const [key, bucket] of buckets) {
      if (bucket.tokens >= burst) {
        buckets.delete(key);
        return;
      }
      if (++scanned >= EVICTION_SCAN) break;
    }
    const oldest = buckets.keys().next();
    if (!oldest.done) buckets.delete(oldest.value);
  };

  const decision = (bucket: TokenBucket, nowMs: number, allowed: boolean, retryAfterMs: number): Decision => {
    const tokens = bucket.tokensAt(nowMs);
    const least = global === undefined ? tokens : Math.min(tokens, global.tokensAt(nowMs));
    return {
      allowed,
      remaining: Math.max(0, Math.floor(least)),
      retryAfterMs,
      resetAfterMs: Math.max(0, ((burst - tokens) * 1000) / rate),
      limit: burst,
    };
  };

  return {
    rate,
    burst,
    async tryTake(key: string, cost = 1): Promise<Decision> {
      const nowMs = clock.now();
      const bucket = bucketFor(key);
      if (bucket.tryTakeAt(nowMs, cost)) {
        if (global === undefined || global.tryTakeAt(nowMs, cost)) return decision(bucket, nowMs, true, 0);
        bucket.refundAt(nowMs, cost); // the global bucket refused: the key is not charged
      }
      const retryAfterMs = Math.max(bucket.delayForAt(nowMs, cost), global?.delayForAt(nowMs, cost) ?? 0);
      return decision(bucket, nowMs, false, retryAfterMs);
    },

    take(key: string, cost = 1, takeOptions?: DeciderTakeOptions): Promise<Decision> {
      const signal = takeOptions?.signal;
      if (signal?.aborted) return Promise.reject(signal.reason);
      const maxWaitMs = takeOptions?.maxWait ?? Number.POSITIVE_INFINITY;
      const nowMs = clock.now();
      const bucket = bucketFor(key);
      let delayMs: number;
      try {
        delayMs = Math.max(bucket.delayForAt(nowMs, cost), global?.delayForAt(nowMs, cost) ?? 0);
      } catch (error) {
        return Promise.reject(error);
      }
      if (delayMs > maxWaitMs) return Promise.reject(new WaitTooLongError(delayMs, maxWaitMs, delayMs));
      bucket.reserveAt(nowMs, cost);
      global?.reserveAt(nowMs, cost);
      if (delayMs === 0) return Promise.resolve(decision(bucket, nowMs, true, 0));
      return new Promise<Decision>((resolve, reject) => {
        const onAbort = (): void => {
          clock.clearTimeout(timer);
          // Neither charge was used: give both back (a reservation's own cancel() would keep a
          // charge that was due at once, though the request as a whole never went).
          bucket.refund(cost);
          global?.refund(cost);
          reject(signal?.reason);
        };
        const timer = clock.setTimeout(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve(decision(bucket, clock.now(), true, 0));
        }, delayMs);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    },
  };
}
