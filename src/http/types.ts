/**
 * The contract between the HTTP adapters and the limiter that decides.
 *
 * The middleware needs two verbs of a keyed limiter, nothing more: `tryTake`
 * to decide now, and `take` to wait (for `maxWait`). Any object with these
 * two methods will do: the package's `KeyedLimiter` (memory or Redis store),
 * or one of your own. The types below are written structurally so that the
 * adapters do not depend on a particular implementation.
 */

import type { Decision } from '../meters/decision.js';

export type { Decision };

/** Options for {@link RateLimitDecider.take}. */
export interface DeciderTakeOptions {
  /** Aborting it while waiting charges nothing and rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * The longest wait accepted, ms. A longer one charges nothing and rejects
   * with `WaitTooLongError` (`ERR_WAIT_TOO_LONG`, with `retryAfterMs`).
   */
  maxWait?: number;
}

/**
 * A keyed limiter as the HTTP middleware uses it (a `KeyedLimiter` is one).
 * A refusal is a returned decision, never a rejection; a rejection means the
 * limiter could not decide (a store that failed with a fail-closed policy, a
 * cost above the burst).
 */
export interface RateLimitDecider {
  /** Decides now: takes `cost` from `key`'s bucket (and the global one) if both have it. */
  tryTake(key: string, cost?: number): Promise<Decision>;
  /** Reserves `cost` and resolves when it conforms; over `maxWait` rejects with `WaitTooLongError`. */
  take(key: string, cost?: number, options?: DeciderTakeOptions): Promise<Decision>;
}
