/**
 * The watchdog: one timer armed for an exact instant, like sch_tbf.c's
 * qdisc watchdog (`qdisc_watchdog_schedule_ns(&q->watchdog, now + shortfall)`).
 * Every wait in tokenpace goes through it: a stream's and a group's sleep
 * for tokens, the scheduler's wake-up for its head, a job's timeout,
 * `TokenBucket.take`.
 *
 * What it guarantees:
 *
 * - **Never early.** It is armed for an instant (`dueMs`), in whole
 *   milliseconds rounded up (at least 1), and calls back only once the clock
 *   has reached that instant. Node's timers may fire up to a millisecond
 *   early by `performance.now()` (their start is the event loop's cached
 *   time); a wake-up before `dueMs` re-arms for the rest instead of calling
 *   back.
 * - **Any length.** Node fires a timer longer than 2^31 - 1 ms (24.8 days)
 *   after 1 ms, with a `TimeoutOverflowWarning`. A longer wait is armed in
 *   steps of at most {@link MAX_TIMER_MS}, so `timeout: '30d'` waits 30 days.
 * - **One at a time.** Arming again replaces the pending wake-up; arming for
 *   the instant already pending keeps it (no clear and set on every call).
 * - **Lateness, measured.** Each wake-up records how late it came
 *   ({@link Lateness}), for callers that size their work to the timers they
 *   really get.
 *
 * The clock module owns the raw timers (`Clock.setTimeout`); this module is
 * the policy on top of them, so it sits beside `clock.ts`, not in `meters/`
 * (pure arithmetic, no timers).
 */

import type { Clock } from './clock.js';

/** The longest single timer Node arms as asked: 2^31 - 1 ms. Longer waits are armed in steps. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** How fast the lateness estimate forgets, ms: it halves in this long without late timers. */
export const LATENESS_HALF_LIFE_MS = 1000;

/**
 * How late wake-ups have been coming lately: the largest lateness seen,
 * halving every second ({@link LATENESS_HALF_LIFE_MS}). A GC pause or a busy
 * event loop raises it at once; punctual timers bring it back down. The decay
 * is by time, not by wake-up, so an event loop blocked periodically (say
 * 25 ms every 200 ms) keeps the estimate between its blocks instead of
 * forgetting it after a few punctual wake-ups. A stream sizes its wake piece
 * by it (see stream/pacing.ts).
 */
export class Lateness {
  /** The estimate as last reported (what callers sized their work by). */
  #ms = 0;
  /** The estimate now, decaying between reports. */
  #currentMs = 0;
  #atMs = Number.NaN;

  /** The estimate as last reported by {@link observe}, ms (changes only by 0.5 ms or more; 0 when punctual). */
  get ms(): number {
    return this.#ms;
  }

  /**
   * Records one wake-up at `nowMs`, `lateMs` after it was due (early counts
   * as punctual); returns true if the estimate moved 0.5 ms or more from the
   * one last reported.
   */
  observe(lateMs: number, nowMs: number): boolean {
    const elapsedMs = Number.isNaN(this.#atMs) ? 0 : Math.max(0, nowMs - this.#atMs);
    this.#atMs = nowMs;
    const decayed = this.#currentMs * 0.5 ** (elapsedMs / LATENESS_HALF_LIFE_MS);
    const next = Math.max(0, lateMs, decayed);
    this.#currentMs = next < 0.5 ? 0 : next;
    if (Math.abs(this.#currentMs - this.#ms) < 0.5) return false;
    this.#ms = this.#currentMs;
    return true;
  }
}

/** How much more lateness than was seen to expect: half as much again ({@link expectedLatenessMs}). */
export const LATENESS_MARGIN = 1.5;

/** The step a wake-up is armed in: whole milliseconds, rounded up, so it comes up to this long after its exact instant before any lateness. */
export const TIMER_STEP_MS = 1;

/**
 * The one lateness policy: how late to expect the next wake-up, ms, given the
 * estimate of the lateness seen lately ({@link Lateness}, {@link Watchdog.latenessMs}):
 * half as much again as the estimate ({@link LATENESS_MARGIN}), and at least
 * `floorMs`. Every part that plans around its timers asks it:
 *
 * - a stream sizes its wake piece so that the bucket does not overflow while
 *   it sleeps that much too long (stream/pacing.ts, floor 10 ms);
 * - the Scheduler makes up at most that much lateness (plus the
 *   {@link TIMER_STEP_MS} rounding) by charging a job at its due time, and
 *   never more than its `catchUp` (scheduler/local-admission.ts);
 * - `TokenBucket.take` needs none: its tokens are reserved when it is called,
 *   so a late wake-up only resolves later and loses nothing.
 *
 * @example expectedLatenessMs(0, 10) === 10; expectedLatenessMs(12, 10) === 18
 */
export function expectedLatenessMs(estimateMs: number, floorMs = 0): number {
  return Math.max(floorMs, LATENESS_MARGIN * estimateMs);
}

/** One timer for an exact instant; see the file's opening comment. */
export class Watchdog {
  #timer: unknown = undefined;
  #armed = false;
  /** The instant asked for. */
  #dueMs = Number.POSITIVE_INFINITY;
  /** When the current step's timer should fire (whole ms after it was armed): lateness is measured from it. */
  #stepDueMs = 0;
  readonly #lateness = new Lateness();
  readonly #clock: Clock;
  readonly #onWake: (latenessChanged: boolean) => void;

  /** `onWake(latenessChanged)` runs once the clock has reached the armed instant. */
  constructor(clock: Clock, onWake: (latenessChanged: boolean) => void) {
    this.#clock = clock;
    this.#onWake = onWake;
  }

  /** True while a wake-up is pending. */
  get armed(): boolean {
    return this.#armed;
  }

  /** The instant the pending wake-up is for (Infinity when none). */
  get dueMs(): number {
    return this.#armed ? this.#dueMs : Number.POSITIVE_INFINITY;
  }

  /** How late wake-ups have been coming lately, ms (0 when punctual). */
  get latenessMs(): number {
    return this.#lateness.ms;
  }

  /**
   * Arms for the instant `dueMs` (clock time); `nowMs` is the clock's time now.
   * A pending wake-up for the same instant is kept, another is replaced.
   * `Infinity` disarms.
   */
  armAt(dueMs: number, nowMs: number): void {
    if (this.#armed) {
      if (this.#dueMs === dueMs) return;
      this.disarm();
    }
    if (dueMs === Number.POSITIVE_INFINITY) return;
    this.#armed = true;
    this.#dueMs = dueMs;
    this.#step(nowMs);
  }

  /**
   * Arms for `delayMs` after `nowMs` (at least 1 ms, whole milliseconds
   * rounded up). A pending wake-up that is not early for it and less than
   * 1 ms later is kept: a caller that re-plans from a slightly later `nowMs`
   * (a stream, on every chunk) does not clear and set a timer each time.
   */
  arm(nowMs: number, delayMs: number): void {
    if (this.#armed) {
      const exactMs = nowMs + Math.max(0, delayMs);
      if (this.#dueMs >= exactMs && this.#dueMs < exactMs + 1) return;
    }
    this.armAt(nowMs + Math.max(1, Math.ceil(delayMs)), nowMs);
  }

  /** Cancels a pending wake-up, if any. */
  disarm(): void {
    if (!this.#armed) return;
    this.#clock.clearTimeout(this.#timer);
    this.#armed = false;
    this.#timer = undefined;
  }

  #step(nowMs: number): void {
    const wholeMs = Math.min(MAX_TIMER_MS, Math.max(1, Math.ceil(this.#dueMs - nowMs)));
    this.#stepDueMs = nowMs + wholeMs;
    this.#timer = this.#clock.setTimeout(this.#fire, wholeMs);
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    const nowMs = this.#clock.now();
    if (nowMs < this.#dueMs) {
      // A step of a long wait, or a timer that fired early: arm for the rest.
      this.#step(nowMs);
      return;
    }
    this.#armed = false;
    this.#onWake(this.#lateness.observe(nowMs - this.#stepDueMs, nowMs));
  };
}

/**
 * How much timer lateness a start paced by `watchdog` may make up now (a scheduler's theoretical
 * start): the timer's whole-ms step plus the lateness expected of it, at most `capMs` (the
 * `catchUp` option; 0 makes up none).
 */
export function catchUpAllowanceMs(capMs: number, watchdog: Watchdog): number {
  if (capMs === 0) return 0;
  return Math.min(capMs, TIMER_STEP_MS + expectedLatenessMs(watchdog.latenessMs, TIMER_STEP_MS));
}
