/**
 * How a Scheduler admits jobs: the one part that differs between a scheduler
 * on its own and one of a fleet. The Scheduler (./scheduler.ts) owns the API,
 * the bounded queue, priorities, signals, deadlines, timeouts, events and
 * counters; an {@link Admission} owns the limits and decides when a waiting
 * job may start. Two implement it:
 *
 * - ./local-admission.ts: a token bucket and a weighted concurrency in this
 *   process, with theoretical start times;
 * - ./fleet-admission.ts: the same limits kept in a fleet store, shared by
 *   every scheduler on the same store and key, through exchanges, leases and
 *   claims.
 *
 * Invariants: jobs start only through {@link Host.start}, in queue order as
 * far as the limits allow (a fleet's calls in flight may swap neighbours when
 * the limits begin to bind); a job the Scheduler removes without starting
 * (aborted, expired, cleared) is handed back with {@link Admission.dropped}.
 * docs/internals/scheduler.md tells how each works.
 */

import type { Clock } from '../clock.js';
import { type BucketParams, type BucketState, msUntilWithin, tokensAt } from '../meters/bucket.js';
import type { Emitter } from './events.js';
import type { RejectReason } from './options.js';
import type { WaitQueue } from './queue.js';
import type { Bill, Job, Runner } from './run.js';
import type { WindowSettings } from './window-limit.js';

/** The Scheduler, as its admission sees it. */
export interface Host {
  readonly clock: Clock;
  /** The jobs waiting, in the order they would run. */
  readonly queue: WaitQueue<Job>;
  /** The queued jobs on trial (see {@link Admission.startsAtOnce}), in arrival order: asked about first. */
  readonly trial: ReadonlySet<Job>;
  /** The jobs running (`pending`, `runningCost`). */
  readonly runner: Runner;
  readonly events: Emitter;
  /** True while paused: start nothing from the queue. */
  paused(): boolean;
  /** Runs `job` (the head of the queue, or a reserved job), holding `held` of the concurrency. */
  start(job: Job, now: number, held: number): void;
  /**
   * Takes `job` out of the queue to wait for its reservation: still waiting, and its signal still aborts
   * it; or rejects it at once (handing it back with {@link Admission.dropped}) if it was on trial and
   * `clear()` or `close({ drain: false })` left it to this answer.
   */
  reserve(job: Job): void;
  /** Removes a job that has not started and rejects it. */
  reject(job: Job, reason: RejectReason, error: unknown): void;
  /**
   * The first answer about a job on trial (see {@link Admission.startsAtOnce}) is that it waits: from
   * now it counts against `maxQueue`, and it is rejected (`queueFull`) if the queue is full without it,
   * or (`cleared`) if `clear()` or `close({ drain: false })` left it to this answer.
   */
  waits(job: Job): void;
  /** The limits changed: reject the waiting jobs that can never start now, then {@link pump}. */
  limitsChanged(now: number): void;
  /** Starts what can start, expires what waited too long, arms the timer, and tells waiters. */
  pump(now: number): void;
  /** Tells waiters (`changed`, `empty`, `idle`). */
  notify(): void;
}

/** A change of the limits, parsed (`undefined`: unchanged). */
export interface LimitsChange {
  readonly ratePerSecond?: number;
  readonly burst?: number;
  readonly concurrency?: number;
  /** A window limit, new or replacing the one in force (`setWindow`). */
  readonly window?: WindowSettings;
}

/** When and how a job may start: see the file's opening comment. */
export interface Admission {
  /** Tokens per second (Infinity: no rate). */
  readonly rate: number;
  /** The bucket's capacity (Infinity without a rate). */
  readonly burst: number;
  /** The weighted concurrency (Infinity: none). */
  readonly concurrency: number;
  /** The window limit's most cost per window (Infinity or absent: none): a job may cost no more. */
  readonly windowLimit?: number;
  /** The window limit in force (`undefined`: none). */
  readonly window?: WindowSettings | undefined;
  /** The cost the window limit lets start at `now` (Infinity, or absent: no window). */
  windowRemaining?(now: number): number;
  /** Jobs wait for the concurrency (the head's share of it is taken). */
  readonly saturated: boolean;
  /** When the head's tokens will be there, for the Scheduler's one timer (Infinity: no wake-up needed). */
  readonly wakeAtMs: number;
  /** How often it asks again while blocked, ms (0: it is woken, it never polls): the least a retry hint says. */
  readonly pollMs: number;
  /** Why a job may be waiting, for the message of one rejected at its deadline. */
  whyWaiting(): string;
  /**
   * The predicted wait of a new job of `cost` at `priority`, ms, if nothing overtakes it: until the
   * bucket (as this admission knows it) holds its cost and the cost queued ahead of it; 0 if it
   * does within `withinMs`.
   */
  predictWaitMs(now: number, cost: number, priority: number, withinMs: number): number;
  /**
   * Nothing waits and the scheduler runs: if a job of `cost` (tokens) and `weight` (concurrency) may
   * start now, charges it and returns the concurrency it holds; else -1.
   */
  tryStart(cost: number, weight: number, now: number): number;
  /**
   * For an admission that decides in calls of its own (a fleet's), where {@link tryStart} cannot
   * answer at once: true if, as far as it knows at `now`, a job of `cost` could start at once beside
   * `aheadCost` of jobs already on trial. Such a job waits for the first answer on trial, not counted
   * against `maxQueue`, since the local form would have started it; the admission asks about the jobs
   * on trial first ({@link Host.trial}), even while paused, and calls {@link Host.waits} if the answer
   * is that it waits.
   */
  startsAtOnce?(cost: number, weight: number, aheadCost: number, aheadWeight: number, now: number): boolean;
  /** Starts waiting jobs, head first, as far as the limits allow; returns the time it last read. */
  drain(now: number): number;
  /** True while the admission waits for an answer about `job`: its deadline is that answer's to decide. */
  deciding(job: Job): boolean;
  /** A job joined the queue behind the head. */
  queued(): void;
  /** The scheduler resumed at `now`. */
  resumed(now: number): void;
  /** A job's concurrency freed (its function settled, or its timeout released it). */
  finished(job: Job | undefined): void;
  /** A waiting job left without starting: give back what it holds (a reservation, a lease). */
  dropped(job: Job): void;
  /** The retry hint of a job of `cost`, `weight` and `priority` rejected at a full queue, ms. */
  retryAfterMs(cost: number, weight: number, priority: number): number;
  /** A running job's `ctx.adjust(deltaCost)` (the delta is a finite number). */
  adjust(bill: Bill, deltaCost: number): void;
  /** Changes the limits (`setRate`, `setBurst`, `setConcurrency`, `setWindow`), the values already checked. */
  configure(change: LimitsChange): void;
  /** The scheduler is closed and idle: let go of what is left (timers, listeners, leases to give back). */
  close(): Promise<void> | undefined;
}

/**
 * ms until `bucket` holds `need` at `now` (0 if it does within `withinMs`, asked in tokens): a new
 * job's predicted wait, `need` being its cost and the cost queued ahead of it.
 */
export function waitForMs(
  bucket: BucketState,
  params: BucketParams,
  now: number,
  need: number,
  withinMs: number,
): number {
  return msUntilWithin(tokensAt(bucket, params, now), need, params, withinMs);
}

/**
 * The units of concurrency a running job holds: its weight; a job of weight 0 holds 1 (or the whole
 * concurrency, where that is below 1), so that every running job counts and `concurrency: 1` means
 * one job at a time. The local and the fleet admission both hold jobs by this rule.
 */
export function heldUnits(weight: number, concurrency: number): number {
  return weight === 0 ? Math.min(1, concurrency) : weight;
}

/** The most cost a job may have: the burst and the window limit bound it (its weight, the concurrency). */
export function maxCostOf(admission: Admission): number {
  return Math.min(admission.burst, admission.windowLimit ?? Number.POSITIVE_INFINITY);
}
