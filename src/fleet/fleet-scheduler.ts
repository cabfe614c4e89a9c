/**
 * The fleet form of the Scheduler: `new Scheduler({ store, key, ... })`.
 *
 * Every scheduler that uses the same `store` and `key` shares ONE rate bucket
 * and ONE weighted concurrency budget (see ./store.ts), in every process; each
 * keeps its own bounded local queue, priorities, signals, timeouts and events.
 * It is a subclass of Scheduler that the Scheduler's constructor returns when
 * it is given a `store`: the options are checked once (by the Scheduler's
 * constructor), and the parts are the Scheduler's own (the wait queue, the
 * Runner that runs a job with its signal and timeout, the refusals, the
 * events); only the scheduling core differs, since the limits are decided by
 * the store and not here.
 *
 * How a job starts. Jobs wait in the local queue (a FIFO per priority). The
 * worker talks to the store in exchanges (`FleetStore.exchange`): one call
 * gives back the leases of the jobs that ended since the last call and asks
 * for up to BATCH queued jobs, head first. The store reserves each start in
 * the shared bucket and takes `cost` units of the budget as a lease, in one
 * atomic step; only the first job of a call may be granted a delay (into
 * debt, up to its remaining `maxWait`), the others only if they can start
 * now. The job starts when its delay has passed, on this worker's clock. The
 * reservation is made before the wait, so N workers take turns in the bucket:
 * starts come evenly at the shared rate, not in bursts of N.
 *
 * Calls in flight. While the limits do not bind (the last answer granted
 * every job asked, at once), a worker keeps up to CALLS exchanges in flight,
 * so its round trips overlap; as soon as an answer holds a delay, a refusal
 * or a job not tried, it goes back to one at a time. At most `reserveAhead`
 * jobs per worker hold a reservation with a delay (default 1), plus at most
 * one per call in flight, so a worker with a long backlog does not book the
 * bucket's future ahead of the others. Jobs of one worker start in queue
 * order, except that a job sent in a later call may start before one of an
 * earlier call in the moment the limits begin to bind.
 *
 * Bound on starts. Over any window of T ms the fleet starts at most
 * `burst + rate * (T + allowanceMs) / 1000`, where the allowance is how
 * unevenly the workers' timers fire relative to Redis's time: the spread of
 * one-way latency to Redis plus local timer lateness (a few ms on a loopback
 * host; tens of ms on a loaded one). The bucket itself is exact in Redis's
 * time; only the moments the workers act on it move. Timer lateness loses no
 * rate (a start is charged when it is reserved, in the store's time), so
 * `catchUp` has nothing to do here and is refused.
 *
 * When the budget is full the store answers `busy` and records the job's
 * claim; while the oldest claim is live, the store grants other jobs only
 * units that leave room for it (no starvation of large costs by small ones
 * from other workers). The worker asks again after `pollMs` (or when the
 * earliest lease expires, if sooner), and at once when one of its own jobs
 * ends. Redis has no cheap way to wake a waiter in another process, so a unit
 * freed by another worker is seen within `pollMs`.
 *
 * Leases. A job's lease is renewed every `leaseMs / 3` while it is reserved
 * or runs, and given back when its function settles (with `onTimeout:
 * 'release'`, the default, at its timeout already), in the worker's next
 * call. A worker that dies (kill -9) stops renewing: its units come back when
 * its leases expire, at most `leaseMs` later.
 *
 * maxWait is decided up front: a job whose predicted wait (the cost queued
 * ahead of it at its priority and above, plus its own, against the bucket's
 * tokens as the store last reported them) exceeds `maxWait` is rejected at
 * once; the store decides exactly for the first job of a call (a reservation
 * longer than its remaining `maxWait` charges nothing); a job still waiting at
 * its deadline (e.g. for concurrency) is rejected then. An aborted job leaves
 * the queue at once; one that held a reservation gives it back by the cancel
 * rule.
 *
 * Live limits. `setRate`, `setBurst`, `setConcurrency` keep the Scheduler's
 * synchronous signatures: the arguments are checked at once (a bad one
 * throws), and the change is sent to the store, where it applies to every
 * worker. The getters report the limits as the store last answered, so they
 * show a change after its round trip. A change that does not reach the store
 * (it is unavailable) is told by the `storeError` event; the fleet's limits
 * stay as they were.
 *
 * A job's `ctx.adjust(deltaCost)` changes its charge in the shared bucket by
 * the Scheduler's rule (more is taken now, into debt; less is given back now,
 * never above the burst), with one call to the store; it stays synchronous,
 * and a change that cannot reach the store is told by `storeError`. Not here:
 * the `catchUp` option, refused with `NotSupportedError`.
 *
 * Failure of the store: see RedisFleetStore (`onError`). The store's
 * `degraded` and `recovered` events are this scheduler's events too.
 */

import { type Clock, checkClock } from '../clock.js';
import {
  AbortError,
  ClosedError,
  checkOptions,
  checkSignal,
  describeValue,
  InvalidOptionError,
  JobTimeoutError,
  NotSupportedError,
  retryHintMs,
  WaitTooLongError,
} from '../errors.js';
import { burstParam, rateParam } from '../meters/bucket.js';
import { Emitter } from '../scheduler/events.js';
import {
  checkListener,
  copyCounters,
  type EventName,
  type JobFunction,
  parseConcurrency,
  parseOptionalDuration,
  parseTimeout,
  type ScheduleOptions,
  type SchedulerCounters,
  type SchedulerListener,
  type SchedulerOptions,
  zeroCounters,
} from '../scheduler/options.js';
import { WaitQueue } from '../scheduler/queue.js';
import { badPriority, costError, Refusals } from '../scheduler/refuse.js';
import { Charge, Job, type JobExtra, Runner } from '../scheduler/run.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import type { DurationInput, RateInput, SizeInput } from '../units.js';
import type { ExchangeResult, FleetParams, FleetStore, HeldLease } from './store.js';

/** Jobs asked for in one call. */
const BATCH = 64;
/** Calls in flight while the limits do not bind. */
const CALLS = 4;
const DEFAULT_LEASE_MS = 10_000;
let workerSeq = 0;

type State = 'queued' | 'reserved' | 'running' | 'done';

/** A waiting job of a fleet: the Scheduler's Job, and what the store gave it. */
class FleetJob extends Job {
  state: State = 'queued';
  /** In a call to the store now. */
  calling = false;
  /** Its lease id, and its claim's while it waits for units: one per job. */
  leaseId = '';
  lease: HeldLease | undefined = undefined;
  readyAtMs = 0;
  /** Its deadline while queued; its start while reserved. */
  timer: unknown = undefined;
  onAbort: (() => void) | undefined = undefined;
}

/** What a store that emits events looks like (RedisFleetStore). */
interface StoreEvents {
  on(event: string, listener: (info: never) => void): unknown;
  off(event: string, listener: (info: never) => void): unknown;
}

let fleetClass: (new (options: SchedulerOptions) => Scheduler) | undefined;

/**
 * The fleet form of `new Scheduler(options)` (the Scheduler's constructor returns it when it is
 * given a `store`). The class is made at the first call, from the Scheduler class it is given:
 * ../scheduler/scheduler.ts imports this module, so this one cannot import the Scheduler's value
 * back (a cycle).
 * @internal
 */
export function makeFleetScheduler(Base: typeof Scheduler, options: SchedulerOptions): Scheduler {
  fleetClass ??= defineFleetScheduler(Base);
  return new fleetClass(options);
}

function defineFleetScheduler(Base: typeof Scheduler) {
  /** A Scheduler whose limits a fleet of processes shares; see the file's opening comment. */
  class FleetScheduler extends Base {
    /** The fleet's name in the store. */
    readonly key: string;
    readonly leaseMs: number;
    readonly pollMs: number;
    readonly reserveAhead: number;
    readonly #store: FleetStore;
    readonly #clock: Clock;
    readonly #queue = new WaitQueue<Job>();
    readonly #events = new Emitter(this);
    readonly #counters: SchedulerCounters = zeroCounters();
    readonly #runner: Runner;
    readonly #refusals: Refusals;
    readonly #maxQueue: number;
    readonly #maxWaitMs: number;
    #timeoutMs: number;
    readonly #workerId = `${process.pid}-${Date.now().toString(36)}-${workerSeq++}`;
    #leaseSeq = 0;
    #params: FleetParams;
    /** The bucket's tokens at the last answer, and when (local clock). */
    #tokens: number;
    #tokensAtMs: number;
    #paused: boolean;
    #closed = false;
    /** Calls to the store in flight. */
    #calls = 0;
    /** The last answer granted every job asked, at once: several calls may be in flight. */
    #fast = false;
    /** The budget was full: ask again after the retry timer, or when a job of ours ends. */
    #blocked = false;
    #reserved = 0;
    /** Jobs holding a lease (reserved or running): renewed together. */
    readonly #leased = new Set<FleetJob>();
    /** Leases of jobs that ended, for the next call. */
    #releases: HeldLease[] = [];
    #pumpQueued = false;
    #retryTimer: unknown;
    #renewTimer: unknown;
    #emptyOwed = false;
    #idleOwed = false;
    readonly #storeListeners: [string, (info: never) => void][] = [];

    constructor(options: SchedulerOptions) {
      super(options); // checks every option the Scheduler has, and makes no timer
      const { store, key } = options;
      if (typeof store !== 'object' || store === null || typeof (store as FleetStore).exchange !== 'function') {
        throw new InvalidOptionError(
          'store',
          store,
          `Expected \`store\` to be a RedisFleetStore or a MemoryFleetStore, got ${describeValue(store)}`,
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
      const leaseMs = parseOptionalDuration(options.leaseMs, DEFAULT_LEASE_MS);
      if (!(leaseMs >= 30 && leaseMs < Number.POSITIVE_INFINITY)) {
        throw new InvalidOptionError(
          'leaseMs',
          options.leaseMs,
          `Expected \`leaseMs\` to be a finite duration >= 30 ms, got ${describeValue(options.leaseMs)}`,
        );
      }
      const pollMs = options.pollMs ?? 20;
      if (!(typeof pollMs === 'number' && pollMs >= 1 && pollMs < Number.POSITIVE_INFINITY)) {
        throw new InvalidOptionError(
          'pollMs',
          pollMs,
          `Expected \`pollMs\` to be a finite number >= 1, got ${describeValue(pollMs)}`,
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
      this.key = key;
      this.leaseMs = leaseMs;
      this.pollMs = pollMs;
      this.reserveAhead = reserveAhead;
      this.#store = store;
      this.#clock = checkClock(options.clock);
      // The limits as the Scheduler's constructor parsed them: the store's win once it answers.
      const ratePerSecond = super.rate;
      this.#params = {
        ratePerSecond,
        capacity: ratePerSecond < Number.POSITIVE_INFINITY ? super.burst : 1,
        concurrency: super.concurrency,
      };
      this.#tokens = this.#params.capacity;
      this.#maxQueue = super.maxQueue;
      this.#maxWaitMs = parseOptionalDuration(options.maxWait, Number.POSITIVE_INFINITY);
      this.#timeoutMs = super.timeout;
      this.#paused = super.isPaused;
      this.#runner = new Runner(this.#clock, this.#counters, this.#events, this.#finished);
      this.#runner.zeroCostHold = 0;
      this.#runner.releaseOnTimeout = options.onTimeout !== 'hold';
      this.#runner.contextFor = (signal, cost) => new Charge(signal, cost, this.#adjust);
      this.#refusals = new Refusals(this.#counters, this.#events, this.#maxQueue);
      this.#tokensAtMs = this.#clock.now();
      this.#listenToStore();
    }

    // ---------------------------------------------------------------- state

    /** Jobs waiting to start: queued here, or holding a reservation. */
    override get size(): number {
      return this.#queue.size + this.#reserved;
    }

    /** Jobs of this worker running now. */
    override get pending(): number {
      return this.#runner.pending;
    }

    /** The cost of this worker's jobs running now. */
    override get pendingCost(): number {
      return this.#runner.runningCost;
    }

    override get isPaused(): boolean {
      return this.#paused;
    }

    /** The fleet's concurrency budget as the store last reported it. Assigning it is {@link setConcurrency}. */
    override get concurrency(): number {
      return this.#params.concurrency;
    }

    override set concurrency(concurrency: number) {
      this.setConcurrency(concurrency);
    }

    override get timeout(): number {
      return this.#timeoutMs;
    }

    override set timeout(timeout: DurationInput | undefined) {
      this.#timeoutMs = parseTimeout(timeout);
    }

    /** True when jobs wait because the fleet's budget is full. */
    override get isSaturated(): boolean {
      return this.#queue.size !== 0 && this.#blocked;
    }

    /** The fleet's rate as the store last reported it (Infinity if none). */
    override get rate(): number {
      return this.#params.ratePerSecond;
    }

    /** The fleet's burst as the store last reported it (Infinity if there is no rate). */
    override get burst(): number {
      return this.#params.ratePerSecond < Number.POSITIVE_INFINITY ? this.#params.capacity : Number.POSITIVE_INFINITY;
    }

    override get maxQueue(): number {
      return this.#maxQueue;
    }

    /** Jobs of this worker waiting at exactly `priority` (queued or reserved). */
    override sizeBy(options: { priority: number }): number {
      const priority = checkOptions(options, 'sizeBy options ({ priority })', true)?.priority;
      if (typeof priority !== 'number' || Number.isNaN(priority)) {
        throw new InvalidOptionError(
          'priority',
          priority,
          `Expected \`priority\` to be a number, got ${describeValue(priority)}`,
        );
      }
      let reserved = 0;
      for (const job of this.#leased) if (job.state === 'reserved' && job.priority === priority) reserved++;
      return this.#queue.sizeAt(priority) + reserved;
    }

    override get counters(): SchedulerCounters {
      return copyCounters(this.#counters);
    }

    override get isClosed(): boolean {
      return this.#closed;
    }

    // ---------------------------------------------------------------- jobs

    override schedule<R>(fn: JobFunction<R>, options: ScheduleOptions = {}): Promise<R> {
      if (typeof fn !== 'function') {
        return Promise.reject(
          new InvalidOptionError('fn', fn, `Expected the job to be a function, got ${describeValue(fn)}`),
        );
      }
      if (typeof options !== 'object' || options === null) {
        return Promise.reject(
          new InvalidOptionError(
            'options',
            options,
            `Expected the job's options to be an object or undefined, got ${describeValue(options)}`,
          ),
        );
      }
      if (this.#closed) return Promise.reject(new ClosedError());
      const cost = options.cost ?? 1;
      const priority = options.priority ?? 0;
      let signal: AbortSignal | undefined;
      let timeoutMs = this.#timeoutMs;
      try {
        signal = checkSignal(options.signal);
        if (options.timeout !== undefined) timeoutMs = parseTimeout(options.timeout);
      } catch (error) {
        return Promise.reject(error);
      }
      const refusals = this.#refusals;
      const burst = this.burst;
      const concurrency = this.#params.concurrency;
      if (!(typeof cost === 'number' && cost >= 0 && cost <= Math.min(burst, concurrency))) {
        return refusals.refuseCost(cost, priority, burst, concurrency);
      }
      if (typeof priority !== 'number' || !Number.isFinite(priority)) {
        return badPriority(priority);
      }
      if (signal?.aborted) return refusals.refuse('aborted', signal.reason, cost, priority);
      const now = this.#clock.now();
      if (this.#queue.size >= this.#maxQueue) {
        return refusals.queueFull(cost, priority, (c) =>
          retryHintMs(Math.max(this.#predictMs(priority, c, now), this.#blocked ? this.pollMs : 0)),
        );
      }
      const predicted = this.#predictMs(priority, cost, now);
      if (predicted > this.#maxWaitMs) {
        const error = new WaitTooLongError(predicted, this.#maxWaitMs, retryHintMs(predicted - this.#maxWaitMs));
        return refusals.refuse('waitTooLong', error, cost, priority);
      }
      const extra: JobExtra | undefined =
        signal === undefined && timeoutMs === this.#timeoutMs ? undefined : { signal, watched: false, timeoutMs };
      const job = new FleetJob(fn as JobFunction<unknown>, cost, priority, now, extra);
      const promise = new Promise<R>((resolve, reject) => {
        job.resolve = resolve as (value: unknown) => void;
        job.reject = reject;
      });
      if (signal !== undefined) {
        job.onAbort = () => this.#abort(job, signal.reason);
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      if (this.#maxWaitMs < Number.POSITIVE_INFINITY) {
        job.timer = this.#clock.setTimeout(() => this.#expire(job), Math.ceil(this.#maxWaitMs));
      }
      this.#queue.push(job);
      this.#counters.admitted++;
      this.#emptyOwed = true;
      this.#idleOwed = true;
      if (this.#events.has('add')) this.#events.emit('add');
      this.#pump();
      return promise;
    }

    // ---------------------------------------------------------------- control

    /** Stops asking for queued jobs (jobs holding a reservation still start). */
    override pause(): void {
      this.#paused = true;
    }

    override resume(): void {
      if (!this.#paused) return;
      this.#paused = false;
      this.#pump();
    }

    /** Rejects every waiting job with `AbortError` and gives back their reservations. Running jobs go on. */
    override clear(): void {
      this.#dropWaiting(
        'cleared',
        () => new AbortError('the job was removed from the queue by Scheduler.clear() before it started'),
      );
    }

    override close(options?: { drain?: boolean }): Promise<void> {
      let drain: boolean;
      try {
        drain = checkOptions(options, 'close options ({ drain })', false)?.drain ?? true;
        if (typeof drain !== 'boolean') {
          throw new InvalidOptionError(
            'drain',
            drain,
            `Expected \`drain\` to be a boolean, got ${describeValue(drain)}`,
          );
        }
      } catch (error) {
        return Promise.reject(error);
      }
      this.#closed = true;
      if (!drain) {
        this.#dropWaiting(
          'cleared',
          () => new ClosedError('the scheduler was closed with { drain: false } before the job started'),
        );
      } else if (this.#paused) {
        this.resume(); // draining a paused scheduler would never end
      }
      return this.onIdle()
        .then(() => this.#settled())
        .then(() => {
          if (this.#retryTimer !== undefined) this.#clock.clearTimeout(this.#retryTimer);
          this.#retryTimer = undefined;
          for (const [event, listener] of this.#storeListeners)
            (this.#store as unknown as StoreEvents).off(event, listener);
          this.#storeListeners.length = 0;
        });
    }

    /** Changes the fleet's rate, for every worker (see "Live limits" in the file's opening comment). */
    override setRate(rate: RateInput): void {
      this.#configure({ ratePerSecond: rateParam(rate) });
    }

    /** Changes the fleet's burst, for every worker. */
    override setBurst(burst: SizeInput): void {
      const capacity = burstParam(burst);
      if (!(this.#params.ratePerSecond < Number.POSITIVE_INFINITY)) {
        throw new InvalidOptionError('burst', burst, '`setBurst` needs a rate: call `setRate` first');
      }
      this.#configure({ capacity });
    }

    /** Changes the fleet's concurrency budget, for every worker. */
    override setConcurrency(concurrency: number): void {
      this.#configure({
        concurrency: parseConcurrency(concurrency, this.#params.ratePerSecond < Number.POSITIVE_INFINITY),
      });
    }

    // ---------------------------------------------------------------- promises and events

    override onEmpty(): Promise<void> {
      if (this.size === 0) return Promise.resolve();
      return this.#events.when('empty');
    }

    override onIdle(): Promise<void> {
      if (this.#isIdle()) return Promise.resolve();
      return this.#events.when('idle');
    }

    override onPendingZero(): Promise<void> {
      if (this.#runner.pending === 0) return Promise.resolve();
      return this.#events.when('changed', () => this.#runner.pending === 0);
    }

    override onSizeLessThan(limit: number): Promise<void> {
      if (typeof limit !== 'number' || !(limit >= 0)) {
        return Promise.reject(
          new InvalidOptionError('limit', limit, `Expected \`limit\` to be a number >= 0, got ${describeValue(limit)}`),
        );
      }
      if (this.size < limit) return Promise.resolve();
      return this.#events.when('changed', () => this.size < limit);
    }

    override on<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
      checkListener(event, listener);
      this.#events.on(event, listener);
      return this;
    }

    override off<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
      checkListener(event, listener);
      this.#events.off(event, listener);
      return this;
    }

    override once<E extends EventName>(event: E, listener: SchedulerListener<E>): this {
      checkListener(event, listener);
      this.#events.once(event, listener);
      return this;
    }

    // ---------------------------------------------------------------- the core

    #isIdle(): boolean {
      return this.#queue.size === 0 && this.#reserved === 0 && this.#runner.pending === 0;
    }

    /** The predicted wait of a job of `cost` at `priority`, from the tokens the store last reported. */
    #predictMs(priority: number, cost: number, now: number): number {
      const { ratePerSecond, capacity } = this.#params;
      if (!(ratePerSecond < Number.POSITIVE_INFINITY)) return 0;
      const tokens = Math.min(capacity, this.#tokens + ((now - this.#tokensAtMs) * ratePerSecond) / 1000);
      const deficit = this.#queue.costAtOrAbove(priority) + cost - tokens;
      return deficit > 0 ? (deficit * 1000) / ratePerSecond : 0;
    }

    /** Sends what there is to send, once the current synchronous work is done (so it batches). */
    #pump(): void {
      if (this.#pumpQueued) return;
      this.#pumpQueued = true;
      queueMicrotask(this.#pumpNow);
    }

    readonly #pumpNow = (): void => {
      this.#pumpQueued = false;
      for (;;) {
        if (this.#calls >= (this.#fast ? CALLS : 1)) return;
        const batch: FleetJob[] = [];
        if (!this.#paused && !this.#blocked && this.#reserved < this.reserveAhead) {
          for (const job of this.#queue as Iterable<FleetJob>) {
            if (job.calling) continue;
            batch.push(job);
            if (batch.length === BATCH) break;
          }
        }
        if (batch.length === 0 && this.#releases.length === 0) return;
        this.#send(batch);
        if (batch.length === 0) return;
      }
    };

    #send(batch: FleetJob[]): void {
      const release = this.#releases;
      this.#releases = [];
      const now = this.#clock.now();
      const acquire = batch.map((job) => {
        job.calling = true;
        if (job.leaseId === '') job.leaseId = `${this.#workerId}:${this.#leaseSeq++}`;
        return {
          cost: job.cost,
          maxWaitMs: Math.max(0, job.enqueuedAtMs + this.#maxWaitMs - now),
          leaseId: job.leaseId,
        };
      });
      this.#calls++;
      this.#store
        .exchange({
          key: this.key,
          release,
          acquire,
          leaseMs: this.leaseMs,
          claimTtlMs: Math.max(100, 5 * this.pollMs),
          params: this.#params,
        })
        .then(
          (result) => this.#answered(batch, result),
          () => {
            // A store that rejects (RedisFleetStore answers by its policy instead): ask again later.
            this.#calls--;
            for (const job of batch) job.calling = false;
            this.#releases.push(...release);
            this.#fast = false;
            this.#blocked = true;
            this.#retryIn(this.pollMs);
            this.#notify();
          },
        );
    }

    #answered(batch: FleetJob[], result: ExchangeResult): void {
      this.#calls--;
      this.#adopt(result);
      let fast = true;
      for (let i = 0; i < batch.length; i++) {
        const job = batch[i] as FleetJob;
        const grant = result.grants[i] ?? { status: 'later', delayMs: 0, readyAtMs: 0 };
        job.calling = false;
        if (grant.status !== 'ok' || grant.delayMs > 0) fast = false;
        if (job.state !== 'queued') {
          // Aborted or expired while the store decided: give the reservation back.
          if (grant.status === 'ok') {
            const lease = { leaseId: job.leaseId, cost: job.cost, source: result.source };
            this.#store.cancel(this.key, lease, grant.readyAtMs).catch(() => {});
          }
          continue;
        }
        switch (grant.status) {
          case 'ok': {
            this.#queue.remove(job);
            if (job.timer !== undefined) this.#clock.clearTimeout(job.timer);
            job.timer = undefined;
            job.lease = { leaseId: job.leaseId, cost: job.cost, source: result.source };
            job.readyAtMs = grant.readyAtMs;
            this.#hold(job);
            if (grant.delayMs > 0) {
              job.state = 'reserved';
              this.#reserved++;
              job.timer = this.#clock.setTimeout(() => this.#startReserved(job), Math.ceil(grant.delayMs));
            } else {
              this.#start(job);
            }
            break;
          }
          case 'waitTooLong': {
            const waited = this.#clock.now() - job.enqueuedAtMs;
            const error = new WaitTooLongError(waited + grant.delayMs, this.#maxWaitMs, retryHintMs(grant.delayMs));
            this.#reject(job, 'waitTooLong', error);
            break;
          }
          case 'tooLarge':
            this.#reject(job, 'costExceedsCapacity', costError(job.cost, this.burst, this.#params.concurrency));
            break;
          case 'busy':
            this.#blocked = true;
            this.#retryIn(Math.min(this.pollMs, Math.max(1, result.nextExpiryMs)));
            break;
          case 'later':
            break;
        }
      }
      this.#fast = fast;
      this.#pump();
      this.#notify();
    }

    /** Takes the store's view of the limits and the bucket. */
    #adopt(snapshot: { params: FleetParams; tokens: number }): void {
      const before = this.#params;
      this.#params = snapshot.params;
      this.#tokens = snapshot.tokens;
      this.#tokensAtMs = this.#clock.now();
      if (before.capacity !== snapshot.params.capacity || before.concurrency !== snapshot.params.concurrency) {
        // Waiting jobs that can never start now are told at once.
        const max = Math.min(this.burst, snapshot.params.concurrency);
        for (const job of [...this.#queue] as FleetJob[]) {
          if (job.cost > max) this.#reject(job, 'costExceedsCapacity', costError(job.cost, this.burst, max));
        }
      }
    }

    #retryIn(ms: number): void {
      if (this.#retryTimer !== undefined) return;
      this.#retryTimer = this.#clock.setTimeout(() => {
        this.#retryTimer = undefined;
        this.#blocked = false;
        this.#pump();
      }, Math.ceil(ms));
    }

    #startReserved(job: FleetJob): void {
      job.timer = undefined;
      if (job.state !== 'reserved') return;
      this.#reserved--;
      this.#start(job);
      this.#pump();
      this.#notify();
    }

    /** Runs a job that holds its lease; the lease goes back when the job's function settles (or times out). */
    #start(job: FleetJob): void {
      job.state = 'running';
      const extra = job.extra;
      if (job.onAbort !== undefined) extra?.signal?.removeEventListener('abort', job.onAbort);
      const waitedMs = this.#clock.now() - job.enqueuedAtMs;
      let held = true;
      const free = (): void => {
        if (!held) return;
        held = false;
        this.#unhold(job);
        this.#releases.push(job.lease as HeldLease);
        this.#blocked = false; // units of ours are free: ask at once
        this.#pump();
      };
      const fn = job.fn;
      const tracked: JobFunction<unknown> = (context) => {
        let result: unknown;
        try {
          result = fn(context);
        } catch (error) {
          free();
          throw error;
        }
        if (isThenable(result)) result.then(free, free);
        else free();
        return result;
      };
      const timeoutMs = extra === undefined ? this.#timeoutMs : extra.timeoutMs;
      if (extra?.signal === undefined && timeoutMs === Number.POSITIVE_INFINITY) {
        const context = new Charge(undefined, job.cost, this.#adjust);
        job.resolve(this.#runner.invoke(tracked, context, job.cost, job.priority, waitedMs));
      } else {
        const { resolve, reject } = job;
        const releaseOnTimeout = this.#runner.releaseOnTimeout;
        this.#runner.invokeGuarded(
          tracked,
          job.cost,
          job.priority,
          extra?.signal,
          timeoutMs,
          waitedMs,
          resolve,
          (error) => {
            if (releaseOnTimeout && error instanceof JobTimeoutError) free();
            reject(error);
          },
        );
      }
    }

    /** After a job's function settled. */
    readonly #finished = (): void => {
      if (this.#events.has('next')) this.#events.emit('next');
      this.#notify();
    };

    /** A running job's `ctx.adjust(deltaCost)`: the Scheduler's rule, applied in the store. */
    readonly #adjust = (charge: Charge, deltaCost: number): void => {
      Charge.checkDelta(deltaCost);
      const params = this.#params;
      if (!(params.ratePerSecond < Number.POSITIVE_INFINITY) || deltaCost === 0) return;
      const delta = Charge.rebill(charge, deltaCost, params.capacity);
      if (delta === 0) return;
      this.#tokens -= delta; // until the store answers
      this.#store.adjust(this.key, delta, params).then(
        (snapshot) => {
          this.#adopt(snapshot);
          this.#pump();
        },
        (error: unknown) => {
          this.#events.emit('storeError', error instanceof Error ? error : new Error(String(error)));
        },
      );
    };

    #abort(job: FleetJob, reason: unknown): void {
      if (job.state === 'queued' || job.state === 'reserved') this.#reject(job, 'aborted', reason);
    }

    #expire(job: FleetJob): void {
      job.timer = undefined;
      if (job.state !== 'queued') return;
      const waited = this.#clock.now() - job.enqueuedAtMs;
      const why = this.#paused
        ? 'the scheduler was paused'
        : this.#blocked
          ? "the fleet's concurrency stayed taken"
          : "the fleet's limits";
      this.#reject(
        job,
        'waitTooLong',
        new WaitTooLongError(
          waited,
          this.#maxWaitMs,
          retryHintMs(this.pollMs),
          `waited ${Math.ceil(waited)} ms without starting, past maxWait of ${this.#maxWaitMs} ms (${why}); retry later, raise maxWait, or lower the load`,
        ),
      );
    }

    /** Rejects every job that has not started. */
    #dropWaiting(reason: 'cleared', error: () => Error): void {
      for (const job of [...this.#queue] as FleetJob[]) this.#reject(job, reason, error());
      for (const job of [...this.#leased]) if (job.state === 'reserved') this.#reject(job, reason, error());
    }

    /** Removes a job that has not started, from the queue or giving its reservation back, and rejects it. */
    #reject(
      job: FleetJob,
      reason: 'queueFull' | 'waitTooLong' | 'costExceedsCapacity' | 'aborted' | 'cleared',
      error: unknown,
    ): void {
      if (job.timer !== undefined) this.#clock.clearTimeout(job.timer);
      job.timer = undefined;
      if (job.onAbort !== undefined) job.extra?.signal?.removeEventListener('abort', job.onAbort);
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
      this.#refusals.rejectWaiting(job, reason, error);
      this.#pump();
      this.#notify();
    }

    /** Emits `changed`, and `empty` / `idle` when their moment has come. */
    #notify(): void {
      const events = this.#events;
      if (events.has('changed')) events.emit('changed');
      if (this.size !== 0) return;
      if (this.#emptyOwed) {
        this.#emptyOwed = false;
        events.emit('empty');
      }
      if (this.#runner.pending === 0 && this.#idleOwed) {
        this.#idleOwed = false;
        events.emit('idle');
      }
    }

    /** Resolves when no call is in flight and no lease waits to be given back. */
    #settled(): Promise<void> {
      if (this.#releases.length !== 0) this.#pump();
      const done = () => this.#calls === 0 && this.#releases.length === 0;
      if (done()) return Promise.resolve();
      return new Promise((resolve) => {
        const check = (): void => {
          if (!done()) return;
          this.#events.off('changed', check);
          resolve();
        };
        this.#events.on('changed', check);
      });
    }

    #configure(change: Partial<FleetParams>): void {
      this.#store.configure(this.key, change, this.#params).then(
        (snapshot) => {
          this.#adopt(snapshot);
          this.#blocked = false;
          this.#pump();
          this.#notify();
        },
        (error: unknown) => {
          this.#events.emit('storeError', error instanceof Error ? error : new Error(String(error)));
        },
      );
    }

    #listenToStore(): void {
      const store = this.#store as unknown as Partial<StoreEvents>;
      if (typeof store.on !== 'function' || typeof store.off !== 'function') return;
      const degraded = (info: never) => this.#events.emit('degraded', info);
      const recovered = (info: never) => {
        this.#events.emit('recovered', info);
        this.#blocked = false;
        this.#pump();
      };
      this.#storeListeners.push(['degraded', degraded], ['recovered', recovered]);
      store.on.call(this.#store, 'degraded', degraded);
      store.on.call(this.#store, 'recovered', recovered);
    }

    /** Keeps `job`'s lease renewed while it is held. */
    #hold(job: FleetJob): void {
      this.#leased.add(job);
      if (this.#renewTimer === undefined) this.#armRenewal();
    }

    #unhold(job: FleetJob): void {
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
  return FleetScheduler;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
