/**
 * p-queue's API over a Scheduler: `import PQueue from 'tokenpace/p-queue'`.
 *
 * A `PQueue` is a Scheduler with p-queue 9's names, options and events, for
 * code written against p-queue: `add`, `addAll`, `start`, `pause`, `clear`,
 * `onEmpty`, `onIdle`, `onPendingZero`, `onSizeLessThan`, `onRateLimit`,
 * `onRateLimitCleared`, `onError`, `size`, `sizeBy`, `pending`, `isPaused`,
 * `isRateLimited`, `isSaturated`, `runningTasks`, `setPriority`, `concurrency`
 * and `timeout` as assignable properties, and the events `active`, `idle`,
 * `empty`, `add`, `next`, `completed`, `error`, `pendingZero`, `rateLimit`,
 * `rateLimitCleared`. Every task is one job of cost 1.
 *
 * p-queue's rate limit, `intervalCap` tasks per `interval` ms, is the
 * Scheduler's window limit (`limit: intervalCap, window: interval`, no
 * margin): no interval, wherever it starts, sees more than `intervalCap`
 * starts. That is p-queue's `strict: true`; p-queue's default fixed windows
 * also let up to `2 * intervalCap` start across a window boundary, which this
 * queue never does, so a task may start later here than in p-queue, never
 * earlier. `carryoverIntervalCount: true` counts a task from its start until
 * `interval` after it ends (`windowCounts: 'finish'`).
 *
 * Its options and types are in ./p-queue-options.ts. The deliberate
 * differences from p-queue 9 are listed in docs/p-queue.md; test/p-queue/
 * runs p-queue's own test suite against this class.
 */

import { EventEmitter } from 'node:events';
import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, checkOptions, describeValue, InvalidOptionError, JobTimeoutError } from '../errors.js';
import type { JobContext } from './options.js';
import {
  type EventName,
  OPTIONS,
  type Options,
  PEER_OPTIONS,
  type PQueueEvents,
  type QueueAddOptions,
  type RunningTask,
  type Task,
} from './p-queue-options.js';
import { Scheduler } from './scheduler.js';

export type {
  EventName,
  Options,
  PQueueEvents,
  QueueAddOptions,
  RunningTask,
  Task,
  TaskOptions,
} from './p-queue-options.js';

/** The reason a task's job is withdrawn when {@link PQueue.setPriority} moves it: never seen outside. */
const MOVED = Symbol('moved');

/** A task added to the queue, through its life. */
interface Entry {
  readonly fn: Task<unknown>;
  readonly id: string | undefined;
  priority: number;
  readonly signal: AbortSignal | undefined;
  readonly timeout: number | undefined;
  /** `queued` until it starts, `running` until its outcome is told (`told`); `cleared` by clear(). */
  state: 'queued' | 'running' | 'told' | 'cleared';
  startTime: number;
  /** Withdraws its job (for setPriority): only a task with an `id` has one. */
  withdraw: AbortController | undefined;
  /** The job now carrying it: a move makes a new one. */
  job: Promise<unknown> | undefined;
  readonly resolve: (value: unknown) => void;
  readonly reject: (reason: unknown) => void;
}

/**
 * p-queue 9's `PQueue` over a {@link Scheduler}; see the file's opening comment.
 *
 * @example
 * import PQueue from 'tokenpace/p-queue';
 * const queue = new PQueue({ concurrency: 2, intervalCap: 10, interval: 1000 });
 * const page = await queue.add(({ signal }) => fetch(url, { signal }));
 */
export class PQueue extends EventEmitter<PQueueEvents> {
  /** The default timeout of tasks added from now on, ms (undefined: none). */
  timeout: number | undefined;

  readonly #scheduler: Scheduler;
  readonly #clock: Clock;
  #concurrency: number;
  /** A rate limit is set (`interval > 0` and a finite `intervalCap`). */
  readonly #limited: boolean;
  #rateLimited = false;
  #rateLimitCheckQueued = false;
  /** A task started since `pendingZero` was last emitted. */
  #pendingZeroOwed = false;
  /** Tasks waiting to start, in the order they were added. */
  readonly #queued = new Set<Entry>();
  /** Tasks running. */
  readonly #running = new Set<Entry>();

  constructor(options: Options = {}) {
    super();
    // Like p-queue's emitter (eventemitter3): no limit on listeners (each `onIdle()` is one).
    this.setMaxListeners(Number.POSITIVE_INFINITY);
    const settings = parseOptions(options);
    this.#concurrency = settings.concurrency;
    this.timeout = settings.timeout;
    this.#limited = settings.window !== undefined;
    this.#clock = settings.clock;
    this.#scheduler = new Scheduler({
      concurrency: schedulerConcurrency(settings.concurrency),
      maxQueue: Number.MAX_SAFE_INTEGER,
      autoStart: settings.autoStart,
      clock: settings.clock,
      ...settings.window,
    });
    this.#scheduler.on('empty', () => this.emit('empty')).on('idle', () => this.emit('idle'));
  }

  // ---------------------------------------------------------------- state

  /** Tasks waiting to start. */
  get size(): number {
    return this.#scheduler.size;
  }

  /** Tasks waiting at `options.priority`. */
  sizeBy(options: Readonly<Partial<QueueAddOptions>>): number {
    const priority = checkOptions(options, 'sizeBy options ({ priority })', true)?.priority;
    return typeof priority === 'number' ? this.#scheduler.sizeBy({ priority }) : 0;
  }

  /** Tasks running. */
  get pending(): number {
    return this.#scheduler.pending;
  }

  /** True while paused (`autoStart: false`, or {@link pause}). */
  get isPaused(): boolean {
    return this.#scheduler.isPaused;
  }

  /** True while the rate limit holds waiting tasks back. */
  get isRateLimited(): boolean {
    return this.#rateLimited;
  }

  /** True while tasks wait because every slot is taken, or because of the rate limit. */
  get isSaturated(): boolean {
    const waiting = this.#scheduler.size > 0;
    return (waiting && this.#scheduler.pending === this.#concurrency) || (waiting && this.#rateLimited);
  }

  /** The most tasks running at once; set, it applies at once (a task running is never stopped). */
  get concurrency(): number {
    return this.#concurrency;
  }

  set concurrency(concurrency: number) {
    this.#concurrency = checkConcurrency(concurrency);
    this.#scheduler.setConcurrency(schedulerConcurrency(concurrency));
  }

  /** The tasks running: a new array of new objects on each read. */
  get runningTasks(): readonly RunningTask[] {
    const now = this.#clock.now();
    return [...this.#running].map((entry) => ({
      id: entry.id,
      priority: entry.priority,
      startTime: entry.startTime,
      timeout: entry.timeout,
      timeoutRemaining: entry.timeout === undefined ? undefined : Math.max(0, entry.startTime + entry.timeout - now),
    }));
  }

  // ---------------------------------------------------------------- tasks

  /**
   * Adds a task; the promise settles with its result. It rejects with the signal's reason when the
   * signal aborts (freeing the task's slot at once if it runs), and with `TimeoutError` past the
   * task's timeout. A task that {@link clear} removes never settles, as in p-queue.
   */
  add<R>(fn: Task<R>, options: QueueAddOptions = {}): Promise<R> {
    let timeout: number | undefined;
    try {
      checkOptions(options, 'add options ({ priority, id, signal, timeout })', false);
      timeout = checkTimeout(Object.hasOwn(options, 'timeout') ? options.timeout : this.timeout);
    } catch (error) {
      return Promise.reject(error);
    }
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<R>((resolve, reject) => {
      const entry: Entry = {
        fn: fn as Task<unknown>,
        id: options.id,
        priority: options.priority ?? 0,
        signal,
        timeout,
        state: 'queued',
        startTime: 0,
        withdraw: options.id === undefined ? undefined : new AbortController(),
        job: undefined,
        resolve: resolve as (value: unknown) => void,
        reject,
      };
      this.#queued.add(entry);
      this.emit('add');
      this.#submit(entry);
      if (this.#scheduler.size > 0) this.#checkRateLimit();
    });
  }

  /** Adds each task with the same options; resolves with their results in order. */
  addAll<R>(fns: ReadonlyArray<Task<R>>, options?: QueueAddOptions): Promise<R[]> {
    return Promise.all(fns.map((fn) => this.add(fn, options)));
  }

  /**
   * Moves the waiting task named `id` (the first in queue order, if several have it) to `priority`,
   * behind the tasks already waiting there. Only a task added with an `id` can be moved.
   */
  setPriority(id: string, priority: number): void {
    if (typeof priority !== 'number' || !Number.isFinite(priority)) {
      throw new InvalidOptionError(
        'priority',
        priority,
        `Expected \`priority\` to be a finite number, got ${describeValue(priority)}`,
      );
    }
    let found: Entry | undefined;
    for (const entry of this.#queued) {
      if (entry.id === id && (found === undefined || entry.priority > found.priority)) found = entry;
    }
    if (found === undefined) {
      throw new InvalidOptionError('id', id, `No promise function with the id "${id}" exists in the queue.`);
    }
    const previous = found.withdraw as AbortController;
    found.priority = priority;
    found.withdraw = new AbortController();
    // The new job first, so the queue never looks empty in between; then the old one leaves.
    this.#submit(found);
    previous.abort(MOVED);
  }

  // ---------------------------------------------------------------- control

  /** Starts (or resumes) running tasks. */
  start(): this {
    this.#scheduler.resume();
    return this;
  }

  /** Holds new starts; running tasks go on. */
  pause(): void {
    this.#scheduler.pause();
  }

  /** Removes every waiting task; as in p-queue, their promises never settle. Running tasks go on. */
  clear(): void {
    for (const entry of this.#queued) entry.state = 'cleared';
    this.#queued.clear();
    this.#scheduler.clear();
    this.#updateRateLimit();
    this.emit('next');
  }

  // ---------------------------------------------------------------- promises

  /** Resolves when nothing waits (tasks may still run). */
  onEmpty(): Promise<void> {
    return this.#scheduler.onEmpty();
  }

  /** Resolves when nothing waits and nothing runs. */
  onIdle(): Promise<void> {
    return this.#scheduler.onIdle();
  }

  /** Resolves when no task runs (tasks may still wait). */
  onPendingZero(): Promise<void> {
    return this.#scheduler.onPendingZero();
  }

  /** Resolves when fewer than `limit` tasks wait. */
  onSizeLessThan(limit: number): Promise<void> {
    return this.#scheduler.onSizeLessThan(limit);
  }

  /** Resolves when the rate limit holds tasks back (at once if it does). */
  onRateLimit(): Promise<void> {
    return this.#rateLimited ? Promise.resolve() : this.#when('rateLimit');
  }

  /** Resolves when the rate limit no longer holds tasks back (at once if it does not). */
  onRateLimitCleared(): Promise<void> {
    return this.#rateLimited ? this.#when('rateLimitCleared') : Promise.resolve();
  }

  /** Rejects with the next task's error (the task's own promise rejects too). */
  onError(): Promise<never> {
    return new Promise<never>((_resolve, reject) => {
      this.once('error', reject);
    });
  }

  /** Like EventEmitter's, except that an `error` with no listener is not thrown: a task's promise carries it. */
  override emit<K extends EventName>(event: K, ...args: PQueueEvents[K]): boolean {
    if (event === 'error' && this.listenerCount('error') === 0) return false;
    return (super.emit as (event: string, ...values: unknown[]) => boolean).call(this, event, ...args);
  }

  // ---------------------------------------------------------------- the core

  /** Gives `entry` to the scheduler as a job; its outcome settles the task's promise. */
  #submit(entry: Entry): void {
    const signals = [entry.signal, entry.withdraw?.signal].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    const job = this.#scheduler.schedule((context) => this.#run(entry, context), {
      priority: entry.priority,
      signal,
      timeout: entry.timeout,
    });
    entry.job = job;
    job.then(
      (value) => {
        if (entry.job !== job) return;
        entry.resolve(value);
        this.#ended(entry, true);
      },
      (error: unknown) => {
        if (entry.job !== job || error === MOVED) return;
        if (entry.state === 'cleared') {
          this.#ended(entry, false); // as p-queue: a task that clear() removed never settles
          return;
        }
        entry.reject(error);
        if (entry.state === 'running') this.#tell(entry, 'error', error); // aborted while running
        this.#ended(entry, true);
      },
    );
  }

  /** A task starts: it is told, and its outcome is told once (its end, its timeout, or an abort). */
  #run(entry: Entry, context: JobContext): Promise<unknown> {
    this.#queued.delete(entry);
    entry.state = 'running';
    entry.startTime = this.#clock.now();
    this.#running.add(entry);
    this.#pendingZeroOwed = true;
    this.emit('active');
    this.#checkRateLimit();
    const signal = context.signal;
    // With a timeout the task's signal is its own: it aborts at the timeout, before the slot is freed.
    if (signal !== undefined && signal !== entry.signal) {
      signal.addEventListener('abort', () => this.#tell(entry, 'error', signal.reason), { once: true });
    }
    let result: Promise<unknown>;
    try {
      result = Promise.resolve(entry.fn({ signal }));
    } catch (error) {
      result = Promise.reject(error);
    }
    // As p-queue: an abort ends a running task at once, and frees its slot, whatever its function does.
    if (entry.signal !== undefined) result = untilAborted(result, entry.signal);
    return result.then(
      (value) => {
        this.#tell(entry, 'completed', value);
        return value;
      },
      (error: unknown) => {
        this.#tell(entry, 'error', error);
        throw error;
      },
    );
  }

  /** Tells a running task's outcome, once. */
  #tell(entry: Entry, event: 'completed' | 'error', value: unknown): void {
    if (entry.state !== 'running') return;
    entry.state = 'told';
    this.#running.delete(entry);
    this.emit(event, value);
  }

  /** A task's promise settled: `next` (unless clear() removed it), `pendingZero`, the rate limit's state. */
  #ended(entry: Entry, next: boolean): void {
    this.#queued.delete(entry);
    this.#running.delete(entry);
    if (this.#pendingZeroOwed && this.#scheduler.pending === 0) {
      this.#pendingZeroOwed = false;
      this.emit('pendingZero');
    }
    if (next) this.emit('next');
    this.#checkRateLimit();
  }

  /** Updates `isRateLimited` once the current synchronous work is done (as p-queue does). */
  #checkRateLimit(): void {
    if (!this.#limited || this.#rateLimitCheckQueued) return;
    this.#rateLimitCheckQueued = true;
    queueMicrotask(() => {
      this.#rateLimitCheckQueued = false;
      this.#updateRateLimit();
    });
  }

  #updateRateLimit(): void {
    const limited = this.#limited && this.#scheduler.size > 0 && this.#scheduler.windowRemaining < 1;
    if (limited === this.#rateLimited) return;
    this.#rateLimited = limited;
    this.emit(limited ? 'rateLimit' : 'rateLimitCleared');
  }

  #when(event: 'rateLimit' | 'rateLimitCleared'): Promise<void> {
    return new Promise((resolve) => {
      this.once(event, () => resolve());
    });
  }
}

export default PQueue;

/** p-queue's name for the error a task rejects with past its timeout. */
export { JobTimeoutError as TimeoutError };

/** The options of a {@link PQueue}, checked as p-queue checks them; the rate limit as a Scheduler's window. */
function parseOptions(options: Options) {
  checkOptions(options, 'PQueue options ({ concurrency, interval, intervalCap, ... })', false);
  checkKnownOptions(options, OPTIONS, 'PQueue options', PEER_OPTIONS);
  // As p-queue: an option given as undefined replaces the default (and is then refused where it must be a number).
  const settings = {
    concurrency: Number.POSITIVE_INFINITY,
    autoStart: true,
    intervalCap: Number.POSITIVE_INFINITY,
    interval: 0,
    carryoverIntervalCount: false,
    strict: false,
    ...options,
  };
  const { intervalCap, interval, strict } = settings;
  if (!(typeof intervalCap === 'number' && intervalCap >= 1)) {
    throw new InvalidOptionError(
      'intervalCap',
      intervalCap,
      `Expected \`intervalCap\` to be a number from 1 and up, got ${describeValue(intervalCap)}`,
    );
  }
  if (!(typeof interval === 'number' && Number.isFinite(interval) && interval >= 0)) {
    throw new InvalidOptionError(
      'interval',
      interval,
      `Expected \`interval\` to be a finite number >= 0, got ${describeValue(interval)}`,
    );
  }
  if (strict && interval === 0) {
    throw new InvalidOptionError('strict', strict, 'The `strict` option requires a non-zero `interval`');
  }
  if (strict && intervalCap === Number.POSITIVE_INFINITY) {
    throw new InvalidOptionError('strict', strict, 'The `strict` option requires a finite `intervalCap`');
  }
  const limited = interval > 0 && intervalCap < Number.POSITIVE_INFINITY;
  const counts: 'start' | 'finish' = settings.carryoverIntervalCount && !strict ? 'finish' : 'start';
  return {
    concurrency: checkConcurrency(settings.concurrency),
    timeout: checkTimeout(settings.timeout),
    autoStart: settings.autoStart !== false,
    clock: checkClock(settings.clock),
    window: limited ? { limit: intervalCap, window: interval, windowMargin: 0, windowCounts: counts } : undefined,
  };
}

/** `result`, or a rejection with `signal`'s reason if it aborts first. */
function untilAborted(result: Promise<unknown>, signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    result.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** `concurrency`: a number >= 1, or Infinity. */
function checkConcurrency(concurrency: unknown): number {
  if (typeof concurrency === 'number' && concurrency >= 1) return concurrency;
  throw new InvalidOptionError(
    'concurrency',
    concurrency,
    `Expected \`concurrency\` to be a number from 1 and up, got ${describeValue(concurrency)}`,
  );
}

/** A Scheduler counts concurrency in cost; Infinity is written as the largest count there is. */
function schedulerConcurrency(concurrency: number): number {
  return Math.min(concurrency, Number.MAX_SAFE_INTEGER);
}

/** `timeout`: a positive finite number of ms, or undefined. */
function checkTimeout(timeout: unknown): number | undefined {
  if (timeout === undefined) return undefined;
  if (typeof timeout === 'number' && Number.isFinite(timeout) && timeout > 0) return timeout;
  throw new InvalidOptionError(
    'timeout',
    timeout,
    `Expected \`timeout\` to be a positive finite number, got ${describeValue(timeout)}`,
  );
}
