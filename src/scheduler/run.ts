/**
 * Running a job: `fn(context)` is called, the job holds its share of the
 * concurrency until `fn` really settles, and its promise settles with `fn`'s
 * result, or earlier when its signal aborts or its `timeout` passes
 * (`JobTimeoutError`; the signal passed to `fn` aborts too). An abort keeps
 * the concurrency taken until `fn` settles (the limit counts work that is
 * actually running); a timeout frees it at once with `onTimeout: 'release'`
 * (the default: a function that never settles cannot hold a slot forever),
 * or keeps it until `fn` settles with `onTimeout: 'hold'`.
 *
 * Also here: the waiting job itself ({@link Job}), kept small since a full
 * queue holds `maxQueue` of them, and a running job's bill ({@link Bill}),
 * which is the context its function receives.
 */

import type { Clock } from '../clock.js';
import { CostExceedsCapacityError, describeValue, InvalidOptionError, JobTimeoutError } from '../errors.js';
import { Watchdog } from '../timer.js';
import type { Emitter } from './events.js';
import type { JobContext, JobFunction, SchedulerCounters } from './options.js';
import type { Level, Waiter } from './queue.js';
import { SignalWatch } from './signal-watch.js';

/**
 * A waiting job: the queue's node and its promise's settlers in one object,
 * kept small, since a full queue holds `maxQueue` of them. The one reaction to
 * its function's result that frees its slot also settles its promise
 * ({@link Runner.runJob}), so a rejection settles it in the same turn as a
 * fulfilment would. The rarely used parts (a signal, a timeout of its own)
 * live in `extra`; links in arrival order only on a {@link TimedJob}.
 */
export class Job implements Waiter<Job> {
  level: Level<Job> | undefined = undefined;
  slot = 0;
  resolve!: (value: unknown) => void;
  reject!: (reason: unknown) => void;
  constructor(
    readonly fn: JobFunction<unknown>,
    readonly cost: number,
    /** The concurrency it holds while it runs (its `weight`; its cost unless told). */
    readonly weight: number,
    readonly priority: number,
    readonly enqueuedAtMs: number,
    readonly extra: JobExtra | undefined,
  ) {}
}

/** The promise of `job`, whose settlers the job keeps. */
export function promiseOf<R>(job: Job): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    job.resolve = resolve as (value: unknown) => void;
    job.reject = reject;
  });
}

/** A job of a scheduler with `maxWait`: linked in arrival order as well, for the queue's `oldest()`. */
export class TimedJob extends Job {
  older: Job | undefined = undefined;
  newer: Job | undefined = undefined;
}

/** The parts of a waiting job that most jobs do not have. */
export interface JobExtra {
  readonly signal: AbortSignal | undefined;
  /** In the scheduler's set of jobs waiting on `signal` (one abort listener per signal, not per job). */
  watched: boolean;
  readonly timeoutMs: number;
}

/** Changes a running job's bill by `deltaCost` (see {@link JobContext.adjust}): the admission does it. */
export type Adjuster = (bill: Bill, deltaCost: number) => void;

/** A running job's bill: what it is charged now, and the context its function receives (`signal`, `adjust`). */
export class Bill implements JobContext {
  readonly #adjuster: Adjuster;
  #adjust: ((deltaCost: number) => void) | undefined = undefined;
  constructor(
    readonly signal: AbortSignal | undefined,
    /** Tokens the job is charged now. */
    public cost: number,
    adjuster: Adjuster,
  ) {
    this.#adjuster = adjuster;
  }

  /**
   * `adjust(deltaCost)`'s rule on this bill, the same for every admission: a charge that would
   * take the job's cost above `capacity` throws `CostExceedsCapacityError` (its message calls
   * the capacity `what`), and a refund is at
   * most what the job was charged. Updates `cost`; returns the change made, signed (0: none).
   * The admission moves its bucket (or its store) by that much.
   */
  amend(deltaCost: number, capacity: number, capacityName?: string): number {
    if (deltaCost > 0) {
      const total = this.cost + deltaCost;
      if (total > capacity) throw new CostExceedsCapacityError({ cost: total, capacity, capacityName });
      this.cost = total;
      return deltaCost;
    }
    const back = Math.min(-deltaCost, this.cost);
    this.cost -= back;
    return -back;
  }

  /**
   * Bound, so that `({ adjust }) => adjust(n)` works; made on first use (most jobs never adjust).
   * Its argument must be a finite number (`InvalidOptionError` otherwise), whatever the admission.
   */
  get adjust(): (deltaCost: number) => void {
    if (this.#adjust === undefined) {
      const adjuster = this.#adjuster;
      this.#adjust = (deltaCost) => {
        if (typeof deltaCost !== 'number' || !Number.isFinite(deltaCost)) {
          throw new InvalidOptionError(
            'deltaCost',
            deltaCost,
            `Expected \`adjust\`'s deltaCost to be a finite number, got ${describeValue(deltaCost)}`,
          );
        }
        adjuster(this, deltaCost);
      };
    }
    return this.#adjust;
  }
}

/** What a {@link Runner} is built with. */
export interface RunnerOptions {
  readonly clock: Clock;
  /** Counts `started`, `completed`, `failed`, `timedOut` and `waitedMs`. */
  readonly counters: SchedulerCounters;
  /** Tells `active`, `completed` and `error`. */
  readonly events: Emitter;
  /**
   * What a job's timeout does to its concurrency: true (`onTimeout: 'release'`) frees it at the
   * timeout, false (`'hold'`) keeps it until the function really settles.
   */
  readonly releaseOnTimeout: boolean;
  /** Changes a running job's bill: its `ctx.adjust`. */
  readonly adjuster: Adjuster;
  /**
   * Runs each time a job's concurrency frees (its function settled, or its timeout released it),
   * with the job if it was a {@link Job} (one that waited, or has a signal or a timeout).
   */
  readonly onFinish: (job: Job | undefined) => void;
}

/** Runs jobs and counts what runs (see the file's opening comment). */
export class Runner {
  /** Jobs running. */
  pending = 0;
  /** The concurrency the jobs running hold (what each was started with: see {@link run}). */
  runningCost = 0;

  readonly #clock: Clock;
  readonly #counters: SchedulerCounters;
  readonly #events: Emitter;
  readonly #releaseOnTimeout: boolean;
  readonly #adjuster: Adjuster;
  readonly #onFinish: (job: Job | undefined) => void;
  /** The running jobs' abort handlers, one listener per signal (a shutdown signal shared by 64 running jobs). */
  readonly #signals = new SignalWatch<() => void>((_signal, handlers) => {
    for (const onAbort of handlers) onAbort();
  });
  /** Shared settle handlers for jobs that hold 1 (the usual cost): no closure per job. */
  readonly #finishOne = (value: unknown): void => this.#finish(1, true, value, undefined);
  readonly #failOne = (error: unknown): void => this.#finish(1, false, error, undefined);

  constructor(options: RunnerOptions) {
    this.#clock = options.clock;
    this.#counters = options.counters;
    this.#events = options.events;
    this.#releaseOnTimeout = options.releaseOnTimeout;
    this.#adjuster = options.adjuster;
    this.#onFinish = options.onFinish;
  }

  /**
   * Runs a job that starts at once and has neither a signal nor a timeout, holding `held` of the
   * concurrency until `fn` settles. Returns `fn`'s result as a promise (the same promise if `fn`
   * returned a native one).
   */
  run(fn: JobFunction<unknown>, cost: number, priority: number, held: number): Promise<unknown> {
    this.#begin(cost, priority, held, 0);
    const result = call(fn, new Bill(undefined, cost, this.#adjuster));
    if (held === 1) result.then(this.#finishOne, this.#failOne);
    else
      result.then(
        (value) => this.#finish(held, true, value, undefined),
        (error) => this.#finish(held, false, error, undefined),
      );
    return result;
  }

  /**
   * Runs `job` (one that waited, or that has a signal or a timeout), holding `held` of the
   * concurrency; its promise settles through the job's settlers. `timeoutMs` is its timeout
   * (Infinity: none).
   */
  runJob(job: Job, held: number, waitedMs: number, timeoutMs: number): void {
    if (job.extra?.signal !== undefined || timeoutMs !== Number.POSITIVE_INFINITY) {
      this.#guard(job, { held, released: false }, waitedMs, timeoutMs);
      return;
    }
    this.#begin(job.cost, job.priority, held, waitedMs);
    // One reaction frees the slot, then settles the job's promise (no second `then`).
    call(job.fn, new Bill(undefined, job.cost, this.#adjuster)).then(
      (value) => {
        this.#finish(held, true, value, job);
        job.resolve(value);
      },
      (error) => {
        this.#finish(held, false, error, job);
        job.reject(error);
      },
    );
  }

  /** A job starts: it holds its concurrency, and is counted and told. */
  #begin(cost: number, priority: number, held: number, waitedMs: number): void {
    this.pending++;
    this.runningCost += held;
    const counters = this.#counters;
    counters.started++;
    counters.waitedMs += waitedMs;
    if (this.#events.has('active')) this.#events.emit('active', { cost, priority, waitedMs });
  }

  /** Runs a job that has a signal or a timeout: its promise settles early on abort or timeout. */
  #guard(job: Job, slot: Slot, waitedMs: number, timeoutMs: number): void {
    const signal = job.extra?.signal;
    const signals = this.#signals;
    let open = true;
    let timer: Watchdog | undefined;
    // The job's own signal when it has a timeout: the caller's abort is forwarded to it by hand, and the
    // listener removed when the job ends. (AbortSignal.any would keep bookkeeping on a long-lived caller's
    // signal, such as a process-wide shutdown signal, for every job until that signal is collected.)
    let own: AbortController | undefined;
    const close = (): void => {
      open = false;
      timer?.disarm();
      if (signal !== undefined) signals.delete(signal, onAbort);
    };
    const onAbort = (): void => {
      if (!open) return;
      close();
      const reason = (signal as AbortSignal).reason;
      own?.abort(reason);
      job.reject(reason);
    };
    if (timeoutMs !== Number.POSITIVE_INFINITY) {
      const controller = new AbortController();
      own = controller;
      timer = new Watchdog(this.#clock, () => {
        if (!open) return;
        close();
        this.#counters.timedOut++;
        const error = new JobTimeoutError(timeoutMs);
        controller.abort(error);
        job.reject(error);
        if (this.#releaseOnTimeout) this.#release(slot, job);
      });
      const now = this.#clock.now();
      timer.armAt(now + timeoutMs, now);
    }
    if (signal !== undefined) signals.add(signal, onAbort);
    const jobSignal = own === undefined ? signal : own.signal;
    this.#begin(job.cost, job.priority, slot.held, waitedMs);
    call(job.fn, new Bill(jobSignal, job.cost, this.#adjuster)).then(
      (value) => {
        this.#settle(slot, true, value, job);
        if (!open) return;
        close();
        job.resolve(value);
      },
      (error) => {
        this.#settle(slot, false, error, job);
        if (!open) return;
        close();
        job.reject(error);
      },
    );
  }

  /** A job's function settled: free the concurrency it held, count it, tell. */
  #finish(held: number, ok: boolean, value: unknown, job: Job | undefined): void {
    this.pending--;
    this.runningCost = this.pending === 0 ? 0 : this.runningCost - held;
    this.#count(ok, value);
    this.#onFinish(job);
  }

  #count(ok: boolean, value: unknown): void {
    if (ok) {
      this.#counters.completed++;
      if (this.#events.has('completed')) this.#events.emit('completed', value);
    } else {
      this.#counters.failed++;
      if (this.#events.has('error')) this.#events.emit('error', value);
    }
  }

  /** The function of a guarded job settled: free its slot unless its timeout did already. */
  #settle(slot: Slot, ok: boolean, value: unknown, job: Job): void {
    if (slot.released) {
      this.#count(ok, value);
      return;
    }
    slot.released = true;
    this.#finish(slot.held, ok, value, job);
  }

  /** Frees a running job's concurrency before its function settles (`onTimeout: 'release'`). */
  #release(slot: Slot, job: Job): void {
    if (slot.released) return;
    slot.released = true;
    this.pending--;
    this.runningCost = this.pending === 0 ? 0 : this.runningCost - slot.held;
    this.#onFinish(job);
  }
}

/** Calls a job's function: its result as a promise (a throw becomes a rejection). */
function call(fn: JobFunction<unknown>, context: JobContext): Promise<unknown> {
  try {
    return Promise.resolve(fn(context));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The concurrency a guarded job holds, and whether it was freed already. */
interface Slot {
  readonly held: number;
  released: boolean;
}
