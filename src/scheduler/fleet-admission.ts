/**
 * The fleet admission: `new Scheduler({ store, key, ... })`. Every scheduler
 * on the same store and key shares ONE rate bucket and ONE weighted
 * concurrency budget, kept in the store (../fleet/store.ts), in every process;
 * each keeps its own queue, priorities, signals, deadlines, timeouts and events
 * (the Scheduler's). The worker talks to the store in exchanges: one call gives
 * back the leases of the jobs that ended and asks for up to {@link BATCH}
 * queued jobs, those on trial first (in arrival order), then the queue from
 * its head; the store reserves each start in the bucket and
 * takes its cost of the budget as a lease, in one atomic step, and may grant
 * the first job a delay (a reservation). A job starts when its delay has
 * passed; its lease is renewed while it runs and given back when it ends.
 * Invariants: at most `reserveAhead` jobs hold a reservation with a delay
 * (plus one per call in flight); a full budget leaves a claim in the store, so
 * small jobs of other workers cannot starve a large one, and the worker's claim
 * is always its head's: a job that overtakes the claimant (a higher priority)
 * takes the claim over, so no claim of its own holds the worker back. The reasoning (calls
 * in flight, the bound on starts, leases and claims) is in
 * docs/internals/scheduler.md.
 */

import { randomUUID } from 'node:crypto';
import { retryHintMs, WaitTooLongError } from '../errors.js';
import type { ExchangeResult, FleetParams, FleetStore, HeldLease } from '../fleet/store.js';
import { type BucketState, rebill } from '../meters/bucket.js';
import { Watchdog } from '../timer.js';
import { type Admission, type Host, heldUnits, type LimitsChange, waitForMs } from './admission.js';
import type { FleetSettings, SchedulerSettings } from './options.js';
import { costError, weightError } from './reject.js';
import type { Bill, Job } from './run.js';
import { noWindowOnFleet } from './window-limit.js';

/** Jobs asked for in one call. */
const BATCH = 64;
/** Calls in flight while the limits do not bind. */
const CALLS = 4;

/** What the fleet keeps for a job it asked the store about (in its `#tickets`, by job). */
interface Ticket {
  /** `done`: the job left without starting (the Scheduler dropped it), or its lease went back. */
  state: 'queued' | 'reserved' | 'running' | 'done';
  /** In a call to the store now. */
  calling: boolean;
  /**
   * Every call with its lease id was answered by the store itself (not lost, not a failure policy's
   * answer), so the store holds no lease under the id unless it granted one: the id may be swapped.
   */
  certain: boolean;
  /** Its lease id, and its claim's while it waits for units (swapped with the head's: see `#send`). */
  leaseId: string;
  lease: HeldLease | undefined;
  /** When the store's bucket holds its cost, in the store's ms (for `cancel`). */
  readyAtMs: number;
  /** Its start, while reserved. */
  timer: Watchdog | undefined;
}

/** What a store that emits events looks like (RedisFleetStore). */
interface StoreEvents {
  on(event: string, listener: (info: never) => void): unknown;
  off(event: string, listener: (info: never) => void): unknown;
}

/** Limits shared through a fleet store; see the file's opening comment. */
export class FleetAdmission implements Admission {
  readonly #host: Host;
  readonly #store: FleetStore;
  readonly #key: string;
  readonly #leaseMs: number;
  readonly #pollMs: number;
  readonly #reserveAhead: number;
  readonly #maxWaitMs: number;
  /** Unique among every worker of every process on the store: the prefix of this worker's lease ids. */
  readonly #workerId = randomUUID();
  #leaseSeq = 0;
  /** The fleet's limits as the store last reported them. */
  #params: FleetParams;
  /** The store's bucket as last reported, dated by the local clock (for predictions until the next answer). */
  #bucket: BucketState;
  /** Calls to the store in flight. */
  #calls = 0;
  /** The last answer granted every job asked, at once: several calls may be in flight. */
  #fast = false;
  /** The budget was full: ask again after the retry timer, or when a job of ours ends. */
  #blocked = false;
  /** The last call failed: send nothing until the retry timer. */
  #failed = false;
  /** Jobs holding a reservation with a delay. */
  #reserved = 0;
  /** The ticket whose lease id names this worker's claim in the store (its last answer was `busy`). */
  #claimant: Ticket | undefined;
  /** Jobs holding a lease (reserved or running): renewed together. */
  readonly #leased = new Set<Ticket>();
  /** The ticket of each job it asked the store about; weak, so a job that leaves takes its ticket with it. */
  readonly #tickets = new WeakMap<Job, Ticket>();
  /** Leases of jobs that ended, for the next call. */
  #releases: HeldLease[] = [];
  #pumpQueued = false;
  /** Asks again after the poll interval while the budget is full. */
  readonly #retry: Watchdog;
  /** Renews the leases held, every third of the lease. */
  readonly #renewal: Watchdog;
  readonly #storeListeners: [string, (info: never) => void][] = [];

  /** The limits in `settings` are the ones to start the key with if the store has none yet (the stored ones win). */
  constructor(host: Host, fleet: FleetSettings, settings: SchedulerSettings) {
    this.#host = host;
    this.#store = fleet.store;
    this.#key = fleet.key;
    this.#leaseMs = fleet.leaseMs;
    this.#pollMs = fleet.pollMs;
    this.#reserveAhead = fleet.reserveAhead;
    this.#maxWaitMs = settings.maxWaitMs;
    const ratePerSecond = settings.params?.ratePerSecond ?? Number.POSITIVE_INFINITY;
    const capacity = settings.params?.burst ?? 1;
    this.#params = { ratePerSecond, burst: capacity, concurrency: settings.concurrency };
    this.#bucket = { tokens: capacity, updatedAtMs: host.clock.now() };
    this.#retry = new Watchdog(host.clock, () => {
      this.#blocked = false;
      this.#failed = false;
      this.#pump();
    });
    this.#renewal = new Watchdog(host.clock, () => this.#renew());
    this.#listenToStore();
  }

  // ---------------------------------------------------------------- the limits, as the store last reported them

  get rate(): number {
    return this.#params.ratePerSecond;
  }

  get burst(): number {
    return this.#params.ratePerSecond < Number.POSITIVE_INFINITY ? this.#params.burst : Number.POSITIVE_INFINITY;
  }

  get concurrency(): number {
    return this.#params.concurrency;
  }

  get saturated(): boolean {
    return this.#blocked;
  }

  get wakeAtMs(): number {
    return Number.POSITIVE_INFINITY; // a reservation's start, a retry and a renewal have timers of their own
  }

  get pollMs(): number {
    return this.#pollMs;
  }

  whyWaiting(): string {
    return this.#blocked ? "the fleet's concurrency stayed taken" : "the fleet's limits";
  }

  predictWaitMs(now: number, cost: number, priority: number, withinMs: number): number {
    const params = this.#params;
    if (!(params.ratePerSecond < Number.POSITIVE_INFINITY)) return 0;
    return waitForMs(this.#bucket, params, now, this.#host.queue.costAtOrAbove(priority) + cost, withinMs);
  }

  retryAfterMs(cost: number, _weight: number, priority: number): number {
    const waitMs = this.predictWaitMs(this.#host.clock.now(), cost, priority, 0);
    return retryHintMs(Math.max(waitMs, this.#blocked ? this.#pollMs : 0));
  }

  // ---------------------------------------------------------------- the Scheduler's calls

  tryStart(): number {
    return -1; // the store decides, in a call of its own
  }

  /**
   * As far as the store last said: the bucket holds the cost of the jobs on trial and this one's,
   * and the jobs running here, those on trial and this one fit the concurrency. (Other workers'
   * use is known only from the answer: a job that must wait after all counts then.)
   */
  startsAtOnce(cost: number, weight: number, aheadCost: number, aheadWeight: number, now: number): boolean {
    if (this.#blocked || this.#failed) return false;
    const params = this.#params;
    if (this.#host.runner.runningCost + aheadWeight + heldUnits(weight, params.concurrency) > params.concurrency)
      return false;
    if (!(params.ratePerSecond < Number.POSITIVE_INFINITY)) return true;
    return waitForMs(this.#bucket, params, now, aheadCost + cost, 0) === 0;
  }

  drain(now: number): number {
    this.#pump();
    return now;
  }

  /**
   * A job in an exchange, or one about to be in one (on trial, or the head; never asked, and nothing
   * holds the asking back): the store applies what is left of its `maxWait` exactly (`waitTooLong`), and the answer
   * pumps.
   */
  deciding(job: Job): boolean {
    const ticket = this.#tickets.get(job);
    if (ticket !== undefined) return ticket.calling;
    if (this.#failed || this.#blocked || this.#reserved >= this.#reserveAhead) return false;
    return this.#host.trial.has(job) || (job === this.#host.queue.peek() && !this.#host.paused());
  }

  queued(): void {
    this.#pump();
  }

  resumed(): void {}

  finished(job: Job | undefined): void {
    const ticket = job === undefined ? undefined : this.#tickets.get(job);
    if (ticket?.lease !== undefined && ticket.state === 'running') {
      ticket.state = 'done';
      this.#unhold(ticket);
      this.#releases.push(ticket.lease);
      this.#blocked = false; // units of ours are free: ask at once
      this.#pump();
    }
    this.#host.notify();
  }

  dropped(job: Job): void {
    const ticket = this.#tickets.get(job);
    if (ticket === undefined) return;
    const { state } = ticket;
    ticket.state = 'done';
    if (state !== 'reserved') return;
    // Aborted, cleared or closed while holding a reservation: give it back by the cancel rule.
    ticket.timer?.disarm();
    this.#reserved--;
    this.#unhold(ticket);
    const pump = () => this.#pump();
    this.#store.cancel(this.#key, ticket.lease as HeldLease, ticket.readyAtMs).then(pump, pump);
  }

  /** `ctx.adjust`: the bill's rule, applied in the store (and to the bucket as last reported, until it answers). */
  adjust(bill: Bill, deltaCost: number): void {
    const params = this.#params;
    if (!(params.ratePerSecond < Number.POSITIVE_INFINITY) || deltaCost === 0) return;
    const delta = bill.amend(deltaCost, params.burst);
    if (delta === 0) return;
    rebill(this.#bucket, params, this.#host.clock.now(), delta);
    this.#store.adjust(this.#key, delta, params).then(
      (snapshot) => {
        this.#adopt(snapshot);
        this.#pump();
      },
      (error: unknown) => this.#storeError(error),
    );
  }

  /**
   * Sends the change to the store, where it applies to every worker; the getters show it once the
   * store answers. A change that does not reach the store is told by `storeError`.
   */
  configure(change: LimitsChange): void {
    if (change.window !== undefined) noWindowOnFleet(this, change.window); // refused, with the one message
    this.#store.configure(this.#key, change, this.#params).then(
      (snapshot) => {
        this.#adopt(snapshot);
        this.#blocked = false;
        this.#host.pump(this.#host.clock.now());
      },
      (error: unknown) => this.#storeError(error),
    );
  }

  close(): Promise<void> {
    return this.#settled().then(() => {
      this.#retry.disarm();
      for (const [event, listener] of this.#storeListeners)
        (this.#store as unknown as StoreEvents).off(event, listener);
      this.#storeListeners.length = 0;
    });
  }

  // ---------------------------------------------------------------- exchanges

  /** Sends what there is to send, once the current synchronous work is done (so it batches). */
  #pump(): void {
    if (this.#pumpQueued) return;
    this.#pumpQueued = true;
    queueMicrotask(this.#pumpNow);
  }

  readonly #pumpNow = (): void => {
    this.#pumpQueued = false;
    if (this.#failed) return;
    for (;;) {
      if (this.#calls >= (this.#fast ? CALLS : 1)) return;
      const batch: Job[] = [];
      if (!this.#blocked && this.#reserved < this.#reserveAhead) {
        // The jobs on trial first, in arrival order, even while paused: the local form would have started
        // them already, so no later job goes before one, and the asking holds none back.
        const trial = this.#host.trial;
        for (const job of trial) {
          if (batch.length === BATCH) break;
          if (!this.#tickets.get(job)?.calling) batch.push(job);
        }
        if (!this.#host.paused()) {
          for (const job of this.#host.queue) {
            if (batch.length === BATCH) break;
            if (!trial.has(job) && !this.#tickets.get(job)?.calling) batch.push(job);
          }
        }
      }
      if (batch.length === 0 && this.#releases.length === 0) return;
      this.#send(batch);
      if (batch.length === 0) return;
    }
  };

  #send(batch: Job[]): void {
    const release = this.#releases;
    this.#releases = [];
    const now = this.#host.clock.now();
    const tickets = batch.map((job) => {
      let ticket = this.#tickets.get(job);
      if (ticket === undefined) {
        const leaseId = `${this.#workerId}:${this.#leaseSeq++}`;
        ticket = {
          state: 'queued',
          calling: false,
          certain: true,
          leaseId,
          lease: undefined,
          readyAtMs: 0,
          timer: undefined,
        };
        this.#tickets.set(job, ticket);
      }
      return ticket;
    });
    this.#passClaim(tickets[0]);
    for (const ticket of tickets) ticket.calling = true;
    const acquire = batch.map((job, i) => ({
      cost: job.cost,
      weight: heldUnits(job.weight, this.#params.concurrency),
      maxWaitMs: Math.max(0, job.enqueuedAtMs + this.#maxWaitMs - now),
      leaseId: (tickets[i] as Ticket).leaseId,
    }));
    this.#calls++;
    this.#store
      .exchange({
        key: this.#key,
        release,
        acquire,
        leaseMs: this.#leaseMs,
        claimTtlMs: Math.max(100, 5 * this.#pollMs),
        params: this.#params,
      })
      .then(
        (result) => this.#answered(batch, tickets, result),
        () => {
          // A store that rejects (RedisFleetStore answers by its policy instead): ask again later.
          this.#calls--;
          for (const ticket of tickets) {
            ticket.calling = false;
            ticket.certain = false; // the store may have granted what the lost answer said
          }
          this.#releases.push(...release);
          this.#fast = false;
          this.#blocked = true;
          this.#failed = true;
          this.#retryIn(this.#pollMs);
          for (let i = 0; i < batch.length; i++) {
            if ((tickets[i] as Ticket).state === 'queued') this.#host.waits(batch[i] as Job);
          }
          this.#host.pump(this.#host.clock.now()); // the deadlines of the jobs asked run again
        },
      );
  }

  /**
   * The claim goes with the head: a job asked first whose ticket is not the claimant's (it overtook
   * the claimant, or the claimant left) takes the claimant's lease id, and the claimant its id. Neither
   * holds a lease and the store answered every call with either id itself (none was lost), so an id
   * names only the claim; the claim keeps its age, so the worker keeps its
   * place among the fleet's claims, and no claim of its own stands before its head until it lapses.
   */
  #passClaim(head: Ticket | undefined): void {
    const claimant = this.#claimant;
    if (head === undefined || claimant === undefined || claimant === head) return;
    if (claimant.calling || claimant.lease !== undefined || head.lease !== undefined) return;
    if (!claimant.certain || !head.certain) return; // an id the store may hold a lease under stays its job's
    const leaseId = claimant.leaseId;
    claimant.leaseId = head.leaseId;
    head.leaseId = leaseId;
    this.#claimant = head;
  }

  #answered(batch: Job[], tickets: Ticket[], result: ExchangeResult): void {
    this.#calls--;
    this.#adopt(result);
    const host = this.#host;
    let fast = true;
    for (let i = 0; i < batch.length; i++) {
      const job = batch[i] as Job;
      const ticket = tickets[i] as Ticket;
      const grant = result.grants[i] ?? { status: 'later', delayMs: 0, readyAtMs: 0 };
      ticket.calling = false;
      if (result.source !== 'store') ticket.certain = false; // a failure policy answered: a call may have been lost
      if (grant.status !== 'ok' || grant.delayMs > 0) fast = false;
      if (ticket.state === 'done') {
        // Aborted or expired while the store decided: give the reservation back.
        if (grant.status === 'ok') {
          const lease = {
            leaseId: ticket.leaseId,
            cost: job.cost,
            weight: heldUnits(job.weight, this.#params.concurrency),
            source: result.source,
          };
          this.#store.cancel(this.#key, lease, grant.readyAtMs).catch(() => {});
        }
        continue;
      }
      switch (grant.status) {
        case 'ok': {
          if (ticket === this.#claimant) this.#claimant = undefined; // the store dropped the claim
          ticket.lease = {
            leaseId: ticket.leaseId,
            cost: job.cost,
            weight: heldUnits(job.weight, this.#params.concurrency),
            source: result.source,
          };
          ticket.readyAtMs = grant.readyAtMs;
          this.#hold(ticket);
          if (grant.delayMs > 0) {
            ticket.state = 'reserved';
            this.#reserved++;
            ticket.timer = new Watchdog(host.clock, () => this.#startReserved(job, ticket));
            ticket.timer.arm(host.clock.now(), grant.delayMs);
            host.reserve(job); // may reject it (a job on trial that `close` left to this answer): `dropped`
          } else {
            ticket.state = 'running';
            host.start(job, host.clock.now(), heldUnits(job.weight, this.#params.concurrency));
          }
          break;
        }
        case 'waitTooLong': {
          const waitedMs = host.clock.now() - job.enqueuedAtMs;
          const error = new WaitTooLongError({
            waitMs: waitedMs + grant.delayMs,
            maxWaitMs: this.#maxWaitMs,
            retryAfterMs: retryHintMs(grant.delayMs),
          });
          host.reject(job, 'waitTooLong', error);
          break;
        }
        case 'tooLarge':
          host.reject(
            job,
            'costExceedsCapacity',
            job.cost > this.burst
              ? costError({ cost: job.cost, burst: this.burst })
              : weightError({ weight: job.weight, concurrency: this.#params.concurrency, cost: job.cost }),
          );
          break;
        case 'busy':
          this.#claimant = ticket;
          this.#blocked = true;
          this.#retryIn(Math.min(this.#pollMs, Math.max(1, result.nextExpiryMs)));
          host.waits(job);
          break;
        case 'later':
          host.waits(job);
          break;
      }
    }
    this.#fast = fast;
    // Leases of ours that ended while the store decided go back in the next call: their units may serve
    // the jobs it just turned away as busy, so ask again with them rather than wait for the retry.
    if (this.#releases.length !== 0) this.#blocked = false;
    host.pump(host.clock.now());
  }

  #startReserved(job: Job, ticket: Ticket): void {
    ticket.timer = undefined;
    if (ticket.state !== 'reserved') return;
    this.#reserved--;
    ticket.state = 'running';
    const host = this.#host;
    host.start(job, host.clock.now(), heldUnits(job.weight, this.#params.concurrency));
    host.pump(host.clock.now());
  }

  /** Takes the store's view of the limits and the bucket; waiting jobs that can never start now are rejected. */
  #adopt(snapshot: { params: FleetParams; tokens: number }): void {
    const before = this.#params;
    const after = snapshot.params;
    this.#params = after;
    this.#bucket = { tokens: snapshot.tokens, updatedAtMs: this.#host.clock.now() };
    if (
      before.ratePerSecond !== after.ratePerSecond ||
      before.burst !== after.burst ||
      before.concurrency !== after.concurrency
    ) {
      this.#host.limitsChanged(this.#host.clock.now());
    }
  }

  #retryIn(ms: number): void {
    if (!this.#retry.armed) this.#retry.arm(this.#host.clock.now(), ms);
  }

  /** Resolves when no call is in flight and no lease waits to be given back. */
  #settled(): Promise<void> {
    if (this.#releases.length !== 0) this.#pump();
    const done = () => this.#calls === 0 && this.#releases.length === 0;
    if (done()) return Promise.resolve();
    const events = this.#host.events;
    return new Promise((resolve) => {
      const check = (): void => {
        if (!done()) return;
        events.off('changed', check);
        resolve();
      };
      events.on('changed', check);
    });
  }

  #storeError(error: unknown): void {
    this.#host.events.emit('storeError', error instanceof Error ? error : new Error(String(error)));
  }

  /** The store's `degraded` and `recovered` events are this scheduler's too. */
  #listenToStore(): void {
    const store = this.#store as unknown as Partial<StoreEvents>;
    if (typeof store.on !== 'function' || typeof store.off !== 'function') return;
    const events = this.#host.events;
    const degraded = (info: never) => events.emit('degraded', info);
    const recovered = (info: never) => {
      events.emit('recovered', info);
      this.#blocked = false;
      this.#pump();
    };
    this.#storeListeners.push(['degraded', degraded], ['recovered', recovered]);
    store.on.call(this.#store, 'degraded', degraded);
    store.on.call(this.#store, 'recovered', recovered);
  }

  // ---------------------------------------------------------------- leases

  /** Keeps a ticket's lease renewed while it is held. */
  #hold(ticket: Ticket): void {
    this.#leased.add(ticket);
    if (!this.#renewal.armed) this.#renewal.arm(this.#host.clock.now(), this.#leaseMs / 3);
  }

  #unhold(ticket: Ticket): void {
    this.#leased.delete(ticket);
    if (this.#leased.size === 0) this.#renewal.disarm();
  }

  /** Pushes the expiry of every lease held to a lease from now, and renews again a third of a lease later. */
  #renew(): void {
    if (this.#leased.size === 0) return;
    const leases = [...this.#leased].map((ticket) => ticket.lease as HeldLease);
    this.#store.renew(this.#key, leases, this.#leaseMs).catch(() => {});
    this.#renewal.arm(this.#host.clock.now(), this.#leaseMs / 3);
  }
}
