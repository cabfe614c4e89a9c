/**
 * RedisStore: keyed buckets in Redis, shared by every instance of a fleet.
 *
 * One decision is one call of the keyed script (redis-script.ts), run the
 * way every store in Redis runs its Lua (src/redis/lua-script.ts: `EVALSHA`,
 * `EVAL` when Redis answers `NOSCRIPT`). The script is the meter's arithmetic
 * in Lua with the time from Redis's `TIME`, so instances with skewed clocks
 * agree, and it expires each bucket when it would be full again, so idle keys
 * vanish. Redis runs a script atomically: two concurrent decisions from any
 * number of processes never spend the same token.
 *
 * Batching. Decisions asked for while others are on the wire are collected
 * and sent together in calls of up to {@link MAX_BATCH} decisions, so calls
 * in flight at once do not each pay a round trip and a script invocation.
 * When nothing is in flight a decision is sent at the next microtask, so a
 * lone call waits for nothing. In a cluster a batch holds only decisions for
 * one slot (the store computes Redis's slot rule itself).
 *
 * Key layout (prefix `p`, default `tokenpace`):
 *
 * - without a global limit: `p:k:<key>`, no hash tag, so keys spread over a
 *   cluster's slots and nodes;
 * - with a global limit: `{p}:k:<key>` and the global bucket `{p}:g`. A
 *   decision must read and charge both atomically, and a script may only
 *   touch keys of one slot, so the hash tag `{p}` puts every key of the
 *   limiter in the one slot of the global bucket. The price: in a cluster,
 *   one node serves this whole limiter (replicas give fail-over, not
 *   scale-out). A limit shared by every key is a single counter, so exactness
 *   and one slot go together; split traffic over several prefixes, each with
 *   its share of the global rate, to spread it.
 *
 * Failure policy (src/stores/health.ts). Each call is bounded by `timeout`.
 * When Redis fails or does not answer in time, the store decides by
 * `onError`: `'allow'` admits (fail-open), `'deny'` refuses (fail-closed),
 * `'local'` decides with an in-memory bucket per instance (each instance then
 * admits up to the full limit on its own). The store then stops sending
 * decisions to Redis (each would wait out the timeout) and answers by the
 * policy at once, while one probe at a time (a try on the probe key
 * `<prefix>:probe:k`, or `{<prefix>}:probe:k` after decisions with a global
 * limit, written as a decision is) tries Redis every `probeInterval`; the
 * first that succeeds restores normal service, so a Redis that answers but
 * cannot decide (a read-only replica, out of memory) keeps the policy. Both
 * transitions are events (`degraded`, `recovered`), and every failed call is
 * a `failure` event: never silent. So is a `maxmemory-policy` that may evict
 * the buckets (`eviction`, src/redis/eviction.ts). Each is also published on
 * the `tokenpace:redis:*` diagnostics channels (src/diagnostics.ts), for a
 * subscriber that watches every store at once.
 *
 * A call that timed out may still reach Redis later (a paused server
 * resumes, a client's offline queue flushes) and be counted there: that errs
 * on the strict side, never the lenient one.
 */

import { EventEmitter } from 'node:events';
import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, InvalidOptionError, StoreUnavailableError } from '../errors.js';
import type { BucketParams } from '../meters/bucket.js';
import { delKeys, type IoredisLikeClient, isNodeRedis, REDIS_CLIENT, type RedisClientLike } from '../redis/client.js';
import { clusterSlot } from '../redis/cluster-slot.js';
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
import type { DurationInput } from '../units.js';
import { MemoryStore } from './memory-store.js';
import { decideByPolicy, resultOf } from './policy-answers.js';
import { KEYED_LUA } from './redis-script.js';
import type { KeyedStore, StoreCredit, StoreOp, StoreResult } from './store.js';

export type { IoredisLikeClient, NodeRedisLikeClient, RedisClientLike } from '../redis/client.js';
export { DEFAULT_TIMEOUT_MS, type FailurePolicy, type StoreEvents } from '../stores/health.js';

/** Options for {@link RedisStore}. */
export interface RedisStoreOptions {
  /** A connected ioredis or node-redis client (single node or cluster). Neither library is a dependency. */
  client: RedisClientLike;
  /**
   * Namespace of the keys; must not contain `{` or `}`. Use one per limiter.
   * @default 'tokenpace'
   */
  prefix?: string;
  /** Fail-open (`'allow'`), fail-closed (`'deny'`), or an in-memory bucket per instance (`'local'`). Required. */
  onError: FailurePolicy;
  /**
   * The longest a decision waits for Redis before the policy decides: ms, or a string such as
   * `'100ms'`. From 1 ms to 2^31 - 1 ms.
   * @default 200
   */
  timeout?: DurationInput;
  /** How often a failed Redis is probed with a decision on a probe key: ms, or a string such as `'1s'`. @default 250 */
  probeInterval?: DurationInput;
  /** Whether `client` is a cluster (batches are then split by slot). @default detected from the client */
  cluster?: boolean;
  /** Timers (timeouts, probes) and the `'local'` policy's time. @default systemClock */
  clock?: Clock;
  /** The most keys the `'local'` policy keeps. @default 100_000 */
  localMaxKeys?: number;
  /**
   * Replaces Redis's `TIME` with this clock's milliseconds: for tests and simulations on a virtual
   * clock only. A fleet leaves it unset, so every instance uses the server's time. (Redis expires keys
   * in its own time, so with a virtual clock a key lives at least a minute.)
   */
  now?: () => number;
}

/** Counters a RedisStore keeps. */
export interface RedisStoreStats {
  /** Decisions made by Redis. */
  decisions: number;
  /** Script calls sent for decisions and credits (a batch is one call; probes are not counted). */
  calls: number;
  /** Decisions made by the failure policy. */
  byPolicy: number;
  /** Failed or timed-out calls and probes. */
  failures: number;
}

/**
 * The most decisions in one script call. Redis runs a call's decisions one after another while the
 * client waits, and the client handles a reply while Redis waits: many decisions in flight go as
 * several calls of this size, so each side works while the other does.
 */
const MAX_BATCH = 32;
/** The probe's bucket (`rate:burst`): a try of 1 always conforms, and the key lives a few ms. */
const PROBE_BUCKET = '1000000:1000000';

interface Pending {
  op: StoreOp;
  /** Set for a cancel: the reservation whose tokens go back. */
  cancel: StoreResult | undefined;
  resolve: (result: StoreResult | Promise<StoreResult>) => void;
}

const REDIS_STORE_OPTIONS: ReadonlySet<string> = new Set([...SHARED_STORE_OPTIONS, 'cluster', 'localMaxKeys']);

/**
 * Keyed token buckets in Redis, shared by a fleet, with an explicit failure policy.
 *
 * @example
 * import { Redis } from 'ioredis';
 * const store = new RedisStore({ client: new Redis(), onError: 'local', timeout: '100ms' });
 * store.on('degraded', ({ error }) => log.warn({ error }, 'rate limits are per instance until Redis is back'));
 * const limiter = new KeyedLimiter({ rate: '100/min', burst: 20, store });
 */
export class RedisStore extends EventEmitter<StoreEvents> implements KeyedStore {
  readonly prefix: string;
  readonly policy: FailurePolicy;
  /** The bound on one call to Redis, ms. */
  readonly timeoutMs: number;
  /** The interval between probes of a failed Redis, ms. */
  readonly probeIntervalMs: number;
  readonly stats: RedisStoreStats = { decisions: 0, calls: 0, byPolicy: 0, failures: 0 };
  readonly #client: RedisClientLike;
  readonly #nodeRedis: boolean;
  readonly #cluster: boolean;
  readonly #clock: Clock;
  readonly #local: MemoryStore | undefined;
  readonly #health: StoreHealth;
  readonly #script: LuaScript;
  #pending: Pending[] = [];
  #flushScheduled = false;
  #inFlight = 0;
  /** Whether the last call had a global bucket: the probe then uses that layout's slot. */
  #probeGlobal = false;
  readonly #flushNow = (): void => this.#flush();

  constructor(options: RedisStoreOptions) {
    super();
    const failure = failureOptions(options, REDIS_CLIENT);
    const nodeRedis = isNodeRedis(options.client);
    checkKnownOptions(options, REDIS_STORE_OPTIONS, 'RedisStore options');
    const { client } = options;
    const prefix = options.prefix ?? 'tokenpace';
    if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
      throw new InvalidOptionError(
        'prefix',
        prefix,
        `Expected \`prefix\` to be a non-empty string without { or }, got ${JSON.stringify(prefix)}`,
      );
    }
    this.#client = client;
    this.#nodeRedis = nodeRedis;
    this.#cluster = options.cluster ?? isClusterClient(client);
    this.prefix = prefix;
    this.policy = failure.policy;
    this.timeoutMs = failure.timeoutMs;
    this.probeIntervalMs = failure.probeIntervalMs;
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
      name: 'keyed',
      lua: KEYED_LUA,
      client,
      nodeRedis,
      health: this.#health,
      now: failure.now,
    });
    this.#local =
      this.policy === 'local' ? new MemoryStore({ clock: this.#clock, maxKeys: options.localMaxKeys }) : undefined;
  }

  /** False while decisions follow the failure policy. */
  get healthy(): boolean {
    return this.#health.healthy;
  }

  /**
   * Redis's `maxmemory-policy` as read at the first call and after each recovery (`undefined`
   * before, or if Redis refused CONFIG and INFO). Any but `'noeviction'` may evict buckets, which
   * then come back full: the `eviction` event says so.
   */
  get maxmemoryPolicy(): string | undefined {
    return this.#health.maxmemory?.policy;
  }

  /** The Redis key that holds `key`'s bucket (with a global limit: `{prefix}:k:<key>`). */
  keyFor(key: string, global: boolean): string {
    return global ? `{${this.prefix}}:k:${key}` : `${this.prefix}:k:${key}`;
  }

  /** The Redis key of the global bucket. */
  get globalKey(): string {
    return `{${this.prefix}}:g`;
  }

  decide(op: StoreOp): Promise<StoreResult> {
    if (!this.#health.usable) return this.#byPolicy(op);
    return new Promise<StoreResult>((resolve) => this.#enqueue({ op, cancel: undefined, resolve }));
  }

  refund(op: StoreOp, result: StoreResult): Promise<void> {
    if (result.source === 'local') return (this.#local as MemoryStore).refund(op, result);
    if (result.source !== 'store' || !this.#health.healthy) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#enqueue({ op, cancel: result, resolve: () => resolve() });
    });
  }

  /**
   * Gives `op.cost` back (bucket.ts's `credit`) in one script call of its own. While Redis is
   * unreachable, only the `'local'` policy charged anything: its own bucket gets the credit.
   * A credit that fails is lost (it errs on the strict side) and counts as a failure.
   */
  credit(op: StoreCredit): Promise<void> {
    if (!this.#health.usable) return this.#local === undefined ? Promise.resolve() : this.#local.credit(op);
    const hasGlobal = op.global !== undefined;
    const keys = hasGlobal ? [this.globalKey, this.keyFor(op.key, true)] : [this.keyFor(op.key, false)];
    // The call's layout is #send's (redis-script.ts), for one `a` operation.
    const args = [paramsText(op.bucket), op.global === undefined ? '' : paramsText(op.global), `a${op.cost}`];
    this.stats.calls++;
    return this.#script.run(keys, args).then(
      () => undefined,
      (error: unknown) => this.#health.failed(errorOf(error), 1),
    );
  }

  async reset(key: string): Promise<void> {
    await this.#local?.reset(key);
    const keys = [this.keyFor(key, false), this.keyFor(key, true)];
    await this.#health
      .withTimeout(this.#cluster ? Promise.all(keys.map((k) => this.#del([k]))) : this.#del(keys))
      .catch((error: unknown) => {
        throw new StoreUnavailableError(
          `could not reset key ${JSON.stringify(key)} in Redis: ${errorOf(error).message}`,
          { cause: error },
        );
      });
  }

  /** Stops probing and answers every later decision by the policy. Does not close the client (it is yours). */
  close(): void {
    this.#health.close();
  }

  /** {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  #enqueue(pending: Pending): void {
    this.#pending.push(pending);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    // Nothing on the wire: send at the next microtask. Otherwise gather what the
    // replies arriving now trigger, and send it as one batch.
    if (this.#inFlight === 0) queueMicrotask(this.#flushNow);
    else setImmediate(this.#flushNow);
  }

  #flush(): void {
    this.#flushScheduled = false;
    const all = this.#pending;
    this.#pending = [];
    if (!this.#health.healthy) {
      for (const p of all) p.resolve(p.cancel !== undefined ? p.cancel : this.#byPolicy(p.op));
      return;
    }
    // One script call serves decisions that share their buckets' parameters (a live setRate makes
    // new ones) and, in a cluster, their slot.
    const groups = new Map<string, Pending[]>();
    const ids = new Map<object, number>();
    const id = (o: object | undefined) => {
      if (o === undefined) return -1;
      let n = ids.get(o);
      if (n === undefined) {
        n = ids.size;
        ids.set(o, n);
      }
      return n;
    };
    for (const p of all) {
      const slot = this.#cluster ? clusterSlot(this.keyFor(p.op.key, p.op.global !== undefined)) : 0;
      const groupKey = `${slot}/${id(p.op.bucket)}/${id(p.op.global)}`;
      let group = groups.get(groupKey);
      if (group === undefined) {
        group = [];
        groups.set(groupKey, group);
      }
      group.push(p);
    }
    for (const group of groups.values()) {
      for (let i = 0; i < group.length; i += MAX_BATCH) this.#send(group.slice(i, i + MAX_BATCH));
    }
  }

  #send(batch: Pending[]): void {
    const { bucket, global } = (batch[0] as Pending).op;
    const hasGlobal = global !== undefined;
    const keys: string[] = hasGlobal ? [this.globalKey] : [];
    const args = [paramsText(bucket), global === undefined ? '' : paramsText(global)];
    for (const { op, cancel } of batch) {
      keys.push(this.keyFor(op.key, hasGlobal));
      if (cancel !== undefined) {
        args.push(`c${op.cost}`, String(cancel.readyAtMs), String(cancel.globalReadyAtMs));
      } else if (op.mode === 'reserve') {
        args.push(`r${op.cost}`, op.maxWaitMs === Number.POSITIVE_INFINITY ? '-1' : String(op.maxWaitMs));
      } else {
        args.push(`${op.mode === 'try' ? 't' : 'p'}${op.cost}`);
      }
    }
    this.#inFlight++;
    this.stats.calls++;
    this.#probeGlobal = hasGlobal;
    this.#script.run(keys, args).then(
      (reply) => {
        this.#inFlight--;
        this.#answer(batch, hasGlobal, reply);
      },
      (error: unknown) => {
        this.#inFlight--;
        this.#failed(errorOf(error), batch);
      },
    );
  }

  /** Resolves each decision of `batch` from the script's reply (redis-script.ts). */
  #answer(batch: Pending[], hasGlobal: boolean, reply: number[]): void {
    const perOp = hasGlobal ? 5 : 3;
    if (reply.length !== 1 + batch.length * perOp) {
      this.#failed(
        new StoreUnavailableError(
          `unexpected reply from the keyed script: expected ${1 + batch.length * perOp} numbers, got ${reply.length}`,
        ),
        batch,
      );
      return;
    }
    this.stats.decisions += batch.length;
    const nowMs = reply[0] as number;
    for (let i = 0, at = 1; i < batch.length; i++, at += perOp) {
      const global = hasGlobal ? ([reply[at + 3], reply[at + 4]] as [number, number]) : undefined;
      (batch[i] as Pending).resolve(
        resultOf(
          (batch[i] as Pending).op,
          nowMs,
          reply[at] as number,
          reply[at + 1] as number,
          reply[at + 2] as number,
          global,
        ),
      );
    }
  }

  /** A try of 1 on the probe key, admitted and written as a decision is: it succeeds where decisions can. */
  #probe(): Promise<unknown> {
    const key = this.#probeGlobal ? `{${this.prefix}}:probe:k` : `${this.prefix}:probe:k`;
    return this.#script.run([key], [PROBE_BUCKET, '', 't1']);
  }

  #del(keys: string[]): Promise<unknown> {
    return delKeys(this.#client, this.#nodeRedis, keys);
  }

  #failed(error: Error, batch: Pending[]): void {
    this.#health.failed(error, batch.length);
    for (const p of batch) p.resolve(p.cancel !== undefined ? p.cancel : this.#byPolicy(p.op));
  }

  #byPolicy(op: StoreOp): Promise<StoreResult> {
    this.stats.byPolicy++;
    if (this.#health.usable) this.#health.degrade(new StoreUnavailableError('Redis failed'));
    return decideByPolicy(this.policy, op, this.#clock, this.#local);
  }
}

/** A bucket's parameters as the keyed script reads them (redis-script.ts): `rate:capacity`. */
function paramsText(bucket: BucketParams): string {
  return `${bucket.ratePerSecond}:${bucket.burst}`;
}

function isClusterClient(client: RedisClientLike): boolean {
  if ((client as IoredisLikeClient).isCluster === true) return true;
  return typeof client === 'object' && client !== null && 'masters' in client && 'nodeByAddress' in client;
}
