/**
 * The clock: the only source of time and timers in tokenpace.
 *
 * Every time-dependent part takes one as its `clock` option, so tests can drive
 * time by hand (see `test/helpers/fake-clock.ts`) and production code reads a
 * monotonic source. Times are milliseconds and may be fractional.
 *
 * Wall-clock time (`Date.now()`) is never used: it jumps when NTP steps the
 * system clock, and a token bucket that sees time jump forward hands out a
 * burst it never earned.
 */

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
