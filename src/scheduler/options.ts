/**
 * The Scheduler's options and public types, and the checks that turn options
 * into numbers. What each option means is written here, once, and the options
 * are parsed once, by {@link parseSchedulerOptions}: the Scheduler and its
 * admission (./local-admission.ts, ./fleet-admission.ts) only use the parsed
 * {@link SchedulerSettings}.
 */

import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, checkOptions, describeValue, InvalidOptionError, NotSupportedError } from '../errors.js';
import type { FleetStore } from '../fleet/store.js';
import { type BucketParams, bucketParams, PACED_JOB_BURST } from '../meters/bucket.js';
import type { FailurePolicy } from '../stores/health.js';
import { type DurationInput, parseDuration, type RateInput, type SizeInput } from '../units.js';
import { SCHEDULER_OPTIONS, SCHEDULER_PEER_OPTIONS } from './option-names.js';
import { TURNS, type Turns } from './turns.js';
import {
  noWindowOnFleet,
  noWindowOnKey,
  parseWindowLimit,
  type WindowLimitOptions,
  type WindowSettings,
} from './window-limit.js';

/** Options for {@link Scheduler}. At least one limit must be finite: `rate`, `concurrency`, or `limit` with `window`. */
export interface SchedulerOptions extends WindowLimitOptions {
  /**
   * Tokens per second refilled into the bucket jobs draw their cost from: a
   * number or a string such as `'100/s'`, `'6000/min'`. Without it, only the
   * concurrency limits the jobs.
   */
  rate?: RateInput;
  /**
   * The bucket's capacity: the largest burst of cost that starts at once after
   * an idle spell, and the largest cost a job may have. Needs `rate`.
   * @default 1 (jobs are spaced evenly; raise it to allow bursts and costs above 1). A bucket that paces takes
   * the smallest burst that sustains its rate: docs/buckets.md#a-missing-burst
   */
  burst?: SizeInput;
  /**
   * The most cost that may run at once (a weighted semaphore): a job of cost c
   * holds c units while it runs. Any positive number; Infinity (no concurrency
   * limit) beside a `rate` or a window limit.
   * @default Infinity (only the rate or the window limits)
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
   * What a full queue gives up when a job arrives (memory stays flat in each case: the queue never
   * holds more than `maxQueue`). `'reject'`: the new job, at once. `'evict-lower'`: the oldest
   * waiting job of the lowest priority, if that priority is lower than the new job's (else the new
   * job), as bottleneck's OVERFLOW_PRIORITY. `'drop-oldest'`: the oldest waiting job of the lowest
   * priority, unless the new job's priority is lower still, as bottleneck's LEAK. Whoever is given
   * up rejects with `QueueFullError`, its `reason` `'full'`, `'evicted'` or `'dropped'`.
   * @default 'reject'
   */
  onFull?: 'reject' | 'evict-lower' | 'drop-oldest';
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
   * stays exact (see "Theoretical start times" in docs/internals/scheduler.md): the cap of
   * its allowance. The allowance follows the package's lateness policy (the
   * timer's 1 ms step plus 1.5 times the lateness its timer has seen lately,
   * at least 2 ms, as the streams plan for theirs) and never exceeds this. The
   * bucket absorbs the first `(burst - cost) / rate` of it; for the rest, jobs
   * that came due while a timer was late are charged at their due times, at
   * most `allowance - (burst - cost) / rate` before now, and start together. A
   * longer stall (a blocked event loop, a GC pause) is not made up, so a
   * window of T sees at most `burst + rate * (T + max(0, catchUp - (burst - cost) / rate))`
   * starts, and the strict `burst + rate * T` when `(burst - cost) / rate >= catchUp`.
   * 0 charges every job at the moment it starts (strict windows, but with a
   * burst below `rate * lateness` every late wake loses rate).
   * @default 5 (ms: a timer's usual lateness and its 1 ms rounding, with room to spare)
   */
  catchUp?: DurationInput;
  /**
   * The default `timeout` of every job (see {@link ScheduleOptions.timeout}).
   * @default Infinity (no timeout)
   */
  timeout?: DurationInput;
  /**
   * What a job's timeout does to the concurrency it holds. `'release'` frees
   * it at the timeout (the job's promise rejects and its signal aborts then):
   * a function that never settles cannot hold a slot forever, and `onIdle`
   * resolves. `'hold'` keeps it until the function really settles: right when
   * the work goes on after the timeout (a database query that ignores the
   * signal) and the limit must count it, at the risk of a slot held for as
   * long as the function runs.
   * @default 'release'
   */
  onTimeout?: 'release' | 'hold';
  /**
   * Start jobs as soon as they may. With false, the scheduler starts paused
   * until {@link Scheduler.resume}.
   * @default true
   */
  autoStart?: boolean;
  /** The time source. @default systemClock */
  clock?: Clock;
  /**
   * A fleet store: a `RedisFleetStore` or `PostgresFleetStore` (or a `MemoryFleetStore`, the same within one process).
   * With `key`, the rate, burst and concurrency are shared by every scheduler on the same store
   * and key, in every process, as one scheduler's would be; each keeps its own bounded queue,
   * priorities, signals, timeouts and events. The stored limits win over the ones given here once
   * the key exists. A job's `ctx.adjust` changes its charge in the shared bucket; `catchUp` is
   * refused with `NotSupportedError` (`ERR_NOT_SUPPORTED`). A subclass of Scheduler given a store
   * is a fleet scheduler too.
   */
  store?: FleetStore;
  /** The fleet's name in the store: schedulers with the same `store` and `key` share the limits. Needs `store`. */
  key?: string;
  /**
   * With `store`: how long a running job's lease on the shared concurrency lives without renewal,
   * the longest a crashed worker's units stay taken: milliseconds or a string such as `'15s'`.
   * Renewed every third of it while the job runs. At least 30 ms.
   * @default '10s'
   */
  lease?: DurationInput;
  /**
   * With `store`: how often a worker asks again while the shared concurrency is full: milliseconds
   * or a string such as `'50ms'`. At least 1 ms.
   * @default 20 (ms)
   */
  pollInterval?: DurationInput;
  /** With `store`: jobs of this worker holding a reservation in the shared bucket without having started. @default 1 */
  reserveAhead?: number;
}

/** What a job's function receives. */
export interface JobContext {
  /**
   * Aborts when the caller's signal aborts or the job's timeout passes.
   * `undefined` when the job has neither.
   */
  readonly signal: AbortSignal | undefined;
  /**
   * Changes the job's charge once its real cost is known (rows scanned,
   * tokens an API call used): `adjust(+n)` takes n more tokens from the
   * bucket now (in debt if they are not there, so later jobs wait for them,
   * as a reservation does), `adjust(-n)` gives back up to n of what the job
   * was charged (never above the burst). The job's total charge stays within
   * 0 and the burst (`CostExceedsCapacityError` beyond it). The concurrency
   * the job holds does not change. Without a rate it does nothing.
   */
  adjust(deltaCost: number): void;
}

/** A job: a function that returns a value or a promise of one. */
export type JobFunction<R> = (context: JobContext) => R | PromiseLike<R>;

/** Options for {@link Scheduler.schedule}. */
export interface ScheduleOptions {
  /**
   * The tokens the job needs from the bucket to start (and counts against a
   * window limit). Any number >= 0, at most the burst and the window limit.
   * @default 1
   */
  cost?: number;
  /**
   * The units of concurrency the job holds while it runs (a weighted
   * semaphore), apart from its cost in tokens: GitHub's points per minute
   * beside its concurrent requests, bottleneck's `weight` beside `minTime`.
   * Any number >= 0, at most the concurrency.
   * @default the job's `cost`
   */
  weight?: number;
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
  /** Aborting it removes the calls still waiting and aborts the running ones (see {@link ScheduleOptions.signal}). */
  signal?: AbortSignal;
  /** The cost of each call, or a function of the call's arguments that returns it. @default 1 */
  cost?: number | ((...args: A) => number);
  /** The concurrency each call holds, or a function of the call's arguments that returns it. @default its cost */
  weight?: number | ((...args: A) => number);
  /** @default 0 */
  priority?: number;
  /** @default the scheduler's `timeout` */
  timeout?: DurationInput;
}

/**
 * Why the scheduler turned a job away (the key in {@link SchedulerCounters.rejected}). `tooManyKeys`
 * comes only from a KeyedScheduler: a new key when the `maxKeys` kept all have jobs.
 */
export type RejectReason = 'queueFull' | 'waitTooLong' | 'costExceedsCapacity' | 'aborted' | 'cleared' | 'tooManyKeys';

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

/** A scheduler's counters at zero. @internal */
export function zeroCounters(): SchedulerCounters {
  return {
    admitted: 0,
    started: 0,
    completed: 0,
    failed: 0,
    timedOut: 0,
    rejected: { queueFull: 0, waitTooLong: 0, costExceedsCapacity: 0, aborted: 0, cleared: 0, tooManyKeys: 0 },
    waitedMs: 0,
  };
}

/** A copy of `counters` that the scheduler's later counting leaves alone. @internal */
export function copyCounters(counters: SchedulerCounters): SchedulerCounters {
  return { ...counters, rejected: { ...counters.rejected } };
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
  /** With `store`: the store stopped answering; its `onError` policy decides until it answers again. */
  degraded: [info: { error: Error; policy: FailurePolicy }];
  /** With `store`: the store answers again. */
  recovered: [info: { downMs: number }];
  /**
   * With `store`: a change of the limits (`setRate`, `setBurst`, `setConcurrency`) did not reach
   * the store (it is unavailable); the fleet's limits stay as they were.
   */
  storeError: [error: Error];
}

/** The events a {@link Scheduler} emits. */
export type EventName = keyof SchedulerEvents;

/** Every event name, for the check in `on`/`once`/`off`. */
export const EVENT_NAMES: ReadonlySet<string> = new Set<EventName>([
  'active',
  'completed',
  'error',
  'empty',
  'idle',
  'rejected',
  'degraded',
  'recovered',
  'storeError',
]);

/** An event name and a listener, checked: an unknown name or a listener that is not a function is refused. */
export function checkListener(event: unknown, listener: unknown): void {
  if (typeof event !== 'string' || !EVENT_NAMES.has(event)) {
    throw new InvalidOptionError(
      'event',
      event,
      `unknown event ${describeValue(event)}: expected one of ${[...EVENT_NAMES].map((e) => `'${e}'`).join(', ')}`,
    );
  }
  if (typeof listener !== 'function') {
    throw new InvalidOptionError(
      'listener',
      listener,
      `Expected the listener for '${event}' to be a function, got ${describeValue(listener)}`,
    );
  }
}

/** A listener for event `E`. */
export type SchedulerListener<E extends EventName> = (...args: SchedulerEvents[E]) => void;

/** The default bound on waiting jobs. */
export const DEFAULT_MAX_QUEUE = 1000;
/** The default timer lateness made up for, ms (see {@link SchedulerOptions.catchUp}). */
export const DEFAULT_CATCH_UP_MS = 5;

/** What a Scheduler with no finite limit is told. */
export const NEEDS_A_LIMIT =
  'a Scheduler needs at least one finite limit: `rate`, `concurrency` or `limit` with `window` ' +
  '(cost per second, cost running at once, cost started per window)';

/**
 * `concurrency`: a number > 0, or Infinity (no concurrency limit) when `otherLimit`: a rate or a
 * window limit is there. At least one limit must be finite.
 */
export function parseConcurrency(value: unknown, otherLimit: boolean): number {
  if (typeof value === 'number' && value > 0 && value < Number.POSITIVE_INFINITY) return value;
  if (value === Number.POSITIVE_INFINITY) {
    if (otherLimit) return value;
    throw new InvalidOptionError('concurrency', value, `${NEEDS_A_LIMIT}; \`concurrency: Infinity\` sets none`);
  }
  throw new InvalidOptionError(
    'concurrency',
    value,
    `Expected \`concurrency\` to be a number > 0 or Infinity, got ${describeValue(value)}`,
  );
}

/** `maxQueue`: a finite integer >= 0. */
export function parseMaxQueue(value: number | undefined): number {
  const maxQueue = value ?? DEFAULT_MAX_QUEUE;
  if (Number.isSafeInteger(maxQueue) && maxQueue >= 0) return maxQueue;
  throw new InvalidOptionError(
    'maxQueue',
    maxQueue,
    `Expected \`maxQueue\` to be a finite integer >= 0, got ${describeValue(maxQueue)}: the queue is bounded on purpose; ` +
      'pick the most jobs you are willing to hold in memory',
  );
}

/** `onFull`: `'reject'` (the default), `'evict-lower'` or `'drop-oldest'`. */
export function parseOnFull(value: unknown): 'reject' | 'evict-lower' | 'drop-oldest' {
  if (value === undefined) return 'reject';
  if (value === 'reject' || value === 'evict-lower' || value === 'drop-oldest') return value;
  throw new InvalidOptionError(
    'onFull',
    value,
    `Expected \`onFull\` to be 'reject', 'evict-lower' or 'drop-oldest', got ${describeValue(value)}`,
  );
}

/** `timeout`: a duration > 0, or Infinity when absent. */
export function parseTimeout(timeout: DurationInput | undefined): number {
  if (timeout === undefined) return Number.POSITIVE_INFINITY;
  const ms = parseDuration(timeout);
  if (ms === 0) {
    throw new InvalidOptionError('timeout', timeout, 'Expected `timeout` to be a duration > 0 (or Infinity), got 0');
  }
  return ms;
}

/** `onTimeout`: true for `'release'` (the default), false for `'hold'`. */
export function parseOnTimeout(value: unknown): boolean {
  if (value === undefined || value === 'release') return true;
  if (value === 'hold') return false;
  throw new InvalidOptionError(
    'onTimeout',
    value,
    `Expected \`onTimeout\` to be 'release' or 'hold', got ${describeValue(value)}`,
  );
}

/** A duration option that may be absent: `fallback` when it is. */
export function parseOptionalDuration(value: DurationInput | undefined, fallback: number): number {
  return value === undefined ? fallback : parseDuration(value);
}

/** The default lease of a fleet job, ms (see {@link SchedulerOptions.lease}). */
export const DEFAULT_LEASE_MS = 10_000;
/** The default interval a fleet worker asks again at while the shared concurrency is full, ms. */
export const DEFAULT_POLL_MS = 20;

/** A fleet's own settings, parsed (see {@link SchedulerOptions.store}). @internal */
export interface FleetSettings {
  readonly store: FleetStore;
  readonly key: string;
  readonly leaseMs: number;
  readonly pollMs: number;
  readonly reserveAhead: number;
}

/** Every option of a Scheduler, checked and parsed: what {@link parseSchedulerOptions} returns. @internal */
export interface SchedulerSettings {
  readonly clock: Clock;
  /** The bucket's parameters; `undefined` without a rate. */
  readonly params: BucketParams | undefined;
  /** Infinity when there is none. */
  readonly concurrency: number;
  readonly maxQueue: number;
  readonly onFull: 'reject' | 'evict-lower' | 'drop-oldest';
  readonly maxWaitMs: number;
  readonly timeoutMs: number;
  readonly catchUpMs: number;
  /** `onTimeout: 'release'`. */
  readonly releaseOnTimeout: boolean;
  /** `autoStart: false`. */
  readonly paused: boolean;
  /** With `store` and `key`: the fleet's settings. */
  readonly fleet: FleetSettings | undefined;
  /** The window limit (`limit`, `window`); `undefined` without one. */
  readonly window: WindowSettings | undefined;
  /** A key of a KeyedScheduler: its turns at the limit over all keys (./turns.ts); `undefined` for a scheduler on its own. */
  readonly turns: Turns | undefined;
}

/** The options a KeyedScheduler gives each key's Scheduler: the public ones and its turns. @internal */
export interface MemberOptions extends SchedulerOptions {
  readonly [TURNS]?: Turns;
}

/**
 * Checks and parses a Scheduler's options, each once; throws the coded error of the first that is
 * wrong. @internal
 */
export function parseSchedulerOptions(options: SchedulerOptions): SchedulerSettings {
  checkOptions(options, 'Scheduler options ({ rate, burst, concurrency, maxQueue, ... })', true);
  checkKnownOptions(options, SCHEDULER_OPTIONS, 'Scheduler options', SCHEDULER_PEER_OPTIONS);
  const clock = checkClock(options.clock);
  const window = parseWindowLimit(options);
  const rate = options.rate;
  const hasRate = rate !== undefined;
  if (!hasRate && options.concurrency === undefined && window === undefined) {
    throw new InvalidOptionError('rate', undefined, NEEDS_A_LIMIT);
  }
  let params: BucketParams | undefined;
  if (hasRate) {
    params = bucketParams(rate, options.burst ?? PACED_JOB_BURST);
  } else if (options.burst !== undefined) {
    throw new InvalidOptionError('burst', options.burst, '`burst` needs a `rate`: give the rate the bucket refills at');
  }
  const settings = {
    clock,
    params,
    concurrency: parseConcurrency(options.concurrency ?? Number.POSITIVE_INFINITY, hasRate || window !== undefined),
    maxQueue: parseMaxQueue(options.maxQueue),
    onFull: parseOnFull(options.onFull),
    maxWaitMs: parseOptionalDuration(options.maxWait, Number.POSITIVE_INFINITY),
    timeoutMs: parseTimeout(options.timeout),
    catchUpMs: parseOptionalDuration(options.catchUp, DEFAULT_CATCH_UP_MS),
    releaseOnTimeout: parseOnTimeout(options.onTimeout),
    paused: options.autoStart === false,
  };
  const turns = (options as MemberOptions)[TURNS];
  return {
    ...settings,
    fleet: noWindowOnFleet(parseFleet(options), window),
    window,
    turns: noWindowOnKey(turns, window),
  };
}

/** The fleet options: `store` and `key` (both or neither), and the three that only a fleet has. */
function parseFleet(options: SchedulerOptions): FleetSettings | undefined {
  const { store, key } = options;
  if (store === undefined && key === undefined) {
    for (const name of ['lease', 'pollInterval', 'reserveAhead'] as const) {
      if (options[name] !== undefined) {
        throw new InvalidOptionError(name, options[name], `\`${name}\` is for a fleet: give \`store\` and \`key\` too`);
      }
    }
    return undefined;
  }
  if (typeof store !== 'object' || store === null || typeof (store as FleetStore).exchange !== 'function') {
    throw new InvalidOptionError(
      'store',
      store,
      `Expected \`store\` to be a RedisFleetStore, a PostgresFleetStore or a MemoryFleetStore, got ${describeValue(store)}`,
    );
  }
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidOptionError(
      'key',
      key,
      `Expected \`key\` (the fleet's name in the store) to be a non-empty string, got ${describeValue(key)}`,
    );
  }
  if (options.catchUp !== undefined) {
    throw new NotSupportedError(
      "`catchUp` does not apply to a fleet: a start is charged when the store reserves it, in the store's time, so timer lateness loses no rate",
    );
  }
  const leaseMs = parseOptionalDuration(options.lease, DEFAULT_LEASE_MS);
  if (!(leaseMs >= 30 && leaseMs < Number.POSITIVE_INFINITY)) {
    throw new InvalidOptionError(
      'lease',
      options.lease,
      `Expected \`lease\` to be a finite duration >= 30 ms, got ${describeValue(options.lease)}`,
    );
  }
  const pollMs = parseOptionalDuration(options.pollInterval, DEFAULT_POLL_MS);
  if (!(pollMs >= 1 && pollMs < Number.POSITIVE_INFINITY)) {
    throw new InvalidOptionError(
      'pollInterval',
      options.pollInterval,
      `Expected \`pollInterval\` to be a finite duration >= 1 ms, got ${describeValue(options.pollInterval)}`,
    );
  }
  const reserveAhead = options.reserveAhead ?? 1;
  if (!(Number.isSafeInteger(reserveAhead) && reserveAhead >= 1)) {
    throw new InvalidOptionError(
      'reserveAhead',
      reserveAhead,
      `Expected \`reserveAhead\` to be an integer >= 1, got ${describeValue(reserveAhead)}`,
    );
  }
  return { store, key, leaseMs, pollMs, reserveAhead };
}

/** `close()`'s options: `drain`, a boolean (true when absent). */
export function parseDrain(options: { drain?: boolean } | undefined): boolean {
  const drain = checkOptions(options, 'close options ({ drain })', false)?.drain ?? true;
  if (typeof drain === 'boolean') return drain;
  throw new InvalidOptionError('drain', drain, `Expected \`drain\` to be a boolean, got ${describeValue(drain)}`);
}

/** `sizeBy()`'s options: `priority`, a number. */
export function parseSizeBy(options: { priority: number }): number {
  const priority = checkOptions(options, 'sizeBy options ({ priority })', true)?.priority;
  if (typeof priority === 'number' && !Number.isNaN(priority)) return priority;
  throw new InvalidOptionError(
    'priority',
    priority,
    `Expected \`priority\` to be a number, got ${describeValue(priority)}`,
  );
}

/**
 * `Scheduler.wrap`: a function whose every call is a job given to `schedule`, with the call's `this`
 * and arguments; `options.cost` may be a function of the arguments. @internal
 */
export function wrapCalls<A extends unknown[], R, T>(
  schedule: (job: JobFunction<R>, options: ScheduleOptions) => Promise<R>,
  fn: (this: T, ...args: A) => R | PromiseLike<R>,
  options: WrapOptions<A>,
): (this: T, ...args: A) => Promise<R> {
  const { cost, weight, priority, timeout, signal } = options;
  return function wrapped(this: T, ...args: A): Promise<R> {
    let jobCost: number | undefined;
    let jobWeight: number | undefined;
    try {
      jobCost = typeof cost === 'function' ? cost(...args) : cost;
      jobWeight = typeof weight === 'function' ? weight(...args) : weight;
    } catch (error) {
      return Promise.reject(error);
    }
    return schedule(() => fn.apply(this, args), { cost: jobCost, weight: jobWeight, priority, timeout, signal });
  };
}
