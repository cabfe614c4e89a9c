/**
 * The fleet store contract: where the shared state of a fleet's scheduler
 * lives, and the in-process implementation of it.
 *
 * A fleet key holds three things that change together, in ONE atomic step
 * per call (see ./script.ts for the Redis side, which this file mirrors):
 *
 * - a token bucket (`src/meters/bucket.ts`): a job's start is reserved in it,
 *   into debt if need be, provided the wait is at most the job's `maxWaitMs`;
 *   the answer is the delay, so N workers start jobs at the shared rate,
 *   evenly, not in bursts of N;
 * - a weighted concurrency budget: a job of cost c holds c units as a lease
 *   that expires `leaseMs` after its start unless renewed; expired leases are
 *   purged at every call, so a crashed worker's units come back by themselves;
 * - the parameters (rate, burst, concurrency), stored with the state, so a
 *   change made by one worker applies to every worker.
 *
 * An acquire either does both (charges the bucket and takes the lease) or
 * neither. A worker talks to the store in exchanges (`exchange`): one call
 * drops the leases of jobs that ended and then tries several queued jobs in
 * order, so a job costs one call shared with its neighbours, not two of its
 * own. In an exchange only the first job granted may wait for the bucket;
 * the others are granted only if they can start now (`later` otherwise), so
 * a worker never books the bucket's future for more than one job per call.
 * Every step is idempotent per lease id (a replayed grant is answered from the
 * lease, a renewal adds only a missing lease, a release or cancel of a lease
 * not held does nothing), so a lease id is counted once. A reservation given up before its job starts is cancelled with
 * `cancel`, which refunds by the meter's cancel rule (`refund` in bucket.ts,
 * Go's `CancelAt`) and drops the lease.
 */

import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, checkOptions } from '../errors.js';
import {
  type BucketParams,
  type BucketState,
  charge,
  clampToCapacity,
  delayUntil,
  rebill,
  reconfigure,
  refund,
  rewind,
  slackFor,
  tokensAt,
} from '../meters/bucket.js';

/** A fleet's limits. `Infinity` means no limit of that kind. */
export interface FleetParams {
  /** Tokens per second (Infinity: no rate limit). */
  ratePerSecond: number;
  /** The burst: the bucket's capacity (ignored without a rate). */
  burst: number;
  /** The weighted concurrency budget (Infinity: none). */
  concurrency: number;
}

/** One acquire: reserve a start and take a lease, or change nothing. */
export interface AcquireOp {
  key: string;
  /** Tokens the start takes from the bucket. */
  cost: number;
  /** Units of the concurrency its lease holds. @default cost */
  weight?: number;
  /** The longest acceptable wait for the bucket, ms (Infinity = any). */
  maxWaitMs: number;
  /** A fleet-unique id for the lease. */
  leaseId: string;
  leaseMs: number;
  /** A refusal for lack of units leaves a claim that lapses unless asked again within this, ms. */
  claimTtlMs: number;
  /** The parameters to start with if the key has none yet (the stored ones win). */
  params: FleetParams;
}

/** Why an acquire did nothing. */
export type AcquireStatus = 'ok' | 'waitTooLong' | 'busy' | 'tooLarge';

/** One job of an exchange. */
export interface ExchangeAcquire {
  /** Tokens the start takes from the bucket. */
  cost: number;
  /** Units of the concurrency its lease holds. @default cost */
  weight?: number;
  /** The longest acceptable wait for the bucket, ms (Infinity = any). */
  maxWaitMs: number;
  /** A fleet-unique id for the lease (and the job's claim while it waits for units). */
  leaseId: string;
}

/** One call of a worker: give back leases, then try jobs in order. */
export interface ExchangeOp {
  key: string;
  /** Leases of jobs that ended: dropped first, so their units serve the jobs below. */
  release: readonly HeldLease[];
  /**
   * Jobs in queue order. Each is tried in turn: `tooLarge` and `waitTooLong` go on to the next;
   * `busy` (the budget is full; its claim is recorded) stops, and the rest are `later`; the first
   * job granted may wait for the bucket (its delay is the answer), any other is granted only if it
   * can start now, and the exchange stops at the first that cannot (`later`) or after a grant with
   * a delay.
   */
  acquire: readonly ExchangeAcquire[];
  leaseMs: number;
  /** A refusal for lack of units leaves a claim that lapses unless asked again within this, ms. */
  claimTtlMs: number;
  /** The parameters to start with if the key has none yet (the stored ones win). */
  params: FleetParams;
}

/** One job's answer in an exchange: `later` means it was not tried. */
export interface ExchangeGrant {
  status: AcquireStatus | 'later';
  /** `ok`: wait this long before starting; `waitTooLong`: the wait that was refused. */
  delayMs: number;
  /** `ok`: when the bucket holds the cost, in the store's ms (for `cancel`). */
  readyAtMs: number;
}

/** The answer to an exchange: the key after it, and one grant per job asked. */
export interface ExchangeResult extends FleetSnapshot {
  grants: ExchangeGrant[];
}

/** Who answered: the store, or the failure policy of a store that could not reach its backend. */
export type FleetSource = 'store' | 'allow' | 'deny' | 'local';

/** What a fleet key looks like after a call. */
export interface FleetSnapshot {
  /** The store's time of the call, ms. */
  nowMs: number;
  /** The bucket's tokens now (negative while reservations are outstanding). */
  tokens: number;
  /** The weight the live leases hold. */
  inFlight: number;
  /** The fleet's parameters, as stored. */
  params: FleetParams;
  /** Ms until the earliest lease expires (Infinity when none is held). */
  nextExpiryMs: number;
  source: FleetSource;
}

/** The answer to an acquire. */
export interface AcquireResult extends FleetSnapshot {
  status: AcquireStatus;
  /** `ok`: wait this long before starting; `waitTooLong`: the wait that was refused. */
  delayMs: number;
  /** `ok`: when the bucket holds the cost, in the store's ms (for `cancel`). */
  readyAtMs: number;
}

/** A lease a worker holds, as it gives it back. */
export interface HeldLease {
  leaseId: string;
  /** The tokens its start took (what a cancel may give back). */
  cost: number;
  /** The units of the concurrency it holds. @default cost */
  weight?: number;
  /** Who granted it: a lease granted by a failure policy goes back there. */
  source: FleetSource;
}

/** The store side of a fleet. `MemoryFleetStore` and `RedisFleetStore` implement it. */
export interface FleetStore {
  /** Drops `op.release`, then tries `op.acquire` in order (see {@link ExchangeOp}): one atomic step. */
  exchange(op: ExchangeOp): Promise<ExchangeResult>;
  /** One job alone: an exchange of one, with nothing to release. */
  acquire(op: AcquireOp): Promise<AcquireResult>;
  /** Gives up a reservation whose job never started: refund by the cancel rule, drop the lease. */
  cancel(key: string, lease: HeldLease, readyAtMs: number): Promise<void>;
  /** Pushes the leases' expiry to now + leaseMs (adding back any the store lost). */
  renew(key: string, leases: readonly HeldLease[], leaseMs: number): Promise<void>;
  /** Drops the leases: their units are free again. */
  release(key: string, leases: readonly HeldLease[]): Promise<void>;
  /**
   * A running job's charge changes by `deltaCost` tokens (a job's `ctx.adjust`): taken now, into
   * debt, when positive; given back now, never above the burst, when negative. Nothing without a rate.
   */
  adjust(key: string, deltaCost: number, defaults: FleetParams): Promise<FleetSnapshot>;
  /** Changes the fleet's parameters (`undefined` fields unchanged); `defaults` if the key is new. */
  configure(key: string, change: Partial<FleetParams>, defaults: FleetParams): Promise<FleetSnapshot>;
  /** Reads the key (purging expired leases). */
  inspect(key: string, defaults: FleetParams): Promise<FleetSnapshot>;
}

interface KeyState {
  params: FleetParams;
  bucket: BucketState;
  /** Lease id -> [weight, expiry ms]. */
  leases: Map<string, [number, number]>;
  inFlight: number;
  /** Claim id -> [cost, last asked ms], in order of first refusal. */
  claims: Map<string, [number, number]>;
}

/**
 * A fleet store in this process's memory: the same contract as the Redis one,
 * for one process (tests, a single worker, and the `'local'`/`'allow'`
 * fallbacks of `RedisFleetStore`). Time is the clock's.
 */
export class MemoryFleetStore implements FleetStore {
  readonly #clock: Clock;
  readonly #keys = new Map<string, KeyState>();

  constructor(options: { clock?: Clock } = {}) {
    checkOptions(options, 'MemoryFleetStore options ({ clock })', false);
    checkKnownOptions(options, new Set(['clock']), 'MemoryFleetStore options');
    this.#clock = checkClock(options.clock);
  }

  /** Forgets a key (its parameters too). */
  delete(key: string): void {
    this.#keys.delete(key);
  }

  exchange(op: ExchangeOp): Promise<ExchangeResult> {
    return Promise.resolve(this.exchangeNow(op));
  }

  /** {@link exchange}, synchronously. */
  exchangeNow(op: ExchangeOp): ExchangeResult {
    const now = this.#clock.now();
    const state = this.#load(op.key, op.params, now);
    for (const lease of op.release) this.#drop(state, lease.leaseId);
    const { params } = state;
    const bucket = bucketOf(params);
    const limit = params.concurrency + slackFor(params.concurrency); // bucket.ts's tolerance, for a budget
    const grants: ExchangeGrant[] = [];
    let granted = 0;
    let stop = false;
    for (const a of op.acquire) {
      if (stop) {
        grants.push({ status: 'later', delayMs: 0, readyAtMs: now });
        continue;
      }
      const held = state.leases.get(a.leaseId);
      if (held !== undefined) {
        // A replay of a grant (its first answer was lost): answered from the lease, counted once.
        const readyAtMs = Math.max(now, held[1] - op.leaseMs);
        grants.push({ status: 'ok', delayMs: readyAtMs - now, readyAtMs });
        granted++;
        if (readyAtMs > now) stop = true;
        continue;
      }
      const units = a.weight ?? a.cost;
      if (units > params.concurrency || (bucket !== undefined && a.cost > params.burst)) {
        grants.push({ status: 'tooLarge', delayMs: 0, readyAtMs: now });
        continue;
      }
      if (state.inFlight + units + this.#ahead(state, a.leaseId, op.claimTtlMs, now) > limit) {
        const claim = state.claims.get(a.leaseId);
        if (claim === undefined) state.claims.set(a.leaseId, [units, now]);
        else {
          claim[0] = units; // the claim's job may have changed (see FleetAdmission's #passClaim), as in Lua
          claim[1] = now;
        }
        grants.push({ status: 'busy', delayMs: 0, readyAtMs: now });
        stop = true;
        continue;
      }
      const delayMs = bucket === undefined ? 0 : delayUntil(state.bucket, bucket, now, a.cost);
      if (delayMs > 0 && granted > 0) {
        grants.push({ status: 'later', delayMs: 0, readyAtMs: now });
        stop = true;
        continue;
      }
      if (delayMs > a.maxWaitMs) {
        grants.push({ status: 'waitTooLong', delayMs, readyAtMs: now });
        continue;
      }
      const readyAtMs = now + delayMs;
      if (bucket !== undefined) charge(state.bucket, bucket, now, a.cost);
      state.leases.set(a.leaseId, [units, readyAtMs + op.leaseMs]);
      state.inFlight += units;
      state.claims.delete(a.leaseId);
      grants.push({ status: 'ok', delayMs, readyAtMs });
      granted++;
      if (delayMs > 0) stop = true;
    }
    return { ...this.#snapshot(state, now), grants };
  }

  acquire(op: AcquireOp): Promise<AcquireResult> {
    return Promise.resolve(this.acquireNow(op));
  }

  /** {@link acquire}, synchronously. */
  acquireNow(op: AcquireOp): AcquireResult {
    const { grants, ...snapshot } = this.exchangeNow(exchangeOf(op));
    const grant = grants[0] as ExchangeGrant;
    return { ...snapshot, ...grant, status: grant.status === 'later' ? 'busy' : grant.status };
  }

  cancel(key: string, lease: HeldLease, readyAtMs: number): Promise<void> {
    const state = this.#keys.get(key);
    if (state !== undefined) {
      const now = this.#clock.now();
      this.#purge(state, now);
      const bucket = bucketOf(state.params);
      if (this.#drop(state, lease.leaseId) && bucket !== undefined) {
        refund(state.bucket, bucket, now, lease.cost, readyAtMs);
      }
    }
    return Promise.resolve();
  }

  renew(key: string, leases: readonly HeldLease[], leaseMs: number): Promise<void> {
    const state = this.#keys.get(key);
    if (state !== undefined) {
      const now = this.#clock.now();
      this.#purge(state, now);
      for (const lease of leases) {
        const held = state.leases.get(lease.leaseId);
        if (held === undefined) {
          state.leases.set(lease.leaseId, [lease.weight ?? lease.cost, now + leaseMs]);
          state.inFlight += lease.weight ?? lease.cost;
        } else {
          held[1] = now + leaseMs;
        }
      }
    }
    return Promise.resolve();
  }

  release(key: string, leases: readonly HeldLease[]): Promise<void> {
    const state = this.#keys.get(key);
    if (state !== undefined) {
      this.#purge(state, this.#clock.now());
      for (const lease of leases) this.#drop(state, lease.leaseId);
    }
    return Promise.resolve();
  }

  /** A key's live lease ids, oldest first (for tests and models). */
  leaseIds(key: string): string[] {
    const state = this.#keys.get(key);
    if (state === undefined) return [];
    this.#purge(state, this.#clock.now());
    return [...state.leases.keys()];
  }

  /**
   * Starts key `key` (if new) with `params` and the bucket `bucket` (tokens dated by this store's
   * clock), holding `leases` until now + leaseMs: the state a fallback takes over from Redis, so it
   * counts the jobs already running and the tokens already spent.
   */
  seed(key: string, params: FleetParams, bucket: BucketState, leases: readonly HeldLease[], leaseMs: number): void {
    if (this.#keys.has(key)) return;
    const now = this.#clock.now();
    const state = this.#load(key, params, now);
    const capped = bucketOf(params);
    if (capped !== undefined) {
      state.bucket = {
        tokens: Math.min(bucket.tokens, params.burst),
        updatedAtMs: Math.min(bucket.updatedAtMs, now),
      };
    }
    for (const lease of leases) {
      if (state.leases.has(lease.leaseId)) continue;
      state.leases.set(lease.leaseId, [lease.weight ?? lease.cost, now + leaseMs]);
      state.inFlight += lease.weight ?? lease.cost;
    }
  }

  adjust(key: string, deltaCost: number, defaults: FleetParams): Promise<FleetSnapshot> {
    const now = this.#clock.now();
    const state = this.#load(key, defaults, now);
    const bucket = bucketOf(state.params);
    if (bucket !== undefined) rebill(state.bucket, bucket, now, deltaCost);
    return Promise.resolve(this.#snapshot(state, now));
  }

  configure(key: string, change: Partial<FleetParams>, defaults: FleetParams): Promise<FleetSnapshot> {
    const now = this.#clock.now();
    const state = this.#load(key, defaults, now);
    const next = { ...state.params };
    if (change.ratePerSecond !== undefined) next.ratePerSecond = change.ratePerSecond;
    if (change.burst !== undefined) next.burst = change.burst;
    if (change.concurrency !== undefined) next.concurrency = change.concurrency;
    const before = bucketOf(state.params);
    if (before !== undefined) {
      reconfigure(state.bucket, before, now, next);
    } else {
      // A first rate: the bucket starts full (at the capacity it had), then takes the new one.
      if (bucketOf(next) !== undefined) state.bucket = { tokens: state.params.burst, updatedAtMs: now };
      clampToCapacity(state.bucket, next);
    }
    state.params = next;
    return Promise.resolve(this.#snapshot(state, now));
  }

  inspect(key: string, defaults: FleetParams): Promise<FleetSnapshot> {
    const now = this.#clock.now();
    return Promise.resolve(this.#snapshot(this.#load(key, defaults, now), now));
  }

  #load(key: string, defaults: FleetParams, now: number): KeyState {
    let state = this.#keys.get(key);
    if (state === undefined) {
      state = {
        params: { ...defaults },
        bucket: { tokens: defaults.burst, updatedAtMs: now },
        leases: new Map(),
        inFlight: 0,
        claims: new Map(),
      };
      this.#keys.set(key, state);
    }
    rewind(state.bucket, now); // a clock that went backwards: bucket.ts rewind, as the script
    this.#purge(state, now);
    return state;
  }

  /** The cost of the oldest live claim other than `op`'s (0 if none, or if it is `op`'s). */
  #ahead(state: KeyState, leaseId: string, claimTtlMs: number, now: number): number {
    if (state.params.concurrency === Number.POSITIVE_INFINITY) return 0;
    for (const [id, [cost, lastMs]] of state.claims) {
      if (lastMs >= now - claimTtlMs) return id === leaseId ? 0 : cost;
      state.claims.delete(id);
    }
    return 0;
  }

  #purge(state: KeyState, now: number): void {
    for (const [id, [, expiry]] of state.leases) if (expiry <= now) this.#drop(state, id);
  }

  /** Drops a lease; false if it was not held (a replay). */
  #drop(state: KeyState, leaseId: string): boolean {
    const held = state.leases.get(leaseId);
    if (held === undefined) return false;
    state.leases.delete(leaseId);
    state.inFlight = state.leases.size === 0 ? 0 : state.inFlight - held[0];
    return true;
  }

  #snapshot(state: KeyState, now: number): FleetSnapshot {
    const bucket = bucketOf(state.params);
    let nextExpiry = Number.POSITIVE_INFINITY;
    for (const [, expiry] of state.leases.values()) if (expiry < nextExpiry) nextExpiry = expiry;
    return {
      nowMs: now,
      tokens: bucket === undefined ? Number.POSITIVE_INFINITY : tokensAt(state.bucket, bucket, now),
      inFlight: state.inFlight,
      params: { ...state.params },
      nextExpiryMs: nextExpiry - now,
      source: 'store',
    };
  }
}

/** The bucket's parameters, or undefined without a rate limit. */
export function bucketOf(params: FleetParams): BucketParams | undefined {
  return params.ratePerSecond < Number.POSITIVE_INFINITY
    ? { ratePerSecond: params.ratePerSecond, burst: params.burst }
    : undefined;
}

/** An acquire as an exchange of one job. */
export function exchangeOf(op: AcquireOp): ExchangeOp {
  return {
    key: op.key,
    release: [],
    acquire: [{ cost: op.cost, weight: op.weight, maxWaitMs: op.maxWaitMs, leaseId: op.leaseId }],
    leaseMs: op.leaseMs,
    claimTtlMs: op.claimTtlMs,
    params: op.params,
  };
}
