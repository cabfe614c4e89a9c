/**
 * The clock: the only source of time and timers in tokenpace.
 *
 * Every time-dependent part takes one as its `clock` option, so tests can drive
 * time by hand (see `test/helpers/fake-clock.ts`) and production code reads a
 * monotonic source. Times are milliseconds and may be fractional.
 *
 * Wall-clock time (`Date.now()`) is never used for pacing: it jumps when NTP
 * steps the system clock, and a token bucket that sees time jump forward hands
 * out a burst it never earned. The HTTP adapters read it, through their own
 * `wallClock` option, only to convert HTTP dates and Unix times.
 */

import { describeValue, InvalidOptionError } from './errors.js';

/** A source of monotonic time and one-shot timers. */
export interface Clock {
  /** Milliseconds since an arbitrary origin; never decreases for the system clock. May be fractional. */
  now(): number;
  /** Calls `fn` once after about `ms` milliseconds; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a timer armed by {@link Clock.setTimeout}. Unknown or fired handles are ignored. */
  clearTimeout(handle: unknown): void;
}

/**
 * The process's monotonic clock: `performance.now()` and Node's timers.
 *
 * Timers keep the process alive, like any Node timer: a stream or a job that
 * is waiting for tokens is work in progress, and the process must not exit
 * under it. Every part clears its timer when it is destroyed, cleared or idle,
 * so a process with nothing left to do exits.
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout(fn: () => void, ms: number): unknown {
    return setTimeout(fn, ms);
  },
  clearTimeout(handle: unknown): void {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

/**
 * `value` as a {@link Clock}, or {@link systemClock} when absent. An object without the three
 * functions is refused with `InvalidOptionError`, at construction, instead of a `TypeError`
 * from the first timer.
 * @internal
 */
export function checkClock(value: unknown): Clock {
  if (value === undefined) return systemClock;
  const clock = value as Partial<Clock> | null;
  if (
    typeof clock === 'object' &&
    clock !== null &&
    typeof clock.now === 'function' &&
    typeof clock.setTimeout === 'function' &&
    typeof clock.clearTimeout === 'function'
  ) {
    return clock as Clock;
  }
  throw new InvalidOptionError(
    'clock',
    value,
    `Expected \`clock\` to have now(), setTimeout(fn, ms) and clearTimeout(handle), got ${describeValue(value)}`,
  );
}
