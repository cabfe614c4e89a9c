/**
 * The jobs that wait: the queue (a FIFO per priority, ./queue.ts), the jobs
 * taken from it to wait for a reservation's time (a fleet's), and their
 * signals. A waiting job leaves by starting ({@link Waiting.take}) or by being
 * rejected ({@link Waiting.reject}); either way it is off its signal, and a
 * rejected one is handed back to its admission (`dropped`), which gives back
 * what it held for it. Aborting a signal rejects every job waiting on it.
 *
 * Jobs on trial: queued jobs that wait for their admission's first answer
 * where the local form would have started them at once (a fleet's). They do
 * not count against `maxQueue` ({@link Waiting.counted}) until the answer
 * says they wait ({@link Waiting.endTrial}), and `onFull` never gives them up;
 * their admission asks about them first, in arrival order ({@link Waiting.trial}).
 * `clear()` and `close({ drain: false })` leave a job on trial to its answer,
 * as the local form leaves a job it started: it runs if the answer is that it
 * starts now, and is rejected as the others were if it waits
 * ({@link Waiting.spared}).
 *
 * One abort listener per signal, not per job (./signal-watch.ts).
 */

import type { RejectReason } from './options.js';
import { WaitQueue } from './queue.js';
import type { Rejections } from './reject.js';
import type { Job } from './run.js';
import { SignalWatch } from './signal-watch.js';

/** What {@link Waiting} is built with. */
export interface WaitingOptions {
  /** Keep the queue's arrival order (`oldest()`): a scheduler with `maxWait`, whose jobs are `TimedJob`s. */
  readonly arrivals: boolean;
  readonly rejections: Rejections;
  /** A job left without starting: its admission gives back what it held for it. */
  readonly dropped: (job: Job) => void;
  /** After a signal's jobs were rejected: start what may start now. */
  readonly aborted: () => void;
}

/** The jobs that wait; see the file's opening comment. */
export class Waiting {
  readonly queue: WaitQueue<Job>;
  /** Taken from the queue to wait for a reservation's time: waiting, not started. */
  readonly #reserved = new Set<Job>();
  /** Queued jobs on trial, in arrival order (see the file's opening comment), and their cost. */
  readonly #trial = new Set<Job>();
  /** Jobs on trial that {@link rejectAll} left to their answer, with the error each gets if it waits. */
  readonly #spared = new Map<Job, () => Error>();
  #trialCost = 0;
  #trialWeight = 0;
  readonly #signals = new SignalWatch<Job>((signal, jobs) => this.#abort(signal, jobs));
  readonly #rejections: Rejections;
  readonly #dropped: (job: Job) => void;
  readonly #aborted: () => void;

  constructor(options: WaitingOptions) {
    this.queue = new WaitQueue<Job>({ arrivals: options.arrivals });
    this.#rejections = options.rejections;
    this.#dropped = options.dropped;
    this.#aborted = options.aborted;
  }

  /** Jobs waiting: queued or reserved. */
  get size(): number {
    return this.queue.size + this.#reserved.size;
  }

  /** Queued jobs that count against `maxQueue`: all but those on trial. */
  get counted(): number {
    return this.queue.size - this.#trial.size;
  }

  /** The jobs on trial, in arrival order. */
  get trial(): ReadonlySet<Job> {
    return this.#trial;
  }

  /** The cost of the jobs on trial. */
  get trialCost(): number {
    return this.#trialCost;
  }

  /** The weight of the jobs on trial. */
  get trialWeight(): number {
    return this.#trialWeight;
  }

  /** Jobs waiting at exactly `priority`. */
  sizeAt(priority: number): number {
    let reserved = 0;
    for (const job of this.#reserved) if (job.priority === priority) reserved++;
    return this.queue.sizeAt(priority) + reserved;
  }

  /** Queues `job` on trial: not counted against `maxQueue` until {@link endTrial}. */
  pushOnTrial(job: Job): void {
    this.push(job);
    this.#trial.add(job);
    this.#trialCost += job.cost;
    this.#trialWeight += job.weight;
  }

  /** `job`'s trial is over (it waits, starts or leaves); false if it was not on trial. */
  endTrial(job: Job): boolean {
    if (this.#trial.size === 0 || !this.#trial.delete(job)) return false;
    if (this.#spared.size !== 0) this.#spared.delete(job);
    this.#trialCost = this.#trial.size === 0 ? 0 : this.#trialCost - job.cost;
    this.#trialWeight = this.#trial.size === 0 ? 0 : this.#trialWeight - job.weight;
    return true;
  }

  /** Queues `job`; its signal (if any) rejects it while it waits. */
  push(job: Job): void {
    const extra = job.extra;
    if (extra?.signal !== undefined) {
      this.#signals.add(extra.signal, job);
      extra.watched = true;
    }
    this.queue.push(job);
  }

  /** Takes `job` from the queue to wait for its reservation: its signal still rejects it. */
  reserve(job: Job): void {
    this.endTrial(job);
    this.queue.remove(job);
    this.#reserved.add(job);
  }

  /** Takes `job` out (from the queue or its reservation) to start it. */
  take(job: Job): void {
    // Queued (the usual case): no set to look in.
    if (job.level !== undefined) {
      this.queue.remove(job);
      this.endTrial(job);
    } else this.#reserved.delete(job);
    this.#unwatch(job);
  }

  /**
   * Takes away `job`, which has not started (or was taken out already), and rejects it; its admission
   * gives back what it held.
   */
  reject(job: Job, reason: RejectReason, error: unknown): void {
    this.take(job);
    this.#dropped(job);
    this.#rejections.rejectWaiting(job, reason, error);
  }

  /**
   * Rejects every waiting job, the queued ones first (`clear()`, `close({ drain: false })`), but those
   * on trial: each is left to its answer, and gets `error` if the answer is that it waits ({@link spared}).
   */
  rejectAll(error: () => Error): void {
    for (const job of [...this.queue]) {
      if (this.#trial.has(job)) this.#spared.set(job, error);
      else this.reject(job, 'cleared', error());
    }
    for (const job of [...this.#reserved]) this.reject(job, 'cleared', error());
  }

  /** If `job` is on trial and was left to its answer by {@link rejectAll}: the error it gets now that it waits. */
  spared(job: Job): (() => Error) | undefined {
    return this.#spared.size === 0 ? undefined : this.#spared.get(job);
  }

  #unwatch(job: Job): void {
    const extra = job.extra;
    if (extra?.watched !== true) return;
    extra.watched = false;
    this.#signals.delete(extra.signal as AbortSignal, job);
  }

  /** `signal` aborted: every job waiting on it leaves and rejects with its reason. */
  #abort(signal: AbortSignal, jobs: Set<Job>): void {
    for (const job of jobs) {
      (job.extra as { watched: boolean }).watched = false;
      if (!this.#reserved.delete(job)) {
        this.queue.remove(job);
        this.endTrial(job);
      }
      this.#dropped(job);
      this.#rejections.rejectWaiting(job, 'aborted', signal.reason);
    }
    this.#aborted();
  }
}
