/**
 * Wall-clock time in the HTTP adapters: the `wallClock` option of `rateLimit`, `rateLimitHook` and
 * `throttleInterceptor`, in milliseconds since the Unix epoch.
 *
 * The rule: wall time is read only to convert values that HTTP carries as wall time: an HTTP-date
 * (`Retry-After` on a response without `Date`) and a Unix time in seconds (`X-RateLimit-Reset`,
 * written by the middleware and read by the interceptor). It is turned into a delay at once; all
 * pacing (buckets, pauses, holds, timeouts) runs on the monotonic `clock`.
 */

import { describeValue, InvalidOptionError } from '../errors.js';

/** The default `wallClock`: `Date.now()`, read at each call. */
export function systemWallClock(): number {
  return Date.now();
}

/** `value` as a `wallClock`, or {@link systemWallClock} when absent; anything but a function is refused. */
export function checkWallClock(value: unknown): () => number {
  if (value === undefined) return systemWallClock;
  if (typeof value === 'function') return value as () => number;
  throw new InvalidOptionError(
    'wallClock',
    value,
    `Expected \`wallClock\` to be a function returning milliseconds since the Unix epoch, got ${describeValue(value)}`,
  );
}
