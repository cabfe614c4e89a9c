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
 * Theoretical start times. Timers fire late (about 1.15 ms here). A scheduler
 * that charges the head when the timer fires loses that lateness on every
 * wake: at 1000 jobs/s with a burst of 1 it starts a job every 2.15 ms, not
 * every 1 ms. Instead, each job is charged at its theoretical start: the time
 * the bucket had its tokens (and the job was at the head and fitted the
 * concurrency), never later than now. Jobs that came due while the timer was
 * late start together when it fires, each charged at its own due time, so the
 * long-run rate is exact; the price is that a window of length T may see
 * burst + rate * (T + the timer's lateness) starts, never more.
 *
 * How much lateness is made up: `catchUp` (5 ms by default) in all. The bucket
 * itself absorbs the first (burst - cost) / rate of it (its tokens keep
 * accumulating while the timer is late, up to the burst), and only the rest is
 * made up by charging in the past: a job may be charged at most
 * lagMs = max(0, catchUp - (burst - cost) / rate) before now. For cost-1 jobs
 * with a burst of 10 at 1000/s that is nothing (the bucket covers 9 ms, and
 * windows keep the strict bound); with a burst of 1 it is the whole 5 ms.
 * After a longer stall (a blocked event loop, a GC pause) the time beyond it
 * is lost rather than turned into a burst, so a window sees at most
 * burst + rate * (T + lagMs).
 *
 * Worked example: rate 1000/s, burst 1, a backlog. Job 1 starts at 0 and
 * empties the bucket; job 2 is due at 1 ms, the timer fires at 2.15 ms: job 2
 * is charged at 1 ms and job 3 at 2 ms (both <= 2.15), and the timer is armed
 * for job 4 at 3 ms. A thousand jobs start in 1 s, as the rate says.
 *
 * Running: `fn({ signal })` receives the job's signal (as in p-queue). Aborting
 * a waiting job removes it at once and rejects it with the signal's reason; a
 * waiting job holds no tokens (it is charged only when it starts), so nothing
 * needs refunding. Aborting a running job, or its `timeout` passing
 * (`JobTimeoutError`, and the signal passed to `fn` aborts), rejects its
 * promise at once, but its concurrency stays taken until `fn` really settles:
 * the limit counts work that is actually running.
 */

import { type Clock, systemClock } from '../clock.js';
import {
  AbortError,
  CostExceedsCapacityError,
  InvalidOptionError,
  InvalidSizeError,
  JobTimeoutError,
  QueueFullError,
  WaitTooLongError,
} from '../errors.js';
import {
  type BucketParams,
  type BucketState,
  bucketParams,
  charge,
  msUntil,
  reconfigure,
  slackFor,
  startAt,
  tokensAt,
  tryCharge,
} from '../meters/bucket.js';
import { Watchdog } from '../timer.js';
import {
  type DurationInput,
  parseDuration,
  parseRateOption,
  parseSizeOption,
  type RateInput,
  type SizeInput,
} from '../units.js';
import { type Level, type Waiter, WaitQueue } from './queue.js';

/** Options for {@link Scheduler}. At least one of `rate` and `concurrency` must be given. */
export interface SchedulerOptions {
  /**
   * Tokens per second refilled into the bucket jobs draw their cost from: a
   * number or a string such as `'100/s'`, `'6000/min'`. Without it, only the
   * concurrency limits the jobs.
   */
  rate?: RateInput;
  /**
   * The bucket's capacity: the largest burst of cost that starts at once after
   * an idle spell, and the largest cost a job may have. Needs `rate`.
   * @default 1 (jobs are spaced evenly; raise it to allow bursts and costs above 1)
   */
  burst?: SizeInput;
  /**
   * The most cost that may run at once (a weighted semaphore): a job of cost c
   * holds c units while it runs. Any positive number.
   * @default Infinity (only the rate limits)
   */
  concurrency?: number;
  /**
   * The most jobs that may wait. A job that arrives when this many are waiting
   * is rejected at once with `QueueFullError` (`ERR_QUEUE_FULL`). 0 means a job
   * either starts at once or is rejected. Must be a finite integer: a bounded
   * queue is the point.
   * @default 1000
   */
  maxQueue?: number;
  /**
   * The longest a job may wait to start: milliseconds or a string such as
   * `'2s'`. A job predicted to wait longer is rejected at once with
   * `WaitTooLongError` (`ERR_WAIT_TOO_LONG`); one that waits past it anyway is
   * rejected then.
   * @default Infinity
   */
  maxWait?: DurationInput;
  /**
   * The most timer lateness the scheduler makes up for, so the long-run rate
   * stays exact (see "Theoretical start times" above). The bucket absorbs the
   * first `(burst - cost) / rate` of it; for the rest, jobs that came due while
   * a timer was late are charged at their due times, at most
   * `catchUp - (burst - cost) / rate` before now, and start together. A longer
   * stall (a blocked event loop, a GC pause) is not made up, so a window of T
   * sees at most `burst + rate * (T + max(0, catchUp - (burst - cost) / rate))` starts. 0
   * charges every job at the moment it starts (strict windows, but with a
   * burst below `rate * lateness` every late wake loses rate).
   * @default 5 (ms: Node's timers fire about 1.15 ms late, plus up to 1 ms of rounding)
   */
  catchUp?: DurationInput;
  /**
   * The default `timeout` of every job (see {@link ScheduleOptions.timeout}).
   * @default Infinity (no timeout)
   */
  timeout?: DurationInput;
  /**
   * Start jobs as soon as they may. With false, the scheduler starts paused
   * until {@link Scheduler.resume} (p-queue's `autoStart`).
   * @default true
   */
  autoStart?: boolean;
  /** The time source. @default systemClock */
  clock?: Clock;
}

/** What a job's function receives. */
export interface JobContext {
  /**
   * Aborts when the caller's signal aborts or the job's timeout passes.
   * `undefined` when the job has neither.
   */
  readonly signal: AbortSignal | undefined;
}

/** A job: a function that returns a value or a promise of one. */
export type JobFunction<R> = (context: JobContext) => R | PromiseLike<R>;

/** Options for {@link Scheduler.schedule}. */
export interface ScheduleOptions {
  /**
   * The job's weight: tokens it needs to start, and units of concurrency it
   * holds while it runs. Any number >= 0, at most the burst and the concurrency.
   * @default 1
   */
  cost?: number;
  /**
   * Higher runs first; equal priorities run in arrival order.
   * @default 0
   */
  priority?: number;
  /**
   * Aborting it removes a waiting job (rejecting it with the signal's reason),
   * and is passed to the running job's function.
   */
  signal?: AbortSignal;
  /**
   * The longest the job may run once started; past it the job's promise
   * rejects with `JobTimeoutError` (`ERR_JOB_TIMEOUT`) and its signal aborts.
   * @default the scheduler's `timeout`
   */
  timeout?: DurationInput;
}

/** Options for {@link Scheduler.wrap}. */
export interface WrapOptions<A extends unknown[]> {
  /** The cost of each call, or a function of the call's arguments that returns it. @default 1 */
  cost?: number | ((...args: A) => number);
  /** @default 0 */
  priority?: number;
  /** @default the scheduler's `timeout` */
  timeout?: DurationInput;
}

/** Why the scheduler turned a job away (the key in {@link SchedulerCounters.rejected}). */
export type RejectReason = 'queueFull' | 'waitTooLong' | 'costExceedsCapacity' | 'aborted' | 'cleared';

/** Counts since the scheduler was made. */
export interface SchedulerCounters {
  /** Jobs accepted: started at once or queued. */
  admitted: number;
  /** Jobs started. */
  started: number;
  /** Jobs whose function fulfilled. */
  completed: number;
  /** Jobs whose function threw or rejected. */
  failed: number;
  /** Running jobs that overran their timeout. */
  timedOut: number;
  /** Jobs the scheduler turned away or removed before they started, by reason. */
  rejected: Record<RejectReason, number>;
  /** The total time started jobs waited before starting, ms. */
  waitedMs: number;
}

/** What the `active` event tells about a job that starts. */
export interface ActiveJob {
  readonly cost: number;
  readonly priority: number;
  /** How long it waited, ms. */
  readonly waitedMs: number;
}

/** What the `rejected` event tells about a job turned away. */
export interface RejectedJob {
  readonly reason: RejectReason;
  /** What the job's promise rejects with. */
  readonly error: unknown;
  readonly cost: number;
  readonly priority: number;
}

/** Each event's listener arguments. */
export interface SchedulerEvents {
  /** A job was queued to wait. */
  add: [];
  /** A job started. */
  active: [job: ActiveJob];
  /** A job's function fulfilled. */
  completed: [result: unknown];
  /** A job's function threw or rejected. */
  error: [error: unknown];
  /** The wait queue became empty (jobs may still be running). */
  empty: [];
  /** Nothing waits and nothing runs. */
  idle: [];
  /** A job was turned away or removed before it started. */
  rejected: [job: RejectedJob];
}

/** The events a {@link Scheduler} emits. */
export type EventName = keyof SchedulerEvents;

/** A listener for event `E`. */
export type SchedulerListener<E extends EventName> = (...args: SchedulerEvents[E]) => void;

/** A waiting job: the queue's node and the promise's settlers in one object. */
/**
 * A waiting job: the queue's node and its promise's settler in one object.
 * Kept small, since a full queue holds `maxQueue` of them: the rarely used
 * parts (a signal, a timeout of its own) live in `extra`, and only the
 * promise's `resolve` is kept (a rejection resolves it with a thenable that
 * rejects), so the unused `reject` function is garbage at once.
 */
class Job implements Waiter<Job> {
  level: Level<Job> | undefined = undefined;
  prev: Job | undefined = undefined;
  next: Job | undefined = undefined;
  resolve!: (value: unknown) => void;
  constructor(
    readonly fn: JobFunction<unknown>,
    readonly cost: number,
    readonly priority: number,
    readonly enqueuedAtMs: number,
    readonly extra: JobExtra | undefined,
  ) {}
}

/** The parts of a waiting job that most jobs do not have. */
interface JobExtra {
  readonly signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  readonly timeoutMs: number;
}

/** A thenable that rejects with `reason`: settles a job's promise through its `resolve`. */
function rejection(reason: unknown): PromiseLike<never> {
  return {
    // biome-ignore lint/suspicious/noThenProperty: a thenable is the point
    then: (_onFulfilled, onRejected) => {
      onRejected?.(reason);
      return undefined as never;
    },
  };
}

const DEFAULT_MAX_QUEUE = 1000;
const DEFAULT_CATCH_UP_MS = 5;
const NO_SIGNAL: JobContext = Object.freeze({ signal: undefined });
const EMPTY: ScheduleOptions = Object.freeze({});

/**
 * A queue-full error without a stack trace. A full queue is flow control, not
 * a bug: a flood produces millions of these, and capturing a stack costs more
 * than everything else a rejection does. The code and fields say what happened.
 */
function queueFullError(maxQueue: number, retryAfterMs: number): QueueFullError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new QueueFullError(maxQueue, retryAfterMs);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function checkConcurrency(value: unknown, hasRate: boolean): number {
  if (typeof value === 'number' && value > 0 && (value < Number.POSITIVE_INFINITY || hasRate)) return value;
  throw new InvalidOptionError(
    'concurrency',
    value,
    `Expected \`concurrency\` to be a number > 0${hasRate ? ' or Infinity' : ' (or give a `rate`)'}, got ${String(value)}`,
  );
}

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
  readonly #timeoutMs: number;
  readonly #catchUpMs: number;
  #paused: boolean;

  #pending = 0;
  #runningCost = 0;
  /** The head could not start for lack of concurrency; it may start when a job finishes. */
  #concurrencyBlocked = false;
  /** No job may be charged before this (a resume, a concurrency slot freed): it could not have started earlier. */
  #floorMs = Number.NEGATIVE_INFINITY;
  /** When the head will have its tokens (Infinity if it waits for something else or nothing waits). */
  #nextStartMs = Number.POSITIVE_INFINITY;

  /** The one timer: for the earlier of the head's token time and the oldest deadline. */
  readonly #watchdog: Watchdog;

  /** The rejection shared by the jobs turned away from a full queue in the current burst. */
  #flood: { promise: Promise<never>; error: QueueFullError } | undefined;

  /** Shared settle handlers for jobs of cost 1 (the usual cost): no closure per job. */
  readonly #finishOne = (value: unknown): void => this.#finish(1, true, value);
  readonly #failOne = (error: unknown): void => this.#finish(1, false, error);

  /** For retry estimates when the concurrency is what holds jobs back: the mean gap between finishes. */
  #finishGapMs = 0;
  #lastFinishMs = Number.NaN;

  /** Something was queued since the last `empty`; something was admitted since the last `idle`. */
  #emptyOwed = false;
  #idleOwed = false;
  #emptyWaiters: (() => void)[] = [];
  #idleWaiters: (() => void)[] = [];
  #sizeWaiters: { limit: number; resolve: () => void }[] = [];

  readonly #listeners: { [E in EventName]?: SchedulerListener<E>[] } = {};
  readonly #counters: SchedulerCounters = {
    admitted: 0,
    started: 0,
    completed: 0,
    failed: 0,
    timedOut: 0,
    rejected: { queueFull: 0, waitTooLong: 0, costExceedsCapacity: 0, aborted: 0, cleared: 0 },
    waitedMs: 0,
  };

  constructor(options: SchedulerOptions) {
    this.#clock = options.clock ?? systemClock;
    this.#watchdog = new Watchdog(this.#clock, () => this.#pump(this.#clock.now()));
    const hasRate = options.rate !== undefined;
    if (!hasRate && options.concurrency === undefined) {
      throw new InvalidOptionError(
        'rate',
        undefined,
        'a Scheduler needs a limit: give `rate` (jobs or cost per second), `concurrency` (cost running at once), or both',
      );
    }
    if (hasRate) {
      this.#params = bucketParams(options.rate as RateInput, options.burst ?? 1);
      this.#bucket = { tokens: this.#params.capacity, updatedAtMs: this.#clock.now() };
    } else if (options.burst !== undefined) {
      throw new InvalidOptionError(
        'burst',
        options.burst,
        '`burst` needs a `rate`: give the rate the bucket refills at',
      );
    }
    this.#concurrency = checkConcurrency(options.concurrency ?? Number.POSITIVE_INFINITY, hasRate);
    this.#concurrencySlack = slackFor(this.#concurrency);
    this.#maxCost = Math.min(this.#params.capacity, this.#concurrency);

    const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
    if (!(Number.isSafeInteger(maxQueue) && maxQueue >= 0)) {
      throw new InvalidOptionError(
        'maxQueue',
        maxQueue,
        `Expected \`maxQueue\` to be a finite integer >= 0, got ${String(maxQueue)}: the queue is bounded on purpose; ` +
          'pick the most jobs you are willing to hold in memory',
      );
    }
    this.#maxQueue = maxQueue;
    this.#maxWaitMs = options.maxWait === undefined ? Number.POSITIVE_INFINITY : parseDuration(options.maxWait);
    this.#timeoutMs = this.#parseTimeout(options.timeout);
    this.#catchUpMs = options.catchUp === undefined ? DEFAULT_CATCH_UP_MS : parseDuration(options.catchUp);
    this.#paused = options.autoStart === false;
  }

  // ---------------------------------------------------------------- state

  /** Jobs waiting to start. */
  get size(): number {
    return this.#queue.size;
  }

  /** Jobs running. */
  get pending(): number {
    return this.#pending;
  }

  /** The cost of the jobs running: the concurrency in use. */
  get pendingCost(): number {
    return this.#runningCost;
  }

  /** True while paused (see {@link pause}). */
  get isPaused(): boolean {
    return this.#paused;
  }

  /** The concurrency limit (Infinity if none). */
  get concurrency(): number {
    return this.#concurrency;
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
    return this.#queue.sizeAt(options.priority);
  }

  /** A snapshot of the counters. */
  get counters(): SchedulerCounters {
    const c = this.#counters;
    return { ...c, rejected: { ...c.rejected } };
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
    const cost = options.cost ?? 1;
    const priority = options.priority ?? 0;
    const signal = options.signal;
    if (!(typeof cost === 'number' && cost >= 0 && cost <= this.#maxCost)) return this.#refuseCost(cost, priority);
    if (typeof priority !== 'number' || !Number.isFinite(priority)) {
      return Promise.reject(
        new InvalidOptionError('priority', priority, `Expected \`priority\` to be a finite number, got ${priority}`),
      );
    }
    if (signal?.aborted) return this.#refuse('aborted', signal.reason, cost, priority);
    const queue = this.#queue;
    // The flood path first: a full queue (with a head, so nothing could start now) rejects at once.
    if (queue.size >= this.#maxQueue && queue.size !== 0) return this.#queueFull(cost, priority);
    let timeoutMs = this.#timeoutMs;
    if (options.timeout !== undefined) {
      try {
        timeoutMs = this.#parseTimeout(options.timeout);
      } catch (error) {
        return Promise.reject(error); // as for a bad cost or priority: the promise says it
      }
    }
    const now = this.#clock.now();
    const bucket = this.#bucket;

    // Start at once: nothing waits ahead, and the tokens and the concurrency are there.
    // The bucket's tokens are computed once, and only when nothing else stands in the way.
    const free =
      queue.size === 0 && !this.#paused && this.#runningCost + cost <= this.#concurrency + this.#concurrencySlack;
    if (free && (bucket === undefined || tryCharge(bucket, this.#params, now, cost))) {
      this.#counters.admitted++;
      this.#idleOwed = true;
      if (signal === undefined && timeoutMs === Number.POSITIVE_INFINITY) {
        return this.#invoke(fn, NO_SIGNAL, cost, priority, 0) as Promise<R>;
      }
      return new Promise<R>((resolve, reject) => {
        this.#startGuarded(fn, cost, priority, signal, timeoutMs, 0, resolve as (v: unknown) => void, reject);
      });
    }

    if (queue.size >= this.#maxQueue) return this.#queueFull(cost, priority);

    if (this.#maxWaitMs !== Number.POSITIVE_INFINITY) {
      const waitMs = this.#predictWaitMs(now, cost, priority, this.#maxWaitMs);
      if (waitMs > 0) {
        return this.#refuse(
          'waitTooLong',
          new WaitTooLongError(waitMs, this.#maxWaitMs, waitMs - this.#maxWaitMs),
          cost,
          priority,
        );
      }
    }

    const extra =
      signal === undefined && timeoutMs === this.#timeoutMs ? undefined : { signal, onAbort: undefined, timeoutMs };
    const job = new Job(fn as JobFunction<unknown>, cost, priority, now, extra);
    const promise = new Promise<R>((resolve) => {
      job.resolve = resolve as (value: unknown) => void;
    });
    if (signal !== undefined) {
      const onAbort = () => this.#abortWaiting(job);
      (extra as JobExtra).onAbort = onAbort;
      signal.addEventListener('abort', onAbort, { once: true });
    }
    queue.push(job);
    this.#counters.admitted++;
    this.#emptyOwed = true;
    this.#idleOwed = true;
    if (this.#listeners.add) this.#emit('add');
    // Behind an existing head nothing changes: the head, its timer and the oldest deadline stay.
    if (queue.peek() === job) this.#pump(now);
    return promise;
  }

  /** p-queue's name for {@link schedule}. */
  add<R>(fn: JobFunction<R>, options?: ScheduleOptions): Promise<R> {
    return this.schedule(fn, options);
  }

  /**
   * Returns a function that runs `fn` through the scheduler: each call is a
   * job. `cost` may be a function of the call's arguments (a batch's size, a
   * query's weight).
   *
   * @example
   * const getUser = scheduler.wrap((id: string) => api.get(`/users/${id}`));
   * const search = scheduler.wrap(runSearch, { cost: (q: Query) => q.pages });
   */
  wrap<A extends unknown[], R>(
    fn: (...args: A) => R | PromiseLike<R>,
    options: WrapOptions<A> = {},
  ): (...args: A) => Promise<R> {
    const { cost, priority, timeout } = options;
    return (...args: A): Promise<R> => {
      let jobCost: number | undefined;
      try {
        jobCost = typeof cost === 'function' ? cost(...args) : cost;
      } catch (error) {
        return Promise.reject(error);
      }
      return this.schedule(() => fn(...args), { cost: jobCost, priority, timeout });
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
      queue.remove(job);
      this.#detach(job);
      this.#rejectWaiting(
        job,
        'cleared',
        new AbortError('the job was removed from the queue by Scheduler.clear() before it started'),
      );
    }
    this.#pump(this.#clock.now());
  }

  /**
   * Changes the rate from now on; tokens earned so far are kept. On a
   * scheduler made without a rate, adds a bucket (full, burst 1).
   */
  setRate(rate: RateInput): void {
    const now = this.#clock.now();
    const ratePerSecond = parseRateOption(rate, 'rate');
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
   * Changes the burst from now on; tokens above a smaller burst are dropped,
   * and waiting jobs that cost more than the new burst are rejected with
   * `CostExceedsCapacityError`.
   */
  setBurst(burst: SizeInput): void {
    const bucket = this.#bucket;
    if (bucket === undefined) {
      throw new InvalidOptionError('burst', burst, '`setBurst` needs a rate: call `setRate` first');
    }
    const next = { ...this.#params, capacity: parseSizeOption(burst, 'burst') };
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
    this.#concurrency = checkConcurrency(concurrency, this.#bucket !== undefined);
    this.#concurrencySlack = slackFor(this.#concurrency);
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
    return new Promise((resolve) => this.#emptyWaiters.push(resolve));
  }

  /** Resolves when nothing waits and nothing runs. */
  onIdle(): Promise<void> {
    if (this.#queue.size === 0 && this.#pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Resolves when fewer than `limit` jobs wait: a producer's cue to add more. */
  onSizeLessThan(limit: number): Promise<void> {
    if (this.#queue.size < limit) return Promise.resolve();
    return new Promise((resolve) => this.#sizeWaiters.push({ limit, resolve }));
  }

  /** Adds a listener. */
  on<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
    const listeners = this.#listeners as { [K in EventName]?: SchedulerListener<K>[] };
    const list = (listeners[event] ?? []) as SchedulerListener<E>[];
    (listeners as Record<E, SchedulerListener<E>[]>)[event] = [...list, listener];
    return this;
  }

  /** Removes a listener added with {@link on} or {@link once}. */
  off<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
    const listeners = this.#listeners as Record<E, SchedulerListener<E>[] | undefined>;
    const list = listeners[event];
    if (list) {
      const rest = list.filter((l) => l !== listener && (l as { original?: unknown }).original !== listener);
      listeners[event] = rest.length ? rest : undefined;
    }
    return this;
  }

  /** Adds a listener that runs once. */
  once<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
    const wrapped = Object.assign(
      (...args: SchedulerEvents[E]): void => {
        this.off(event, wrapped);
        listener(...args);
      },
      { original: listener },
    );
    return this.on(event, wrapped);
  }

  // ---------------------------------------------------------------- internals

  #emit<E extends EventName>(event: E, ...args: SchedulerEvents[E]): void {
    const list = (this.#listeners as Record<E, SchedulerListener<E>[] | undefined>)[event];
    if (list === undefined) return;
    for (const listener of list) {
      try {
        listener(...args);
      } catch (error) {
        // A listener's exception must not stop the scheduler half-way through a change of
        // state (a job counted as running whose promise never settles, a drain left undone).
        // It surfaces on its own, as an uncaught exception on the next microtask, like a
        // throwing timer callback's.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  #parseTimeout(timeout: DurationInput | undefined): number {
    if (timeout === undefined) return Number.POSITIVE_INFINITY;
    const ms = parseDuration(timeout);
    if (ms === 0) {
      throw new InvalidOptionError('timeout', timeout, 'Expected `timeout` to be a duration > 0 (or Infinity), got 0');
    }
    return ms;
  }

  #refuse(reason: RejectReason, error: unknown, cost: number, priority: number): Promise<never> {
    this.#counters.rejected[reason]++;
    if (this.#listeners.rejected) this.#emit('rejected', { reason, error, cost, priority });
    return Promise.reject(error);
  }

  #refuseCost(cost: unknown, priority: number): Promise<never> {
    if (typeof cost !== 'number' || !(cost >= 0)) {
      return Promise.reject(new InvalidSizeError(cost, `invalid cost ${String(cost)}: expected a finite number >= 0`));
    }
    const error =
      cost > this.#params.capacity
        ? new CostExceedsCapacityError(cost, this.#params.capacity)
        : new CostExceedsCapacityError(cost, this.#concurrency, "the scheduler's concurrency");
    return this.#refuse('costExceedsCapacity', error, cost, priority);
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
   * Turns a job away from a full queue. The cheap path, since a flood is made
   * of these: every job turned away in one synchronous burst shares one
   * `QueueFullError` (no stack trace) and one underlying rejection, made in a
   * microtask once the callers have attached their handlers. Each caller
   * still gets a promise of its own (one derived promise per job), and Node
   * never has to track a rejection that has no handler yet.
   */
  #queueFull(cost: number, priority: number): Promise<never> {
    this.#counters.rejected.queueFull++;
    let flood = this.#flood;
    if (flood === undefined) {
      const error = queueFullError(this.#maxQueue, this.#retryAfterMs());
      let reject!: (reason: unknown) => void;
      const promise = new Promise<never>((_, rejectShared) => {
        reject = rejectShared;
      });
      flood = this.#flood = { promise, error };
      queueMicrotask(() => {
        this.#flood = undefined;
        reject(error);
      });
    }
    if (this.#listeners.rejected) this.#emit('rejected', { reason: 'queueFull', error: flood.error, cost, priority });
    return flood.promise.then();
  }

  /**
   * An estimate of when a queue slot frees up: when the head starts. Under a
   * rate that is known exactly; under a concurrency it is the mean gap between
   * finishes after the last one; 0 when nothing is known (paused, no history).
   */
  #retryAfterMs(): number {
    if (this.#nextStartMs !== Number.POSITIVE_INFINITY) return Math.max(0, this.#nextStartMs - this.#clock.now());
    if (this.#concurrencyBlocked && this.#finishGapMs > 0) {
      return Math.max(0, this.#lastFinishMs + this.#finishGapMs - this.#clock.now());
    }
    return 0;
  }

  /** Starts what can start, expires what waited too long, arms the timer, and tells waiters. */
  #pump(now: number): void {
    do this.#drain(now);
    while (this.#expire(now));
    this.#arm(now);
    this.#notify();
  }

  /** Starts waiting jobs, head first, while the concurrency and the tokens (at their theoretical times) allow. */
  #drain(now: number): void {
    this.#nextStartMs = Number.POSITIVE_INFINITY;
    if (this.#paused) return;
    const queue = this.#queue;
    // A job started here may pause the scheduler (or change its limits) from its fn: check on every turn.
    for (let job = queue.peek(); job !== undefined && !this.#paused; job = queue.peek()) {
      if (this.#runningCost + job.cost > this.#concurrency + this.#concurrencySlack) {
        this.#concurrencyBlocked = true;
        return;
      }
      if (this.#concurrencyBlocked) {
        // A slot freed up just now: the head could not have started before now.
        this.#concurrencyBlocked = false;
        if (now > this.#floorMs) this.#floorMs = now;
      }
      const bucket = this.#bucket;
      if (bucket !== undefined) {
        // The theoretical start: when the bucket had the tokens, but not before the job arrived or
        // could otherwise have started, and making up at most the lateness the bucket could not absorb.
        const notBeforeMs = job.enqueuedAtMs > this.#floorMs ? job.enqueuedAtMs : this.#floorMs;
        const atMs = startAt(bucket, this.#params, now, job.cost, notBeforeMs, this.#catchUpMs);
        if (atMs > now) {
          this.#nextStartMs = atMs;
          return;
        }
        charge(bucket, this.#params, atMs, job.cost);
      }
      queue.remove(job);
      this.#detach(job);
      const waitedMs = now - job.enqueuedAtMs;
      const extra = job.extra;
      const timeoutMs = extra === undefined ? this.#timeoutMs : extra.timeoutMs;
      if (extra?.signal === undefined && timeoutMs === Number.POSITIVE_INFINITY) {
        // The job's promise adopts the result; #invoke's own handler (attached first) frees the slot first.
        job.resolve(this.#invoke(job.fn, NO_SIGNAL, job.cost, job.priority, waitedMs));
      } else {
        const resolve = job.resolve;
        this.#startGuarded(job.fn, job.cost, job.priority, extra?.signal, timeoutMs, waitedMs, resolve, (error) =>
          resolve(rejection(error)),
        );
      }
    }
  }

  /** Rejects waiting jobs whose deadline has passed. True if it removed any. */
  #expire(now: number): boolean {
    if (this.#maxWaitMs === Number.POSITIVE_INFINITY) return false;
    const queue = this.#queue;
    let any = false;
    const maxWaitMs = this.#maxWaitMs;
    for (let job = queue.oldest(); job !== undefined && job.enqueuedAtMs + maxWaitMs <= now; job = queue.oldest()) {
      const wasHead = job === queue.peek();
      queue.remove(job);
      this.#detach(job);
      const waitedMs = now - job.enqueuedAtMs;
      const retryAfterMs = Math.max(0, this.#predictWaitMs(now, job.cost, job.priority) - this.#maxWaitMs);
      const why = this.#paused
        ? 'the scheduler was paused'
        : this.#concurrencyBlocked
          ? 'the concurrency stayed taken'
          : 'jobs of higher priority went first';
      this.#rejectWaiting(
        job,
        'waitTooLong',
        new WaitTooLongError(
          waitedMs,
          this.#maxWaitMs,
          retryAfterMs,
          `waited ${Math.ceil(waitedMs)} ms without starting, past maxWait of ${this.#maxWaitMs} ms (${why}); ` +
            'retry later, raise maxWait, or lower the load',
        ),
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
      if (oldest !== undefined && oldest.enqueuedAtMs + this.#maxWaitMs < wakeMs) {
        wakeMs = oldest.enqueuedAtMs + this.#maxWaitMs;
      }
    }
    // Whole ms rounded up, in steps past Node's 24.8-day limit: it never wakes before the tokens are there.
    this.#watchdog.armAt(wakeMs, now);
  }

  /** Emits `empty` / `idle` and resolves the promise forms when their moment has come. */
  #notify(): void {
    const size = this.#queue.size;
    if (this.#sizeWaiters.length) {
      const due = this.#sizeWaiters.filter((w) => size < w.limit);
      if (due.length) {
        this.#sizeWaiters = this.#sizeWaiters.filter((w) => size >= w.limit);
        for (const w of due) w.resolve();
      }
    }
    if (size !== 0) return;
    if (this.#emptyOwed) {
      this.#emptyOwed = false;
      const waiters = this.#emptyWaiters;
      this.#emptyWaiters = [];
      for (const resolve of waiters) resolve();
      if (this.#listeners.empty) this.#emit('empty');
    }
    if (this.#pending === 0 && this.#idleOwed) {
      this.#idleOwed = false;
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const resolve of waiters) resolve();
      if (this.#listeners.idle) this.#emit('idle');
    }
  }

  /** After a limit changed: reject waiting jobs that can no longer ever start, then start what can. */
  #limitsChanged(now: number): void {
    this.#maxCost = Math.min(this.#params.capacity, this.#concurrency);
    for (const job of [...this.#queue]) {
      if (job.cost <= this.#maxCost) continue;
      this.#queue.remove(job);
      this.#detach(job);
      const error =
        job.cost > this.#params.capacity
          ? new CostExceedsCapacityError(job.cost, this.#params.capacity)
          : new CostExceedsCapacityError(job.cost, this.#concurrency, "the scheduler's concurrency");
      this.#rejectWaiting(job, 'costExceedsCapacity', error);
    }
    this.#pump(now);
  }

  #detach(job: Job): void {
    const extra = job.extra;
    if (extra?.onAbort !== undefined) {
      (extra.signal as AbortSignal).removeEventListener('abort', extra.onAbort);
      extra.onAbort = undefined;
    }
  }

  #rejectWaiting(job: Job, reason: RejectReason, error: unknown): void {
    this.#counters.rejected[reason]++;
    job.resolve(rejection(error));
    if (this.#listeners.rejected) {
      this.#emit('rejected', { reason, error, cost: job.cost, priority: job.priority });
    }
  }

  #abortWaiting(job: Job): void {
    if (!this.#queue.remove(job)) return;
    const extra = job.extra as JobExtra;
    extra.onAbort = undefined;
    this.#rejectWaiting(job, 'aborted', (extra.signal as AbortSignal).reason);
    this.#pump(this.#clock.now());
  }

  /**
   * Runs `fn`, holding `cost` of the concurrency until it settles. Returns its
   * result as a promise (the same promise if `fn` returned a native one).
   */
  #invoke(fn: JobFunction<unknown>, context: JobContext, cost: number, priority: number, waitedMs: number) {
    this.#pending++;
    this.#runningCost += cost;
    const counters = this.#counters;
    counters.started++;
    counters.waitedMs += waitedMs;
    if (this.#listeners.active) this.#emit('active', { cost, priority, waitedMs });
    let result: Promise<unknown>;
    try {
      result = Promise.resolve(fn(context));
    } catch (error) {
      result = Promise.reject(error);
    }
    if (cost === 1) result.then(this.#finishOne, this.#failOne);
    else
      result.then(
        (value) => this.#finish(cost, true, value),
        (error) => this.#finish(cost, false, error),
      );
    return result;
  }

  /** Starts a job that has a signal or a timeout: its promise settles early on abort or timeout. */
  #startGuarded(
    fn: JobFunction<unknown>,
    cost: number,
    priority: number,
    signal: AbortSignal | undefined,
    timeoutMs: number,
    waitedMs: number,
    resolve: (value: unknown) => void,
    reject: (reason: unknown) => void,
  ): void {
    let open = true;
    let timer: Watchdog | undefined;
    let controller: AbortController | undefined;
    let jobSignal = signal;
    const close = (): void => {
      open = false;
      timer?.disarm();
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = (): void => {
      if (!open) return;
      close();
      reject((signal as AbortSignal).reason);
    };
    if (timeoutMs !== Number.POSITIVE_INFINITY) {
      controller = new AbortController();
      const own = controller;
      jobSignal = signal === undefined ? own.signal : AbortSignal.any([signal, own.signal]);
      timer = new Watchdog(this.#clock, () => {
        if (!open) return;
        close();
        this.#counters.timedOut++;
        const error = new JobTimeoutError(timeoutMs);
        own.abort(error);
        reject(error);
      });
      const now = this.#clock.now();
      timer.armAt(now + timeoutMs, now);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    this.#invoke(fn, { signal: jobSignal }, cost, priority, waitedMs).then(
      (value) => {
        if (!open) return;
        close();
        resolve(value);
      },
      (error) => {
        if (!open) return;
        close();
        reject(error);
      },
    );
  }

  /** A job's function settled: free its concurrency and start what may start. */
  #finish(cost: number, ok: boolean, value: unknown): void {
    this.#pending--;
    this.#runningCost = this.#pending === 0 ? 0 : this.#runningCost - cost;
    if (ok) {
      this.#counters.completed++;
      if (this.#listeners.completed) this.#emit('completed', value);
    } else {
      this.#counters.failed++;
      if (this.#listeners.error) this.#emit('error', value);
    }
    if (this.#queue.size === 0) {
      this.#lastFinishMs = Number.NaN;
      this.#notify();
      return;
    }
    const now = this.#clock.now();
    if (!Number.isNaN(this.#lastFinishMs)) {
      const gapMs = now - this.#lastFinishMs;
      this.#finishGapMs = this.#finishGapMs === 0 ? gapMs : this.#finishGapMs + (gapMs - this.#finishGapMs) / 8;
    }
    this.#lastFinishMs = now;
    this.#pump(now);
  }
}
