/**
 * The Scheduler: jobs with a token cost, weighted concurrency, and a bounded
 * wait queue that rejects instead of growing.
 *
 * A job of cost c needs c tokens from a token bucket (`rate`, `burst`) to
 * start, and holds c units of `concurrency` while it runs; either limit may be
 * absent, not both. Jobs that cannot start at once wait in a FIFO per priority
 * (higher first), at most `maxQueue` of them: a job that arrives at a full
 * queue is rejected at once (`QueueFullError`). Settled up front: a cost above
 * the burst or the concurrency (`CostExceedsCapacityError`), and a predicted
 * start later than `maxWait` (`WaitTooLongError`); a job still waiting at its
 * deadline is rejected then. One timer for the whole scheduler, armed for the
 * earlier of the admission's wake-up and the oldest deadline; an idle
 * scheduler holds none.
 *
 * This class owns the API, the queue, signals, deadlines, timeouts, events and
 * counters. When a job may start is its admission's (./admission.ts): the
 * local one (a bucket and a concurrency here), or a fleet's, when it is given
 * a `store` and `key`. docs/internals/scheduler.md has the reasoning.
 */

import type { Clock } from '../clock.js';
import {
  AbortError,
  ClosedError,
  checkSignal,
  InvalidOptionError,
  QueueFullError,
  retryHintMs,
  WaitTooLongError,
} from '../errors.js';
import { burstParam, rateParam, timeToFullMs } from '../meters/bucket.js';
import { Watchdog } from '../timer.js';
import type { DurationInput, RateInput, SizeInput } from '../units.js';
import { type Admission, type Host, maxCostOf } from './admission.js';
import { Emitter, EmptyEvent } from './events.js';
import { FleetAdmission } from './fleet-admission.js';
import { LocalAdmission } from './local-admission.js';
import {
  checkListener,
  copyCounters,
  type EventName,
  type JobFunction,
  parseConcurrency,
  parseDrain,
  parseSchedulerOptions,
  parseSizeBy,
  parseTimeout,
  type ScheduleOptions,
  type SchedulerCounters,
  type SchedulerListener,
  type SchedulerOptions,
  type WrapOptions,
  wrapCalls,
  zeroCounters,
} from './options.js';
import {
  costError,
  deadlineError,
  Rejections,
  rejectCall,
  rejectOption,
  rejectPriority,
  weightError,
} from './reject.js';
import { Job, promiseOf, Runner, TimedJob } from './run.js';
import { Waiting } from './waiting.js';
import { parseWindowChange, type WindowLimitOptions } from './window-limit.js';

export type {
  ActiveJob,
  EventName,
  JobContext,
  JobFunction,
  RejectedJob,
  RejectReason,
  ScheduleOptions,
  SchedulerCounters,
  SchedulerEvents,
  SchedulerListener,
  SchedulerOptions,
  WrapOptions,
} from './options.js';

const EMPTY: ScheduleOptions = Object.freeze({});

/**
 * Runs jobs under a token-bucket rate and a weighted concurrency limit, with a
 * bounded priority queue that rejects when full. With `store` and `key`, the
 * limits are shared by every scheduler on that store and key (a fleet).
 *
 * @example
 * const scheduler = new Scheduler({ rate: '20/s', burst: 5, concurrency: 4, maxQueue: 100 });
 * const user = await scheduler.schedule(({ signal }) => fetch(url, { signal }), { cost: 1 });
 */
export class Scheduler {
  readonly #clock: Clock;
  /** The jobs that wait: the queue, reservations (a fleet's), their signals. */
  readonly #waiting: Waiting;
  readonly #admission: Admission;
  readonly #maxQueue: number;
  /** What a full queue gives up (`onFull`). */
  readonly #onFull: 'reject' | 'evict-lower' | 'drop-oldest';
  readonly #maxWaitMs: number;
  /** A waiting job: under a maxWait, linked in arrival order too (the queue's `oldest()`); else with no such links. */
  readonly #JobKind: typeof Job;
  /** The largest cost a job may have: min(burst, concurrency). */
  #maxCost: number;
  /** A window counts jobs until they finish (`windowCounts: 'finish'`): a job started at once needs its record. */
  #countsFinish: boolean;
  #timeoutMs: number;
  #paused: boolean;
  /** The latest arrival time given to a waiting job. */
  #lastEnqueuedMs = Number.NEGATIVE_INFINITY;
  /** Set by {@link close}: no new jobs. */
  #closed = false;
  /** The one timer: for the earlier of the admission's wake-up and the oldest deadline. */
  readonly #watchdog: Watchdog;
  /** When `empty` is due; something was admitted since the last `idle`. */
  readonly #empty = new EmptyEvent();
  #idleOwed = false;

  readonly #events = new Emitter(this);
  readonly #counters: SchedulerCounters = zeroCounters();
  readonly #runner: Runner;
  readonly #rejections: Rejections;

  constructor(options: SchedulerOptions) {
    const settings = parseSchedulerOptions(options);
    const clock = settings.clock;
    this.#clock = clock;
    this.#watchdog = new Watchdog(clock, () => this.#pump(clock.now(), true));
    this.#maxQueue = settings.maxQueue;
    this.#onFull = settings.onFull;
    this.#maxWaitMs = settings.maxWaitMs;
    this.#JobKind = settings.maxWaitMs === Number.POSITIVE_INFINITY ? Job : TimedJob;
    this.#timeoutMs = settings.timeoutMs;
    this.#paused = settings.paused;
    this.#runner = new Runner({
      clock,
      counters: this.#counters,
      events: this.#events,
      releaseOnTimeout: settings.releaseOnTimeout,
      adjuster: (bill, deltaCost) => this.#admission.adjust(bill, deltaCost),
      onFinish: (job) => {
        // A job's concurrency freed: the admission starts what may start.
        this.#empty.ended();
        this.#admission.finished(job);
      },
    });
    this.#rejections = new Rejections(this.#counters, this.#events, this.#maxQueue);
    const waiting = new Waiting({
      arrivals: this.#JobKind === TimedJob,
      rejections: this.#rejections,
      dropped: (job) => this.#admission.dropped(job),
      aborted: () => this.#pump(clock.now()),
    });
    this.#waiting = waiting;
    const host: Host = {
      clock,
      queue: waiting.queue,
      trial: waiting.trial,
      runner: this.#runner,
      events: this.#events,
      paused: () => this.#paused,
      start: (job, now, held) => this.#start(job, now, held),
      reserve: (job) => this.#reserve(job),
      reject: (job, reason, error) => waiting.reject(job, reason, error),
      waits: (job) => this.#waits(job),
      limitsChanged: (now) => this.#limitsChanged(now),
      pump: (now) => this.#pump(now),
      notify: () => this.#notify(),
    };
    this.#admission =
      settings.fleet === undefined
        ? new LocalAdmission(host, settings, this.#watchdog)
        : new FleetAdmission(host, settings.fleet, settings);
    this.#maxCost = maxCostOf(this.#admission);
    this.#countsFinish = this.#admission.window?.untilFinish === true;
  }

  // ---------------------------------------------------------------- state

  /** Jobs waiting to start (in a fleet, those holding a reservation too). */
  get size(): number {
    return this.#waiting.size;
  }

  /** Jobs running. */
  get pending(): number {
    return this.#runner.pending;
  }

  /** The cost of the jobs running: the concurrency in use. */
  get pendingCost(): number {
    return this.#runner.runningCost;
  }

  /** True while paused (see {@link pause}). */
  get isPaused(): boolean {
    return this.#paused;
  }

  /** The concurrency limit (Infinity if none; a fleet's as its store last said). Set: {@link setConcurrency}. */
  get concurrency(): number {
    return this.#admission.concurrency;
  }

  /** The default timeout of new jobs, ms (Infinity: none); set (`5000`, `'5s'`), it applies to later jobs. */
  get timeout(): number {
    return this.#timeoutMs;
  }

  set timeout(timeout: DurationInput | undefined) {
    this.#timeoutMs = parseTimeout(timeout);
  }

  /** True when jobs wait for the concurrency: every slot the head needs is taken. */
  get isSaturated(): boolean {
    return this.#waiting.queue.size !== 0 && this.#admission.saturated;
  }

  /** The rate, tokens per second (Infinity if none). */
  get rate(): number {
    return this.#admission.rate;
  }

  /** The burst (Infinity if there is no rate). */
  get burst(): number {
    return this.#admission.burst;
  }

  /** The window limit's most cost per window (Infinity if none); `window` is its length, ms (0 if none). */
  get limit(): number {
    return this.#admission.windowLimit ?? Number.POSITIVE_INFINITY;
  }
  get window(): number {
    return this.#admission.window?.windowMs ?? 0;
  }

  /** The cost the window limit lets start now (Infinity without one). */
  get windowRemaining(): number {
    return this.#admission.windowRemaining?.(this.#clock.now()) ?? Number.POSITIVE_INFINITY;
  }

  /** The bound on waiting jobs. */
  get maxQueue(): number {
    return this.#maxQueue;
  }

  /** Jobs waiting at exactly `priority`. */
  sizeBy(options: { priority: number }): number {
    return this.#waiting.sizeAt(parseSizeBy(options));
  }

  /** A snapshot of the counters. */
  get counters(): SchedulerCounters {
    return copyCounters(this.#counters);
  }

  /** True once {@link close} was called. */
  get isClosed(): boolean {
    return this.#closed;
  }

  // ---------------------------------------------------------------- jobs

  /**
   * Runs `fn` when its cost fits the limits. The promise settles with the job's own result, or
   * rejects at once (without running it) with `CostExceedsCapacityError`, `QueueFullError`,
   * `WaitTooLongError` or the signal's reason; later with `WaitTooLongError` at its deadline, an
   * `AbortError` from {@link clear}, or `JobTimeoutError`.
   */
  schedule<R>(fn: JobFunction<R>, options: ScheduleOptions = EMPTY): Promise<R> {
    if (typeof fn !== 'function' || typeof options !== 'object' || options === null) return rejectCall(fn, options);
    if (this.#closed) return Promise.reject(new ClosedError());
    const cost = options.cost ?? 1;
    const weight = options.weight ?? cost;
    const priority = options.priority ?? 0;
    let signal = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      try {
        signal = checkSignal(signal); // a cross-realm signal passes; anything else is rejected here, before anything
      } catch (error) {
        return Promise.reject(error);
      }
    }
    const rejections = this.#rejections;
    const admission = this.#admission;
    if (!(typeof cost === 'number' && cost >= 0 && cost <= this.#maxCost)) {
      return rejections.rejectCost({ cost, priority, burst: admission.burst, windowLimit: admission.windowLimit });
    }
    if (!(typeof weight === 'number' && weight >= 0 && weight <= admission.concurrency)) {
      return rejections.rejectWeight({ weight, cost, priority, concurrency: admission.concurrency });
    }
    if (typeof priority !== 'number' || !Number.isFinite(priority)) return rejectPriority(priority);
    if (signal?.aborted) return rejections.reject('aborted', signal.reason, cost, priority);
    const waiting = this.#waiting;
    const queue = waiting.queue;
    // A full queue first: with a job waiting at its head nothing could start now, so this one is rejected.
    const counted = waiting.counted;
    if (counted >= this.#maxQueue && counted !== 0 && this.#victim(priority) === undefined) {
      return rejections.queueFull(cost, priority, admission.retryAfterMs(cost, weight, priority));
    }
    let timeoutMs = this.#timeoutMs;
    if (options.timeout !== undefined) {
      try {
        timeoutMs = parseTimeout(options.timeout);
      } catch (error) {
        return Promise.reject(error); // as for a bad cost or priority: the promise says it
      }
    }
    const now = this.#clock.now();
    // The default timeout is the one in force now (as in p-queue): copied to the job, not read when it starts.
    const extra = signal === undefined && timeoutMs === Infinity ? undefined : { signal, watched: false, timeoutMs };
    // Start at once: nothing waits ahead, and the admission has the concurrency and the tokens (charged if so).
    const held = queue.size === 0 && !this.#paused ? admission.tryStart(cost, weight, now) : -1;
    if (held >= 0) {
      this.#counters.admitted++;
      this.#idleOwed = true;
      if (signal === undefined && timeoutMs === Number.POSITIVE_INFINITY && !this.#countsFinish) {
        return this.#runner.run(fn as JobFunction<unknown>, cost, priority, held) as Promise<R>;
      }
      const job = new Job(fn as JobFunction<unknown>, cost, weight, priority, now, extra);
      const promise = promiseOf<R>(job);
      this.#runner.runJob(job, held, 0, timeoutMs);
      return promise;
    }

    // A job the local form would have started now waits for a fleet's first answer on trial, outside `maxQueue`.
    const trial =
      counted === 0 &&
      !this.#paused &&
      admission.startsAtOnce?.(cost, weight, waiting.trialCost, waiting.trialWeight, now) === true;
    if (!trial && counted >= this.#maxQueue && this.#victim(priority) === undefined) {
      return rejections.queueFull(cost, priority, admission.retryAfterMs(cost, weight, priority));
    }
    const maxWaitMs = this.#maxWaitMs;
    if (maxWaitMs !== Number.POSITIVE_INFINITY) {
      const waitMs = admission.predictWaitMs(now, cost, priority, maxWaitMs);
      if (waitMs > 0) {
        const error = new WaitTooLongError({ waitMs, maxWaitMs, retryAfterMs: retryHintMs(waitMs - maxWaitMs) });
        return rejections.reject('waitTooLong', error, cost, priority);
      }
    }

    // Arrival times never go back (a clock that does counts as no time), so the first job in arrival order
    // is the one with the first deadline: the queue's `oldest()`.
    if (now > this.#lastEnqueuedMs) this.#lastEnqueuedMs = now;
    const job = new this.#JobKind(fn as JobFunction<unknown>, cost, weight, priority, this.#lastEnqueuedMs, extra);
    const promise = promiseOf<R>(job);
    if (!trial) this.#makeRoom(priority);
    if (trial) waiting.pushOnTrial(job);
    else waiting.push(job);
    this.#counters.admitted++;
    if (!trial) this.#empty.queued(); // a job on trial is owed `empty` once it waits (`#waits`), as it would have started
    this.#idleOwed = true;
    if (queue.peek() === job) this.#pump(now);
    else admission.queued();
    return promise;
  }

  /**
   * Returns a function that runs `fn` through the scheduler: each call is a
   * job, with the call's `this` and arguments. `cost` may be a function of the
   * call's arguments (a batch's size, a query's weight); `signal` applies to
   * every call: `scheduler.wrap(runSearch, { cost: (q: Query) => q.pages })`.
   */
  wrap<A extends unknown[], R, T = unknown>(
    fn: (this: T, ...args: A) => R | PromiseLike<R>,
    options: WrapOptions<A> = {},
  ): (this: T, ...args: A) => Promise<R> {
    return wrapCalls((job, jobOptions) => this.schedule(job, jobOptions), fn, options);
  }

  // ---------------------------------------------------------------- control

  /** Stops starting jobs; running ones go on, waiting ones wait (deadlines run; a fleet's reserved ones start). */
  pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.#pump(this.#clock.now());
  }

  /** Starts jobs again. A job that was due during the pause is charged from now, not from before it. */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    const now = this.#clock.now();
    this.#admission.resumed(now);
    this.#pump(now, true);
  }

  /**
   * Removes every waiting job, rejecting each with tokenpace's `AbortError`
   * (`ABORT_ERR`); in a fleet, reservations are given back, and a job on trial
   * goes to its answer (it runs if admitted at once). Running jobs go on.
   */
  clear(): void {
    if (this.size === 0) return;
    this.#waiting.rejectAll(
      () => new AbortError('the job was removed from the queue by Scheduler.clear() before it started'),
    );
    this.#pump(this.#clock.now());
  }

  /**
   * Closes the scheduler: `schedule` then rejects with `ClosedError`. Waiting jobs still run (as
   * undici's `close()`), or with `{ drain: false }` are rejected with `ClosedError` (running ones go
   * on; in a fleet, a job on trial goes to its answer, as `clear()` says). Resolves when nothing waits or runs (a fleet's leases given back), holding no timer then.
   * Again is harmless. `await using` calls it (`Symbol.asyncDispose`).
   */
  close(options?: { drain?: boolean }): Promise<void> {
    let drain: boolean;
    try {
      drain = parseDrain(options);
    } catch (error) {
      return Promise.reject(error);
    }
    this.#closed = true;
    if (!drain) {
      this.#waiting.rejectAll(
        () => new ClosedError('the scheduler was closed with { drain: false } before the job started'),
      );
      this.#pump(this.#clock.now());
    } else if (this.#paused && this.#waiting.queue.size !== 0) {
      this.resume(); // draining a paused scheduler would never end
    }
    return this.onIdle().then(() => {
      const closing = this.#admission.close();
      this.#watchdog.disarm();
      return closing;
    });
  }

  /** `await using scheduler = new Scheduler(...)`: {@link close} at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Changes the rate from now on: tokens earned so far are kept (capped at the burst). Without a rate,
   * adds a bucket (full, burst 1). In a fleet the change goes to the store, for every worker: the
   * getters show it once the store answers; one that does not reach it is told by `storeError`.
   */
  setRate(rate: RateInput): void {
    this.#admission.configure({ ratePerSecond: rateParam(rate) });
  }

  /**
   * Changes the burst from now on: tokens earned so far are kept, capped at it; waiting jobs that
   * cost more are rejected with `CostExceedsCapacityError`.
   */
  setBurst(burst: SizeInput): void {
    if (!(this.#admission.rate < Number.POSITIVE_INFINITY)) {
      throw new InvalidOptionError('burst', burst, '`setBurst` needs a rate: call `setRate` first');
    }
    this.#admission.configure({ burst: burstParam(burst) });
  }

  /**
   * Changes the concurrency from now on. Running jobs are never stopped: a smaller limit holds new
   * starts back until enough cost finishes. Waiting jobs that cost more are rejected, as for a burst.
   * Infinity (no concurrency limit) only beside a rate or a window limit.
   */
  setConcurrency(concurrency: number): void {
    const admission = this.#admission;
    const otherLimit = admission.rate < Number.POSITIVE_INFINITY || admission.window !== undefined;
    admission.configure({ concurrency: parseConcurrency(concurrency, otherLimit) });
  }

  /**
   * Sets the window limit from now on (`{ limit, window }`, as the options; on a scheduler made
   * without one, adds it): the starts counted so far stay counted, and waiting jobs that cost more
   * than the new limit are rejected with `CostExceedsCapacityError`. Not in a fleet (`ERR_NOT_SUPPORTED`).
   */
  setWindow(options: WindowLimitOptions): void {
    this.#admission.configure({ window: parseWindowChange(options, this.#admission.window) });
  }

  // ---------------------------------------------------------------- promises and events

  /** Resolves when the queue is empty (jobs may still run). */
  onEmpty(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return this.#events.when('empty');
  }

  /** Resolves when nothing waits and nothing runs. */
  onIdle(): Promise<void> {
    if (this.size === 0 && this.#runner.pending === 0) return Promise.resolve();
    return this.#events.when('idle');
  }

  /** Resolves when no job runs (jobs may still wait: paused, or waiting for tokens). */
  onPendingZero(): Promise<void> {
    if (this.#runner.pending === 0) return Promise.resolve();
    return this.#events.when('changed', () => this.#runner.pending === 0);
  }

  /** Resolves when fewer than `limit` jobs wait: a producer's cue to add more. */
  onSizeLessThan(limit: number): Promise<void> {
    if (typeof limit !== 'number' || !(limit >= 0)) return rejectOption('limit', limit, 'a number >= 0');
    if (this.size < limit) return Promise.resolve();
    return this.#events.when('changed', () => this.size < limit);
  }

  /** Adds a listener. */
  on<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
    checkListener(event, listener);
    this.#events.on(event, listener);
    return this;
  }

  /** Removes a listener added with {@link on} or {@link once}. */
  off<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
    checkListener(event, listener);
    this.#events.off(event, listener);
    return this;
  }

  /** Adds a listener that runs once. */
  once<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
    checkListener(event, listener);
    this.#events.once(event, listener);
    return this;
  }

  // ---------------------------------------------------------------- the core

  /** Starts what can start, expires what waited too long, arms the timer, and tells waiters. */
  #pump(now: number, timerOrResume = false): void {
    const admission = this.#admission;
    if (timerOrResume) this.#empty.looked();
    do now = admission.drain(now);
    while (this.#expire(now));
    // Whole ms rounded up, in steps past Node's 24.8-day limit: it never wakes before the tokens are there.
    let wakeMs = admission.wakeAtMs;
    if (this.#maxWaitMs !== Number.POSITIVE_INFINITY) {
      const oldest = this.#waiting.queue.oldest();
      if (oldest !== undefined && !admission.deciding(oldest)) {
        wakeMs = Math.min(wakeMs, oldest.enqueuedAtMs + this.#maxWaitMs);
      }
    }
    this.#watchdog.armAt(wakeMs, now);
    this.#notify();
  }

  /** Rejects waiting jobs whose deadline has passed. True if it removed any. */
  #expire(now: number): boolean {
    const maxWaitMs = this.#maxWaitMs;
    if (maxWaitMs === Number.POSITIVE_INFINITY) return false;
    const waiting = this.#waiting;
    const queue = waiting.queue;
    const admission = this.#admission;
    let any = false;
    for (let job = queue.oldest(); job !== undefined && job.enqueuedAtMs + maxWaitMs <= now; job = queue.oldest()) {
      if (admission.deciding(job)) break; // its answer decides (and pumps)
      const wasHead = job === queue.peek();
      waiting.take(job); // out of the queue first: the hint is this job's wait were it to come back now
      const waitedMs = now - job.enqueuedAtMs;
      const predictedMs = admission.predictWaitMs(now, job.cost, job.priority, 0);
      const retryAfterMs = retryHintMs(Math.max(predictedMs - maxWaitMs, admission.pollMs));
      const why = this.#paused ? 'the scheduler was paused' : admission.whyWaiting();
      waiting.reject(job, 'waitTooLong', deadlineError({ waitedMs, maxWaitMs, retryAfterMs, why }));
      any = true;
      // A new head may start right now, at exactly its deadline: let the admission try before expiring more.
      if (wasHead) return true;
    }
    return any;
  }

  /** Emits `changed`, and `empty` / `idle` (resolving their promise forms) when their moment has come. */
  #notify(): void {
    const events = this.#events;
    if (events.has('changed')) events.emit('changed');
    if (this.#waiting.size !== 0) return;
    if (this.#empty.due()) events.emit('empty');
    if (this.#runner.pending === 0 && this.#idleOwed) {
      this.#idleOwed = false;
      events.emit('idle');
    }
  }

  /** Runs a waiting job (the head, or a reserved one) that its admission let start; its promise adopts the result. */
  #start(job: Job, now: number, held: number): void {
    // A reserved job (out of the queue) starts by its own timer: for `empty`, a look of the timer's kind.
    if (job.level === undefined) this.#empty.looked();
    this.#waiting.take(job);
    this.#empty.started(this.#waiting.size);
    this.#runner.runJob(job, held, now - job.enqueuedAtMs, job.extra?.timeoutMs ?? Number.POSITIVE_INFINITY);
  }

  /**
   * The waiting job a full queue gives up for a new one of `priority` (`onFull`): the oldest of the
   * lowest priority, if it is lower (`'evict-lower'`) or not higher (`'drop-oldest'`); `undefined`:
   * the new job is the one turned away.
   */
  #victim(priority: number): Job | undefined {
    const onFull = this.#onFull;
    if (onFull === 'reject') return undefined;
    // A job on trial is not given up: the local form would have started it.
    const trial = this.#waiting.trial;
    const lowest = this.#waiting.queue.lowest(trial.size === 0 ? undefined : (job) => trial.has(job));
    if (lowest === undefined) return undefined;
    return lowest.priority < priority || (onFull === 'drop-oldest' && lowest.priority === priority)
      ? lowest
      : undefined;
  }

  /** Before a new job of `priority` is queued: gives up waiting jobs while the queue is full (see {@link victim}). */
  #makeRoom(priority: number): void {
    const waiting = this.#waiting;
    while (waiting.counted >= this.#maxQueue) {
      const victim = this.#victim(priority);
      if (victim === undefined) return;
      const retryAfterMs = this.#admission.retryAfterMs(victim.cost, victim.weight, victim.priority);
      const reason = this.#onFull === 'evict-lower' ? 'evicted' : 'dropped';
      waiting.reject(victim, 'queueFull', new QueueFullError({ maxQueue: this.#maxQueue, retryAfterMs, reason }));
    }
  }

  /**
   * A job on trial waits: it counts against `maxQueue` from now, and is rejected if the queue is full
   * without it, or if `clear()` or `close({ drain: false })` left it to this answer.
   */
  #waits(job: Job): void {
    const waiting = this.#waiting;
    const spared = waiting.spared(job);
    if (spared !== undefined) {
      waiting.reject(job, 'cleared', spared());
      return;
    }
    if (!waiting.endTrial(job)) return;
    if (waiting.counted <= this.#maxQueue) {
      this.#empty.queued();
      return;
    }
    const retryAfterMs = this.#admission.retryAfterMs(job.cost, job.weight, job.priority);
    waiting.reject(job, 'queueFull', new QueueFullError({ maxQueue: this.#maxQueue, retryAfterMs }));
  }

  /**
   * A job waits for its reservation (one on trial is owed `empty` from now, as in {@link waits}); one
   * on trial that `clear()` or `close({ drain: false })` left to its answer is rejected instead.
   */
  #reserve(job: Job): void {
    const waiting = this.#waiting;
    const spared = waiting.spared(job);
    const onTrial = waiting.trial.has(job);
    waiting.reserve(job);
    if (spared !== undefined) waiting.reject(job, 'cleared', spared());
    else if (onTrial) this.#empty.queued();
  }

  /** After a limit changed: reject waiting jobs that can no longer ever start, then start what can. */
  #limitsChanged(now: number): void {
    const { burst, concurrency, windowLimit } = this.#admission;
    this.#maxCost = maxCostOf(this.#admission);
    this.#countsFinish = this.#admission.window?.untilFinish === true;
    const waiting = this.#waiting;
    for (const job of [...waiting.queue]) {
      if (job.cost > this.#maxCost) {
        waiting.reject(job, 'costExceedsCapacity', costError({ cost: job.cost, burst, windowLimit }));
      } else if (job.weight > concurrency) {
        waiting.reject(job, 'costExceedsCapacity', weightError({ weight: job.weight, concurrency, cost: job.cost }));
      }
    }
    this.#pump(now);
  }
}

/**
 * How long after its last charge `scheduler`'s bucket is surely full again, so equal to a new one's,
 * ms ({@link timeToFullMs} from empty, at its limits now): 0 without a rate. @internal
 */
export function refillMsOf(scheduler: Scheduler): number {
  const ratePerSecond = scheduler.rate;
  return ratePerSecond < Number.POSITIVE_INFINITY ? timeToFullMs(0, { ratePerSecond, burst: scheduler.burst }) : 0;
}
