/**
 * Window counters per key, for a KeyedLimiter whose `algorithm` is
 * `'fixed-window'` or `'sliding-window'`: a store contract of its own, beside
 * the token bucket stores'.
 *
 * The arithmetic is the meters' (`src/meters/windows.ts`): `fixedWindowTake`,
 * `slidingLogTake` and `slidingCounterTake` over one plain state per key.
 * In memory each decision is one synchronous call; in Redis it is one call of
 * a Lua script (src/redis/window-lua.ts, the fixed window's and the sliding
 * counter's steps in Lua, held to windows.ts's test tables), with the
 * server's `TIME`. The exact sliding log would need a sorted set per key in
 * Redis: RedisWindowStore refuses it (use `mode: 'counter'` there).
 */

import { EventEmitter } from 'node:events';
import { type Clock, checkClock } from '../clock.js';
import {
  checkKnownOptions,
  checkOptions,
  InvalidOptionError,
  NotSupportedError,
  StoreUnavailableError,
} from '../errors.js';
import type { Decision } from '../meters/decision.js';
import {
  type FixedWindowState,
  fixedWindowTake,
  newSlidingCounter,
  newSlidingLog,
  type SlidingCounterState,
  type SlidingLogState,
  slidingCounterTake,
  slidingLogTake,
  type WindowParams,
} from '../meters/windows.js';
import { delKeys, isNodeRedis, REDIS_CLIENT } from '../redis/client.js';
import { redisEviction } from '../redis/eviction.js';
import { LuaScript } from '../redis/lua-script.js';
import { WINDOW_LUA } from '../redis/window-lua.js';
import {
  errorOf,
  type FailurePolicy,
  failureOptions,
  SHARED_STORE_OPTIONS,
  type StoreEvents,
  StoreHealth,
} from '../stores/health.js';
import type { DurationInput } from '../units.js';
import { DEFAULT_MAX_KEYS, MEMORY_STORE_OPTIONS, parseMaxKeys } from './memory-store.js';
import { DENY_RETRY_AFTER_MS } from './policy-answers.js';
import type { RedisClientLike } from './redis-store.js';

/** How a window limiter counts: a fixed window, an exact sliding log, or the two-counter estimate. */
export type WindowKind = 'fixed' | 'log' | 'counter';

/** One window decision for a store to make atomically. */
export interface WindowOp {
  /** `'try'` counts the cost if it fits; `'peek'` says what `'try'` would, counting nothing. */
  mode: 'try' | 'peek';
  key: string;
  /** Cost to count (0 <= cost <= limit; the limiter has checked it). */
  cost: number;
  kind: WindowKind;
  params: WindowParams;
}

/** A place to keep per-key window counters. */
export interface WindowStore {
  /** Makes one decision atomically; rejects only if the store itself fails. */
  decideWindow(op: WindowOp): Promise<Decision>;
  /** Forgets a key: its windows are empty again. */
  reset(key: string): Promise<void>;
}

type AnyWindowState = FixedWindowState | SlidingLogState | SlidingCounterState;

/** Runs the meter's step for `kind` on `state` (mutated when `try` admits). */
export function windowStep(kind: WindowKind, state: AnyWindowState, params: WindowParams, nowMs: number, cost: number) {
  if (kind === 'fixed') return fixedWindowTake(state as FixedWindowState, params, nowMs, cost);
  if (kind === 'counter') return slidingCounterTake(state as SlidingCounterState, params, nowMs, cost);
  return slidingLogTake(state as SlidingLogState, params, nowMs, cost);
}

function newState(kind: WindowKind): AnyWindowState {
  if (kind === 'fixed') return { windowStartMs: Number.NEGATIVE_INFINITY, count: 0 };
  return kind === 'counter' ? newSlidingCounter() : newSlidingLog();
}

function copyState(kind: WindowKind, state: AnyWindowState): AnyWindowState {
  if (kind !== 'log') return { ...state };
  const log = state as SlidingLogState;
  return {
    atMs: log.atMs.slice(log.head),
    cost: log.cost.slice(log.head),
    head: 0,
    used: log.used,
    latestMs: log.latestMs,
  };
}

/** Options for {@link MemoryWindowStore}. */
export interface MemoryWindowStoreOptions {
  /** The most keys kept; the least recently used is dropped first. @default 100_000 */
  maxKeys?: number;
  /** The store's time; windows are aligned to its zero. @default systemClock */
  clock?: Clock;
}

/** The probe's decision: a fixed window of 1 ms with room for any count, so every try is counted. */
const PROBE_ARGS = ['f', 't', '1', '1000000000000000', '1'];

const REDIS_WINDOW_STORE_OPTIONS: ReadonlySet<string> = new Set([...SHARED_STORE_OPTIONS, 'localMaxKeys']);

/**
 * Per-key window counters in memory (a Map in recency order, bounded by `maxKeys`).
 * A KeyedLimiter with a window `algorithm` makes one unless given a `store`.
 */
export class MemoryWindowStore implements WindowStore {
  readonly maxKeys: number;
  readonly #clock: Clock;
  readonly #states = new Map<string, { kind: WindowKind; state: AnyWindowState }>();

  constructor(options: MemoryWindowStoreOptions = {}) {
    checkOptions(options, 'MemoryWindowStore options ({ maxKeys, clock })', false);
    checkKnownOptions(options, MEMORY_STORE_OPTIONS, 'MemoryWindowStore options');
    this.maxKeys = parseMaxKeys(options.maxKeys, DEFAULT_MAX_KEYS);
    this.#clock = checkClock(options.clock);
  }

  /** Keys currently kept. */
  get size(): number {
    return this.#states.size;
  }

  decideWindow(op: WindowOp): Promise<Decision> {
    return Promise.resolve(this.decideWindowAt(this.#clock.now(), op));
  }

  /** {@link decideWindow} synchronously, at an explicit time. */
  decideWindowAt(nowMs: number, op: WindowOp): Decision {
    const states = this.#states;
    let entry = states.get(op.key);
    if (entry !== undefined && entry.kind !== op.kind) entry = undefined;
    if (op.mode === 'peek') {
      const state = entry === undefined ? newState(op.kind) : copyState(op.kind, entry.state);
      return windowStep(op.kind, state, op.params, nowMs, op.cost);
    }
    if (entry === undefined) {
      entry = { kind: op.kind, state: newState(op.kind) };
      if (states.size >= this.maxKeys && !states.has(op.key)) {
        const oldest = states.keys().next().value as string;
        states.delete(oldest);
      }
    }
    states.delete(op.key); // to the back: most recently used
    states.set(op.key, entry);
    return windowStep(op.kind, entry.state, op.params, nowMs, op.cost);
  }

  reset(key: string): Promise<void> {
    this.#states.delete(key);
    return Promise.resolve();
  }
}

/** Options for {@link RedisWindowStore}. */
export interface RedisWindowStoreOptions {
  /** A connected ioredis or node-redis client (single node or cluster: one key per decision). */
  client: RedisClientLike;
  /** Namespace of the keys. Use one per limiter. @default 'tokenpace' */
  prefix?: string;
  /**
   * When Redis fails or does not answer within `timeout`: admit (`'allow'`, fail-open), refuse
   * (`'deny'`, fail-closed), or count in memory per instance (`'local'`). Required.
   */
  onError: FailurePolicy;
  /**
   * The longest a decision waits for Redis before the policy decides: ms, or a string such as
   * `'100ms'`. From 1 ms to 2^31 - 1 ms. @default 200
   */
  timeout?: DurationInput;
  /** How often a failed Redis is probed with a decision on a probe key: ms, or a string such as `'1s'`. @default 250 */
  probeInterval?: DurationInput;
  /** Timers (timeouts, probes) and the `'local'` policy's time. @default systemClock */
  clock?: Clock;
  /** The most keys the `'local'` policy keeps. @default 100_000 */
  localMaxKeys?: number;
  /**
   * Replaces Redis's `TIME` with this clock's milliseconds: tests and simulations on a virtual clock
   * only (keys then live at least a minute of Redis's real time).
   */
  now?: () => number;
}

/** Counters a RedisWindowStore keeps. */
export interface RedisWindowStoreStats {
  /** Decisions made by Redis. */
  decisions: number;
  /** Decisions made by the failure policy. */
  byPolicy: number;
  /** Failed or timed-out calls and probes. */
  failures: number;
}

/**
 * Per-key fixed windows and sliding counters in Redis: one Lua script call per decision, time from
 * Redis `TIME`, a key per limited key (`<prefix>:w:<key>`) that expires when it can no longer count.
 * The exact sliding log is not offered here (it would need a sorted set per key): use
 * `mode: 'counter'`.
 *
 * Failure policy: RedisStore's (src/stores/health.ts). Each call is bounded by `timeout`;
 * when Redis fails or does not answer in time, `onError` decides (`'allow'`, `'deny'`, or
 * `'local'`: a MemoryWindowStore per instance), later decisions follow it at once while a probe (a
 * counted try on `<prefix>:probe:w`, which succeeds only where a decision would) tries Redis, and the
 * events `failure`, `degraded`, `recovered` (also on the `tokenpace:redis:*` channels) say so. A
 * `maxmemory-policy` that may evict the windows is an `eviction` event.
 *
 * @example
 * const limiter = new KeyedLimiter({ algorithm: 'fixed-window', limit: 100, window: '1 min',
 *   store: new RedisWindowStore({ client: redis, onError: 'local' }) });
 */
export class RedisWindowStore extends EventEmitter<StoreEvents> implements WindowStore {
  readonly prefix: string;
  readonly policy: FailurePolicy;
  /** The bound on one call to Redis, ms. */
  readonly timeoutMs: number;
  /** The interval between probes of a failed Redis, ms. */
  readonly probeIntervalMs: number;
  readonly stats: RedisWindowStoreStats = { decisions: 0, byPolicy: 0, failures: 0 };
  readonly #client: RedisClientLike;
  readonly #nodeRedis: boolean;
  readonly #script: LuaScript;
  readonly #clock: Clock;
  readonly #health: StoreHealth;
  readonly #local: MemoryWindowStore | undefined;

  constructor(options: RedisWindowStoreOptions) {
    super();
    const failure = failureOptions(options, REDIS_CLIENT);
    const nodeRedis = isNodeRedis(options.client);
    checkKnownOptions(options, REDIS_WINDOW_STORE_OPTIONS, 'RedisWindowStore options');
    const { client } = options;
    const prefix = options.prefix ?? 'tokenpace';
    if (typeof prefix !== 'string' || prefix.length === 0) {
      throw new InvalidOptionError('prefix', prefix, `Expected \`prefix\` to be a non-empty string, got ${prefix}`);
    }
    this.prefix = prefix;
    this.policy = failure.policy;
    this.timeoutMs = failure.timeoutMs;
    this.probeIntervalMs = failure.probeIntervalMs;
    this.#client = client;
    this.#nodeRedis = nodeRedis;
    this.#clock = checkClock(options.clock);
    this.#health = new StoreHealth({
      owner: this,
      backend: 'Redis',
      failure,
      clock: this.#clock,
      probe: () => this.#probe(),
      stats: this.stats,
      eviction: redisEviction(client, nodeRedis),
    });
    this.#script = new LuaScript({
      name: 'window',
      lua: WINDOW_LUA,
      client,
      nodeRedis,
      health: this.#health,
      now: failure.now,
    });
    this.#local =
      failure.policy === 'local'
        ? new MemoryWindowStore({ clock: this.#clock, maxKeys: options.localMaxKeys })
        : undefined;
  }

  /** False while decisions follow the failure policy. */
  get healthy(): boolean {
    return this.#health.healthy;
  }

  /**
   * Redis's `maxmemory-policy` as read at the first call and after each recovery (`undefined`
   * before, or if Redis refused CONFIG and INFO). Any but `'noeviction'` may evict windows, which
   * then count from zero: the `eviction` event says so.
   */
  get maxmemoryPolicy(): string | undefined {
    return this.#health.maxmemory?.policy;
  }

  /** Stops probing and answers every later decision by the policy. Does not close the client (it is yours). */
  close(): void {
    this.#health.close();
  }

  /** {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  /** The Redis key of `key`'s window counter. */
  keyFor(key: string): string {
    return `${this.prefix}:w:${key}`;
  }

  async decideWindow(op: WindowOp): Promise<Decision> {
    if (op.kind === 'log') {
      throw new NotSupportedError(
        "the exact sliding log is not kept in Redis (it would need a sorted set per key): use mode: 'counter' " +
          'with a RedisWindowStore, or a MemoryWindowStore for the exact log',
      );
    }
    if (!this.#health.usable) return this.#byPolicy(op);
    const args = [
      op.kind === 'fixed' ? 'f' : 'c',
      op.mode === 'try' ? 't' : 'p',
      String(op.cost),
      String(op.params.limit),
      String(op.params.windowMs),
    ];
    let reply: number[];
    try {
      reply = await this.#script.run([this.keyFor(op.key)], args);
      if (reply.length !== 4) {
        throw new StoreUnavailableError(`unexpected reply from the window script: ${reply.length} numbers`);
      }
    } catch (error) {
      this.#health.failed(errorOf(error), 1);
      return this.#byPolicy(op);
    }
    this.stats.decisions++;
    const [allowed, remaining, retryAfterMs, resetAfterMs] = reply as [number, number, number, number];
    return { allowed: allowed === 1, remaining, retryAfterMs, resetAfterMs, limit: op.params.limit };
  }

  async reset(key: string): Promise<void> {
    await this.#local?.reset(key);
    const k = this.keyFor(key);
    const del = delKeys(this.#client, this.#nodeRedis, [k]);
    await this.#health.withTimeout(del).catch((error: unknown) => {
      throw new StoreUnavailableError(
        `could not reset key ${JSON.stringify(key)} in Redis: ${errorOf(error).message}`,
        { cause: error },
      );
    });
  }

  /** A counted try on the probe key, written as a decision is: it succeeds where decisions can. */
  #probe(): Promise<unknown> {
    return this.#script.run([`${this.prefix}:probe:w`], PROBE_ARGS);
  }

  /** The decision by `onError`, while Redis cannot be reached. */
  #byPolicy(op: WindowOp): Decision {
    this.stats.byPolicy++;
    if (this.#health.usable) this.#health.degrade(new StoreUnavailableError('Redis failed'));
    if (this.policy === 'local') return (this.#local as MemoryWindowStore).decideWindowAt(this.#clock.now(), op);
    const { limit } = op.params;
    if (this.policy === 'allow') return { allowed: true, remaining: limit, retryAfterMs: 0, resetAfterMs: 0, limit };
    return {
      allowed: false,
      remaining: 0,
      retryAfterMs: DENY_RETRY_AFTER_MS,
      resetAfterMs: DENY_RETRY_AFTER_MS,
      limit,
    };
  }
}
