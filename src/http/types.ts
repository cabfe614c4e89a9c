/**
 * The contract between the HTTP adapters and the limiter that decides.
 *
 * The middleware needs two verbs of a keyed limiter: `tryTake` to decide
 * now, and `take` to wait (for `maxWait`); and a third, `credit`, only to
 * give costs back (`skipSuccessfulRequests`, `skipFailedRequests`). They are
 * `KeyedLimiter`'s (src/keyed/keyed-limiter.ts), written structurally here so
 * that any object with these methods will do: a `KeyedLimiter` (memory or
 * Redis store), or one of your own. `rateLimit({ rate, burst })` makes a
 * `KeyedLimiter` itself.
 */

import type { KeyedLimiter, KeyedTakeOptions } from '../keyed/keyed-limiter.js';
import type { Decision } from '../meters/decision.js';

export type { Decision };

/**
 * Options for {@link RateLimitDecider.take}: `KeyedLimiter.take`'s. The
 * middleware passes `signal` and `maxWait` in milliseconds: aborting charges
 * nothing (or what the cancel rule keeps), a longer wait charges nothing and
 * rejects with `WaitTooLongError` (`ERR_WAIT_TOO_LONG`, with `retryAfterMs`).
 */
export type DeciderTakeOptions = KeyedTakeOptions;

/**
 * A keyed limiter as the HTTP middleware uses it: `KeyedLimiter`'s `tryTake`
 * and `take`. A refusal is a returned decision, never a rejection; a rejection
 * means the limiter could not decide (a store that failed with a fail-closed
 * policy, a cost above the burst). A numeric `rate` and `burst` on the object,
 * as `KeyedLimiter` has, are advertised in `RateLimit-Policy`.
 */
export interface RateLimitDecider {
  /** Decides now: takes `cost` from `key`'s bucket (and the global one) if both have it. */
  tryTake(key: string, cost?: number): ReturnType<KeyedLimiter['tryTake']>;
  /** Reserves `cost` and resolves when it conforms; over `maxWait` rejects with `WaitTooLongError`. */
  take(key: string, cost?: number, options?: DeciderTakeOptions): ReturnType<KeyedLimiter['take']>;
  /**
   * Gives `cost` back to `key`'s bucket (and the global one), never above the capacity: what
   * `skipSuccessfulRequests`/`skipFailedRequests` call once a response is done. Optional otherwise.
   */
  credit?(key: string, cost?: number): Promise<void>;
}
