/**
 * FleetScheduler: the Scheduler's model, shared by a fleet of processes.
 *
 * Every worker that uses the same `store` and `key` shares ONE rate bucket
 * and ONE weighted concurrency budget (see ./store.ts); each keeps its own
 * bounded local queue, priorities, signals and events.
 *
 * How a job starts. Jobs wait in the local queue (src/scheduler/queue.ts's
 * WaitQueue: a FIFO per priority). The head asks the store, in one atomic
 * step, to reserve its start in the shared bucket (into debt up to its
 * remaining `maxWait`) and to take `cost` units of the budget as a lease. The
 * store answers the delay; the job starts when it has passed, on this
 * worker's clock. The reservation is made before the wait, so N workers take
 * turns in the bucket: starts come evenly at the shared rate, not in bursts of
 * N. At most `reserveAhead` jobs per worker hold a reservation without having
 * started (default 1), so a worker with a long backlog does not book the
 * bucket's future ahead of the others and a later high-priority job is not
 * stuck behind a long line of reservations.
 *
 * Bound on starts. Over any window of T ms the fleet starts at most
 * `burst + rate * (T + allowanceMs) / 1000`, where the allowance is how
 * unevenly the workers' timers fire relative to Redis's time: the spread of
 * one-way latency to Redis plus local timer lateness (about 1-3 ms on an idle
 * loopback host; tens of ms on a loaded one). The bucket itself is exact in
 * Redis's time; only the moments the workers act on it move.
 *
 * When the budget is full the store answers `busy` and records the job's
 * claim; while the oldest claim is live, the store grants other jobs only
 * units that leave room for it (no starvation of large costs by small ones
 * from other workers). The worker asks again
 * after `pollMs` (or when the earliest lease expires, if sooner), and at once
 * when one of its own jobs ends. Redis has no cheap way to wake a waiter in
 * another process, so a unit freed by another worker is seen within
 * `pollMs`.
 *
 * Leases. A running job's lease is renewed every `leaseMs / 3`, and released
 * when the job ends. A worker that dies (kill -9) stops renewing: its units
 * come back when its leases expire, at most `leaseMs` later.
 *
 * maxWait is decided up front: a job whose predicted wait (the cost queued
 * ahead of it at its priority and above, plus its own, against the bucket's
 * tokens as the store last reported them) exceeds `maxWait` is rejected at
 * once; the store decides exactly for the head (a reservation longer than its
 * remaining `maxWait` charges nothing); a job still waiting at its deadline
 * (e.g. for concurrency) is rejected then. An aborted job leaves the queue
 * at once; one that held a reservation gives it back by the cancel rule.
 *
 * Failure of the store: see RedisFleetStore (`onError`). The store's
 * `degraded` and `recovered` events are this scheduler's events too.
 */

import { type Clock, systemClock } from '../clock.js';
import {
  AbortError,
  CostExceedsCapacityError,
  InvalidOptionError,
  QueueFullError,
  WaitTooLongError,
} from '../errors.js';
import type { FailurePolicy } from '../keyed/redis-store.js';
import type {
  ActiveJob,
  JobContext,
  JobFunction,
  RejectedJob,
  RejectReason,
  SchedulerCounters,
} from '../scheduler/options.js';
import { type Level, type Waiter, WaitQueue } from '../scheduler/queue.js';
import {
  type DurationInput,
  parseDuration,
  parseRateOption,
  parseSizeOption,
  type RateInput,
  type SizeInput,
} from '../units.js';
import type { AcquireResult, FleetParams, FleetStore, HeldLease } from './store.js';

/** Options for {@link FleetScheduler}. At least one of `rate` and `concurrency` must be given. */
export interface FleetSchedulerOptions {
  /** Where the fleet's shared state lives: a `RedisFleetStore` (or `MemoryFleetStore` in one process). */
  store: FleetStore;
  /** The fleet's name in the store: workers with the same key share the limits. */
  key: string;
  /** The fleet's rate, shared by every worker. The stored value wins over this once the key exists. */
  rate?: RateInput;
  /** The shared bucket's capacity. @default 1 */
  burst?: SizeInput;
  /** The fleet's weighted concurrency budget. @default Infinity */
  concurrency?: number;
  /**
   * How long a lease lives without renewal: the longest a dead worker's units stay taken. Renewed
   * every `leaseMs / 3` while its job runs. Minimum 30 ms.
   * @default 10_000
   */
  leaseMs?: DurationInput;
  /** The most jobs waiting in this worker's queue. @default 1000 */
  maxQueue?: number;
  /** The longest a job may wait to start. @default Infinity */
  maxWait?: DurationInput;
  /** How often a worker asks again while the budget is full, ms. @default 20 */
  pollMs?: number;
  /** Jobs per worker holding a reservation without having started. @default 1 */
  reserveAhead?: number;
  /** @default true */
  autoStart?: boolean;
  /** @default systemClock */
  clock?: Clock;
}

/** Options for {@link FleetScheduler.schedule}. */
export interface FleetScheduleOptions {
  /** Tokens to start and units held while running. @default 1 */
  cost?: number;
  /** Higher first. @default 0 */
  priority?: number;
  signal?: AbortSignal;
}

/** The events of a FleetScheduler: the Scheduler's, plus the store's failure transitions. */
export interface FleetSchedulerEvents {
  add: [];
  active: [job: ActiveJob];
  completed: [result: unknown];
  error: [error: unknown];
  empty: [];
  idle: [];
  rejected: [job: RejectedJob];
  /** The store stopped answering: its `onError` policy decides. */
  degraded: [info: { error: Error; policy: FailurePolicy }];
  /** The store answers again. */
  recovered: [info: { downMs: number }];
}

type State = 'queued' | 'reserved' | 'running' | 'done';

interface Job extends Waiter<Job> {
  readonly fn: JobFunction<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  readonly signal: AbortSignal | undefined;
  state: State;
  lease: HeldLease | undefined;
  /** Its lease id, and its claim's while it waits for units: one per job. */
  leaseId: string | undefined;
  readyAtMs: number;
  timer: unknown;
  onAbort: (() => void) | undefined;
}

const DEFAULT_LEASE_MS = 10_000;
let workerSeq = 0;

/** A Scheduler whose limits a fleet of processes shares; see the file's opening comment. */
export class FleetScheduler {
  readonly key: string;
  readonly leaseMs: number;
  readonly maxQueue: number;
  readonly maxWaitMs: number;
  readonly pollMs: number;
  readonly reserveAhead: number;
  readonly #store: FleetStore;
  readonly #clock: Clock;
  readonly #queue = new WaitQueue<Job>();
  readonly #leased = new Set<Job>();
  readonly #listeners: { [E in keyof FleetSchedulerEvents]?: ((...args: FleetSchedulerEvents[E]) => void)[] } = {};
  readonly #workerId = `${process.pid}-${Date.now().toString(36)}-${workerSeq++}`;
  readonly #counters: SchedulerCounters = {
    admitted: 0,
    started: 0,
    completed: 0,
    failed: 0,
    timedOut: 0,
    rejected: { queueFull: 0, waitTooLong: 0, costExceedsCapacity: 0, aborted: 0, cleared: 0 },
    waitedMs: 0,
  };
  #params: FleetParams;
  /** The bucket's tokens at the last reply, and when (local clock). */
  #tokens: number;
  #tokensAtMs = 0;
  #leaseSeq = 0;
  #paused: boolean;
  #acquiring = false;
  #reserved = 0;
  #running = 0;
  #retryTimer: unknown;
  #renewTimer: unknown;

  constructor(options: FleetSchedulerOptions) {
    const { store, key } = options;
    if (typeof store !== 'object' || store === null || typeof store.acquire !== 'function') {
      throw new InvalidOptionError('store', store, 'Expected `store` to be a RedisFleetStore or a MemoryFleetStore');
    }
    if (typeof key !== 'string' || key.length === 0) {
      throw new InvalidOptionError('key', key, `Expected \`key\` to be a non-empty string, got ${String(key)}`);
    }
    const ratePerSecond = options.rate === undefined ? Number.POSITIVE_INFINITY : parseRateOption(options.rate, 'rate');
    const capacity = options.burst === undefined ? 1 : parseSizeOption(options.burst, 'burst');
    const concurrency = options.concurrency ?? Number.POSITIVE_INFINITY;
    if (!(concurrency > 0) || (concurrency === Number.POSITIVE_INFINITY && options.rate === undefined)) {
      throw new InvalidOptionError(
        'concurrency',
        concurrency,
        `Expected \`concurrency\` to be a number > 0${options.rate === undefined ? ' (or give a `rate`)' : ''}, got ${String(options.concurrency)}`,
      );
    }
    const leaseMs = options.leaseMs === undefined ? DEFAULT_LEASE_MS : parseDuration(options.leaseMs);
    if (!(leaseMs >= 30 && leaseMs < Number.POSITIVE_INFINITY)) {
      throw new InvalidOptionError(
        'leaseMs',
        options.leaseMs,
        `Expected \`leaseMs\` to be a finite duration >= 30 ms, got ${String(options.leaseMs)}`,
      );
    }
    const maxQueue = options.maxQueue ?? 1000;
    if (!(Number.isSafeInteger(maxQueue) && maxQueue >= 0)) {
      throw new InvalidOptionError(
        'maxQueue',
        maxQueue,
        `Expected \`maxQueue\` to be a finite integer >= 0, got ${String(maxQueue)}`,
      );
    }
    const pollMs = options.pollMs ?? 20;
    if (!(pollMs >= 1 && pollMs < Number.POSITIVE_INFINITY)) {
      throw new InvalidOptionError(
        'pollMs',
        pollMs,
        `Expected \`pollMs\` to be a finite number >= 1, got ${String(pollMs)}`,
      );
    }
    const reserveAhead = options.reserveAhead ?? 1;
    if (!(Number.isSafeInteger(reserveAhead) && reserveAhead >= 1)) {
      throw new InvalidOptionError(
        'reserveAhead',
        reserveAhead,
        `Expected \`reserveAhead\` to be an integer >= 1, got ${String(reserveAhead)}`,
      );
    }
    this.key = key;
    this.leaseMs = leaseMs;
    this.maxQueue = maxQueue;
    this.maxWaitMs = options.maxWait === undefined ? Number.POSITIVE_INFINITY : parseDuration(options.maxWait);
    this.pollMs = pollMs;
    this.reserveAhead = reserveAhead;
    this.#store = store;
    this.#clock = options.clock ?? systemClock;
    this.#params = { ratePerSecond, capacity, concurrency };
    this.#tokens = capacity;
    this.#paused = options.autoStart === false;
    const emitter = store as Partial<{ on(event: string, listener: (info: never) => void): unknown }>;
    if (typeof emitter.on === 'function') {
      emitter.on.call(store, 'degraded', (info: { error: Error; policy: FailurePolicy }) =>
        this.#emit('degraded', info),
      );
      emitter.on.call(store, 'recovered', (info: { downMs: number }) => {
        this.#emit('recovered', info);
        this.#pump();
      });
    }
  }

  /** Jobs waiting to start: queued here, or holding a reservation. */
  get size(): number {
    return this.#queue.size + this.#reserved;
  }

  /** Jobs of this worker running now. */
  get pending(): number {
    return this.#running;
  }

  get isPaused(): boolean {
    return this.#paused;
  }

  /** The fleet's rate as the store last reported it. */
  get rate(): number {
    return this.#params.ratePerSecond;
  }

  get burst(): number {
    return this.#params.capacity;
  }

  get concurrency(): number {
    return this.#params.concurrency;
  }

  get counters(): SchedulerCounters {
    return { ...this.#counters, rejected: { ...this.#counters.rejected } };
  }

  /** Runs `fn` when the fleet's limits allow; resolves or rejects with its result. */
  schedule<R>(fn: JobFunction<R>, options: FleetScheduleOptions = {}): Promise<R> {
    const cost = options.cost ?? 1;
    const priority = options.priority ?? 0;
    return new Promise<R>((resolve, reject) => {
      const now = this.#clock.now();
      const job: Job = {
        fn: fn as JobFunction<unknown>,
        resolve: resolve as (value: unknown) => void,
        reject,
        signal: options.signal,
        priority,
        cost,
        level: undefined as Level<Job> | undefined,
        enqueuedAtMs: now,
        prev: undefined,
        next: undefined,
        state: 'queued',
        lease: undefined,
        leaseId: undefined,
        readyAtMs: 0,
        timer: undefined,
        onAbort: undefined,
      };
      if (!(cost >= 0 && cost < Number.POSITIVE_INFINITY)) {
        this.#turnAway(
          job,
          'costExceedsCapacity',
          new CostExceedsCapacityError(cost, this.#params.concurrency, 'the limits'),
        );
        return;
      }
      const limit = Math.min(
        this.#params.concurrency,
        this.#params.ratePerSecond < Number.POSITIVE_INFINITY ? this.#params.capacity : Number.POSITIVE_INFINITY,
      );
      if (cost > limit) {
        const what = limit === this.#params.concurrency ? "the fleet's concurrency" : "the fleet's burst";
        this.#turnAway(job, 'costExceedsCapacity', new CostExceedsCapacityError(cost, limit, what));
        return;
      }
      if (options.signal?.aborted) {
        this.#turnAway(job, 'aborted', options.signal.reason);
        return;
      }
      if (this.#queue.size >= this.maxQueue) {
        this.#turnAway(job, 'queueFull', new QueueFullError(this.maxQueue, this.#predictMs(priority, 1, now)));
        return;
      }
      const predicted = this.#predictMs(priority, cost, now);
      if (predicted > this.maxWaitMs) {
        this.#turnAway(job, 'waitTooLong', new WaitTooLongError(predicted, this.maxWaitMs, predicted - this.maxWaitMs));
        return;
      }
      this.#counters.admitted++;
      this.#queue.push(job);
      if (options.signal !== undefined) {
        const signal = options.signal;
        job.onAbort = () => this.#abort(job, signal.reason);
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      if (this.maxWaitMs < Number.POSITIVE_INFINITY) {
        job.timer = this.#clock.setTimeout(() => this.#expire(job), Math.ceil(this.maxWaitMs));
      }
      this.#emit('add');
      this.#pump();
    });
  }

  /** Same as {@link schedule}. */
  add<R>(fn: JobFunction<R>, options?: FleetScheduleOptions): Promise<R> {
    return this.schedule(fn, options);
  }

  /** Stops starting queued jobs (jobs holding a reservation still start). */
  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#pump();
  }

  /** Changes the fleet's rate, for every worker. */
  async setRate(rate: RateInput): Promise<void> {
    await this.#configure({ ratePerSecond: parseRateOption(rate, 'rate') });
  }

  /** Changes the fleet's burst, for every worker. */
  async setBurst(burst: SizeInput): Promise<void> {
    await this.#configure({ capacity: parseSizeOption(burst, 'burst') });
  }

  /** Changes the fleet's concurrency budget, for every worker. */
  async setConcurrency(concurrency: number): Promise<void> {
    if (!(concurrency > 0)) {
      throw new InvalidOptionError(
        'concurrency',
        concurrency,
        `Expected \`concurrency\` to be a number > 0, got ${concurrency}`,
      );
    }
    await this.#configure({ concurrency });
  }

  /** Resolves when nothing waits and nothing runs in this worker. */
  onIdle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return this.#when('idle', () => this.#isIdle());
  }

  /** Resolves when this worker's queue is empty. */
  onEmpty(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return this.#when('empty', () => this.size === 0);
  }

  on<E extends keyof FleetSchedulerEvents>(event: E, listener: (...args: FleetSchedulerEvents[E]) => void): this {
    const lists = this.#listeners as Record<E, ((...args: FleetSchedulerEvents[E]) => void)[] | undefined>;
    lists[event] = [...(lists[event] ?? []), listener];
    return this;
  }

  off<E extends keyof FleetSchedulerEvents>(event: E, listener: (...args: FleetSchedulerEvents[E]) => void): this {
    const lists = this.#listeners as Record<E, ((...args: FleetSchedulerEvents[E]) => void)[] | undefined>;
    const rest = (lists[event] ?? []).filter((l) => l !== listener);
    lists[event] = rest.length > 0 ? rest : undefined;
    return this;
  }

  /** Rejects every queued job (with AbortError) and gives back their reservations. Running jobs go on. */
  clear(): void {
    for (const job of [...this.#queue]) this.#drop(job, 'cleared', new AbortError('the scheduler was cleared'));
    for (const job of [...this.#leased]) {
      if (job.state === 'reserved') this.#drop(job, 'cleared', new AbortError('the scheduler was cleared'));
    }
  }

  #when(event: keyof FleetSchedulerEvents, condition: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const listener = (): void => {
        if (!condition()) return;
        this.off(event, listener);
        resolve();
      };
      this.on(event, listener);
    });
  }

  #emit<E extends keyof FleetSchedulerEvents>(event: E, ...args: FleetSchedulerEvents[E]): void {
    const list = (this.#listeners as Record<E, ((...args: FleetSchedulerEvents[E]) => void)[] | undefined>)[event];
    if (list === undefined) return;
    for (const listener of list) {
      try {
        listener(...args);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  #isIdle(): boolean {
    return this.#queue.size === 0 && this.#reserved === 0 && this.#running === 0;
  }

  /** The predicted wait of a job of `cost` at `priority`, from the tokens the store last reported. */
  #predictMs(priority: number, cost: number, now: number): number {
    const { ratePerSecond, capacity } = this.#params;
    if (!(ratePerSecond < Number.POSITIVE_INFINITY)) return 0;
    const tokens = Math.min(capacity, this.#tokens + ((now - this.#tokensAtMs) * ratePerSecond) / 1000);
    const deficit = this.#queue.costAtOrAbove(priority) + cost - tokens;
    return deficit > 0 ? (deficit * 1000) / ratePerSecond : 0;
  }

  async #configure(change: Partial<FleetParams>): Promise<void> {
    const snapshot = await this.#store.configure(this.key, change, this.#params);
    this.#params = snapshot.params;
    this.#tokens = snapshot.tokens;
    this.#tokensAtMs = this.#clock.now();
    this.#pump();
  }

  #pump(): void {
    if (this.#paused || this.#acquiring || this.#reserved >= this.reserveAhead) return;
    const head = this.#queue.peek();
    if (head === undefined) return;
    if (this.#retryTimer !== undefined) {
      this.#clock.clearTimeout(this.#retryTimer);
      this.#retryTimer = undefined;
    }
    const now = this.#clock.now();
    this.#acquiring = true;
    if (head.leaseId === undefined) head.leaseId = `${this.#workerId}:${this.#leaseSeq++}`;
    const leaseId = head.leaseId;
    this.#store
      .acquire({
        key: this.key,
        cost: head.cost,
        maxWaitMs: Math.max(0, head.enqueuedAtMs + this.maxWaitMs - now),
        leaseId,
        leaseMs: this.leaseMs,
        claimTtlMs: Math.max(100, 5 * this.pollMs),
        params: this.#params,
      })
      .then(
        (result) => this.#acquired(head, leaseId, result),
        () => {
          // A store that rejects (not RedisFleetStore, which answers by its policy): ask again later.
          this.#acquiring = false;
          this.#retryIn(this.pollMs);
        },
      );
  }

  #acquired(job: Job, leaseId: string, result: AcquireResult): void {
    this.#acquiring = false;
    this.#params = result.params;
    this.#tokens = result.tokens;
    this.#tokensAtMs = this.#clock.now();
    const lease: HeldLease = { leaseId, cost: job.cost, source: result.source };
    if (job.state !== 'queued') {
      // Aborted or expired while the store decided: give the reservation back.
      if (result.status === 'ok') this.#store.cancel(this.key, lease, result.readyAtMs).catch(() => {});
      this.#pump();
      return;
    }
    switch (result.status) {
      case 'ok': {
        this.#queue.remove(job);
        if (this.#queue.size === 0) this.#emit('empty');
        job.state = 'reserved';
        job.lease = lease;
        job.readyAtMs = result.readyAtMs;
        this.#reserved++;
        this.#hold(job);
        if (job.timer !== undefined) this.#clock.clearTimeout(job.timer);
        job.timer = undefined;
        if (result.delayMs > 0) job.timer = this.#clock.setTimeout(() => this.#start(job), Math.ceil(result.delayMs));
        else this.#start(job);
        break;
      }
      case 'waitTooLong': {
        const waited = this.#clock.now() - job.enqueuedAtMs;
        this.#drop(job, 'waitTooLong', new WaitTooLongError(waited + result.delayMs, this.maxWaitMs, result.delayMs));
        break;
      }
      case 'tooLarge': {
        const p = result.params;
        const limit = Math.min(
          p.concurrency,
          p.ratePerSecond < Number.POSITIVE_INFINITY ? p.capacity : Number.POSITIVE_INFINITY,
        );
        this.#drop(job, 'costExceedsCapacity', new CostExceedsCapacityError(job.cost, limit, "the fleet's limits"));
        break;
      }
      case 'busy':
        this.#retryIn(Math.min(this.pollMs, Math.max(1, result.nextExpiryMs)));
        return;
    }
    this.#pump();
  }

  #retryIn(ms: number): void {
    if (this.#retryTimer !== undefined) return;
    this.#retryTimer = this.#clock.setTimeout(() => {
      this.#retryTimer = undefined;
      this.#pump();
    }, Math.ceil(ms));
  }

  #start(job: Job): void {
    job.timer = undefined;
    if (job.state !== 'reserved') return;
    job.state = 'running';
    this.#reserved--;
    this.#running++;
    if (job.onAbort !== undefined) job.signal?.removeEventListener('abort', job.onAbort);
    const waitedMs = this.#clock.now() - job.enqueuedAtMs;
    this.#counters.started++;
    this.#counters.waitedMs += waitedMs;
    this.#emit('active', { cost: job.cost, priority: job.priority, waitedMs });
    this.#pump();
    let result: unknown;
    try {
      const context: JobContext = { signal: job.signal, adjust: refuseAdjust };
      result = job.fn(context);
    } catch (error) {
      this.#finish(job, false, error);
      return;
    }
    Promise.resolve(result).then(
      (value) => this.#finish(job, true, value),
      (error: unknown) => this.#finish(job, false, error),
    );
  }

  #finish(job: Job, ok: boolean, value: unknown): void {
    job.state = 'done';
    this.#running--;
    this.#unhold(job);
    const lease = job.lease as HeldLease;
    this.#store.release(this.key, [lease]).then(
      () => this.#pump(),
      () => this.#pump(),
    );
    if (ok) {
      this.#counters.completed++;
      job.resolve(value);
      this.#emit('completed', value);
    } else {
      this.#counters.failed++;
      job.reject(value);
      this.#emit('error', value);
    }
    if (this.#isIdle()) this.#emit('idle');
  }

  #abort(job: Job, reason: unknown): void {
    if (job.state === 'queued' || job.state === 'reserved') this.#drop(job, 'aborted', reason);
  }

  #expire(job: Job): void {
    job.timer = undefined;
    if (job.state !== 'queued') return;
    const waited = this.#clock.now() - job.enqueuedAtMs;
    this.#drop(
      job,
      'waitTooLong',
      new WaitTooLongError(
        waited,
        this.maxWaitMs,
        this.pollMs,
        `waited ${Math.ceil(waited)} ms, more than maxWait of ${this.maxWaitMs} ms, for the fleet's limits; retry later or raise maxWait`,
      ),
    );
  }

  /** Removes a job that has not started: from the queue, or giving its reservation back. */
  #drop(job: Job, reason: RejectReason, error: unknown): void {
    if (job.timer !== undefined) this.#clock.clearTimeout(job.timer);
    job.timer = undefined;
    if (job.onAbort !== undefined) job.signal?.removeEventListener('abort', job.onAbort);
    if (job.state === 'queued') {
      this.#queue.remove(job);
    } else if (job.state === 'reserved') {
      this.#reserved--;
      this.#unhold(job);
      this.#store.cancel(this.key, job.lease as HeldLease, job.readyAtMs).then(
        () => this.#pump(),
        () => this.#pump(),
      );
    }
    job.state = 'done';
    this.#turnAway(job, reason, error);
    if (this.#queue.size === 0) this.#emit('empty');
    if (this.#isIdle()) this.#emit('idle');
    this.#pump();
  }

  #turnAway(job: Job, reason: RejectReason, error: unknown): void {
    this.#counters.rejected[reason]++;
    job.reject(error);
    this.#emit('rejected', { reason, error, cost: job.cost, priority: job.priority });
  }

  /** Keeps `job`'s lease renewed while it is held. */
  #hold(job: Job): void {
    this.#leased.add(job);
    if (this.#renewTimer === undefined) this.#armRenewal();
  }

  #unhold(job: Job): void {
    this.#leased.delete(job);
    if (this.#leased.size === 0 && this.#renewTimer !== undefined) {
      this.#clock.clearTimeout(this.#renewTimer);
      this.#renewTimer = undefined;
    }
  }

  #armRenewal(): void {
    this.#renewTimer = this.#clock.setTimeout(() => {
      this.#renewTimer = undefined;
      if (this.#leased.size === 0) return;
      const leases = [...this.#leased].map((job) => job.lease as HeldLease);
      this.#store.renew(this.key, leases, this.leaseMs).catch(() => {});
      this.#armRenewal();
    }, this.leaseMs / 3);
  }
}

/**
 * A fleet job's `ctx.adjust`: not supported yet. The shared bucket is charged in the store when
 * the job is reserved; changing that charge afterwards would be one more script call per job.
 */
function refuseAdjust(deltaCost: number): void {
  throw new InvalidOptionError(
    'adjust',
    deltaCost,
    'FleetScheduler jobs cannot adjust their charge yet (the shared bucket is charged when the job is reserved): schedule each job with the cost you expect, or use a local Scheduler',
  );
}
