/**
 * `AdaptiveRate`: a Scheduler whose rate is learned from its downstream's
 * pushback, for any downstream (a database that sheds load, a queue that says
 * "slow down", an API called by hand). Jobs that complete are the successes;
 * a job that was pushed back says so with `pushback({ retryAfter })`. The
 * learning is ./aimd.ts's, as the interceptor's `adaptive` is; this class
 * applies it with `setRate` and pauses the scheduler for a retry-after.
 *
 * Invariants: the scheduler's rate stays in [min, max]; at most one pause
 * timer; `close()` leaves the scheduler running at the rate last learned.
 */

import { type Clock, checkClock } from '../clock.js';
import { InvalidOptionError } from '../errors.js';
import { rateParam } from '../meters/bucket.js';
import { type DurationInput, parseDuration, type RateInput } from '../units.js';
import { Aimd, type RateChange } from './aimd.js';
import type { Scheduler } from './scheduler.js';

/** Options for {@link AdaptiveRate}. */
export interface AdaptiveRateOptions {
  /** The least rate it goes down to. @default 0.5 (per second) */
  min?: RateInput;
  /** The most rate it goes up to. @default Infinity */
  max?: RateInput;
  /** Where it starts. @default the scheduler's rate */
  initial?: RateInput;
  /** The time source (the scheduler's). @default systemClock */
  clock?: Clock;
}

/** What a `change` listener receives. */
export interface AdaptiveRateChange {
  readonly rate: number;
  readonly previousRate: number;
  readonly reason: RateChange;
}

/** A scheduler's rate learned from pushback; see the file's opening comment. */
export class AdaptiveRate {
  readonly #scheduler: Scheduler;
  readonly #clock: Clock;
  readonly #aimd: Aimd;
  readonly #listeners = new Set<(change: AdaptiveRateChange) => void>();
  #timer: unknown = undefined;
  #pausedUntilMs = 0;
  readonly #onCompleted = (): void => this.#succeeded();

  /**
   * @example
   * const scheduler = new Scheduler({ rate: 20, concurrency: 8 });
   * const adaptive = new AdaptiveRate(scheduler, { min: 1, max: 200 });
   * await scheduler.schedule(async () => {
   *   const reply = await callDownstream();
   *   if (reply.busy) adaptive.pushback({ retryAfter: reply.retryAfterMs });
   * });
   */
  constructor(scheduler: Scheduler, options: AdaptiveRateOptions = {}) {
    if (!(scheduler.rate < Number.POSITIVE_INFINITY)) {
      throw new InvalidOptionError(
        'scheduler',
        scheduler.rate,
        'AdaptiveRate needs a Scheduler with a `rate` to adapt',
      );
    }
    this.#scheduler = scheduler;
    this.#clock = checkClock(options.clock);
    const min = options.min === undefined ? 0.5 : rateParam(options.min, 'min');
    const max = options.max === undefined ? Number.POSITIVE_INFINITY : rateParam(options.max, 'max');
    const initial = options.initial === undefined ? scheduler.rate : rateParam(options.initial, 'initial');
    if (!(min <= initial && initial <= max)) {
      throw new InvalidOptionError(
        'initial',
        initial,
        `Expected min <= initial <= max, got ${min} <= ${initial} <= ${max}`,
      );
    }
    this.#aimd = new Aimd({ min, max, initial }, this.#clock.now());
    if (initial !== scheduler.rate) scheduler.setRate(initial);
    scheduler.on('completed', this.#onCompleted);
  }

  /** The rate learned, per second (the scheduler's rate). */
  get rate(): number {
    return this.#aimd.rate;
  }

  /**
   * The downstream pushed back: cut the rate, and with `retryAfter` (ms or `'2s'`) start nothing
   * until then (jobs running go on).
   */
  pushback(options: { retryAfter?: DurationInput } = {}): void {
    const now = this.#clock.now();
    const previousRate = this.#aimd.rate;
    if (this.#aimd.pushedBack(now)) this.#apply(previousRate, 'pushback');
    if (options.retryAfter === undefined) return;
    const delayMs = parseDuration(options.retryAfter);
    if (!(delayMs > 0) || now + delayMs <= this.#pausedUntilMs) return;
    this.#pausedUntilMs = now + delayMs;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#scheduler.pause();
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      this.#scheduler.resume();
    }, delayMs);
  }

  /** Calls `listener` each time the learned rate changes. */
  on(event: 'change', listener: (change: AdaptiveRateChange) => void): this {
    if (event !== 'change' || typeof listener !== 'function') {
      throw new InvalidOptionError('event', event, "Expected on('change', listener) with a function listener");
    }
    this.#listeners.add(listener);
    return this;
  }

  off(event: 'change', listener: (change: AdaptiveRateChange) => void): this {
    if (event === 'change') this.#listeners.delete(listener);
    return this;
  }

  /** Stops learning (and a pause it holds); the scheduler keeps the rate last learned. */
  close(): void {
    this.#scheduler.off('completed', this.#onCompleted);
    if (this.#timer !== undefined) {
      this.#clock.clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#scheduler.resume();
    }
  }

  /** {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  #succeeded(): void {
    const previousRate = this.#aimd.rate;
    if (this.#aimd.succeeded(this.#clock.now(), this.#scheduler.size !== 0)) this.#apply(previousRate, 'increase');
  }

  #apply(previousRate: number, reason: RateChange): void {
    const rate = this.#aimd.rate;
    this.#scheduler.setRate(rate);
    for (const listener of this.#listeners) listener({ rate, previousRate, reason });
  }
}
