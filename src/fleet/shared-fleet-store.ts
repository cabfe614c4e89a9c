/**
 * The part of a fleet store that every shared backend has in common: a
 * fleet's rate bucket and concurrency budget live in the backend, changed by
 * one call of the fleet script's protocol per operation (./script.ts: the
 * Lua for Redis; src/postgres/fleet-sql.ts, its PL/pgSQL port), and this
 * class keeps the rest once: the failure policy (src/stores/health.ts), the
 * fallback of `'allow'` and `'local'` (a MemoryFleetStore seeded with the last
 * state the backend gave), the leases this process holds, the releases the
 * backend missed, the resync after an outage, and the deadline a call carries
 * so that a late run grants nothing (idempotence, see ./script.ts).
 *
 * Failure policy. Each call is bounded by `timeout`. When the backend fails
 * or does not answer in time the store is degraded (event `degraded`),
 * answers every call by `onError` at once, and probes the backend every
 * `probeInterval` with the script's `g` on probe state beside the last fleet
 * key called, which writes as every call does; the first probe that succeeds
 * ends it (event `recovered`):
 *
 * - `'deny'`: acquires answer `busy`; jobs wait, and `maxWait` rejects them;
 * - `'allow'`: each worker runs on the fleet's limits on its own (an
 *   in-memory bucket and budget with the last parameters the backend gave);
 * - `'local'`: each worker runs on its share of them: rate, burst and
 *   concurrency divided by `expectedWorkers` (never below 1 where the whole
 *   is at least 1).
 *
 * Leases the backend granted before the failure expire there by themselves
 * unless renewed; a renewal after recovery adds back the ones it lost (a
 * restart without persistence), so the budget again counts what really
 * runs. Leases granted by the policy stay local and end with their jobs.
 */

import { EventEmitter } from 'node:events';
import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, InvalidOptionError, StoreUnavailableError } from '../errors.js';
import type { BucketState } from '../meters/bucket.js';
import {
  errorOf,
  type FailurePolicy,
  failureOptions,
  SHARED_STORE_OPTIONS,
  type StoreEvents,
  StoreHealth,
  type StoreHealthOptions,
} from '../stores/health.js';
import { type DurationInput, parseDuration } from '../units.js';
import {
  type AcquireOp,
  type AcquireResult,
  type ExchangeAcquire,
  type ExchangeGrant,
  type ExchangeOp,
  type ExchangeResult,
  exchangeOf,
  type FleetParams,
  type FleetSnapshot,
  type FleetStore,
  type HeldLease,
  MemoryFleetStore,
} from './store.js';

/** A job's status in the script's reply. */
const GRANT: readonly ExchangeGrant['status'][] = ['waitTooLong', 'ok', 'busy', 'tooLarge', 'later'];

/** How long an idle fleet key lives in the backend by default, ms: a day. */
const DEFAULT_IDLE_TTL_MS = 86_400_000;

/** How long a probe's state lives in the backend, ms. */
export const PROBE_TTL_MS = 10_000;

/** The names of the options every shared fleet store has; each adds its own. */
export const SHARED_FLEET_OPTIONS: readonly string[] = [...SHARED_STORE_OPTIONS, 'expectedWorkers', 'idleTtl'];

/** The options every shared fleet store has (see RedisFleetStoreOptions for each). */
export interface SharedFleetStoreOptions {
  client: unknown;
  prefix?: string;
  onError: FailurePolicy;
  expectedWorkers?: number;
  timeout?: DurationInput;
  probeInterval?: DurationInput;
  idleTtl?: DurationInput;
  clock?: Clock;
  now?: () => number;
}

/** What a backend gives the shared fleet store: its name, its options, and its eviction check. */
export interface FleetBackend {
  /** `'Redis'`, `'PostgreSQL'`: in messages. */
  name: string;
  /** The store's class name, for option messages. */
  storeName: string;
  client: { example: string; what: string };
  knownOptions: ReadonlySet<string>;
  /** Why `prefix` is refused, or undefined if it is fine. */
  badPrefix: (prefix: string) => string | undefined;
  eviction?: StoreHealthOptions['eviction'];
}

/**
 * A fleet's shared state in a backend that runs the fleet script's protocol (./script.ts): one
 * call per operation, arguments and reply as the Lua's. RedisFleetStore and PostgresFleetStore
 * are this, each with its own {@link SharedFleetStore.runScript} and {@link SharedFleetStore.probeScript};
 * the failure policy, the fallback, idempotent releases and the resync after an outage are here, once.
 */
export abstract class SharedFleetStore extends EventEmitter<StoreEvents> implements FleetStore {
  readonly prefix: string;
  readonly policy: FailurePolicy;
  readonly expectedWorkers: number;
  /** The bound on one call to the backend, ms. */
  readonly timeoutMs: number;
  /** The interval between probes of a failed backend, ms. */
  readonly probeIntervalMs: number;
  /** How long an idle fleet key lives in the backend, ms. */
  readonly idleTtlMs: number;
  /** The backend's name in messages. */
  readonly backend: string;
  readonly #clock: Clock;
  /** A virtual clock's time for the script, or undefined for the backend's own. */
  protected readonly now: (() => number) | undefined;
  /** The last parameters the backend gave per key: what the fallback uses. */
  readonly #known = new Map<string, FleetParams>();
  #fallback: MemoryFleetStore | undefined;
  /** Per key, the leases this process holds (granted by the backend or by the policy, not given back): lease id -> cost. */
  readonly #held = new Map<string, Map<string, number>>();
  /** Per key, lease ids to drop in the backend at the next call that reaches it. */
  readonly #pending = new Map<string, Set<string>>();
  /** Per key, the lease length last asked for. */
  readonly #leaseMs = new Map<string, number>();
  /** Per key, the bucket's tokens the backend last reported, dated by this process's clock. */
  readonly #bucketSeen = new Map<string, BucketState>();
  /** The store's time minus this process's clock, from the last answer (undefined before one). */
  #offsetMs: number | undefined;
  /** The fleet key of the last call: the probe goes to its slot. */
  #lastKey = '';
  /** Timeouts, degrading, probes and recovery: the one policy of every shared store. */
  protected readonly health: StoreHealth;

  constructor(options: SharedFleetStoreOptions, backend: FleetBackend) {
    super();
    // One store serves every fleet key of a process, and each Scheduler on it listens for its
    // `degraded` and `recovered` (until closed): more than ten is normal, not a leak.
    this.setMaxListeners(0);
    const failure = failureOptions(options, backend.client);
    checkKnownOptions(options, backend.knownOptions, `${backend.storeName} options`);
    const expectedWorkers = options.expectedWorkers ?? (options.onError === 'local' ? Number.NaN : 1);
    if (!(Number.isSafeInteger(expectedWorkers) && expectedWorkers >= 1)) {
      throw new InvalidOptionError(
        'expectedWorkers',
        options.expectedWorkers,
        `Expected \`expectedWorkers\` to be an integer >= 1 (with onError 'local' each worker falls back to 1/expectedWorkers of the limits), got ${String(options.expectedWorkers)}`,
      );
    }
    const prefix = options.prefix ?? 'tokenpace-fleet';
    const bad = typeof prefix !== 'string' || prefix.length === 0 ? 'a non-empty string' : backend.badPrefix(prefix);
    if (bad !== undefined) throw new InvalidOptionError('prefix', prefix, `Expected \`prefix\` to be ${bad}`);
    const idleTtlMs = options.idleTtl === undefined ? DEFAULT_IDLE_TTL_MS : parseDuration(options.idleTtl);
    if (!(idleTtlMs >= 1 && idleTtlMs < Number.POSITIVE_INFINITY)) {
      throw new InvalidOptionError(
        'idleTtl',
        options.idleTtl,
        `Expected \`idleTtl\` to be a finite duration of at least 1 ms, as in \`idleTtl: '1d'\`, got ${String(options.idleTtl)}`,
      );
    }
    this.#clock = checkClock(options.clock);
    this.backend = backend.name;
    this.now = failure.now;
    this.prefix = prefix;
    this.policy = failure.policy;
    this.expectedWorkers = expectedWorkers;
    this.timeoutMs = failure.timeoutMs;
    this.probeIntervalMs = failure.probeIntervalMs;
    this.idleTtlMs = idleTtlMs;
    this.health = new StoreHealth({
      owner: this,
      backend: backend.name,
      failure,
      clock: this.#clock,
      probe: () => this.probeScript(this.#lastKey),
      stats: { failures: 0 },
      eviction: backend.eviction,
    });
    this.on('recovered', () => this.#resync());
  }

  /**
   * Runs the fleet script's operation for fleet key `key` with `args` (the Lua's ARGV from 2 on:
   * op, idle TTL, default parameters, deadline, the op's own) within the timeout, and resolves with
   * the reply's numbers.
   */
  protected abstract runScript(key: string, args: string[]): Promise<number[]>;

  /** The script's `g` on probe state beside fleet key `key`, with no limits, written as every call writes. */
  protected abstract probeScript(key: string): Promise<unknown>;

  /** False while calls are answered by the failure policy. */
  get healthy(): boolean {
    return this.health.healthy;
  }

  /** Stops probing; later calls are answered by the policy. The client is yours to close. */
  close(): void {
    this.health.close();
  }

  /** {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  async exchange(op: ExchangeOp): Promise<ExchangeResult> {
    const { key } = op;
    const ids = op.release.map((l) => l.leaseId);
    this.#forget(key, ids);
    // The fallback holds the policy's leases and, in an outage, the ones the backend granted (seeded).
    if (op.release.length !== 0) await this.#fallback?.release(key, op.release);
    if (!this.health.usable) {
      this.#defer(key, ids);
      return this.#exchangeByPolicy(op);
    }
    const release = [...this.#takePending(key), ...ids];
    const args = ['b', String(op.leaseMs), String(op.claimTtlMs), String(release.length), ...release];
    for (const a of op.acquire) {
      const word = a.weight === undefined || a.weight === a.cost ? String(a.cost) : `${a.cost}:${a.weight}`;
      args.push(word, a.maxWaitMs === Number.POSITIVE_INFINITY ? '-1' : String(a.maxWaitMs), a.leaseId);
    }
    this.#leaseMs.set(key, op.leaseMs);
    const reply = await this.#call(key, op.params, args);
    if (reply === undefined) {
      // The backend may still carry the call out (a paused server resumes, a client replays its queue):
      // its releases are sent again, and whatever it granted is given back, at the next call.
      this.#defer(key, release);
      this.#defer(
        key,
        op.acquire.map((a) => a.leaseId),
      );
      return this.#exchangeByPolicy(op);
    }
    const grants: ExchangeGrant[] = [];
    for (let i = 0; i < op.acquire.length; i++) {
      const grant: ExchangeGrant = {
        status: GRANT[reply.grants[3 * i] as number] ?? 'later',
        delayMs: reply.grants[3 * i + 1] as number,
        readyAtMs: reply.grants[3 * i + 2] as number,
      };
      if (grant.status === 'ok') this.#hold(key, op.acquire[i] as ExchangeAcquire);
      grants.push(grant);
    }
    return { ...reply.snapshot, grants };
  }

  async acquire(op: AcquireOp): Promise<AcquireResult> {
    const { grants, ...snapshot } = await this.exchange(exchangeOf(op));
    const grant = grants[0] as ExchangeGrant;
    return { ...snapshot, ...grant, status: grant.status === 'later' ? 'busy' : grant.status };
  }

  async cancel(key: string, lease: HeldLease, readyAtMs: number): Promise<void> {
    this.#forget(key, [lease.leaseId]);
    if (lease.source !== 'store' || !this.health.usable) {
      await this.#fallback?.cancel(key, lease, readyAtMs);
      // The backend may hold it (a lease adopted after an outage, or granted by a call given up on).
      return this.#giveBack(key, [lease.leaseId]);
    }
    const reply = await this.#call(key, undefined, ['c', lease.leaseId, String(lease.cost), String(readyAtMs)]);
    if (reply === undefined) this.#defer(key, [lease.leaseId]);
  }

  /**
   * Renews every lease given (whoever granted it) in the backend, adding back the ones it lost: after an
   * outage the backend counts every job that runs, the ones the policy started included.
   */
  async renew(key: string, leases: readonly HeldLease[], leaseMs: number): Promise<void> {
    this.#leaseMs.set(key, leaseMs);
    for (const lease of leases) this.#hold(key, lease);
    if (!this.health.usable) {
      await this.#fallback?.renew(key, leases, leaseMs);
      return;
    }
    const local = leases.filter((l) => l.source !== 'store');
    if (local.length > 0) await this.#fallback?.renew(key, local, leaseMs);
    await this.#renewInBackend(key, leases, leaseMs);
  }

  async release(key: string, leases: readonly HeldLease[]): Promise<void> {
    const ids = leases.map((l) => l.leaseId);
    this.#forget(key, ids);
    if (this.#fallback !== undefined) await this.#fallback.release(key, leases);
    await this.#giveBack(key, ids);
  }

  async adjust(key: string, deltaCost: number, defaults: FleetParams): Promise<FleetSnapshot> {
    const reply = this.healthy ? await this.#call(key, defaults, ['j', String(deltaCost)]) : undefined;
    if (reply !== undefined) return reply.snapshot;
    // The backend is away: the policy's local bucket (if any) takes the change, as it took the jobs.
    if (this.#fallback !== undefined && this.policy !== 'deny') {
      const share = shareOf(this.#known.get(key) ?? defaults, this.policy === 'local' ? this.expectedWorkers : 1);
      this.#seed(key, share);
      const snapshot = await this.#fallback.adjust(key, deltaCost, share);
      return { ...snapshot, source: this.policy };
    }
    throw new StoreUnavailableError(
      `could not adjust a job's charge for ${JSON.stringify(key)}: ${this.backend} is unavailable`,
    );
  }

  async configure(key: string, change: Partial<FleetParams>, defaults: FleetParams): Promise<FleetSnapshot> {
    const reply = this.healthy
      ? await this.#call(key, defaults, [
          's',
          change.ratePerSecond === undefined ? '' : num(change.ratePerSecond),
          change.burst === undefined ? '' : num(change.burst),
          change.concurrency === undefined ? '' : num(change.concurrency),
        ])
      : undefined;
    if (reply === undefined) {
      throw new StoreUnavailableError(
        `could not change the fleet's limits for ${JSON.stringify(key)}: ${this.backend} is unavailable; try again when it answers`,
      );
    }
    this.#fallback?.delete(key); // the fallback picks the new limits up
    return reply.snapshot;
  }

  async inspect(key: string, defaults: FleetParams): Promise<FleetSnapshot> {
    const reply = this.healthy ? await this.#call(key, defaults, ['g']) : undefined;
    if (reply === undefined)
      throw new StoreUnavailableError(`could not read fleet key ${JSON.stringify(key)} from ${this.backend}`);
    return reply.snapshot;
  }

  #exchangeByPolicy(op: ExchangeOp): ExchangeResult {
    const params = this.#known.get(op.key) ?? op.params;
    if (this.policy === 'deny') {
      const now = this.#clock.now();
      return {
        grants: op.acquire.map((_, i) => ({ status: i === 0 ? 'busy' : 'later', delayMs: 0, readyAtMs: now })),
        nowMs: now,
        tokens: 0,
        inFlight: 0,
        params,
        nextExpiryMs: this.probeIntervalMs,
        source: 'deny',
      };
    }
    if (this.#fallback === undefined) this.#fallback = new MemoryFleetStore({ clock: this.#clock });
    const share = shareOf(params, this.policy === 'local' ? this.expectedWorkers : 1);
    this.#seed(op.key, share);
    const result = this.#fallback.exchangeNow({ ...op, release: [], params: share });
    for (let i = 0; i < op.acquire.length; i++) {
      if (result.grants[i]?.status === 'ok') this.#hold(op.key, op.acquire[i] as ExchangeAcquire);
    }
    result.source = this.policy;
    return result;
  }

  /**
   * The fallback's state for `key`, on first use in an outage: the share of the limits, the share
   * of the tokens the backend last reported, and every lease this process holds (its jobs that run).
   */
  #seed(key: string, share: FleetParams): void {
    const fallback = this.#fallback as MemoryFleetStore;
    const whole = this.#known.get(key);
    const last = this.#bucketSeen.get(key);
    const part = whole !== undefined && whole.burst > 0 ? share.burst / whole.burst : 1;
    const bucket =
      last === undefined || !Number.isFinite(last.tokens)
        ? { tokens: share.burst, updatedAtMs: this.#clock.now() }
        : { tokens: last.tokens * part, updatedAtMs: last.updatedAtMs };
    const leases: HeldLease[] = [];
    for (const [leaseId, cost] of this.#held.get(key) ?? [])
      leases.push({ leaseId, cost, weight: cost, source: 'store' });
    fallback.seed(key, share, bucket, leases, this.#leaseMs.get(key) ?? 60_000);
  }

  /** A lease this process now holds, whoever granted it: no deferred release may drop it (see {@link #defer}). */
  #hold(key: string, a: { leaseId: string; cost: number; weight?: number }): void {
    const held = this.#held.get(key) ?? new Map<string, number>();
    this.#held.set(key, held);
    held.set(a.leaseId, a.weight ?? a.cost);
    this.#pending.get(key)?.delete(a.leaseId);
  }

  /** Leases given back (their jobs ended or never started). */
  #forget(key: string, ids: readonly string[]): void {
    const held = this.#held.get(key);
    if (held === undefined) return;
    for (const id of ids) held.delete(id);
    if (held.size === 0) this.#held.delete(key);
  }

  /**
   * Lease ids to drop in the backend at the next call that reaches it (dropping one it lacks does
   * nothing). Never one this process holds: an id asked for again after a call given up on may be
   * granted, and its job runs, before a failed call that carried its release defers it again.
   */
  #defer(key: string, ids: readonly string[]): void {
    if (ids.length === 0) return;
    const pending = this.#pending.get(key) ?? new Set<string>();
    this.#pending.set(key, pending);
    const held = this.#held.get(key);
    for (const id of ids) if (held?.has(id) !== true) pending.add(id);
    if (pending.size === 0) this.#pending.delete(key);
  }

  #takePending(key: string): string[] {
    const pending = this.#pending.get(key);
    if (pending === undefined) return [];
    this.#pending.delete(key);
    return [...pending];
  }

  /** Drops `ids` in the backend now, or at the next call that reaches it. */
  async #giveBack(key: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    if (!this.health.usable) return this.#defer(key, ids);
    const release = [...this.#takePending(key), ...ids];
    const reply = await this.#call(key, undefined, ['b', '0', '0', String(release.length), ...release]);
    if (reply === undefined) this.#defer(key, release);
  }

  /** One `r`: the pending releases first, then the leases renewed (added back where the backend lacks them). */
  async #renewInBackend(key: string, leases: Iterable<HeldLease>, leaseMs: number): Promise<void> {
    const release = this.#takePending(key);
    const args = ['r', String(leaseMs), String(release.length), ...release];
    for (const lease of leases) args.push(lease.leaseId, String(lease.weight ?? lease.cost));
    const reply = await this.#call(key, undefined, args);
    if (reply === undefined) this.#defer(key, release);
  }

  /**
   * The backend answers again: per key, the releases it missed, then every lease of this process renewed
   * and added back where the backend lost it (a restart), in one call before any new grant.
   */
  #resync(): void {
    const keys = new Set([...this.#pending.keys(), ...this.#held.keys()]);
    for (const key of keys) {
      const leases: HeldLease[] = [];
      for (const [leaseId, cost] of this.#held.get(key) ?? [])
        leases.push({ leaseId, cost, weight: cost, source: 'store' });
      const leaseMs = this.#leaseMs.get(key);
      if (leaseMs === undefined && leases.length > 0) continue;
      this.#renewInBackend(key, leases, leaseMs ?? 1).catch(() => {});
    }
  }

  /** One script call; `undefined` when the backend failed (the store is then degraded). */
  async #call(
    key: string,
    defaults: FleetParams | undefined,
    opArgs: string[],
  ): Promise<{ snapshot: FleetSnapshot; grants: number[] } | undefined> {
    const d = defaults ??
      this.#known.get(key) ?? {
        ratePerSecond: Number.POSITIVE_INFINITY,
        burst: 1,
        concurrency: Number.POSITIVE_INFINITY,
      };
    // The deadline, in the store's time: after it this process has given the call up, so a late run
    // (a resumed server, a replayed queue) grants nothing (see ./script.ts).
    const sentAt = this.#clock.now();
    const offset = this.#offsetMs;
    this.#lastKey = key;
    const args = [
      opArgs[0] as string,
      String(this.idleTtlMs),
      num(d.ratePerSecond),
      String(d.burst),
      num(d.concurrency),
      offset === undefined ? '' : String(sentAt + offset + this.timeoutMs),
      ...opArgs.slice(1),
    ];
    let n: number[];
    try {
      n = await this.runScript(key, args);
      if (n.length < 10 || (n.length - 10) % 3 !== 0) {
        throw new StoreUnavailableError(`unexpected reply from the fleet script: ${n.length} numbers`);
      }
    } catch (error) {
      this.#failed(errorOf(error));
      return undefined;
    }
    const params: FleetParams = {
      ratePerSecond: inf(n[6] as number),
      burst: n[7] as number,
      concurrency: inf(n[8] as number),
    };
    this.#known.set(key, params);
    const nowMs = n[0] as number;
    const receivedAt = this.#clock.now();
    // At most the true offset (the script ran before the answer came): deadlines err early.
    this.#offsetMs = nowMs - receivedAt;
    this.#bucketSeen.set(key, { tokens: n[4] as number, updatedAtMs: receivedAt });
    return {
      grants: n.slice(10),
      snapshot: {
        nowMs,
        tokens: params.ratePerSecond === Number.POSITIVE_INFINITY ? Number.POSITIVE_INFINITY : (n[4] as number),
        inFlight: n[5] as number,
        params,
        nextExpiryMs: (n[9] as number) < 0 ? Number.POSITIVE_INFINITY : (n[9] as number),
        source: 'store',
      },
    };
  }

  /** A call failed: a `failure`, and on the first one a fresh local state for the outage and `degraded`. */
  #failed(error: Error): void {
    if (this.health.healthy) this.#fallback = undefined;
    this.health.failed(error, 1);
  }
}

/** The limits divided among `workers`, never below 1 where the whole is at least 1. */
export function shareOf(params: FleetParams, workers: number): FleetParams {
  const part = (x: number) => (x === Number.POSITIVE_INFINITY ? x : Math.max(x / workers, Math.min(x, 1)));
  return {
    ratePerSecond: part(params.ratePerSecond),
    burst: part(params.burst),
    concurrency: part(params.concurrency),
  };
}

function num(x: number): string {
  return x === Number.POSITIVE_INFINITY ? '-1' : String(x);
}

function inf(x: number): number {
  return x < 0 ? Number.POSITIVE_INFINITY : x;
}
