/**
 * RedisBandwidthStore: a fleet bandwidth group's bucket and members' demands
 * in Redis, one script call (./bandwidth-lua.ts) per exchange, with an
 * explicit failure policy.
 *
 * The script runs the way every store in Redis runs its Lua
 * (src/redis/lua-script.ts), with Redis's `TIME` as the time base, and
 * failures follow src/stores/health.ts, as `RedisFleetStore`'s do. Keys, for
 * key `k` and prefix `p`: `{p:k}:s` (limits and bucket), `{p:k}:m` (members'
 * sequence, demand and cap), `{p:k}:e` (members' expiries).
 *
 * Each call carries a deadline in Redis's time (this process's send time plus
 * the offset of the last answer, plus `timeout`): a call Redis runs after it
 * (a paused server that resumes, a client's offline queue replayed into a
 * restarted one) grants nothing; a call with a sequence number not above the
 * member's last changes nothing. So a grant this process gave up on is never
 * also spent, and a lease is counted once.
 *
 * While Redis is failing the exchange is answered by `onError` at once:
 * - `'deny'`: nothing is granted; what a process already holds it may still
 *   spend within its lease;
 * - `'local'`: each process is granted a lease of rate / `expectedWorkers`;
 * - `'allow'`: each process is granted a lease of the whole rate.
 */

import { EventEmitter } from 'node:events';
import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, InvalidOptionError, StoreUnavailableError } from '../errors.js';
import { isNodeRedis, REDIS_CLIENT, type RedisClientLike } from '../redis/client.js';
import { redisEviction } from '../redis/eviction.js';
import { LuaScript } from '../redis/lua-script.js';
import {
  errorOf,
  type FailurePolicy,
  failureOptions,
  SHARED_STORE_OPTIONS,
  type StoreEvents,
  StoreHealth,
} from '../stores/health.js';
import { type DurationInput, parseDuration } from '../units.js';
import { BANDWIDTH_LUA } from './bandwidth-lua.js';
import {
  type BandwidthExchangeOp,
  type BandwidthLease,
  type BandwidthParams,
  type BandwidthStore,
  leaseBytes,
} from './bandwidth-store.js';

/** Options for {@link RedisBandwidthStore}. */
export interface RedisBandwidthStoreOptions {
  /** A connected ioredis or node-redis client. */
  client: RedisClientLike;
  /** Namespace of the keys; no `{` or `}`. @default 'tokenpace-bw' */
  prefix?: string;
  /** What to do when Redis fails: `'deny'`, `'allow'` or `'local'`. Required. */
  onError: FailurePolicy;
  /** With `'local'`: how many processes share the rate (each gets 1/expectedWorkers). Required then. */
  expectedWorkers?: number;
  /** The longest a call waits for Redis: ms, or a string such as `'100ms'`. @default 200 */
  timeout?: DurationInput;
  /** How often a failed Redis is probed: ms, or a string such as `'1s'`. @default 250 */
  probeInterval?: DurationInput;
  /** Idle keys vanish after this long: ms, or a string such as `'1h'`. @default '1d' */
  idleTtl?: DurationInput;
  /** @default systemClock */
  clock?: Clock;
  /** The time the script uses, ms; Redis's own `TIME` by default. */
  now?: () => number;
}

const DEFAULT_IDLE_TTL_MS = 86_400_000;
const OPTIONS: ReadonlySet<string> = new Set([...SHARED_STORE_OPTIONS, 'expectedWorkers', 'idleTtl']);

/** A fleet bandwidth group's shared state in Redis; see the file's opening comment. */
export class RedisBandwidthStore extends EventEmitter<StoreEvents> implements BandwidthStore {
  readonly prefix: string;
  readonly policy: FailurePolicy;
  readonly expectedWorkers: number;
  /** The bound on one call to Redis, ms. */
  readonly timeoutMs: number;
  readonly idleTtlMs: number;
  readonly #clock: Clock;
  readonly #script: LuaScript;
  readonly #health: StoreHealth;
  /** Redis's time minus this process's clock, from the last answer (undefined before one). */
  #offsetMs: number | undefined;
  /** The limits Redis last gave per key: what the fallback uses. */
  readonly #known = new Map<string, BandwidthParams>();
  #lastKey = '';
  /** Calls that reached Redis and calls answered by the policy. */
  readonly stats = { calls: 0, byPolicy: 0, failures: 0 };

  constructor(options: RedisBandwidthStoreOptions) {
    super();
    this.setMaxListeners(0);
    const failure = failureOptions(options, REDIS_CLIENT);
    const nodeRedis = isNodeRedis(options.client);
    checkKnownOptions(options, OPTIONS, 'RedisBandwidthStore options');
    const expectedWorkers = options.expectedWorkers ?? (options.onError === 'local' ? Number.NaN : 1);
    if (!(Number.isSafeInteger(expectedWorkers) && expectedWorkers >= 1)) {
      throw new InvalidOptionError(
        'expectedWorkers',
        options.expectedWorkers,
        `Expected \`expectedWorkers\` to be an integer >= 1 (with onError 'local' each process falls back to 1/expectedWorkers of the rate), got ${String(options.expectedWorkers)}`,
      );
    }
    const prefix = options.prefix ?? 'tokenpace-bw';
    if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
      throw new InvalidOptionError('prefix', prefix, 'Expected `prefix` to be a non-empty string without { or }');
    }
    const idleTtlMs = options.idleTtl === undefined ? DEFAULT_IDLE_TTL_MS : parseDuration(options.idleTtl);
    if (!(idleTtlMs >= 1 && idleTtlMs < Number.POSITIVE_INFINITY)) {
      throw new InvalidOptionError(
        'idleTtl',
        options.idleTtl,
        `Expected \`idleTtl\` to be a finite duration of at least 1 ms, as in \`idleTtl: '1d'\`, got ${String(options.idleTtl)}`,
      );
    }
    this.#clock = checkClock(options.clock);
    this.prefix = prefix;
    this.policy = failure.policy;
    this.expectedWorkers = expectedWorkers;
    this.timeoutMs = failure.timeoutMs;
    this.idleTtlMs = idleTtlMs;
    const { client } = options;
    this.#health = new StoreHealth({
      owner: this,
      backend: 'Redis',
      failure,
      clock: this.#clock,
      // on probe keys in the last key's slot: a probe must not create the real key with made-up limits
      probe: () =>
        this.#script.run(
          this.keysFor(this.#lastKey).map((k) => `${k}:probe`),
          [String(idleTtlMs), '1', '1', '', ''],
        ),
      stats: this.stats,
      eviction: redisEviction(client, nodeRedis),
    });
    this.#script = new LuaScript({
      name: 'bandwidth',
      lua: BANDWIDTH_LUA,
      client,
      nodeRedis,
      health: this.#health,
      now: failure.now,
    });
  }

  /** False while exchanges are answered by the failure policy. */
  get healthy(): boolean {
    return this.#health.healthy;
  }

  /** The three Redis keys of key `key`. */
  keysFor(key: string): [string, string, string] {
    const tag = `{${this.prefix}:${key}}`;
    return [`${tag}:s`, `${tag}:m`, `${tag}:e`];
  }

  /** Stops probing; later calls are answered by the policy. The client is yours to close. */
  close(): void {
    this.#health.close();
  }

  /** {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  async exchange(op: BandwidthExchangeOp): Promise<BandwidthLease> {
    this.#lastKey = op.key;
    if (!this.#health.usable) return this.#byPolicy(op);
    const sentAt = this.#clock.now();
    const offset = this.#offsetMs;
    const d = op.writeParams === true ? op.params : (this.#known.get(op.key) ?? op.params);
    // After this (Redis's time) the call is given up here: run later, it only gives back.
    const deadline = op.deadlineMs ?? (offset === undefined ? undefined : sentAt + offset + this.timeoutMs);
    const args = [
      String(this.idleTtlMs),
      String(d.ratePerSecond),
      String(d.burst),
      deadline === undefined ? '' : String(deadline),
      op.member,
      String(op.seq),
      String(op.demand),
      op.capPerSecond === Number.POSITIVE_INFINITY ? '-1' : String(op.capPerSecond),
      String(op.giveBackBytes),
      String(op.heldBytes),
      String(op.leaseMs),
      op.writeParams === true ? '1' : '',
      String(op.floorPerSecond ?? 0),
    ];
    let n: number[];
    try {
      n = await this.#script.run(this.keysFor(op.key), args);
      if (n.length !== 9)
        throw new StoreUnavailableError(`unexpected reply from the bandwidth script: ${n.length} numbers`);
    } catch (error) {
      this.#health.failed(errorOf(error), 1);
      return this.#byPolicy(op);
    }
    this.stats.calls++;
    const nowMs = n[0] as number;
    // At most the true offset (the script ran before the answer came): deadlines err early.
    this.#offsetMs = nowMs - this.#clock.now();
    const params = { ratePerSecond: n[7] as number, burst: n[8] as number };
    this.#known.set(op.key, params);
    return {
      nowMs,
      grantedBytes: n[1] as number,
      sharePerSecond: n[2] as number,
      retryMs: n[3] as number,
      tokens: n[4] as number,
      demand: n[5] as number,
      members: n[6] as number,
      params,
      source: 'store',
    };
  }

  /** The policy's answer: nothing (`'deny'`), or a lease of this process's part of the rate. */
  #byPolicy(op: BandwidthExchangeOp): BandwidthLease {
    this.stats.byPolicy++;
    const params = op.writeParams === true ? op.params : (this.#known.get(op.key) ?? op.params);
    const workers = this.policy === 'local' ? this.expectedWorkers : 1;
    const share = this.policy === 'deny' || !(op.demand > 0) ? 0 : params.ratePerSecond / workers;
    const grantedBytes = Math.max(0, leaseBytes(share, op.leaseMs) - op.heldBytes);
    return {
      nowMs: this.#clock.now() + (this.#offsetMs ?? 0),
      grantedBytes,
      sharePerSecond: share,
      retryMs: this.policy === 'deny' ? this.#health.probeIntervalMs : 0,
      tokens: 0,
      demand: op.demand,
      members: 1,
      params,
      source: this.policy,
    };
  }
}
