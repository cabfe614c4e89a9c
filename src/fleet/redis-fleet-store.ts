/**
 * RedisFleetStore: a fleet's shared rate bucket and concurrency budget in
 * Redis, one script call (./script.ts) per operation, with an explicit
 * failure policy (./shared-fleet-store.ts holds what every backend shares).
 *
 * The client is an ioredis or node-redis client (src/redis/client.ts); the
 * script runs the way every store in Redis runs its Lua
 * (src/redis/lua-script.ts: `EVALSHA`, `EVAL` on `NOSCRIPT`, each call
 * bounded by `timeout`), and failures follow src/stores/health.ts.
 * A worker batches on its own: one `exchange` call gives back the leases of
 * the jobs that ended and asks for several queued jobs (see ./store.ts), and
 * renewals of all its leases go in one call.
 *
 * Keys, for fleet key `k` and prefix `p`: `{p:k}:s` (parameters and
 * variables), `{p:k}:l` (lease expiries), `{p:k}:w` (lease weights),
 * `{p:k}:q` and `{p:k}:c` (claims of jobs waiting for units). The hash tag
 * puts them in one cluster slot.
 *
 * Failure policy. Each call is bounded by `timeout`. When Redis fails or
 * does not answer in time the store is degraded (event `degraded`), answers
 * every call by `onError` at once, and probes Redis every `probeInterval`
 * with the script's `g` on the probe keys of the last fleet key called
 * (`{p:k}:probe:s`, ...: the same slot), which writes as every call does, so
 * a Redis that answers but cannot decide (a read-only replica, out of memory)
 * fails it too; the first probe that succeeds ends it (event `recovered`):
 *
 * - `'deny'`: acquires answer `busy`; jobs wait, and `maxWait` rejects them;
 * - `'allow'`: each worker runs on the fleet's limits on its own (an
 *   in-memory bucket and budget with the last parameters Redis gave);
 * - `'local'`: each worker runs on its share of them: rate, burst and
 *   concurrency divided by `expectedWorkers` (never below 1 where the whole
 *   is at least 1).
 *
 * Leases Redis granted before the failure expire there by themselves unless
 * renewed; a renewal after recovery adds back the ones Redis lost (a restart
 * without persistence), so the budget again counts what really runs. Leases
 * granted by the policy stay local and end with their jobs.
 *
 * A `maxmemory-policy` that may evict the fleet's keys (src/redis/eviction.ts)
 * is an `eviction` event: evicted leases and an evicted bucket free the
 * budget and the burst while jobs still run.
 */

import type { Clock } from '../clock.js';
import { isNodeRedis, REDIS_CLIENT, type RedisClientLike } from '../redis/client.js';
import { redisEviction } from '../redis/eviction.js';
import { LuaScript } from '../redis/lua-script.js';
import type { FailurePolicy, StoreEvents } from '../stores/health.js';
import type { DurationInput } from '../units.js';
import { FLEET_LUA } from './script.js';
import { PROBE_TTL_MS, SHARED_FLEET_OPTIONS, SharedFleetStore } from './shared-fleet-store.js';

/** Options for {@link RedisFleetStore}. */
export interface RedisFleetStoreOptions {
  /** A connected ioredis or node-redis client. */
  client: RedisClientLike;
  /** Namespace of the keys; no `{` or `}`. @default 'tokenpace-fleet' */
  prefix?: string;
  /** What to do when Redis fails: `'deny'`, `'allow'` or `'local'`. Required. */
  onError: FailurePolicy;
  /** With `'local'`: how many workers share the limits (each gets 1/expectedWorkers). Required then. */
  expectedWorkers?: number;
  /** The longest a call waits for Redis: ms, or a string such as `'100ms'`. @default 200 */
  timeout?: DurationInput;
  /** How often a failed Redis is probed with a call on probe keys: ms, or a string such as `'1s'`. @default 250 */
  probeInterval?: DurationInput;
  /** Idle keys vanish after this long: ms, or a string such as `'1h'`. @default '1d' */
  idleTtl?: DurationInput;
  /** @default systemClock */
  clock?: Clock;
  /**
   * The time the script uses, ms. By default Redis's own `TIME`, so workers with skewed clocks
   * agree; a function here replaces it (tests on a virtual clock).
   */
  now?: () => number;
}

/** The events a RedisFleetStore emits: those of every shared store (stores/health.ts). */
export type RedisFleetStoreEvents = StoreEvents;

const REDIS_FLEET_STORE_OPTIONS: ReadonlySet<string> = new Set(SHARED_FLEET_OPTIONS);

/** A fleet's shared state in Redis; see the file's opening comment. */
export class RedisFleetStore extends SharedFleetStore {
  readonly #script: LuaScript;

  constructor(options: RedisFleetStoreOptions) {
    // Options that are not an object are refused by SharedFleetStore, with the message every store gives.
    const client: RedisClientLike | undefined =
      typeof options === 'object' && options !== null ? options.client : undefined;
    const nodeRedis = typeof client === 'object' && client !== null ? isNodeRedis(client) : false;
    super(options, {
      name: 'Redis',
      storeName: 'RedisFleetStore',
      client: REDIS_CLIENT,
      knownOptions: REDIS_FLEET_STORE_OPTIONS,
      badPrefix: (prefix) => (/[{}]/.test(prefix) ? 'a non-empty string without { or }' : undefined),
      eviction: client === undefined ? undefined : redisEviction(client, nodeRedis),
    });
    this.#script = new LuaScript({
      name: 'fleet',
      lua: FLEET_LUA,
      client: options.client,
      nodeRedis,
      health: this.health,
      now: this.now,
    });
  }

  /**
   * Redis's `maxmemory-policy` as read at the first call and after each recovery (`undefined`
   * before, or if Redis refused CONFIG and INFO). Any but `'noeviction'` may evict the fleet's
   * leases and bucket: the `eviction` event says so.
   */
  get maxmemoryPolicy(): string | undefined {
    return this.health.maxmemory?.policy;
  }

  /** The five Redis keys of fleet key `key`. */
  keysFor(key: string): [string, string, string, string, string] {
    const tag = `{${this.prefix}:${key}}`;
    return [`${tag}:s`, `${tag}:l`, `${tag}:w`, `${tag}:q`, `${tag}:c`];
  }

  protected runScript(key: string, args: string[]): Promise<number[]> {
    return this.#script.run(this.keysFor(key), args);
  }

  /**
   * The script's `g` on the probe keys in the last fleet key's slot (`{p:k}:probe:s`, ...), with no
   * limits: it writes the state as every call does, so it succeeds where calls can.
   */
  protected probeScript(key: string): Promise<unknown> {
    const keys = this.keysFor(key).map((k) => k.replace(/:(.)$/, ':probe:$1'));
    return this.#script.run(keys, ['g', String(PROBE_TTL_MS), '-1', '1', '-1', '']);
  }
}
