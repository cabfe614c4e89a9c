/**
 * The Scheduler: jobs with a token cost, weighted concurrency, and a bounded
 * wait queue that rejects instead of growing.
 *
 * A job of cost c needs c tokens from a token bucket (`rate`, `burst`) to
 * start, and holds c units of `concurrency` while it runs: a weighted
 * semaphore, so a 10-unit report query weighs as much as ten 1-unit lookups.
 * Either limit may be absent; at least one must be there. A job that cannot
 * start at once waits in a FIFO per priority (higher first), at most
 * `maxQueue` of them; a job that arrives at a full queue is rejected at once
 * with `QueueFullError`, so a flood costs a rejection per call and no memory.
 *
 * Settled up front, as x/time's `Wait` does: a cost above the burst or above
 * the concurrency can never start (`CostExceedsCapacityError`), and with
 * `maxWait`, a job whose predicted start is later than that is refused at once
 * (`WaitTooLongError`, with `retryAfterMs`) instead of waiting to fail. A job
 * that waits past its deadline anyway (higher priorities overtook it, the
 * concurrency stayed taken, the scheduler was paused) is rejected then.
 *
 * Waking: one timer for the whole scheduler, armed for the earlier of the
 * head's exact token shortfall and the oldest waiter's deadline. No polling;
 * an idle or empty scheduler holds no timer.
 *
 * Theoretical start times. Timers fire late (about a millisecond on Node;
 * the README's bench measures it). A scheduler that charges the head when
 * the timer fires loses that lateness on every wake: at 1000 jobs/s with a
 * burst of 1 and timers 1.15 ms late it starts a job every 2.15 ms, not
 * every 1 ms. Instead, each job is charged at its theoretical start: the time
 * the bucket had its tokens (and the job was at the head and fitted the
 * concurrency), never later than now. Jobs that came due while the timer was
 * late start together when it fires, each charged at its own due time, so the
 * long-run rate is exact; the price is that a window of length T may see
 * burst + rate * (T + the timer's lateness) starts, never more.
 *
 * How much lateness is made up: the allowance, by the package's one lateness
 * policy (timer.ts's `expectedLatenessMs`, the streams' too): the timer's 1 ms
 * step plus half as much again as the lateness this scheduler's timer has seen
 * lately (at least 1 ms), and never more than `catchUp` (5 ms by default). With
 * punctual timers it is 2 ms; under load it grows to `catchUp`. The bucket
 * itself absorbs the first (burst - cost) / rate of it (its tokens keep
 * accumulating while the timer is late, up to the burst), and only the rest is
 * made up by charging in the past: a job may be charged at most
 * lagMs = max(0, allowance - (burst - cost) / rate) before now. For cost-1 jobs
 * with a burst of 10 at 1000/s that is nothing (the bucket covers 9 ms, more
 * than `catchUp`, and windows keep the strict bound); with a burst of 1 it is
 * the whole allowance. After a longer stall (a blocked event loop, a GC pause)
 * the time beyond it is lost rather than turned into a burst, so a window sees
 * at most burst + rate * (T + lagMs) <= burst + rate * (T + catchUp). Under a
 * rate each start reads the clock, so that these are the instants the jobs'
 * functions are called (see #drain).
 *
 * Worked example: rate 1000/s, burst 1, a backlog, timers 1.15 ms late.
 * Job 1 starts at 0 and empties the bucket; job 2 is due at 1 ms, the timer
 * fires at 2.15 ms: job 2 is charged at 1 ms and job 3 at 2 ms (both <= 2.15), and the timer is armed
 * for job 4 at 3 ms. A thousand jobs start in 1 s, as the rate says.
 *
 * Aborting a waiting job removes it at once and rejects it with the signal's
 * reason; a waiting job holds no tokens (it is charged only when it starts),
 * so nothing needs refunding.
 *
 * The layout: this file is the scheduling core (schedule, drain, expire,
 * arm). The options and public types are in ./options.ts, the events and
 * their promise forms in ./events.ts, running a job (its signal, timeout and
 * concurrency) in ./run.ts, turning jobs away in ./refuse.ts, the queue in
 * ./queue.ts, and the bucket's arithmetic (the theoretical start is
 * `startAt`) in ../meters/bucket.ts.
 */

import { type Clock, checkClock } from '../clock.js';
import {
  AbortError,
  ClosedError,
  checkOptions,
  checkSignal,
  describeValue,
  InvalidOptionError,
  retryHintMs,
  WaitTooLongError,
} from '../errors.js';
import { makeFleetScheduler } from '../fleet/fleet-scheduler.js';
import {
  advance,
  type BucketParams,
  type BucketState,
  bucketParams,
  burstParam,
  charge,
  delayUntil,
  msUntil,
  rateParam,
  rebill,
  reconfigure,
  slackFor,
  startAt,
  tokensAt,
  tryCharge,
} from '../meters/bucket.js';
import { expectedLatenessMs, TIMER_STEP_MS, Watchdog } from '../timer.js';
import type { DurationInput, RateInput, SizeInput } from '../units.js';
import { Emitter } from './events.js';
import {
  checkListener,
  copyCounters,
  DEFAULT_CATCH_UP_MS,
  type EventName,
  intervalRate,
  type JobFunction,
  parseConcurrency,
  parseMaxQueue,
  parseOnTimeout,
  parseOptionalDuration,
  parseTimeout,
  type ScheduleOptions,
  type SchedulerCounters,
  type SchedulerListener,
  type SchedulerOptions,
  type WrapOptions,
  zeroCounters,
} from './options.js';
import { WaitQueue } from './queue.js';
import { badPriority, costError, Refusals } from './refuse.js';
import { Charge, Job, type JobExtra, Runner } from './run.js';

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
 * bounded priority queue that rejects when full.
 *
 * @example
 * const scheduler = new Scheduler({ rate: '20/s', burst: 5, concurrency: 4, maxQueue: 100 });
 * const user = await scheduler.schedule(({ signal }) => fetch(url, { signal }), { cost: 1 });
 */
export class Scheduler {
  readonly #clock: Clock;
  readonly #queue = new WaitQueue<Job>();
  /** Bucket state; `undefined` when there is no rate limit. */
  #bucket: BucketState | undefined;
  #params: BucketParams = { ratePerSecond: Number.POSITIVE_INFINITY, capacity: Number.POSITIVE_INFINITY };
  #concurrency: number;
  #concurrencySlack: number;
  /** The largest cost a job may have: min(burst, concurrency). */
  #maxCost: number;
  readonly #maxQueue: number;
  readonly #maxWaitMs: number;
  #timeoutMs: number;
  readonly #catchUpMs: number;
  #paused: boolean;
  /** The latest arrival time given to a waiting job. */
  #lastEnqueuedMs = Number.NEGATIVE_INFINITY;
  /** Set by {@link close}: no new jobs. */
  #closed = false;

  /** The head could not start for lack of concurrency; it may start when a job finishes. */
  #concurrencyBlocked = false;
  /** No job may be charged before this (a resume, a concurrency slot freed): it could not have started earlier. */
  #floorMs = Number.NEGATIVE_INFINITY;
  /** When the head will have its tokens (Infinity if it waits for something else or nothing waits). */
  #nextStartMs = Number.POSITIVE_INFINITY;
  /** The one timer: for the earlier of the head's token time and the oldest deadline. */
  readonly #watchdog: Watchdog;

  /** For retry estimates when the concurrency is what holds jobs back: the mean gap between finishes. */
  #finishGapMs = 0;
  #lastFinishMs = Number.NaN;
  /** When the last job started (for a retry estimate before any job finished). */
  #lastStartMs = Number.NaN;
  /** A job was turned away for lack of concurrency since the last finish: measure the gap to the next. */
  #contended = false;
  /** The instant the last retry hint pointed at: the next one points at least one job's time later. */
  #hintAtMs = Number.NEGATIVE_INFINITY;
  /** Something was queued since the last `empty`; something was admitted since the last `idle`. */
  #emptyOwed = false;
  #idleOwed = false;

  readonly #events = new Emitter(this);
  readonly #counters: SchedulerCounters = zeroCounters();
  readonly #runner: Runner;
  readonly #refusals: Refusals;

  constructor(options: SchedulerOptions) {
    checkOptions(options, 'Scheduler options ({ rate, burst, concurrency, maxQueue, ... })', true);
    this.#clock = checkClock(options.clock);
    this.#watchdog = new Watchdog(this.#clock, () => this.#pump(this.#clock.now()));
    const fromInterval = intervalRate(options);
    const rate = fromInterval?.rate ?? options.rate;
    const hasRate = rate !== undefined;
    if (!hasRate && options.concurrency === undefined) {
      throw new InvalidOptionError(
        'rate',
        undefined,
        'a Scheduler needs a limit: give `rate` (jobs or cost per second), `concurrency` (cost running at once), or both',
      );
    }
    if (hasRate) {
      this.#params = bucketParams(rate, fromInterval?.burst ?? options.burst ?? 1);
      this.#bucket = { tokens: this.#params.capacity, updatedAtMs: this.#clock.now() };
    } else if (options.burst !== undefined) {
      throw new InvalidOptionError(
        'burst',
        options.burst,
        '`burst` needs a `rate`: give the rate the bucket refills at',
      );
    }
    this.#concurrency = parseConcurrency(options.concurrency ?? Number.POSITIVE_INFINITY, hasRate);
    this.#concurrencySlack = slackFor(this.#concurrency);
    this.#maxCost = Math.min(this.#params.capacity, this.#concurrency);
    this.#maxQueue = parseMaxQueue(options.maxQueue);
    this.#maxWaitMs = parseOptionalDuration(options.maxWait, Number.POSITIVE_INFINITY);
    this.#timeoutMs = parseTimeout(options.timeout);
    this.#catchUpMs = parseOptionalDuration(options.catchUp, DEFAULT_CATCH_UP_MS);
    this.#paused = options.autoStart === false;
    this.#runner = new Runner(this.#clock, this.#counters, this.#events, this.#finished);
    this.#runner.zeroCostHold = Math.min(1, this.#concurrency);
    this.#runner.releaseOnTimeout = parseOnTimeout(options.onTimeout);
    this.#runner.contextFor = (signal, cost) => new Charge(signal, cost, this.#adjust);
    this.#refusals = new Refusals(this.#counters, this.#events, this.#maxQueue);
    if (options.store !== undefined || options.key !== undefined) {
      // A fleet: the same API on limits kept in a store, run by ../fleet/fleet-scheduler.ts (a subclass,
      // whose constructor comes through here too). The options are checked above, once for both.
      // biome-ignore lint/correctness/noConstructorReturn: one public entry for both forms, as the design names it
      if (new.target === Scheduler) return makeFleetScheduler(Scheduler, options);
    } else if (options.leaseMs !== undefined || options.pollMs !== undefined || options.reserveAhead !== undefined) {
      const name = options.leaseMs !== undefined ? 'leaseMs' : options.pollMs !== undefined ? 'pollMs' : 'reserveAhead';
      throw new InvalidOptionError(name, options[name], `\`${name}\` is for a fleet: give \`store\` and \`key\` too`);
    }
  }

  // ---------------------------------------------------------------- state

  /** Jobs waiting to start. */
  get size(): number {
    return this.#queue.size;
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

  /** The concurrency limit (Infinity if none). Assigning it is {@link setConcurrency}, as in p-queue. */
  get concurrency(): number {
    return this.#concurrency;
  }

  set concurrency(concurrency: number) {
    this.setConcurrency(concurrency);
  }

  /**
   * The default timeout of new jobs, ms (Infinity: none). Assigning it (a
   * duration: `5000`, `'5s'`) applies to jobs scheduled from then on, as in p-queue.
   */
  get timeout(): number {
    return this.#timeoutMs;
  }

  set timeout(timeout: DurationInput | undefined) {
    this.#timeoutMs = parseTimeout(timeout);
  }

  /** True when jobs wait for the concurrency: every slot the head needs is taken (p-queue's `isSaturated`). */
  get isSaturated(): boolean {
    return this.#queue.size !== 0 && this.#concurrencyBlocked;
  }

  /** The rate, tokens per second (Infinity if none). */
  get rate(): number {
    return this.#params.ratePerSecond;
  }

  /** The burst (Infinity if there is no rate). */
  get burst(): number {
    return this.#params.capacity;
  }

  /** The bound on waiting jobs. */
  get maxQueue(): number {
    return this.#maxQueue;
  }

  /** Jobs waiting at exactly `priority`. */
  sizeBy(options: { priority: number }): number {
    const priority = checkOptions(options, 'sizeBy options ({ priority })', true)?.priority;
    if (typeof priority !== 'number' || Number.isNaN(priority)) {
      throw new InvalidOptionError(
        'priority',
        priority,
        `Expected \`priority\` to be a number, got ${describeValue(priority)}`,
      );
    }
    return this.#queue.sizeAt(priority);
  }

  /** A snapshot of the counters. */
  get counters(): SchedulerCounters {
    return copyCounters(this.#counters);
  }

  // ---------------------------------------------------------------- jobs

  /**
   * Runs `fn` when its cost fits the rate and the concurrency. The promise
   * settles with the job's own result, or rejects at once (without running the
   * job) with `CostExceedsCapacityError`, `QueueFullError`, `WaitTooLongError`,
   * or the signal's reason; later with `WaitTooLongError` at its deadline, an
   * `AbortError` from {@link clear}, or `JobTimeoutError`.
   */
  schedule<R>(fn: JobFunction<R>, options: ScheduleOptions = EMPTY): Promise<R> {
    if (typeof fn !== 'function' || typeof options !== 'object' || options === null) return this.#badCall(fn, options);
    if (this.#closed) return Promise.reject(new ClosedError());
    const cost = options.cost ?? 1;
    const priority = options.priority ?? 0;
    let signal = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      try {
        signal = checkSignal(signal); // a cross-realm signal passes; anything else is refused here, before anything
      } catch (error) {
        return Promise.reject(error);
      }
    }
    const refusals = this.#refusals;
    if (!(typeof cost === 'number' && cost >= 0 && cost <= this.#maxCost)) {
      return refusals.refuseCost(cost, priority, this.#params.capacity, this.#concurrency);
    }
    if (typeof priority !== 'number' || !Number.isFinite(priority)) {
      return badPriority(priority);
    }
    if (signal?.aborted) return refusals.refuse('aborted', signal.reason, cost, priority);
    const queue = this.#queue;
    // The flood path first: a full queue (with a head, so nothing could start now) rejects at once.
    if (queue.size >= this.#maxQueue && queue.size !== 0) return refusals.queueFull(cost, priority, this.#retryAfterMs);
    let timeoutMs = this.#timeoutMs;
    if (options.timeout !== undefined) {
      try {
        timeoutMs = parseTimeout(options.timeout);
      } catch (error) {
        return Promise.reject(error); // as for a bad cost or priority: the promise says it
      }
    }
    const now = this.#clock.now();
    const bucket = this.#bucket;
    const runner = this.#runner;

    // Start at once: nothing waits ahead, and the concurrency and the tokens are there (charged if so).
    if (
      queue.size === 0 &&
      !this.#paused &&
      runner.runningCost + (cost === 0 ? runner.zeroCostHold : cost) <= this.#concurrency + this.#concurrencySlack &&
      (bucket === undefined || tryCharge(bucket, this.#params, now, cost))
    ) {
      this.#counters.admitted++;
      this.#idleOwed = true;
      this.#lastStartMs = now;
      if (this.#events.has('add')) this.#events.emit('add');
      if (signal === undefined && timeoutMs === Number.POSITIVE_INFINITY) {
        return runner.invoke(fn, new Charge(undefined, cost, this.#adjust), cost, priority, 0) as Promise<R>;
      }
      return new Promise<R>((resolve, reject) => {
        runner.invokeGuarded(fn, cost, priority, signal, timeoutMs, 0, resolve as (v: unknown) => void, reject);
      });
    }

    if (queue.size >= this.#maxQueue) return refusals.queueFull(cost, priority, this.#retryAfterMs);
    if (this.#maxWaitMs !== Number.POSITIVE_INFINITY) {
      const waitMs = this.#predictWaitMs(now, cost, priority, this.#maxWaitMs);
      if (waitMs > 0) {
        const error = new WaitTooLongError(waitMs, this.#maxWaitMs, retryHintMs(waitMs - this.#maxWaitMs));
        return refusals.refuse('waitTooLong', error, cost, priority);
      }
    }

    const extra =
      signal === undefined && timeoutMs === this.#timeoutMs ? undefined : { signal, watched: false, timeoutMs };
    // Arrival times never go back (a clock that does counts as no time), so the first job in arrival order
    // is the one with the first deadline: the queue's `oldest()`.
    if (now > this.#lastEnqueuedMs) this.#lastEnqueuedMs = now;
    const job = new Job(fn as JobFunction<unknown>, cost, priority, this.#lastEnqueuedMs, extra);
    const promise = new Promise<R>((resolve, reject) => {
      job.resolve = resolve as (value: unknown) => void;
      job.reject = reject;
    });
    if (signal !== undefined) {
      this.#watch(job, signal);
      (extra as JobExtra).watched = true;
    }
    queue.push(job);
    this.#counters.admitted++;
    this.#emptyOwed = true;
    this.#idleOwed = true;
    if (this.#events.has('add')) this.#events.emit('add');
    // Behind an existing head nothing changes: the head, its timer and the oldest deadline stay.
    if (queue.peek() === job) this.#pump(now);
    return promise;
  }

  /** A call to `schedule` with something other than a function and an options object: a coded rejection. */
  #badCall(fn: unknown, options: unknown): Promise<never> {
    if (typeof fn !== 'function') {
      return Promise.reject(
        new InvalidOptionError('fn', fn, `Expected the job to be a function, got ${describeValue(fn)}`),
      );
    }
    return Promise.reject(
      new InvalidOptionError(
        'options',
        options,
        `Expected the job's options to be an object or undefined, got ${describeValue(options)}`,
      ),
    );
  }

  /** p-queue's name for {@link schedule}. */
  add<R>(fn: JobFunction<R>, options?: ScheduleOptions): Promise<R> {
    return this.schedule(fn, options);
  }

  /** Schedules every function with the same options; resolves with their results in order (p-queue's `addAll`). */
  addAll<R>(fns: readonly JobFunction<R>[], options?: ScheduleOptions): Promise<R[]> {
    if (!Array.isArray(fns)) {
      return Promise.reject(
        new InvalidOptionError('fns', fns, `Expected an array of job functions, got ${describeValue(fns)}`),
      );
    }
    return Promise.all(fns.map((fn) => this.schedule<R>(fn, options)));
  }

  /**
   * Returns a function that runs `fn` through the scheduler: each call is a
   * job, with the call's `this` and arguments. `cost` may be a function of the
   * call's arguments (a batch's size, a query's weight); `signal` applies to
   * every call.
   *
   * @example
   * const getUser = scheduler.wrap((id: string) => api.get(`/users/${id}`));
   * const search = scheduler.wrap(runSearch, { cost: (q: Query) => q.pages });
   */
  wrap<A extends unknown[], R, T = unknown>(
    fn: (this: T, ...args: A) => R | PromiseLike<R>,
    options: WrapOptions<A> = {},
  ): (this: T, ...args: A) => Promise<R> {
    const { cost, priority, timeout, signal } = options;
    const scheduler = this;
    return function wrapped(this: T, ...args: A): Promise<R> {
      let jobCost: number | undefined;
      try {
        jobCost = typeof cost === 'function' ? cost(...args) : cost;
      } catch (error) {
        return Promise.reject(error);
      }
      return scheduler.schedule(() => fn.apply(this, args), { cost: jobCost, priority, timeout, signal });
    };
  }

  // ---------------------------------------------------------------- control

  /** Stops starting jobs; running ones go on, waiting ones keep waiting (and their deadlines still run). */
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
    if (now > this.#floorMs) this.#floorMs = now;
    this.#pump(now);
  }

  /** p-queue's name for {@link resume}. */
  start(): this {
    this.resume();
    return this;
  }

  /**
   * Removes every waiting job, rejecting each with tokenpace's `AbortError`
   * (`ABORT_ERR`). Running jobs go on.
   */
  clear(): void {
    const queue = this.#queue;
    if (queue.size === 0) return;
    for (const job of [...queue]) {
      this.#unqueue(job);
      const error = new AbortError('the job was removed from the queue by Scheduler.clear() before it started');
      this.#refusals.rejectWaiting(job, 'cleared', error);
    }
    this.#pump(this.#clock.now());
  }

  /**
   * Closes the scheduler: from now on `schedule` rejects with `ClosedError`
   * (`ERR_CLOSED`). Jobs already waiting still run (the default, as undici's
   * `close()`), or, with `{ drain: false }`, are rejected with `ClosedError`
   * at once (running jobs go on either way). Resolves when nothing waits and
   * nothing runs; the scheduler then holds no timer. Calling it again is
   * harmless (a later `{ drain: false }` still rejects what waits).
   * `await using scheduler = new Scheduler(...)` calls it through
   * `Symbol.asyncDispose` where the runtime has it.
   */
  close(options?: { drain?: boolean }): Promise<void> {
    let drain: boolean;
    try {
      drain = checkOptions(options, 'close options ({ drain })', false)?.drain ?? true;
      if (typeof drain !== 'boolean') {
        throw new InvalidOptionError('drain', drain, `Expected \`drain\` to be a boolean, got ${describeValue(drain)}`);
      }
    } catch (error) {
      return Promise.reject(error);
    }
    this.#closed = true;
    if (!drain) {
      for (const job of [...this.#queue]) {
        this.#unqueue(job);
        const error = new ClosedError('the scheduler was closed with { drain: false } before the job started');
        this.#refusals.rejectWaiting(job, 'cleared', error);
      }
      this.#pump(this.#clock.now());
    } else if (this.#paused && this.#queue.size !== 0) {
      this.resume(); // draining a paused scheduler would never end
    }
    return this.onIdle().then(() => this.#watchdog.disarm());
  }

  /** True once {@link close} was called. */
  get isClosed(): boolean {
    return this.#closed;
  }

  /**
   * Changes the rate from now on: tokens earned so far are kept (capped at the
   * burst), refill runs at the new rate. On a scheduler made without a rate,
   * adds a bucket (full, burst 1).
   */
  setRate(rate: RateInput): void {
    const now = this.#clock.now();
    const ratePerSecond = rateParam(rate);
    if (this.#bucket === undefined) {
      this.#params = { ratePerSecond, capacity: 1 };
      this.#bucket = { tokens: 1, updatedAtMs: now };
      this.#limitsChanged(now);
      return;
    }
    const next = { ...this.#params, ratePerSecond };
    reconfigure(this.#bucket, this.#params, now, next);
    this.#params = next;
    this.#pump(now);
  }

  /**
   * Changes the burst from now on: tokens earned so far are kept, capped at the
   * new burst, and waiting jobs that cost more than it are rejected with
   * `CostExceedsCapacityError`.
   */
  setBurst(burst: SizeInput): void {
    const bucket = this.#bucket;
    if (bucket === undefined) {
      throw new InvalidOptionError('burst', burst, '`setBurst` needs a rate: call `setRate` first');
    }
    const next = { ...this.#params, capacity: burstParam(burst) };
    const now = this.#clock.now();
    reconfigure(bucket, this.#params, now, next);
    this.#params = next;
    this.#limitsChanged(now);
  }

  /**
   * Changes the concurrency from now on. Running jobs are never stopped; a
   * smaller limit holds new starts back until enough cost finishes. Waiting
   * jobs that cost more than the new limit are rejected with
   * `CostExceedsCapacityError`.
   */
  setConcurrency(concurrency: number): void {
    this.#concurrency = parseConcurrency(concurrency, this.#bucket !== undefined);
    this.#concurrencySlack = slackFor(this.#concurrency);
    this.#runner.zeroCostHold = Math.min(1, this.#concurrency);
    const now = this.#clock.now();
    // Freed capacity counts from now, as a finished job's does.
    if (this.#concurrencyBlocked) {
      this.#concurrencyBlocked = false;
      if (now > this.#floorMs) this.#floorMs = now;
    }
    this.#limitsChanged(now);
  }

  // ---------------------------------------------------------------- promises and events

  /** Resolves when the queue is empty (jobs may still run). */
  onEmpty(): Promise<void> {
    if (this.#queue.size === 0) return Promise.resolve();
    return this.#events.when('empty');
  }

  /** Resolves when nothing waits and nothing runs. */
  onIdle(): Promise<void> {
    if (this.#queue.size === 0 && this.#runner.pending === 0) return Promise.resolve();
    return this.#events.when('idle');
  }

  /** Resolves when no job runs (jobs may still wait: paused, or waiting for tokens), as p-queue's. */
  onPendingZero(): Promise<void> {
    if (this.#runner.pending === 0) return Promise.resolve();
    return this.#events.when('changed', () => this.#runner.pending === 0);
  }

  /** Resolves when fewer than `limit` jobs wait: a producer's cue to add more. */
  onSizeLessThan(limit: number): Promise<void> {
    if (typeof limit !== 'number' || !(limit >= 0)) {
      return Promise.reject(
        new InvalidOptionError('limit', limit, `Expected \`limit\` to be a number >= 0, got ${describeValue(limit)}`),
      );
    }
    if (this.#queue.size < limit) return Promise.resolve();
    return this.#events.when('changed', () => this.#queue.size < limit);
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

  // ---------------------------------------------------------------- the scheduling core

  /** Starts what can start, expires what waited too long, arms the timer, and tells waiters. */
  #pump(now: number): void {
    do now = this.#drain(now);
    while (this.#expire(now));
    this.#arm(now);
    this.#notify();
  }

  /**
   * Starts waiting jobs, head first, while the concurrency and the tokens (at their theoretical times) allow.
   * Returns the time it last read: under a rate it reads the clock for each job it starts, so that a job is
   * charged at the instant its function is really called. (A pause in the middle of a drain, a GC or the
   * process descheduled, would otherwise leave the rest of the drain charged at an instant before it and
   * called after it, with the bucket refilled in between: more than burst + rate * T in a window of calls.)
   */
  #drain(now: number): number {
    this.#nextStartMs = Number.POSITIVE_INFINITY;
    const queue = this.#queue;
    // A job started here may pause the scheduler (or change its limits) from its fn: check on every turn.
    for (let job = queue.peek(); job !== undefined && !this.#paused; job = queue.peek()) {
      const held = job.cost === 0 ? this.#runner.zeroCostHold : job.cost;
      if (this.#runner.runningCost + held > this.#concurrency + this.#concurrencySlack) {
        this.#concurrencyBlocked = true;
        return now;
      }
      const bucket = this.#bucket;
      if (bucket !== undefined) {
        const read = this.#clock.now();
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
        const atMs = startAt(bucket, this.#params, now, job.cost, notBeforeMs, this.#allowanceMs());
        if (atMs > now) {
          this.#nextStartMs = atMs;
          return now;
        }
        charge(bucket, this.#params, atMs, job.cost);
      }
      this.#unqueue(job);
      this.#lastStartMs = now;
      this.#start(job, now - job.enqueuedAtMs);
    }
    return now;
  }

  /**
   * How much timer lateness a start may make up now (see "How much lateness is made up" above): the
   * package's one lateness policy (timer.ts's `expectedLatenessMs`, from this scheduler's own timer's
   * lateness estimate) plus the timer's whole-ms step, and at most `catchUp`.
   */
  #allowanceMs(): number {
    const capMs = this.#catchUpMs;
    if (capMs === 0) return 0;
    return Math.min(capMs, TIMER_STEP_MS + expectedLatenessMs(this.#watchdog.latenessMs, TIMER_STEP_MS));
  }

  /** Rejects waiting jobs whose deadline has passed. True if it removed any. */
  #expire(now: number): boolean {
    const maxWaitMs = this.#maxWaitMs;
    if (maxWaitMs === Number.POSITIVE_INFINITY) return false;
    const queue = this.#queue;
    let any = false;
    for (let job = queue.oldest(); job !== undefined && job.enqueuedAtMs + maxWaitMs <= now; job = queue.oldest()) {
      const wasHead = job === queue.peek();
      this.#unqueue(job);
      const waitedMs = now - job.enqueuedAtMs;
      const retryAfterMs = retryHintMs(this.#predictWaitMs(now, job.cost, job.priority) - maxWaitMs);
      const why = this.#paused
        ? 'the scheduler was paused'
        : this.#concurrencyBlocked
          ? 'the concurrency stayed taken'
          : 'jobs of higher priority went first';
      const message =
        `waited ${Math.ceil(waitedMs)} ms without starting, past maxWait of ${maxWaitMs} ms (${why}); ` +
        'retry later, raise maxWait, or lower the load';
      this.#refusals.rejectWaiting(
        job,
        'waitTooLong',
        new WaitTooLongError(waitedMs, maxWaitMs, retryAfterMs, message),
      );
      any = true;
      // A new head may start right now, at exactly its deadline: let #drain try before expiring more.
      if (wasHead) return true;
    }
    return any;
  }

  /** Keeps exactly one timer: for the earlier of the head's token time and the oldest deadline. */
  #arm(now: number): void {
    let wakeMs = this.#nextStartMs;
    if (this.#maxWaitMs !== Number.POSITIVE_INFINITY) {
      const oldest = this.#queue.oldest();
      if (oldest !== undefined) wakeMs = Math.min(wakeMs, oldest.enqueuedAtMs + this.#maxWaitMs);
    }
    // Whole ms rounded up, in steps past Node's 24.8-day limit: it never wakes before the tokens are there.
    this.#watchdog.armAt(wakeMs, now);
  }

  /** Emits `empty` / `idle` (and resolves their promise forms) when their moment has come. */
  #notify(): void {
    const events = this.#events;
    if (events.has('changed')) events.emit('changed');
    if (this.#queue.size !== 0) return;
    if (this.#emptyOwed) {
      this.#emptyOwed = false;
      events.emit('empty');
    }
    if (this.#runner.pending === 0 && this.#idleOwed) {
      this.#idleOwed = false;
      events.emit('idle');
    }
  }

  /** Starts a job taken from the queue; its promise adopts the result. */
  #start(job: Job, waitedMs: number): void {
    const extra = job.extra;
    const timeoutMs = extra === undefined ? this.#timeoutMs : extra.timeoutMs;
    if (extra?.signal === undefined && timeoutMs === Number.POSITIVE_INFINITY) {
      // The runner's one handler frees the slot, then settles the job's promise.
      const context = new Charge(undefined, job.cost, this.#adjust);
      this.#runner.invoke(job.fn, context, job.cost, job.priority, waitedMs, undefined, job);
    } else {
      this.#runner.invokeGuarded(
        job.fn,
        job.cost,
        job.priority,
        extra?.signal,
        timeoutMs,
        waitedMs,
        job.resolve,
        job.reject,
      );
    }
  }

  /** After a job's function settled: start what may start. */
  readonly #finished = (): void => {
    if (this.#events.has('next')) this.#events.emit('next');
    if (this.#queue.size === 0) {
      if (!this.#contended) {
        this.#lastFinishMs = Number.NaN;
        this.#notify();
        return;
      }
      this.#contended = false; // jobs were turned away (maxQueue 0): the gap to this finish says how fast slots free
    }
    const now = this.#clock.now();
    if (!Number.isNaN(this.#lastFinishMs)) {
      const gapMs = now - this.#lastFinishMs;
      this.#finishGapMs = this.#finishGapMs === 0 ? gapMs : this.#finishGapMs + (gapMs - this.#finishGapMs) / 8;
    }
    this.#lastFinishMs = now;
    this.#pump(now);
  };

  /** After a limit changed: reject waiting jobs that can no longer ever start, then start what can. */
  #limitsChanged(now: number): void {
    this.#maxCost = Math.min(this.#params.capacity, this.#concurrency);
    for (const job of [...this.#queue]) {
      if (job.cost <= this.#maxCost) continue;
      this.#unqueue(job);
      const error = costError(job.cost, this.#params.capacity, this.#concurrency);
      this.#refusals.rejectWaiting(job, 'costExceedsCapacity', error);
    }
    this.#pump(now);
  }

  /**
   * ms until a new job of this cost and priority would have its tokens, if
   * nothing overtakes it; 0 if they are there within `withinMs` (compared in
   * tokens, by the one tolerance rule of meters/bucket.ts).
   */
  #predictWaitMs(now: number, cost: number, priority: number, withinMs = 0): number {
    const bucket = this.#bucket;
    if (bucket === undefined) return 0;
    const params = this.#params;
    const need = this.#queue.costAtOrAbove(priority) + cost;
    const tokens = tokensAt(bucket, params, now);
    if (msUntil(tokens + (withinMs * params.ratePerSecond) / 1000, need, params) === 0) return 0;
    return msUntil(tokens, need, params);
  }

  /**
   * The retry hint for a job of `cost` turned away from a full queue: when the
   * queue will have room for this caller, rounded up to whole ms plus the
   * timer margin ({@link retryHintMs}).
   *
   * - Under a rate the time is known: room comes when the head starts (with
   *   `maxQueue: 0`, when this job's own tokens are there).
   * - Under a concurrency that is full it is estimated: the mean gap between
   *   finishes while jobs were turned away or waiting, after the last finish;
   *   before any finish, as long again as the last job has run so far (at
   *   least 1 ms), which doubles the hint on each refused retry.
   * - No stampede: callers turned away together would otherwise all be told
   *   the same instant and all come back to one free slot. Each hint is at
   *   least the previous one plus the time one more job takes to go through
   *   (cost / rate, or the gap between finishes), so the k-th caller refused
   *   in a burst is told when there is room for the k-th.
   */
  readonly #retryAfterMs = (cost: number): number => {
    const now = this.#clock.now();
    const bucket = this.#bucket;
    const queued = this.#queue.size !== 0;
    let baseMs = 0;
    let spacingMs = 0;
    if (bucket !== undefined) {
      const params = this.#params;
      if (!queued) baseMs = delayUntil(bucket, params, now, cost);
      else if (this.#nextStartMs !== Number.POSITIVE_INFINITY) baseMs = this.#nextStartMs - now;
      spacingMs = (cost * 1000) / params.ratePerSecond;
    }
    const held = cost === 0 ? this.#runner.zeroCostHold : cost;
    const full = queued
      ? this.#concurrencyBlocked
      : this.#runner.runningCost + held > this.#concurrency + this.#concurrencySlack;
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
  };

  /** A running job's `adjust(deltaCost)` (see {@link JobContext.adjust}). */
  readonly #adjust = (charge: Charge, deltaCost: number): void => {
    Charge.checkDelta(deltaCost);
    const bucket = this.#bucket;
    if (bucket === undefined || deltaCost === 0) return;
    const params = this.#params;
    const now = this.#clock.now();
    const delta = Charge.rebill(charge, deltaCost, params.capacity);
    rebill(bucket, params, now, delta);
    this.#pump(now); // the head's start moved: later for a charge, sooner for a refund
  };

  /** Takes a job out of the queue and off its signal. */
  #unqueue(job: Job): void {
    this.#queue.remove(job);
    const extra = job.extra;
    if (extra?.watched) {
      extra.watched = false;
      this.#unwatch(job, extra.signal as AbortSignal);
    }
  }

  /**
   * Waiting jobs by signal, with one abort listener per signal. A listener per
   * job would make each add and removal O(n) in the jobs waiting on one signal
   * (Node's EventTarget scans its listeners) and warn past 10 of them.
   */
  readonly #bySignal = new Map<AbortSignal, { readonly jobs: Set<Job>; readonly onAbort: () => void }>();

  #watch(job: Job, signal: AbortSignal): void {
    let waiting = this.#bySignal.get(signal);
    if (waiting === undefined) {
      waiting = { jobs: new Set(), onAbort: () => this.#abortWaiting(signal) };
      this.#bySignal.set(signal, waiting);
      signal.addEventListener('abort', waiting.onAbort, { once: true });
    }
    waiting.jobs.add(job);
  }

  #unwatch(job: Job, signal: AbortSignal): void {
    const waiting = this.#bySignal.get(signal);
    if (waiting === undefined) return;
    waiting.jobs.delete(job);
    if (waiting.jobs.size !== 0) return;
    this.#bySignal.delete(signal);
    signal.removeEventListener('abort', waiting.onAbort);
  }

  /** `signal` aborted: every job waiting on it leaves the queue and rejects with its reason. */
  #abortWaiting(signal: AbortSignal): void {
    const waiting = this.#bySignal.get(signal);
    if (waiting === undefined) return;
    this.#bySignal.delete(signal);
    for (const job of waiting.jobs) {
      this.#queue.remove(job);
      (job.extra as JobExtra).watched = false;
      this.#refusals.rejectWaiting(job, 'aborted', signal.reason);
    }
    this.#pump(this.#clock.now());
  }
}

// `await using`: Symbol.asyncDispose where the runtime has it (Node 20 does). Defined at run time, so
// that the types need no `esnext.disposable` lib in a consumer's tsconfig.
const asyncDispose = (Symbol as { asyncDispose?: symbol }).asyncDispose;
if (asyncDispose !== undefined) {
  Object.defineProperty(Scheduler.prototype, asyncDispose, {
    value(this: Scheduler): Promise<void> {
      return this.close();
    },
    writable: true,
    configurable: true,
  });
}
