/**
 * One origin of throttleInterceptor: its limits (the defaults with its
 * override on top), its Scheduler, its pause, and what its answers taught
 * (adaptive: the learned rate, the advertised policy, what is left of the
 * quota).
 *
 * Invariants: a paused origin holds a timer only while requests wait behind
 * the pause; an origin is forgettable only once its state equals a new one's
 * (bucket refilled, window slid out, pause over, nothing learned kept).
 */

import type { Clock } from '../clock.js';
import type { KeyEntry } from '../scheduler/key-table.js';
import { refillMsOf, type Scheduler, type SchedulerOptions } from '../scheduler/scheduler.js';
import { type DurationInput, parseDuration, type RateInput, type SizeInput } from '../units.js';
import type { AdaptiveOrigin } from './adaptive-origin.js';

/** The limits of one origin. */
export interface OriginLimits {
  /** Requests per second to the origin: a number or a string such as `'600/min'`. */
  rate?: RateInput;
  /**
   * Requests that may start at once after an idle spell. An origin that gives its own `rate` and
   * no `burst` gets this default, not the top level's burst. @default 1
   */
  burst?: SizeInput;
  /** Requests in flight at once. @default Infinity (only the rate limits) */
  concurrency?: number;
  /** Requests that may wait; beyond that a request fails with `QueueFullError`. @default 1000 */
  maxQueue?: number;
  /** The longest a request may wait to be sent (ms or `'2s'`); beyond it, `WaitTooLongError`. @default Infinity */
  maxWait?: DurationInput;
  /**
   * With `window`: the most requests in any window of that length, as the origin counts them
   * (arrivals). A request counts from when it is sent until `window` after its response has been
   * delivered, so no network jitter can put two of them closer than `window` at the origin.
   */
  limit?: number;
  /** With `limit`: the window's length (ms or `'1s'`). */
  window?: DurationInput;
  /** Added to the window (ms or `'10ms'`), for an origin whose clock for the window is coarse. @default 0 */
  windowMargin?: DurationInput;
}

/** What one origin's state is made of. */
export interface OriginParts {
  readonly origin: string;
  readonly scheduler: Scheduler;
  readonly clock: Clock;
  /** The longest a request may wait for it, the pause included (`undefined`: unbounded). */
  readonly maxWait: DurationInput | undefined;
  /** How long after its last use an idle origin's state equals a new one's (bucket refilled, window slid), ms. */
  readonly settleMs: number;
}

/** One origin: its scheduler and its pause. */
export class OriginState implements KeyEntry {
  pausedUntilMs = 0;
  adaptive: AdaptiveOrigin | undefined = undefined;
  #timer: unknown = undefined;
  readonly origin: string;
  readonly scheduler: Scheduler;
  readonly clock: Clock;
  readonly maxWaitMs: number;
  /** How long after its last use an idle origin's state equals a new one's, ms. */
  readonly settleMs: number;
  /** When a request of it last started or finished, ms. */
  lastUseMs: number;

  constructor({ origin, scheduler, clock, maxWait, settleMs }: OriginParts) {
    this.origin = origin;
    this.scheduler = scheduler;
    this.clock = clock;
    this.maxWaitMs = maxWait === undefined ? Number.POSITIVE_INFINITY : parseDuration(maxWait);
    this.settleMs = settleMs;
    this.lastUseMs = clock.now();
  }

  busy(): boolean {
    const scheduler = this.scheduler;
    return scheduler.size !== 0 || scheduler.pending !== 0 || this.#timer !== undefined;
  }

  forgettable(nowMs: number): boolean {
    // An adopted window (adaptive) counts a request until a window after its end, like the caller's.
    const settleMs = Math.max(this.settleMs, this.scheduler.window);
    return nowMs >= this.lastUseMs + settleMs && nowMs >= this.pausedUntilMs;
  }

  /** Ms left of the current pause (0 if none), resuming a pause that is over. */
  pauseLeftMs(nowMs: number): number {
    const left = this.pausedUntilMs - nowMs;
    if (left > 0) return left;
    if (this.scheduler.isPaused) this.#resume();
    return 0;
  }

  pauseFor(nowMs: number, delayMs: number): boolean {
    const until = nowMs + delayMs;
    if (until <= this.pausedUntilMs) return false;
    this.pausedUntilMs = until;
    this.scheduler.pause();
    if (this.#timer !== undefined) {
      this.clock.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.armIfWaiting();
    return true;
  }

  /** Arms the resume timer if requests wait behind the pause (an idle paused origin holds no timer). */
  armIfWaiting(): void {
    if (this.#timer !== undefined || !this.scheduler.isPaused || this.scheduler.size === 0) return;
    const delayMs = Math.max(0, this.pausedUntilMs - this.clock.now());
    this.#timer = this.clock.setTimeout(() => {
      this.#timer = undefined;
      this.#resume();
    }, delayMs);
  }

  #resume(): void {
    if (this.#timer !== undefined) {
      this.clock.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.scheduler.resume();
  }
}

/** The `Scheduler` options of one origin, from the defaults and its override. */
export function schedulerOptions(limits: OriginLimits, clock: Clock): SchedulerOptions {
  const options: SchedulerOptions = { clock };
  if (limits.rate !== undefined) {
    options.rate = limits.rate;
    if (limits.burst !== undefined) options.burst = limits.burst;
  }
  if (limits.concurrency !== undefined) options.concurrency = limits.concurrency;
  else if (limits.rate === undefined && limits.limit === undefined) options.concurrency = Number.MAX_SAFE_INTEGER; // pushback only
  if (limits.limit !== undefined || limits.window !== undefined) {
    options.limit = limits.limit;
    options.window = limits.window;
    options.windowCounts = 'finish'; // from sent until `window` after the response: arrivals fall in between
    if (limits.windowMargin !== undefined) options.windowMargin = limits.windowMargin;
  }
  if (limits.maxQueue !== undefined) options.maxQueue = limits.maxQueue;
  if (limits.maxWait !== undefined) options.maxWait = limits.maxWait;
  return options;
}

/** How long after its last use an idle origin equals a new one: its bucket refilled, its window slid out, ms. */
export function settleMsOf(scheduler: Scheduler, limits: OriginLimits): number {
  const refillMs = refillMsOf(scheduler);
  const windowMs =
    limits.window === undefined ? 0 : parseDuration(limits.window) + parseDuration(limits.windowMargin ?? 0);
  return Math.max(refillMs, windowMs);
}

/**
 * The defaults with an origin's override on top (an override's undefined fields keep the default),
 * except that an override's own `rate` without a `burst` takes the default burst for that rate: the
 * defaults' burst was sized for the defaults' rate.
 */
export function merge(defaults: OriginLimits, override: OriginLimits | undefined): OriginLimits {
  if (override === undefined) return defaults;
  const merged: OriginLimits = { ...defaults };
  for (const [name, value] of Object.entries(override) as Array<[keyof OriginLimits, never]>) {
    if (value !== undefined) merged[name] = value;
  }
  if (override.rate !== undefined && override.burst === undefined) merged.burst = undefined;
  return merged;
}

/** `https://Example.com:443/` -> `https://example.com` (the URL standard's origin serialisation). */
export function originOf(origin: string | URL | undefined): string {
  if (origin === undefined) return '';
  try {
    return (origin instanceof URL ? origin : new URL(origin)).origin;
  } catch {
    return String(origin);
  }
}
