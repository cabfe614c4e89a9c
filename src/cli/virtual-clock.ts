/**
 * A virtual clock for the simulator: time moves only when the simulation
 * moves it, and timers fire in order, each at exactly its due time. The
 * limiters run unchanged on it (they take a `clock`), so a minute of traffic
 * is replayed in a fraction of a second and every run gives the same numbers.
 */

import type { Clock } from '../clock.js';

interface Timer {
  atMs: number;
  seq: number;
  fn: () => void;
}

/** A {@link Clock} whose time is set by hand and whose timers fire only through {@link VirtualClock.fireNext}. */
export class VirtualClock implements Clock {
  #nowMs = 0;
  #seq = 0;
  readonly #timers = new Map<number, Timer>();

  now(): number {
    return this.#nowMs;
  }

  /** Moves time to `ms` (never backwards). */
  set(ms: number): void {
    if (ms > this.#nowMs) this.#nowMs = ms;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const seq = ++this.#seq;
    this.#timers.set(seq, { atMs: this.#nowMs + Math.max(0, Number.isFinite(ms) ? ms : 0), seq, fn });
    return seq;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  /** The earliest timer, if any. */
  #next(): Timer | undefined {
    let next: Timer | undefined;
    for (const timer of this.#timers.values()) {
      if (!next || timer.atMs < next.atMs || (timer.atMs === next.atMs && timer.seq < next.seq)) next = timer;
    }
    return next;
  }

  /** When the earliest timer is due, or Infinity if none is armed. */
  nextTimerAtMs(): number {
    return this.#next()?.atMs ?? Number.POSITIVE_INFINITY;
  }

  /** Moves time to the earliest timer and fires it. Returns false if there was none. */
  fireNext(): boolean {
    const timer = this.#next();
    if (!timer) return false;
    this.#timers.delete(timer.seq);
    this.set(timer.atMs);
    timer.fn();
    return true;
  }

  /** Timers armed and not yet fired or cleared. */
  get pending(): number {
    return this.#timers.size;
  }
}
