/**
 * Window counters per key, for a KeyedLimiter whose `algorithm` is
 * `'fixed-window'` or `'sliding-window'`: a path of its own, beside the token
 * bucket stores, so the buckets' hot path stays as it is.
 *
 * The arithmetic is the meters' (`src/meters/windows.ts`): `fixedWindowTake`,
 * `slidingLogTake` and `slidingCounterTake` over one plain state per key.
 * In memory each decision is one synchronous call; in Redis it is one Lua
 * script (`WINDOW_SCRIPT`) that mirrors the fixed window's and the sliding
 * counter's step line by line, with the server's `TIME`. The exact sliding
 * log would need a sorted set per key in Redis: RedisWindowStore refuses it
 * (use `mode: 'counter'` there).
 */

import { createHash } from 'node:crypto';
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
import { delKeys, evalScript, luaNow } from '../redis/client.js';
import {
  errorOf,
  type FailurePolicy,
  failureOptions,
  RedisHealth,
  type RedisStoreEvents,
  SHARED_STORE_OPTIONS,
} from '../redis/health.js';
import { MEMORY_STORE_OPTIONS } from './memory-store.js';
import { DENY_RETRY_AFTER_MS, type RedisClientLike } from './redis-store.js';

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
    const maxKeys = options.maxKeys ?? 100_000;
    if (!(Number.isInteger(maxKeys) && maxKeys >= 1)) {
      throw new InvalidOptionError('maxKeys', maxKeys, `Expected \`maxKeys\` to be a positive integer, got ${maxKeys}`);
    }
    this.maxKeys = maxKeys;
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

/**
 * The fixed window's and the sliding counter's steps (`fixedWindowTake`, `slidingCounterTake`
 * in src/meters/windows.ts) in Lua, for one decision. It reads the key, rolls the windows and
 * counts the cost when it fits (`try`), then returns what it read, so the caller runs the same
 * step in JavaScript on that state for the Decision's numbers, and the time it used.
 *
 * KEYS[1] = the key. ARGV = kind ('f' fixed, 'c' counter), mode ('t' try, 'p' peek), cost,
 * limit, windowMs, now-or-empty (Redis TIME when empty), least TTL ms.
 * State: fixed `"<windowStartMs> <count>"`; counter `"<windowStartMs> <previous> <current>"`,
 * written with PX until it can no longer count (the end of its window, or of the next for the counter).
 * Reply: { nowMs, allowed (1/0), the state read (empty strings when absent) ... } as strings.
 */
export const WINDOW_SCRIPT = `
local kind = ARGV[1]
local mode = ARGV[2]
local cost = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local w = tonumber(ARGV[5])
${luaNow(6)}
local MIN_TTL = tonumber(ARGV[7])
local function fmt(x) return string.format('%.17g', x) end
local raw = redis.call('GET', KEYS[1])
local a, b, c
if raw then
  local i = 0
  for part in string.gmatch(raw, '%S+') do
    i = i + 1
    if i == 1 then a = tonumber(part) elseif i == 2 then b = tonumber(part) else c = tonumber(part) end
  end
end
local start0 = a or -math.huge
local allowed = 0
local out
if kind == 'f' then
  -- fixedRoll + fixedWindowTake
  local count = b or 0
  local t = math.max(now, start0)
  local start = math.floor(t / w) * w
  local ws = start0
  if start > ws then ws = start; count = 0 end
  if count + cost <= limit then allowed = 1; count = count + cost end
  if allowed == 1 and mode == 't' then
    local ttl = math.max(MIN_TTL, math.ceil(ws + w - t) + 1)
    redis.call('SET', KEYS[1], fmt(ws) .. ' ' .. fmt(count), 'PX', ttl)
  end
  out = { raw and fmt(a) or '', raw and fmt(b) or '' }
else
  -- rollCounter + counterEstimate + slidingCounterTake
  local prev = b or 0
  local cur = c or 0
  local t = math.max(now, start0)
  local start = math.floor(t / w) * w
  local ws = start0
  if start > ws then
    if start - ws == w then prev = cur else prev = 0 end
    cur = 0
    ws = start
  end
  local elapsed = (t - ws) / w
  if prev * (1 - elapsed) + cur + cost <= limit then allowed = 1; cur = cur + cost end
  if allowed == 1 and mode == 't' then
    local ttl = math.max(MIN_TTL, math.ceil(ws + 2 * w - t) + 1)
    redis.call('SET', KEYS[1], fmt(ws) .. ' ' .. fmt(prev) .. ' ' .. fmt(cur), 'PX', ttl)
  end
  out = { raw and fmt(a) or '', raw and fmt(b) or '', raw and fmt(c) or '' }
end
local reply = { fmt(now), tostring(allowed) }
for i = 1, #out do reply[#reply + 1] = out[i] end
return reply
`;

/** Options for {@link RedisWindowStore}. */
export interface RedisWindowStoreOptions {
  /** A connected ioredis or node-redis client (single node or cluster: one key per decision). */
  client: RedisClientLike;
  /** Namespace of the keys. Use one per limiter. @default 'tokenpace' */
  prefix?: string;
  /**
   * When Redis fails or does not answer within `timeoutMs`: admit (`'allow'`, fail-open), refuse
   * (`'deny'`, fail-closed), or count in memory per instance (`'local'`). Required.
   */
  onError: FailurePolicy;
  /** The longest a decision waits for Redis before the policy decides, ms. Minimum 1. @default 200 */
  timeoutMs?: number;
  /** How often a failed Redis is probed with PING, ms. @default 250 */
  probeIntervalMs?: number;
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

let windowSha: string | undefined;

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
 * Failure policy: RedisStore's (src/redis/health.ts). Each call is bounded by `timeoutMs`;
 * when Redis fails or does not answer in time, `onError` decides (`'allow'`, `'deny'`, or
 * `'local'`: a MemoryWindowStore per instance), later decisions follow it at once while a PING
 * probes Redis, and the events `failure`, `degraded`, `recovered` (also on the
 * `tokenpace:redis:*` channels) say so.
 *
 * @example
 * const limiter = new KeyedLimiter({ algorithm: 'fixed-window', limit: 100, window: '1 min',
 *   store: new RedisWindowStore({ client: redis, onError: 'local' }) });
 */
export class RedisWindowStore extends EventEmitter<RedisStoreEvents> implements WindowStore {
  readonly prefix: string;
  readonly policy: FailurePolicy;
  readonly timeoutMs: number;
  readonly probeIntervalMs: number;
  readonly stats: RedisWindowStoreStats = { decisions: 0, byPolicy: 0, failures: 0 };
  readonly #client: RedisClientLike;
  readonly #nodeRedis: boolean;
  readonly #now: (() => number) | undefined;
  readonly #sha: string;
  readonly #clock: Clock;
  readonly #health: RedisHealth;
  readonly #local: MemoryWindowStore | undefined;

  constructor(options: RedisWindowStoreOptions) {
    super();
    const failure = failureOptions(options);
    checkKnownOptions(options, REDIS_WINDOW_STORE_OPTIONS, 'RedisWindowStore options');
    const { client } = options;
    const nodeRedis = failure.nodeRedis;
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
    this.#now = failure.now;
    this.#clock = checkClock(options.clock);
    this.#health = new RedisHealth(this, failure, this.#clock, () => client.ping(), this.stats);
    this.#local =
      failure.policy === 'local'
        ? new MemoryWindowStore({ clock: this.#clock, maxKeys: options.localMaxKeys })
        : undefined;
    windowSha ??= createHash('sha1').update(WINDOW_SCRIPT).digest('hex');
    this.#sha = windowSha;
  }

  /** False while decisions follow the failure policy. */
  get healthy(): boolean {
    return this.#health.healthy;
  }

  /** Stops probing and answers every later decision by the policy. Does not close the client (it is yours). */
  close(): void {
    this.#health.close();
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
    const args = [
      op.kind === 'fixed' ? 'f' : 'c',
      op.mode === 'try' ? 't' : 'p',
      String(op.cost),
      String(op.params.limit),
      String(op.params.windowMs),
      this.#now === undefined ? '' : String(this.#now()),
      this.#now === undefined ? '0' : '60000',
    ];
    if (!this.#health.usable) return this.#byPolicy(op);
    let reply: string[];
    try {
      reply = (await this.#health.withTimeout(this.#run([this.keyFor(op.key)], args))) as string[];
      if (!Array.isArray(reply) || reply.length !== (op.kind === 'fixed' ? 4 : 5)) {
        const got = Array.isArray(reply) ? `${(reply as unknown[]).length} values` : typeof reply;
        throw new StoreUnavailableError(`unexpected reply from the window script: got ${got}`);
      }
    } catch (error) {
      this.#health.failed(errorOf(error), 1);
      return this.#byPolicy(op);
    }
    this.stats.decisions++;
    const nowMs = Number(reply[0]);
    const read = (i: number, absent: number): number => (reply[i] === '' ? absent : Number(reply[i]));
    const state: AnyWindowState =
      op.kind === 'fixed'
        ? { windowStartMs: read(2, Number.NEGATIVE_INFINITY), count: read(3, 0) }
        : { windowStartMs: read(2, Number.NEGATIVE_INFINITY), previous: read(3, 0), current: read(4, 0) };
    // The same step on the state the script read, at the script's time: the Decision's numbers.
    const decision = windowStep(op.kind, state, op.params, nowMs, op.cost);
    if (decision.allowed !== (reply[1] === '1')) {
      throw new Error(
        `the window script and windows.ts disagree for key ${JSON.stringify(op.key)}: a bug, please report`,
      );
    }
    return decision;
  }

  async reset(key: string): Promise<void> {
    await this.#local?.reset(key);
    const k = this.keyFor(key);
    const del = delKeys(this.#client, this.#nodeRedis, [k]);
    await this.#health.withTimeout(del).catch((error: unknown) => {
      throw new StoreUnavailableError(
        `could not reset key ${JSON.stringify(key)} in Redis: ${errorOf(error).message}`,
        {
          cause: error,
        },
      );
    });
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

  /** EVALSHA, and EVAL if the server does not know the script (see src/redis/client.ts). */
  #run(keys: string[], args: string[]): Promise<unknown> {
    return evalScript(this.#client, this.#nodeRedis, WINDOW_SCRIPT, this.#sha, keys, args);
  }
}
