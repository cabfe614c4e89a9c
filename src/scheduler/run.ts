/**
 * Running a job: `fn({ signal })` is called, the job holds its cost of the
 * concurrency until `fn` really settles, and its promise settles with `fn`'s
 * result, or earlier when its signal aborts or its `timeout` passes
 * (`JobTimeoutError`; the signal passed to `fn` aborts too). An abort keeps
 * the concurrency taken until `fn` settles (the limit counts work that is
 * actually running); a timeout frees it at once with `onTimeout: 'release'`
 * (the default: a function that never settles cannot hold a slot forever),
 * or keeps it until `fn` settles with `onTimeout: 'hold'`.
 *
 * Also here: the waiting job itself ({@link Job}), kept small since a full
 * queue holds `maxQueue` of them.
 */

import type { Clock } from '../clock.js';
import { CostExceedsCapacityError, describeValue, InvalidOptionError, JobTimeoutError } from '../errors.js';
import { Watchdog } from '../timer.js';
import type { Emitter } from './events.js';
import type { JobContext, JobFunction, SchedulerCounters } from './options.js';
import type { Level, Waiter } from './queue.js';

/**
 * A waiting job: the queue's node and its promise's settlers in one object.
 * The rarely used parts (a signal, a timeout of its own) live in `extra`.
 * Both settlers are kept, so that the one reaction to its function's result
 * that frees its slot also settles its promise ({@link Runner.invoke}):
 * resolving it with that result instead would cost a thenable job, a second
 * reaction and two more microtask hops per job.
 */
export class Job implements Waiter<Job> {
  level: Level<Job> | undefined = undefined;
  prev: Job | undefined = undefined;
  next: Job | undefined = undefined;
  older: Job | undefined = undefined;
  newer: Job | undefined = undefined;
  resolve!: (value: unknown) => void;
  reject!: (reason: unknown) => void;
  constructor(
    readonly fn: JobFunction<unknown>,
    readonly cost: number,
    readonly priority: number,
    readonly enqueuedAtMs: number,
    readonly extra: JobExtra | undefined,
  ) {}
}

/** The parts of a waiting job that most jobs do not have. */
export interface JobExtra {
  readonly signal: AbortSignal | undefined;
  /** In the scheduler's set of jobs waiting on `signal` (one abort listener per signal, not per job). */
  watched: boolean;
  readonly timeoutMs: number;
}

/** The context of a job with neither a signal nor a timeout, and nothing to adjust (the Runner's own tests). */
export const NO_SIGNAL: JobContext = Object.freeze({ signal: undefined, adjust: () => {} });

/** Changes a running job's charge (see {@link JobContext.adjust}): the scheduler's bucket does it. */
export type Adjuster = (charge: Charge, deltaCost: number) => void;

/** A job's context: its signal and its charge, which `adjust` changes. */
export class Charge implements JobContext {
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

  /** `adjust`'s argument must be a finite number; throws `InvalidOptionError` otherwise. */
  static checkDelta(deltaCost: number): void {
    if (typeof deltaCost !== 'number' || !Number.isFinite(deltaCost)) {
      throw new InvalidOptionError(
        'deltaCost',
        deltaCost,
        `Expected \`adjust\`'s deltaCost to be a finite number, got ${describeValue(deltaCost)}`,
      );
    }
  }

  /**
   * `adjust(deltaCost)`'s rule on this job's charge, the same for the Scheduler and its fleet form
   * (each checks `deltaCost` first with {@link checkDelta}): a charge that would take the job's cost
   * above `capacity` throws `CostExceedsCapacityError`, and a refund is at most what the job was
   * charged. Updates `cost`; returns the change made, signed (0: none). The caller moves its
   * bucket (or its store) by that much.
   */
  static rebill(charge: Charge, deltaCost: number, capacity: number): number {
    if (deltaCost > 0) {
      const total = charge.cost + deltaCost;
      if (total > capacity) throw new CostExceedsCapacityError(total, capacity);
      charge.cost = total;
      return deltaCost;
    }
    const back = Math.min(-deltaCost, charge.cost);
    charge.cost -= back;
    return -back;
  }

  /** Bound, so that `({ adjust }) => adjust(n)` works; made on first use (most jobs never adjust). */
  get adjust(): (deltaCost: number) => void {
    if (this.#adjust === undefined) {
      const adjuster = this.#adjuster;
      this.#adjust = (deltaCost) => adjuster(this, deltaCost);
    }
    return this.#adjust;
  }
}

/** Runs jobs and counts what runs; `onFinish` runs after each job's function settles. */
export class Runner {
  /** Jobs running. */
  pending = 0;
  /** The concurrency the jobs running hold: their costs, with {@link zeroCostHold} for each of cost 0. */
  runningCost = 0;
  /**
   * The concurrency a job of cost 0 holds while it runs: 1, or the whole
   * concurrency if that is smaller. Every running job counts: under
   * `concurrency: 1` a free job still runs alone.
   */
  zeroCostHold = 1;
  /**
   * What a job's timeout does to its concurrency: true (`onTimeout: 'release'`) frees it at the
   * timeout, false (`'hold'`) keeps it until the function really settles.
   */
  releaseOnTimeout = false;
  /** Makes the context of a guarded job (signal and timeout): the scheduler gives its own, with `adjust`. */
  contextFor: (signal: AbortSignal | undefined, cost: number) => JobContext = (signal) =>
    signal === undefined ? NO_SIGNAL : { signal, adjust: NO_SIGNAL.adjust };

  readonly #clock: Clock;
  readonly #counters: SchedulerCounters;
  readonly #events: Emitter;
  readonly #onFinish: () => void;
  /** Shared settle handlers for jobs of cost 1 (the usual cost): no closure per job. */
  readonly #finishOne = (value: unknown): void => this.#finish(1, true, value);
  readonly #failOne = (error: unknown): void => this.#finish(1, false, error);

  constructor(clock: Clock, counters: SchedulerCounters, events: Emitter, onFinish: () => void) {
    this.#clock = clock;
    this.#counters = counters;
    this.#events = events;
    this.#onFinish = onFinish;
  }

  /**
   * Runs `fn`, holding `cost` of the concurrency until it settles. Returns its
   * result as a promise (the same promise if `fn` returned a native one).
   */
  invoke(
    fn: JobFunction<unknown>,
    context: JobContext,
    cost: number,
    priority: number,
    waitedMs: number,
    slot?: Slot,
    settle?: Settlers,
  ) {
    const held = cost === 0 ? this.zeroCostHold : cost;
    this.pending++;
    this.runningCost += held;
    const counters = this.#counters;
    counters.started++;
    counters.waitedMs += waitedMs;
    if (this.#events.has('active')) this.#events.emit('active', { cost, priority, waitedMs });
    let result: Promise<unknown>;
    try {
      result = Promise.resolve(fn(context));
    } catch (error) {
      result = Promise.reject(error);
    }
    if (settle !== undefined) {
      // A queued job's promise: one reaction frees the slot, then settles it (no second `then`).
      result.then(
        (value) => {
          this.#finish(held, true, value);
          settle.resolve(value);
        },
        (error) => {
          this.#finish(held, false, error);
          settle.reject(error);
        },
      );
    } else if (slot !== undefined) {
      slot.held = held;
      result.then(
        (value) => this.#settle(slot, true, value),
        (error) => this.#settle(slot, false, error),
      );
    } else if (held === 1) result.then(this.#finishOne, this.#failOne);
    else
      result.then(
        (value) => this.#finish(held, true, value),
        (error) => this.#finish(held, false, error),
      );
    return result;
  }

  /** Starts a job that has a signal or a timeout: its promise settles early on abort or timeout. */
  invokeGuarded(
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
    // The job's own signal when it has a timeout: the caller's abort is forwarded to it by hand, and the
    // listener removed when the job ends. (AbortSignal.any would keep bookkeeping on a long-lived caller's
    // signal, such as a process-wide shutdown signal, for every job until that signal is collected.)
    let own: AbortController | undefined;
    let slot: Slot | undefined;
    const close = (): void => {
      open = false;
      timer?.disarm();
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = (): void => {
      if (!open) return;
      close();
      const reason = (signal as AbortSignal).reason;
      own?.abort(reason);
      reject(reason);
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
        reject(error);
        if (this.releaseOnTimeout && slot !== undefined) this.#release(slot);
      });
      slot = { held: 0, released: false };
      const now = this.#clock.now();
      timer.armAt(now + timeoutMs, now);
    }
    const jobSignal = own === undefined ? signal : own.signal;
    signal?.addEventListener('abort', onAbort, { once: true });
    this.invoke(fn, this.contextFor(jobSignal, cost), cost, priority, waitedMs, slot).then(
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

  /** A job's function settled: free the concurrency it held, count it, tell. */
  #finish(held: number, ok: boolean, value: unknown): void {
    this.pending--;
    this.runningCost = this.pending === 0 ? 0 : this.runningCost - held;
    this.#count(ok, value);
    this.#onFinish();
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

  /** The function of a job with a slot settled: free the slot unless its timeout did already. */
  #settle(slot: Slot, ok: boolean, value: unknown): void {
    if (slot.released) {
      this.#count(ok, value);
      return;
    }
    slot.released = true;
    this.#finish(slot.held, ok, value);
  }

  /** Frees a running job's concurrency before its function settles (`onTimeout: 'release'`). */
  #release(slot: Slot): void {
    if (slot.released) return;
    slot.released = true;
    this.pending--;
    this.runningCost = this.pending === 0 ? 0 : this.runningCost - slot.held;
    this.#onFinish();
  }
}

/** A promise's settlers: a queued {@link Job} is one. */
export interface Settlers {
  resolve(value: unknown): void;
  reject(reason: unknown): void;
}

/** The concurrency a guarded job holds, and whether it was freed already. */
interface Slot {
  held: number;
  released: boolean;
}
