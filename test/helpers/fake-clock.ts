/**
 * A fake clock for tests: @sinonjs/fake-timers adapted to tokenpace's Clock.
 * Time moves only when the test says so (`timers.tick(ms)`), so every
 * assertion about time is exact and no test sleeps.
 */

import FakeTimers from '@sinonjs/fake-timers';
import type { Clock } from '../../src/clock.js';

export interface FakeClock {
  clock: Clock;
  timers: FakeTimers.Clock;
  /** Timers armed and not yet fired or cleared. */
  pending(): number;
}

export function fakeClock(startMs = 0): FakeClock {
  const timers = FakeTimers.createClock(startMs);
  const clock: Clock = {
    now: () => timers.now,
    setTimeout: (fn, ms) => timers.setTimeout(fn, ms),
    clearTimeout: (handle) => timers.clearTimeout(handle as FakeTimers.TimerId),
  };
  return { clock, timers, pending: () => timers.countTimers() };
}

/** A clock whose time is set by hand and which has no timers (for pure meter tests). */
export function manualClock(startMs = 0): Clock & { set(ms: number): void; advance(ms: number): void } {
  let now = startMs;
  return {
    now: () => now,
    set(ms: number) {
      now = ms;
    },
    advance(ms: number) {
      now += ms;
    },
    setTimeout: () => {
      throw new Error('manualClock has no timers; use fakeClock()');
    },
    clearTimeout: () => {},
  };
}
