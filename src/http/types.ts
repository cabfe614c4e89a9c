/**
 * The contract between the HTTP adapters and the limiter that decides.
 *
 * The middleware needs two verbs of a keyed limiter, nothing more: `tryTake`
 * to decide now, and `take` to wait (for `maxWait`). Any object with these
 * two methods will do: the package's `KeyedLimiter` (memory or Redis store),
 * or one of your own. The types below are written structurally so that the
 * adapters do not depend on a particular implementation.
 */

/** What a limiter answers for one request: the same shape for every meter. */
export interface Decision {
  /** True if the request conforms (its cost was taken). */
  readonly allowed: boolean;
  /** Whole tokens left for this key after the decision (never negative). */
  readonly remaining: number;
  /** Milliseconds until the refused request would conform (0 when allowed). */
  readonly retryAfterMs: number;
  /** Milliseconds until the key's bucket is full again. */
  readonly resetAfterMs: number;
  /** The key's capacity (its burst). */
  readonly limit: number;
}

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
