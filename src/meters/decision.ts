/**
 * The answer every counting meter gives: the same shape as a keyed limiter's
 * decision, so a caller (or an HTTP adapter writing `RateLimit` and
 * `Retry-After` headers) reads a fixed window, a sliding window, a leaky
 * bucket and a token bucket alike.
 */

/** What a meter decided about one request. */
export interface Decision {
  /** True if the request conforms (and was counted). */
  allowed: boolean;
  /** What is left for further requests right after this decision, in cost units (whole units, rounded down). */
  remaining: number;
  /** Milliseconds until a request of the same cost would be allowed: 0 when allowed now. */
  retryAfterMs: number;
  /** Milliseconds until the meter is back to its idle state (a fresh window, an empty bucket or queue). */
  resetAfterMs: number;
  /**
   * The most this meter (or key) admits at once: a token bucket's burst, a window's `limit`, a leaky
   * bucket's `maxQueue`. It is the quota of the `RateLimit` header.
   */
  limit: number;
}
