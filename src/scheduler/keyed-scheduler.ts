/**
 * KeyedScheduler: a queue per key (a tenant, a user, an API key), each one a
 * Scheduler of its own, and an optional limit over all keys together (the
 * provider's), at which the keys waiting take turns.
 *
 * Each key gets its own rate and burst (one pair for all, or by plan:
 * `limits(key)`, or `plans` and `plan(key)`, the resolvers KeyedLimiter uses),
 * and the same concurrency, bounded queue, `onFull`, `maxWait` and `timeout`.
 * A key's Scheduler is made on first use and dropped once it is idle and its
 * bucket is full again (it then equals a new one): the table looks when a new
 * key comes, and counts a key idle from when it first sees it so, with no
 * timer per key. At most `maxKeys` are kept (./key-table.ts). A new key when every key kept has jobs waiting or running
 * is refused with TooManyKeysError: memory stays bounded.
 *
 * With `global`, a job starts only when its key's limits and the global
 * bucket both allow it, and neither is charged when either refuses; while the
 * global bucket is what holds jobs back, the keys take turns at it by deficit
 * round robin by cost (./turns.ts): a key with 10,000 jobs waiting and a key
 * with one start within one round of each other.
 *
 * Invariants: a key's jobs run only through its own Scheduler (its API:
 * signals, priorities, deadlines, timeouts, events, counters); the counters of
 * dropped keys are kept in the totals.
 */

import { type Clock, checkClock } from '../clock.js';
import {
  ClosedError,
  CostExceedsCapacityError,
  checkKnownOptions,
  checkOptions,
  describeValue,
  InvalidOptionError,
  QueueFullError,
  retryHintMs,
  TooManyKeysError,
} from '../errors.js';
import { type GlobalLimitOptions, globalParams } from '../keyed/keyed-options.js';
import { parseMaxKeys } from '../keyed/memory-store.js';
import { type LimitsResolver, limitsResolver, type PlanOptions } from '../keyed/plans.js';
import { type BucketParams, bucketParams, PACED_JOB_BURST } from '../meters/bucket.js';
import type { RateInput, SizeInput } from '../units.js';
import { isThenable } from './events.js';
import { type KeyEntry, KeyTable } from './key-table.js';
import { SCHEDULER_PEER_OPTIONS } from './option-names.js';
import {
  checkListener,
  copyCounters,
  DEFAULT_CATCH_UP_MS,
  type EventName,
  type JobFunction,
  type MemberOptions,
  parseMaxQueue,
  parseOptionalDuration,
  type RejectedJob,
  type RejectReason,
  type ScheduleOptions,
  type SchedulerCounters,
  type SchedulerEvents,
  type SchedulerOptions,
  type WrapOptions,
  wrapCalls,
  zeroCounters,
} from './options.js';
import { refillMsOf, Scheduler } from './scheduler.js';
import { GLOBAL_CAPACITY, TURNS, Turns } from './turns.js';

/**
 * Options for {@link KeyedScheduler}: each key's limits, and what every key shares. `concurrency`,
 * `maxQueue`, `onFull`, `maxWait`, `timeout`, `onTimeout` and `catchUp` are each key's, as a
 * Scheduler's; `maxWait` counts the turns at `global` too.
 */
export interface KeyedSchedulerOptions
  extends PlanOptions<string>,
    Pick<SchedulerOptions, 'concurrency' | 'maxQueue' | 'onFull' | 'maxWait' | 'timeout' | 'onTimeout' | 'catchUp'> {
  /** Each key's rate: a number per second or a string such as `'10/s'`. Or `limits`, or `plans` with `plan`. */
  rate?: RateInput;
  /** Each key's burst (with `rate`). @default 1 (see {@link SchedulerOptions.burst}) */
  burst?: SizeInput;
  /** A bucket over all keys together (the provider's limit): a job needs tokens from both; keys take turns at it. */
  global?: GlobalLimitOptions;
  /**
   * The most keys kept, an integer from 1 to 2^31 - 1. An idle key whose bucket is full again is
   * dropped first, then the least recently used idle key (it comes back with a full bucket). When
   * every key kept has jobs waiting or running, a job for a new key is refused with
   * `TooManyKeysError` (`ERR_TOO_MANY_KEYS`).
   * @default 10_000
   */
  maxKeys?: number;
  /** The time source. @default systemClock */
  clock?: Clock;
}

/** A listener of a key's event: the key, then the Scheduler event's own arguments. */
export type KeyedSchedulerListener<E extends EventName> = (key: string, ...args: SchedulerEvents[E]) => void;

/** The default bound on keys kept (see {@link KeyedSchedulerOptions.maxKeys}). */
export const DEFAULT_MAX_SCHEDULER_KEYS = 10_000;

const KEYED_SCHEDULER_OPTIONS: ReadonlySet<string> = new Set([
  'rate',
  'burst',
  'limits',
  'plans',
  'plan',
  'concurrency',
  'maxQueue',
  'onFull',
  'maxWait',
  'timeout',
  'onTimeout',
  'catchUp',
  'global',
  'maxKeys',
  'clock',
]);

/** One key kept: its Scheduler, its limits, and since when it is known to be idle. */
class KeyState implements KeyEntry {
  readonly scheduler: Scheduler;
  /** The limits its plan last gave (`undefined` without a rate): a new plan is applied when they differ. */
  params: BucketParams | undefined;
  /**
   * When the table first saw it idle and unused since (NaN: not seen so). Its bucket was last
   * charged before then, so it is full again (it equals a new key) a refill from empty later.
   */
  seenIdleAtMs = Number.NaN;
  /** Its Scheduler's `counters.admitted` then: a job given to the Scheduler directly restarts the idle time. */
  admittedWhenSeenIdle = 0;
  /** Its refill time then: new limits since (a `setRate` while idle) restart the idle time. */
  refillMsWhenSeenIdle = 0;

  constructor(scheduler: Scheduler, params: BucketParams | undefined) {
    this.scheduler = scheduler;
    this.params = params;
  }

  busy(): boolean {
    const scheduler = this.scheduler;
    return scheduler.size !== 0 || scheduler.pending !== 0 || scheduler.isPaused;
  }

  /** Idle (the table asks only then): true once its bucket, at its limits now, is surely full again. */
  forgettable(nowMs: number): boolean {
    const scheduler = this.scheduler;
    const refillMs = refillMsOf(scheduler);
    if (refillMs === 0) return true;
    const admitted = scheduler.counters.admitted;
    if (
      Number.isNaN(this.seenIdleAtMs) ||
      admitted !== this.admittedWhenSeenIdle ||
      refillMs !== this.refillMsWhenSeenIdle
    ) {
      this.seenIdleAtMs = nowMs;
      this.admittedWhenSeenIdle = admitted;
      this.refillMsWhenSeenIdle = refillMs;
      return false;
    }
    return nowMs >= this.seenIdleAtMs + refillMs;
  }
}

/**
 * A Scheduler per key, made on first use and dropped when idle, with an optional limit over all
 * keys at which the keys take turns. See the file's opening comment.
 *
 * @example
 * const tenants = new KeyedScheduler({
 *   plans: { free: { rate: '2/s', burst: 2 }, pro: { rate: '20/s', burst: 20 } },
 *   plan: (tenant) => (tenant.startsWith('pro-') ? 'pro' : 'free'),
 *   concurrency: 4,
 *   maxQueue: 100,
 *   global: { rate: '50/s', burst: 50 },
 * });
 * const report = await tenants.schedule('pro-acme', () => fetchReport(), { cost: 1 });
 */
export class KeyedScheduler {
  readonly #clock: Clock;
  /** Each key's rate and burst: fixed (`undefined` without a rate) or resolved per key. */
  readonly #fixed: BucketParams | undefined;
  readonly #resolve: LimitsResolver<string> | undefined;
  /** The options every key's Scheduler is made with, but its rate and burst. */
  readonly #shared: MemberOptions;
  readonly #turns: Turns | undefined;
  readonly #table: KeyTable<KeyState>;
  readonly #maxKeys: number;
  /** The counters of the keys dropped so far, and the jobs refused here, before any key's Scheduler. */
  readonly #retired: SchedulerCounters = zeroCounters();
  /** Keyed listeners per event; every key's Scheduler forwards the events that have any. */
  readonly #listeners = new Map<EventName, Set<KeyedSchedulerListener<EventName>>>();
  /** Calls waiting for an asynchronous plan, not yet in a key's queue. */
  readonly #resolving = new Map<Promise<unknown>, (error: unknown) => void>();
  /** Per key whose plan is being looked up: how many calls wait for it, and since when (bounded, see `schedule`). */
  readonly #resolvingByKey = new Map<string, { count: number; sinceMs: number }>();
  /** The most calls that may wait for one key's plan: its `maxQueue`, at least one. */
  readonly #maxResolvingPerKey: number;
  #closed = false;

  constructor(options: KeyedSchedulerOptions) {
    checkOptions(
      options,
      'KeyedScheduler options ({ rate, burst, concurrency, maxQueue, global, maxKeys, ... })',
      true,
    );
    checkKnownOptions(options, KEYED_SCHEDULER_OPTIONS, 'KeyedScheduler options', SCHEDULER_PEER_OPTIONS);
    const clock = checkClock(options.clock);
    this.#clock = clock;
    const fixed = options.rate !== undefined || options.burst !== undefined;
    this.#resolve = limitsResolver(options, fixed);
    if (options.burst !== undefined && options.rate === undefined) {
      throw new InvalidOptionError('burst', options.burst, '`burst` needs a `rate`: give the rate each key refills at');
    }
    this.#fixed = options.rate === undefined ? undefined : bucketParams(options.rate, options.burst ?? PACED_JOB_BURST);
    const maxKeys = parseMaxKeys(options.maxKeys, DEFAULT_MAX_SCHEDULER_KEYS);
    this.#maxKeys = maxKeys;
    const global = globalParams(options.global);
    this.#turns =
      global === undefined
        ? undefined
        : new Turns({
            clock,
            params: global,
            // A visit gives a key one unit of cost: a key of cost-1 jobs starts one a turn.
            quantum: 1,
            catchUpMs: parseOptionalDuration(options.catchUp, DEFAULT_CATCH_UP_MS),
          });
    this.#maxResolvingPerKey = Math.max(1, parseMaxQueue(options.maxQueue));
    const shared: MemberOptions = {
      clock,
      concurrency: options.concurrency,
      maxQueue: options.maxQueue,
      onFull: options.onFull,
      maxWait: options.maxWait,
      timeout: options.timeout,
      onTimeout: options.onTimeout,
      catchUp: options.catchUp,
      [TURNS]: this.#turns,
    };
    this.#shared = shared;
    // Every option checked now, not at the first job: a key with the fixed limits (or a placeholder rate by plan).
    const probe = this.#resolve === undefined ? this.#fixed : { ratePerSecond: 1, burst: 1 };
    new Scheduler(this.#optionsFor(probe, false));
    this.#table = new KeyTable<KeyState>({
      maxKeys,
      whenAllBusy: 'refuse',
      dropped: (_key, state) => this.#retire(state),
    });
  }

  // ---------------------------------------------------------------- state

  /** The bound on keys kept. */
  get maxKeys(): number {
    return this.#maxKeys;
  }

  /** Keys kept now. */
  get keyCount(): number {
    return this.#table.size;
  }

  /** Jobs waiting to start, all keys together. */
  get size(): number {
    let size = 0;
    for (const state of this.#table.values()) size += state.scheduler.size;
    return size;
  }

  /** Jobs running, all keys together. */
  get pending(): number {
    let pending = 0;
    for (const state of this.#table.values()) pending += state.scheduler.pending;
    return pending;
  }

  /** The counters of every key, summed (the keys dropped so far included). */
  get counters(): SchedulerCounters {
    const total = copyCounters(this.#retired);
    for (const state of this.#table.values()) addCounters(total, state.scheduler.counters);
    return total;
  }

  /** The global bucket's parameters, if any (as {@link KeyedLimiter.global}). */
  get global(): Readonly<BucketParams> | undefined {
    return this.#turns?.params;
  }

  /** True once {@link close} was called. */
  get isClosed(): boolean {
    return this.#closed;
  }

  /** The keys kept, least recently used first. */
  keys(): string[] {
    return [...this.#table.keys()];
  }

  /**
   * The Scheduler of `key` while it is kept (`undefined` if not): its `size`, `counters`, `onIdle()`,
   * `pause()` and the rest. What it is changed to lasts while the key is kept (a paused key is kept).
   */
  scheduler(key: string): Scheduler | undefined {
    return this.#table.peek(key)?.scheduler;
  }

  // ---------------------------------------------------------------- jobs

  /**
   * Runs `fn` as a job of `key`'s Scheduler (made if there is none), with that key's limits and its
   * turn at `global`. Settles as {@link Scheduler.schedule} does; rejects too with
   * `TooManyKeysError` for a new key when the `maxKeys` kept all have jobs, and with
   * `CostExceedsCapacityError` for a cost above `global.burst`.
   */
  schedule<R>(key: string, fn: JobFunction<R>, options?: ScheduleOptions): Promise<R> {
    if (typeof key !== 'string') {
      return Promise.reject(
        new InvalidOptionError('key', key, `Expected \`key\` to be a string, got ${describeValue(key)}`),
      );
    }
    if (this.#closed) return Promise.reject(new ClosedError('the keyed scheduler is closed: it takes no new jobs'));
    const turns = this.#turns;
    const cost = options?.cost;
    if (turns !== undefined && typeof cost === 'number' && cost > turns.burst) {
      const error = new CostExceedsCapacityError({ cost, capacity: turns.burst, capacityName: GLOBAL_CAPACITY });
      return this.#refuse(key, 'costExceedsCapacity', error, options);
    }
    const resolve = this.#resolve;
    if (resolve === undefined) return this.#enqueue(key, this.#fixed, fn, options);
    let params: BucketParams | Promise<BucketParams>;
    try {
      params = resolve(key);
    } catch (error) {
      return Promise.reject(error);
    }
    if (!(params instanceof Promise)) return this.#enqueue(key, params, fn, options);
    const refused = this.#refuseLookup(key);
    if (refused !== undefined) {
      params.catch(() => undefined); // its outcome is no longer awaited
      return this.#refuse(key, refused instanceof QueueFullError ? 'queueFull' : 'tooManyKeys', refused, options);
    }
    let resolveCall!: (value: R | PromiseLike<R>) => void;
    let rejectCall!: (reason: unknown) => void;
    const arriving = new Promise<R>((resolve, reject) => {
      resolveCall = resolve;
      rejectCall = reject;
    });
    /** True the first time: the call leaves the calls waiting for a plan (its plan came, or close() gave up). */
    const leaves = (): boolean => {
      if (!this.#resolving.has(arriving)) return false;
      this.#looked(key, arriving);
      return true;
    };
    this.#resolving.set(arriving, (error) => {
      if (!leaves()) return;
      rejectCall(error);
      this.#told(key, 'cleared', error, options); // accepted, then given up: as close({ drain: false }) counts
    });
    params.then(
      (resolved) => {
        if (!leaves()) return;
        try {
          resolveCall(this.#enqueue(key, resolved, fn, options));
        } catch (error) {
          rejectCall(error);
        }
      },
      (error: unknown) => {
        if (leaves()) rejectCall(error);
      },
    );
    return arriving;
  }

  /**
   * Bounds the calls waiting for a plan, as the queues bound the calls waiting to start: at most
   * `maxQueue` (at least one) per key, else `QueueFullError`; at most `maxKeys` keys, else
   * `TooManyKeysError`. `undefined`: the call may wait (it is counted).
   */
  #refuseLookup(key: string): QueueFullError | TooManyKeysError | undefined {
    const now = this.#clock.now();
    const waiting = this.#resolvingByKey.get(key);
    if (waiting === undefined) {
      if (this.#resolvingByKey.size >= this.#maxKeys) return new TooManyKeysError(this.#maxKeys, key);
      this.#resolvingByKey.set(key, { count: 1, sinceMs: now });
      return undefined;
    }
    if (waiting.count >= this.#maxResolvingPerKey) {
      // The lookup's time is not known: as long again as the oldest has taken so far (at least 1 ms).
      return new QueueFullError({
        maxQueue: this.#maxResolvingPerKey,
        retryAfterMs: retryHintMs(Math.max(1, now - waiting.sinceMs)),
      });
    }
    waiting.count++;
    return undefined;
  }

  /**
   * Refuses a job before any key's Scheduler has it: counted in `counters.rejected` and told to the
   * `rejected` listeners with its key, as a key's Scheduler does with its own refusals.
   */
  #refuse(key: string, reason: RejectReason, error: unknown, options: ScheduleOptions | undefined): Promise<never> {
    this.#told(key, reason, error, options);
    return Promise.reject(error);
  }

  /** Counts a job turned away here by `reason` and tells the `rejected` listeners. */
  #told(key: string, reason: RejectReason, error: unknown, options: ScheduleOptions | undefined): void {
    this.#retired.rejected[reason]++;
    const listeners = this.#listeners.get('rejected');
    if (listeners !== undefined && listeners.size !== 0) {
      const cost = typeof options?.cost === 'number' ? options.cost : 1;
      const priority = typeof options?.priority === 'number' ? options.priority : 0;
      const job: RejectedJob = { reason, error, cost, priority };
      for (const listener of listeners) {
        // A listener that throws (or rejects) is heard by the `error` listeners, as on a Scheduler.
        try {
          const result: unknown = listener(key, job);
          if (isThenable(result)) result.then(undefined, (failure: unknown) => this.#listenerFailed(key, failure));
        } catch (failure) {
          this.#listenerFailed(key, failure);
        }
      }
    }
  }

  /** A `rejected` listener failed: to the `error` listeners, or thrown in a microtask if there are none. */
  #listenerFailed(key: string, failure: unknown): void {
    const listeners = this.#listeners.get('error');
    if (listeners === undefined || listeners.size === 0) {
      queueMicrotask(() => {
        throw failure;
      });
      return;
    }
    for (const listener of listeners) (listener as (key: string, error: unknown) => void)(key, failure);
  }

  /** A call's plan lookup settled: it no longer counts against the bound. */
  #looked(key: string, arriving: Promise<unknown>): void {
    this.#resolving.delete(arriving);
    const waiting = this.#resolvingByKey.get(key);
    if (waiting !== undefined && --waiting.count === 0) this.#resolvingByKey.delete(key);
  }

  /** A function whose every call is a job of `key` (see {@link Scheduler.wrap}). */
  wrap<A extends unknown[], R, T = unknown>(
    key: string,
    fn: (this: T, ...args: A) => R | PromiseLike<R>,
    options: WrapOptions<A> = {},
  ): (this: T, ...args: A) => Promise<R> {
    return wrapCalls((job, jobOptions) => this.schedule(key, job, jobOptions), fn, options);
  }

  /** Gives the job to `key`'s Scheduler: the one kept (its limits brought up to date), or a new one. */
  #enqueue<R>(
    key: string,
    params: BucketParams | undefined,
    fn: JobFunction<R>,
    options: ScheduleOptions | undefined,
  ): Promise<R> {
    let state = this.#table.use(key);
    if (state === undefined) {
      state = this.#table.add(key, this.#clock.now(), () => this.#make(key, params));
      if (state === undefined)
        return this.#refuse(key, 'tooManyKeys', new TooManyKeysError(this.#maxKeys, key), options);
    } else if (params !== state.params && params !== undefined) {
      // A new plan: the key keeps its tokens, capped at the new burst (the Scheduler's setRate and setBurst).
      const scheduler = state.scheduler;
      if (params.ratePerSecond !== scheduler.rate) scheduler.setRate(params.ratePerSecond);
      if (params.burst !== scheduler.burst) scheduler.setBurst(params.burst);
      state.params = params;
    }
    state.seenIdleAtMs = Number.NaN; // used: idle again only once the table sees it so
    return state.scheduler.schedule(fn, options);
  }

  #make(key: string, params: BucketParams | undefined): KeyState {
    const scheduler = new Scheduler(this.#optionsFor(params, true));
    const state = new KeyState(scheduler, params);
    for (const event of this.#listeners.keys()) this.#forward(key, scheduler, event);
    return state;
  }

  /** A key's Scheduler options: the shared ones, its rate and burst, and (if `member`) its turns at `global`. */
  #optionsFor(params: BucketParams | undefined, member: boolean): MemberOptions {
    const options: MemberOptions =
      params === undefined ? { ...this.#shared } : { ...this.#shared, rate: params.ratePerSecond, burst: params.burst };
    if (!member) return { ...options, [TURNS]: undefined };
    return options;
  }

  #retire(state: KeyState): void {
    addCounters(this.#retired, state.scheduler.counters);
  }

  // ---------------------------------------------------------------- control

  /**
   * Closes every key's Scheduler (see {@link Scheduler.close}): `schedule` then rejects with
   * `ClosedError`; waiting jobs still run, or with `{ drain: false }` are rejected. A job whose key's
   * plan was still being looked up (an async `plan` or `limits`) is rejected with `ClosedError` at once,
   * its plan not waited for.
   * Resolves when every key is idle.
   */
  async close(options?: { drain?: boolean }): Promise<void> {
    this.#closed = true;
    // Not waited for: a plan that never comes would hold close() forever.
    for (const abandon of [...this.#resolving.values()]) {
      abandon(new ClosedError("the keyed scheduler was closed while the key's plan was looked up"));
    }
    await Promise.all([...this.#table.values()].map((state) => state.scheduler.close(options)));
    this.#turns?.close(); // keys whose jobs were rejected may still hold a place in the ring
  }

  /** `await using tenants = new KeyedScheduler(...)`: {@link close} at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  // ---------------------------------------------------------------- promises and events

  /** Resolves when no key has a job waiting or running. */
  async onIdle(): Promise<void> {
    for (;;) {
      const busy: Promise<unknown>[] = [...this.#resolving.keys()];
      for (const state of this.#table.values()) {
        const scheduler = state.scheduler;
        if (scheduler.size !== 0 || scheduler.pending !== 0) busy.push(scheduler.onIdle());
      }
      if (busy.length === 0) return;
      await Promise.allSettled(busy);
    }
  }

  /** Adds a listener for every key's `event`: it is called with the key, then the event's arguments. */
  on<E extends EventName>(event: E, listener: KeyedSchedulerListener<E>): this {
    checkListener(event, listener);
    let listeners = this.#listeners.get(event);
    if (listeners === undefined) {
      listeners = new Set();
      this.#listeners.set(event, listeners);
      for (const key of this.#table.keys()) this.#forward(key, (this.#table.peek(key) as KeyState).scheduler, event);
    }
    listeners.add(listener as KeyedSchedulerListener<EventName>);
    return this;
  }

  /** Adds a listener for every key's `event` that runs once, for whichever key emits it first. */
  once<E extends EventName>(event: E, listener: KeyedSchedulerListener<E>): this {
    checkListener(event, listener);
    const once: KeyedSchedulerListener<E> = (key, ...args) => {
      this.off(event, once);
      listener(key, ...args);
    };
    return this.on(event, once);
  }

  /** Removes a listener added with {@link on} (one added with {@link once} removes itself when it runs). */
  off<E extends EventName>(event: E, listener: KeyedSchedulerListener<E>): this {
    checkListener(event, listener);
    this.#listeners.get(event)?.delete(listener as KeyedSchedulerListener<EventName>);
    return this;
  }

  /** Makes `scheduler` (of `key`) pass its `event` to the keyed listeners. */
  #forward(key: string, scheduler: Scheduler, event: EventName): void {
    scheduler.on(event, (...args: unknown[]) => {
      const listeners = this.#listeners.get(event);
      if (listeners === undefined) return;
      for (const listener of listeners) (listener as (key: string, ...rest: unknown[]) => void)(key, ...args);
    });
  }
}

/** Adds the counts of `from` to `into`. */
function addCounters(into: SchedulerCounters, from: SchedulerCounters): void {
  into.admitted += from.admitted;
  into.started += from.started;
  into.completed += from.completed;
  into.failed += from.failed;
  into.timedOut += from.timedOut;
  into.waitedMs += from.waitedMs;
  for (const reason of Object.keys(from.rejected) as (keyof SchedulerCounters['rejected'])[]) {
    into.rejected[reason] += from.rejected[reason];
  }
}
