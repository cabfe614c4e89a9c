/**
 * The local admission: a token bucket (`rate`, `burst`) and a weighted
 * concurrency, both in this process. A job of cost c and weight w (w = c
 * unless told) starts when it is at the head of the queue, w units of the
 * concurrency are free, and the bucket holds c tokens; it is charged at its theoretical start ({@link startAt}): when the
 * bucket had the tokens, never before it arrived or could otherwise have
 * started, and never more than the catch-up allowance before now. So a window
 * of T sees at most burst + rate * (T + allowance) of cost start, and the
 * long-run rate is exact however late timers fire. The reasoning and a worked
 * example are in docs/internals/scheduler.md.
 *
 * A key of a KeyedScheduler has one more limit, over all keys together: once
 * its own limits let the head start, the head asks for its turn at the shared
 * bucket (./turns.ts), which charges it if the answer is yes; on a no the
 * head waits (its own bucket uncharged) until the turns wake the scheduler.
 * Such a key has no window limit: a KeyedScheduler gives none, and `setWindow`
 * on its key's Scheduler is refused (`NotSupportedError`).
 */

import { retryHintMs } from '../errors.js';
import {
  type BucketParams,
  type BucketState,
  charge,
  conformsAt,
  delayUntil,
  msUntil,
  PACED_JOB_BURST,
  rebill,
  reconfigure,
  slackFor,
  startAt,
  tryCharge,
} from '../meters/bucket.js';
import { catchUpAllowanceMs, type Watchdog } from '../timer.js';
import { type Admission, type Host, heldUnits, type LimitsChange, waitForMs } from './admission.js';
import type { SchedulerSettings } from './options.js';
import type { Bill, Job } from './run.js';
import { GLOBAL_CAPACITY, type TurnsMember } from './turns.js';
import { noWindowOnKey, StartWindow, type WindowSettings } from './window-limit.js';

/** A bucket and a weighted concurrency in this process; see the file's opening comment. */
export class LocalAdmission implements Admission {
  readonly #host: Host;
  readonly #watchdog: Watchdog;
  readonly #catchUpMs: number;
  /** Bucket state; `undefined` when there is no rate limit. */
  #bucket: BucketState | undefined;
  #params: BucketParams = { ratePerSecond: Number.POSITIVE_INFINITY, burst: Number.POSITIVE_INFINITY };
  #concurrency = Number.POSITIVE_INFINITY;
  #concurrencySlack = 0;
  /** The window limit's sliding log (./window-limit.ts); `undefined` without one. */
  #window: StartWindow | undefined;
  /**
   * The concurrency a job of cost 0 holds while it runs: 1, or the whole concurrency if that is
   * smaller. Every running job counts: under `concurrency: 1` a free job still runs alone.
   */

  /** A key's place at the limit over all keys (./turns.ts); `undefined` for a scheduler on its own. */
  readonly #turns: TurnsMember | undefined;
  /** The head waits for its turn at the limit over all keys: the turns wake the scheduler. */
  #turnBlocked = false;
  /** The head could not start for lack of concurrency; it may start when a job finishes. */
  #concurrencyBlocked = false;
  /** No job may be charged before this (a resume, a concurrency slot freed): it could not have started earlier. */
  #floorMs = Number.NEGATIVE_INFINITY;
  /** When the head will have its tokens (Infinity if it waits for something else or nothing waits). */
  #nextStartMs = Number.POSITIVE_INFINITY;

  /** For retry estimates when the concurrency is what holds jobs back: the mean gap between finishes. */
  #finishGapMs = 0;
  #lastFinishMs = Number.NaN;
  /** When the last job started (for a retry estimate before any job finished). */
  #lastStartMs = Number.NaN;
  /** A job was turned away for lack of concurrency since the last finish: measure the gap to the next. */
  #contended = false;
  /** The instant the last retry hint pointed at: the next one points at least one job's time later. */
  #hintAtMs = Number.NEGATIVE_INFINITY;

  /** `watchdog` is the Scheduler's one timer: how late it fires sizes the catch-up allowance. */
  constructor(host: Host, settings: SchedulerSettings, watchdog: Watchdog) {
    this.#host = host;
    this.#watchdog = watchdog;
    this.#catchUpMs = settings.catchUpMs;
    const params = settings.params;
    if (params !== undefined) {
      this.#params = params;
      this.#bucket = { tokens: params.burst, updatedAtMs: host.clock.now() };
    }
    this.#setConcurrency(settings.concurrency);
    this.#window = settings.window === undefined ? undefined : new StartWindow(settings.window);
    this.#turns = settings.turns?.member((now) => host.pump(now));
  }

  get windowLimit(): number {
    return this.#window?.limit ?? Number.POSITIVE_INFINITY;
  }

  get window(): WindowSettings | undefined {
    return this.#window?.settings;
  }

  windowRemaining(now: number): number {
    return this.#window?.remaining(now) ?? Number.POSITIVE_INFINITY;
  }

  get rate(): number {
    return this.#params.ratePerSecond;
  }

  get burst(): number {
    return this.#params.burst;
  }

  get concurrency(): number {
    return this.#concurrency;
  }

  get saturated(): boolean {
    return this.#concurrencyBlocked;
  }

  get wakeAtMs(): number {
    return this.#nextStartMs;
  }

  get pollMs(): number {
    return 0;
  }

  whyWaiting(): string {
    if (this.#concurrencyBlocked) return 'the concurrency stayed taken';
    if (this.#turnBlocked) return 'the limit over all keys was taken by the turns of other keys';
    return 'jobs of higher priority went first';
  }

  predictWaitMs(now: number, cost: number, priority: number, withinMs: number): number {
    const bucket = this.#bucket;
    // The window's wait, when known: not behind queued jobs, nor while only running jobs' finishes can
    // make room (as for the concurrency, that is not predicted).
    let windowMs = this.#window === undefined || this.#host.queue.size !== 0 ? 0 : this.#window.waitMs(now, cost);
    if (windowMs === Number.POSITIVE_INFINITY) windowMs = 0;
    if (bucket === undefined) return windowMs > withinMs ? windowMs : 0;
    const bucketMs = waitForMs(bucket, this.#params, now, this.#host.queue.costAtOrAbove(priority) + cost, withinMs);
    return windowMs > withinMs ? Math.max(windowMs, bucketMs) : bucketMs;
  }

  tryStart(cost: number, weight: number, now: number): number {
    const held = heldUnits(weight, this.#concurrency);
    if (this.#host.runner.runningCost + held > this.#concurrency + this.#concurrencySlack) return -1;
    const bucket = this.#bucket;
    const window = this.#window;
    if (window !== undefined) {
      if (bucket !== undefined && !conformsAt(bucket, this.#params, now, cost)) return -1;
      if (window.take(now, cost) !== 0) return -1;
    }
    const turns = this.#turns;
    if (turns !== undefined) {
      // The shared bucket is asked last and charges on yes: neither bucket is charged when one refuses.
      if (bucket !== undefined && !conformsAt(bucket, this.#params, now, cost)) return -1;
      if (!turns.pass(cost, now)) return -1;
    }
    if (bucket !== undefined && !tryCharge(bucket, this.#params, now, cost)) return -1;
    this.#lastStartMs = now;
    return held;
  }

  /**
   * Starts waiting jobs, head first, while the concurrency and the tokens (at their theoretical times) allow.
   * Returns the time it last read: under a rate it reads the clock for each job it starts, so that a job is
   * charged at the instant its function is really called. (A pause in the middle of a drain, a GC or the
   * process descheduled, would otherwise leave the rest of the drain charged at an instant before it and
   * called after it, with the bucket refilled in between: more than burst + rate * T in a window of calls.)
   */
  drain(now: number): number {
    this.#nextStartMs = Number.POSITIVE_INFINITY;
    const host = this.#host;
    const queue = host.queue;
    const runner = host.runner;
    const window = this.#window;
    // A job started here may pause the scheduler (or change its limits) from its fn: check on every turn.
    for (let job = queue.peek(); job !== undefined && !host.paused(); job = queue.peek()) {
      const held = heldUnits(job.weight, this.#concurrency);
      if (runner.runningCost + held > this.#concurrency + this.#concurrencySlack) {
        this.#concurrencyBlocked = true;
        return now;
      }
      const bucket = this.#bucket;
      if (bucket !== undefined || window !== undefined) {
        const read = host.clock.now();
        if (read > now) now = read;
      }
      if (this.#concurrencyBlocked) {
        // A slot freed up just now: the head could not have started before now.
        this.#concurrencyBlocked = false;
        if (now > this.#floorMs) this.#floorMs = now;
      }
      if (bucket !== undefined) {
        // The theoretical start: when the bucket had the tokens, but not before the job arrived or
        // could otherwise have started, and making up at most the lateness the bucket could not absorb.
        const notBeforeMs = Math.max(job.enqueuedAtMs, this.#floorMs);
        let atMs = startAt(
          bucket,
          this.#params,
          now,
          job.cost,
          notBeforeMs,
          catchUpAllowanceMs(this.#catchUpMs, this.#watchdog),
        );
        if (atMs > now) {
          this.#nextStartMs = atMs;
          return now;
        }
        if (this.#turns !== undefined) {
          if (!this.#passTurn(job.cost, now)) return now;
          atMs = Math.max(atMs, this.#floorMs); // it waited for its turn: it could not have started before
        }
        if (window !== undefined && !this.#windowAllows(window, now, job.cost)) return now;
        charge(bucket, this.#params, atMs, job.cost);
      } else {
        if (this.#turns !== undefined && !this.#passTurn(job.cost, now)) return now;
        if (window !== undefined && !this.#windowAllows(window, now, job.cost)) return now;
      }
      this.#lastStartMs = now;
      host.start(job, now, held);
    }
    return now;
  }

  /**
   * The head's turn at the limit over all keys: true if it may start (the shared bucket charged).
   * After a wait for its turn, it could not have started before now (the floor rises).
   */
  #passTurn(cost: number, now: number): boolean {
    if (!(this.#turns as TurnsMember).pass(cost, now)) {
      this.#turnBlocked = true;
      return false;
    }
    if (this.#turnBlocked) {
      this.#turnBlocked = false;
      if (now > this.#floorMs) this.#floorMs = now;
    }
    return true;
  }

  /** Counts a start in the window limit if it fits; else sets the wake-up for when it will. */
  #windowAllows(window: StartWindow, now: number, cost: number): boolean {
    const waitMs = window.take(now, cost);
    if (waitMs === 0) return true;
    this.#nextStartMs = now + waitMs;
    return false;
  }

  deciding(): boolean {
    return false; // it decides at once
  }

  queued(): void {
    // Behind an existing head nothing changes: the head, its timer and the oldest deadline stay.
  }

  resumed(now: number): void {
    // A job that was due during the pause is charged from now, not from before it.
    if (now > this.#floorMs) this.#floorMs = now;
  }

  finished(job: Job | undefined): void {
    const host = this.#host;
    if (job !== undefined && this.#window !== undefined) this.#window.finished(host.clock.now(), job.cost);
    if (host.queue.size === 0) {
      if (!this.#contended) {
        this.#lastFinishMs = Number.NaN;
        host.notify();
        return;
      }
      this.#contended = false; // jobs were turned away (maxQueue 0): the gap to this finish says how fast slots free
    }
    const now = host.clock.now();
    if (!Number.isNaN(this.#lastFinishMs)) {
      const gapMs = now - this.#lastFinishMs;
      this.#finishGapMs = this.#finishGapMs === 0 ? gapMs : this.#finishGapMs + (gapMs - this.#finishGapMs) / 8;
    }
    this.#lastFinishMs = now;
    host.pump(now);
  }

  dropped(): void {
    // A waiting job holds no tokens (it is charged only when it starts): nothing to give back.
  }

  /**
   * The retry hint for a job of `cost` turned away from a full queue: when the
   * queue will have room for this caller, rounded up to whole ms plus the
   * timer margin ({@link retryHintMs}).
   *
   * - Under a rate the time is known: room comes when the head starts (with
   *   `maxQueue: 0`, when this job's own tokens are there). A key of a
   *   KeyedScheduler takes the later of that and its turn at the limit over
   *   all keys (an estimate: ./turns.ts).
   * - Under a concurrency that is full it is estimated: the mean gap between
   *   finishes while jobs were turned away or waiting, after the last finish;
   *   before any finish, as long again as the last job has run so far (at
   *   least 1 ms), which doubles the hint on each rejected retry.
   * - No stampede: callers turned away together would otherwise all be told
   *   the same instant and all come back to one free slot. Each hint is at
   *   least the previous one plus the time one more job takes to go through
   *   (cost / rate, or the gap between finishes), so the k-th caller rejected
   *   in a burst is told when there is room for the k-th.
   */
  retryAfterMs(cost: number, weight: number): number {
    const host = this.#host;
    const now = host.clock.now();
    const bucket = this.#bucket;
    const queued = host.queue.size !== 0;
    let baseMs = 0;
    let spacingMs = 0;
    if (bucket !== undefined) {
      const params = this.#params;
      if (!queued) baseMs = delayUntil(bucket, params, now, cost);
      else if (this.#nextStartMs !== Number.POSITIVE_INFINITY) baseMs = this.#nextStartMs - now;
      spacingMs = msUntil(0, cost, params);
    }
    const turns = this.#turns;
    if (turns !== undefined) {
      // A key's head waits for its turn at the limit over all keys as well: the later of the two.
      const head = queued ? host.queue.peek() : undefined;
      baseMs = Math.max(baseMs, turns.waitMs(head === undefined ? cost : head.cost, now));
      spacingMs = Math.max(spacingMs, msUntil(0, cost, turns.turns.params));
    }
    // Under `windowCounts: 'finish'`, a window that only running jobs' finishes can free is full as a concurrency is.
    const windowMs = this.#window === undefined || queued ? 0 : this.#window.waitMs(now, cost);
    const windowFull = windowMs === Number.POSITIVE_INFINITY;
    if (!windowFull) baseMs = Math.max(baseMs, windowMs);
    const held = heldUnits(weight, this.#concurrency);
    const full =
      windowFull ||
      (queued ? this.#concurrencyBlocked : host.runner.runningCost + held > this.#concurrency + this.#concurrencySlack);
    if (full) {
      this.#contended = true;
      const gapMs = this.#finishGapMs;
      const waitMs =
        gapMs > 0 && !Number.isNaN(this.#lastFinishMs)
          ? Math.max(1, this.#lastFinishMs + gapMs - now)
          : Math.max(1, now - this.#lastStartMs);
      baseMs = Math.max(baseMs, waitMs);
      spacingMs = Math.max(spacingMs, gapMs > 0 ? gapMs * held : waitMs);
    }
    const atMs = Math.max(now + Math.max(0, baseMs), this.#hintAtMs + spacingMs);
    this.#hintAtMs = atMs;
    return retryHintMs(atMs - now);
  }

  /**
   * A key of a KeyedScheduler is billed at both buckets: the new total must fit the key's burst and
   * the global one, and the change moves both (a key without a rate, the global one alone).
   */
  adjust(bill: Bill, deltaCost: number): void {
    const bucket = this.#bucket;
    const turns = this.#turns;
    if (deltaCost === 0 || (bucket === undefined && turns === undefined)) return;
    const params = this.#params;
    const now = this.#host.clock.now();
    const globalBurst = turns === undefined ? Number.POSITIVE_INFINITY : turns.turns.burst;
    const delta =
      globalBurst < params.burst
        ? bill.amend(deltaCost, globalBurst, GLOBAL_CAPACITY)
        : bill.amend(deltaCost, params.burst);
    turns?.rebill(delta, now);
    if (bucket === undefined) return;
    rebill(bucket, params, now, delta);
    this.#host.pump(now); // the head's start moved: later for a charge, sooner for a refund
  }

  /**
   * New limits from now on. A new rate keeps the tokens earned so far (capped at the burst); on a
   * scheduler made without a rate it adds a bucket (full, burst 1). A new burst keeps the tokens,
   * capped at it. A new concurrency never stops running jobs; freed capacity counts from now. A new
   * window keeps the starts counted so far. Waiting jobs that can no longer ever start are rejected
   * (by the Scheduler).
   */
  configure(change: LimitsChange): void {
    const host = this.#host;
    const now = host.clock.now();
    const { ratePerSecond, burst, concurrency, window } = change;
    if (window !== undefined) {
      noWindowOnKey(this.#turns, window); // refused, with the one message
      if (this.#window === undefined) this.#window = new StartWindow(window);
      else this.#window.reconfigure(window);
      host.limitsChanged(now);
      return;
    }
    if (concurrency !== undefined) {
      this.#setConcurrency(concurrency);
      if (this.#concurrencyBlocked) {
        this.#concurrencyBlocked = false;
        if (now > this.#floorMs) this.#floorMs = now;
      }
      host.limitsChanged(now);
      return;
    }
    if (this.#bucket === undefined) {
      if (ratePerSecond === undefined) return;
      this.#params = { ratePerSecond, burst: PACED_JOB_BURST };
      this.#bucket = { tokens: PACED_JOB_BURST, updatedAtMs: now };
      host.limitsChanged(now);
      return;
    }
    const next = {
      ratePerSecond: ratePerSecond ?? this.#params.ratePerSecond,
      burst: burst ?? this.#params.burst,
    };
    reconfigure(this.#bucket, this.#params, now, next);
    this.#params = next;
    if (burst === undefined) host.pump(now);
    else host.limitsChanged(now);
  }

  #setConcurrency(concurrency: number): void {
    this.#concurrency = concurrency;
    this.#concurrencySlack = slackFor(concurrency);
  }

  close(): undefined {
    return undefined;
  }
}
