/**
 * MemoryStore: keyed buckets in this process's memory.
 *
 * Layout. A `Map` from key to a slot number, and per slot, in typed arrays:
 * the bucket's two variables (`tokens`, `updatedAtMs`), when it is full again
 * under the limits it was last written with (`fullAtMs`), and the slot's
 * neighbours in the recency list (`newer`, `older`), plus the key itself in a
 * plain array (the same string the map holds). A live key costs its map
 * entry, its key string and 40 bytes of arrays: no object per key, no timer.
 * The arrays grow by doubling up to `maxKeys`.
 *
 * Order. The recency list is intrusive (links in an Int32Array), so using a
 * key moves it to the front in O(1) without touching the `Map` (deleting and
 * re-inserting a key to keep the map's order leaves holes the map must
 * compact, a copy of the whole table).
 *
 * Bound. At most `maxKeys` keys are kept. A bucket that has refilled to full
 * holds no information (it equals a new one), so when a new key needs room the
 * full buckets go first: a sweep drops every bucket past its `fullAtMs` at once.
 * Each key's own limits decide when it is full (keys may have limits by plan),
 * as they decide when a Redis key expires. A sweep costs
 * a pass over the slots, so it runs at most once per `maxKeys / 16` new keys
 * (amortised O(1) per key); between sweeps, and when no bucket is full, the
 * least recently used key goes. Forgetting a bucket that was not full gives
 * that key a fresh burst, so size `maxKeys` above the number of keys active
 * within `burst / rate` seconds.
 *
 * Global bucket. One bucket shared by every key, kept apart from the map
 * (never evicted). A decision reads both and charges both or neither, in one
 * synchronous step, which is atomic in one process.
 *
 * Keys are compared as strings by the `Map`, so `'__proto__'`, `'constructor'`
 * and `'hasOwnProperty'` are ordinary keys.
 */

import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, checkOptions, describeValue, InvalidOptionError } from '../errors.js';
import {
  type BucketParams,
  type BucketState,
  charge,
  chargeNew,
  clampToCapacity,
  conformsAt,
  credit,
  delayUntil,
  refund,
  rewind,
  timeToFullMs,
  tokensAt,
} from '../meters/bucket.js';
import type { KeyedStore, StoreCredit, StoreOp, StoreResult } from './store.js';

/** Options for {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * The most keys kept at once. Full buckets are dropped first, then the least recently used.
   * Minimum 1.
   * @default 100_000
   */
  maxKeys?: number;
  /** The time source. @default systemClock */
  clock?: Clock;
}

/** The default bound on keys kept in memory. */
export const DEFAULT_MAX_KEYS = 100_000;

/**
 * `maxKeys` (`fallback` when not given): an integer from 1 to 2^31 - 1, the one rule for every table
 * of keys (the memory stores, a KeyedScheduler). Bounded on purpose: it sizes the memory kept. @internal
 */
export function parseMaxKeys(value: number | undefined, fallback: number): number {
  const maxKeys = value ?? fallback;
  if (Number.isInteger(maxKeys) && maxKeys >= 1 && maxKeys < 2 ** 31) return maxKeys;
  throw new InvalidOptionError(
    'maxKeys',
    maxKeys,
    `Expected \`maxKeys\` to be an integer from 1 to 2^31 - 1, got ${describeValue(maxKeys)}: the keys kept are ` +
      'bounded on purpose; pick the most you are willing to hold in memory',
  );
}

const INITIAL_SLOTS = 1024;
const NONE = -1;

/** The options of the keyed memory stores (MemoryStore, MemoryWindowStore). @internal */
export const MEMORY_STORE_OPTIONS: ReadonlySet<string> = new Set(['maxKeys', 'clock']);

/**
 * Keyed token buckets in memory, bounded by `maxKeys`, with no timer per key.
 *
 * @example
 * const limiter = new KeyedLimiter({ rate: 10, burst: 20, store: new MemoryStore({ maxKeys: 50_000 }) });
 */
export class MemoryStore implements KeyedStore {
  readonly maxKeys: number;
  readonly #clock: Clock;
  readonly #slots = new Map<string, number>();
  /** Per slot, side by side: `tokens` at `2 * slot`, `updatedAtMs` at `2 * slot + 1`. */
  #state: Float64Array;
  /**
   * The recency list, per slot side by side: at `2 * slot` the next more recently used slot (NONE at
   * the front), at `2 * slot + 1` the next less recently used (NONE at the back).
   */
  #links: Int32Array;
  /** Per slot: when its bucket is full again, by the limits it was last written with (it may be forgotten then). */
  #fullAt: Float64Array;
  /** The key of each live slot (undefined when free). */
  #keys: (string | undefined)[] = [];
  /** Most recently used slot. */
  #front = NONE;
  /** Least recently used slot. */
  #back = NONE;
  /** Slots freed by eviction or reset, reused before new ones. */
  #free: number[] = [];
  /** Slots ever handed out (the arrays' used prefix). */
  #used = 0;
  #insertsSinceSweep = Number.POSITIVE_INFINITY;
  readonly #sweepEvery: number;
  /** The global bucket, from the first decision that has one (new, it is full). */
  #global: BucketState | undefined;
  /** Evictions so far, by reason. */
  readonly evictions = { full: 0, leastRecentlyUsed: 0 };

  constructor(options: MemoryStoreOptions = {}) {
    checkOptions(options, 'MemoryStore options ({ maxKeys, clock })', false);
    checkKnownOptions(options, MEMORY_STORE_OPTIONS, 'MemoryStore options');
    const maxKeys = parseMaxKeys(options.maxKeys, DEFAULT_MAX_KEYS);
    this.maxKeys = maxKeys;
    this.#clock = checkClock(options.clock);
    this.#sweepEvery = Math.floor(maxKeys / 16);
    const initial = Math.min(maxKeys, INITIAL_SLOTS);
    this.#state = new Float64Array(2 * initial);
    this.#links = new Int32Array(2 * initial);
    this.#fullAt = new Float64Array(initial);
  }

  /** Keys currently kept. */
  get size(): number {
    return this.#slots.size;
  }

  /** True if `key` has a bucket here (a key never seen, reset or evicted has none: it is full). */
  has(key: string): boolean {
    return this.#slots.has(key);
  }

  /** The keys kept, least recently used first. */
  *keys(): IterableIterator<string> {
    for (let slot = this.#back; slot !== NONE; slot = this.#links[2 * slot] as number) yield this.#keys[slot] as string;
  }

  decide(op: StoreOp): Promise<StoreResult> {
    return Promise.resolve(this.decideAt(this.#clock.now(), op));
  }

  /** {@link decide}, answered synchronously (the contract's optional {@link KeyedStore.decideSync}). */
  decideSync(op: StoreOp): StoreResult {
    return this.decideAt(this.#clock.now(), op);
  }

  /** {@link decideSync} at an explicit time. @internal */
  decideAt(nowMs: number, op: StoreOp): StoreResult {
    const { mode, key, cost, bucket, global, maxWaitMs } = op;
    let slot = this.#slots.get(key);
    if (slot === undefined && global === undefined && mode !== 'peek' && cost <= bucket.burst) {
      // A new key: its bucket is full, so any cost up to the capacity is admitted at once. This is
      // the general path below with its answers known (delayUntil is 0, and charge, with no time
      // elapsed, leaves chargeNew's tokens): the same floats.
      const tokens = chargeNew(bucket, cost);
      slot = this.#insert(key, nowMs);
      this.#write(slot, { tokens, updatedAtMs: nowMs }, bucket);
      return {
        allowed: true,
        tokens,
        globalTokens: Number.POSITIVE_INFINITY,
        waitMs: 0,
        nowMs,
        readyAtMs: nowMs,
        globalReadyAtMs: nowMs,
        source: 'store',
      };
    }
    // The steps are TokenBucket's (reserveAt, tryTakeAt), on the stored state as it was written:
    // ask when (delayUntil), then charge. The same float path, so one key is exactly a TokenBucket.
    let k: BucketState;
    if (slot === undefined) {
      k = { tokens: bucket.burst, updatedAtMs: nowMs };
    } else {
      k = this.#read(slot);
      clampToCapacity(k, bucket);
      rewind(k, nowMs); // the clock went back: re-count from now (bucket.ts rewind), as the script does
      if (slot !== this.#front) {
        this.#unlink(slot);
        this.#pushFront(slot);
      }
    }
    const readyInMs = delayUntil(k, bucket, nowMs, cost);
    // The global bucket, read at the same instant: both buckets are charged, or neither.
    const shared = global === undefined ? undefined : { state: this.#globalAt(global, nowMs), params: global };
    const globalReadyInMs = shared === undefined ? 0 : delayUntil(shared.state, shared.params, nowMs, cost);
    const waitMs = Math.max(readyInMs, globalReadyInMs);
    const allowed =
      mode === 'reserve'
        ? waitMs <= maxWaitMs ||
          (conformsAt(k, bucket, nowMs + maxWaitMs, cost) &&
            (shared === undefined || conformsAt(shared.state, shared.params, nowMs + maxWaitMs, cost)))
        : waitMs === 0;
    let tokens: number;
    let globalTokens = Number.POSITIVE_INFINITY;
    if (allowed && mode !== 'peek') {
      charge(k, bucket, nowMs, cost);
      tokens = k.tokens;
      if (shared !== undefined) {
        charge(shared.state, shared.params, nowMs, cost);
        globalTokens = shared.state.tokens;
      }
      if (slot === undefined) slot = this.#insert(key, nowMs);
      this.#write(slot, k, bucket);
    } else {
      tokens = tokensAt(k, bucket, nowMs);
      if (shared !== undefined) globalTokens = tokensAt(shared.state, shared.params, nowMs);
      // A refusal keeps a rewind (the only change to a kept key's time here), so refill runs from it.
      if (slot !== undefined) this.#state[2 * slot + 1] = k.updatedAtMs;
    }
    return {
      allowed,
      tokens,
      globalTokens,
      waitMs,
      nowMs,
      readyAtMs: nowMs + readyInMs,
      globalReadyAtMs: nowMs + globalReadyInMs,
      source: 'store',
    };
  }

  refund(op: StoreOp, result: StoreResult): Promise<void> {
    this.refundAt(this.#clock.now(), op, result);
    return Promise.resolve();
  }

  /** {@link refund} at an explicit time. @internal */
  refundAt(nowMs: number, op: StoreOp, result: StoreResult): void {
    this.#giveBack(nowMs, op, result);
  }

  credit(op: StoreCredit): Promise<void> {
    this.creditAt(this.#clock.now(), op);
    return Promise.resolve();
  }

  /** {@link credit} at an explicit time. @internal */
  creditAt(nowMs: number, op: StoreCredit): void {
    this.#giveBack(nowMs, op, undefined);
  }

  /**
   * Gives `op.cost` back to the key's bucket (if it still has one) and the global one: by the
   * cancel rule for the reservation `reserved` (its due times), or as a credit without one.
   */
  #giveBack(nowMs: number, op: StoreCredit, reserved: StoreResult | undefined): void {
    const slot = this.#slots.get(op.key);
    if (slot !== undefined) {
      const k = this.#read(slot);
      clampToCapacity(k, op.bucket);
      rewind(k, nowMs);
      if (reserved === undefined) credit(k, op.bucket, nowMs, op.cost);
      else refund(k, op.bucket, nowMs, op.cost, reserved.readyAtMs);
      this.#write(slot, k, op.bucket);
    }
    const g = this.#global;
    if (op.global !== undefined && g !== undefined) {
      clampToCapacity(g, op.global);
      rewind(g, nowMs);
      if (reserved === undefined) credit(g, op.global, nowMs, op.cost);
      else refund(g, op.global, nowMs, op.cost, reserved.globalReadyAtMs);
    }
  }

  reset(key: string): Promise<void> {
    this.resetKey(key);
    return Promise.resolve();
  }

  /** Synchronous {@link reset}. @internal */
  resetKey(key: string): void {
    const slot = this.#slots.get(key);
    if (slot !== undefined) this.#drop(slot);
  }

  /** Forgets every key and the global bucket. */
  clear(): void {
    this.#slots.clear();
    this.#keys = [];
    this.#free = [];
    this.#used = 0;
    this.#front = NONE;
    this.#back = NONE;
    this.#global = undefined;
  }

  /** The global bucket at `nowMs`, before a decision: new (full), or clamped to `global` and rewound. */
  #globalAt(global: BucketParams, nowMs: number): BucketState {
    this.#global ??= { tokens: global.burst, updatedAtMs: nowMs };
    const g = this.#global;
    clampToCapacity(g, global);
    rewind(g, nowMs);
    return g;
  }

  /** A slot's bucket state, as a new object. */
  #read(slot: number): BucketState {
    return { tokens: this.#state[2 * slot] as number, updatedAtMs: this.#state[2 * slot + 1] as number };
  }

  /** Writes a slot's bucket, and when it is full again under `bucket`. */
  #write(slot: number, k: BucketState, bucket: BucketParams): void {
    this.#state[2 * slot] = k.tokens;
    this.#state[2 * slot + 1] = k.updatedAtMs;
    this.#fullAt[slot] = k.updatedAtMs + timeToFullMs(k.tokens, bucket);
  }

  /** Gives `key` a slot, making room first if the store is at `maxKeys`. */
  #insert(key: string, nowMs: number): number {
    if (this.#slots.size >= this.maxKeys) this.#makeRoom(nowMs);
    let slot = this.#free.pop();
    if (slot === undefined) {
      slot = this.#used++;
      if (2 * slot >= this.#state.length) this.#grow();
    }
    this.#slots.set(key, slot);
    this.#keys[slot] = key;
    this.#pushFront(slot);
    this.#insertsSinceSweep++;
    return slot;
  }

  #makeRoom(nowMs: number): void {
    if (this.#insertsSinceSweep >= this.#sweepEvery) {
      this.#insertsSinceSweep = 0;
      const keys = this.#keys;
      const fullAt = this.#fullAt;
      for (let slot = 0; slot < this.#used; slot++) {
        if (keys[slot] === undefined) continue;
        if ((fullAt[slot] as number) <= nowMs) {
          this.#drop(slot);
          this.evictions.full++;
        }
      }
      if (this.#slots.size < this.maxKeys) return;
    }
    if (this.#back === NONE) return;
    this.#drop(this.#back);
    this.evictions.leastRecentlyUsed++;
  }

  /** Forgets a live slot's key and frees the slot. */
  #drop(slot: number): void {
    this.#slots.delete(this.#keys[slot] as string);
    this.#keys[slot] = undefined;
    this.#unlink(slot);
    this.#free.push(slot);
  }

  #pushFront(slot: number): void {
    const links = this.#links;
    const front = this.#front;
    links[2 * slot] = NONE;
    links[2 * slot + 1] = front;
    if (front === NONE) this.#back = slot;
    else links[2 * front] = slot;
    this.#front = slot;
  }

  #unlink(slot: number): void {
    const links = this.#links;
    const newer = links[2 * slot] as number;
    const older = links[2 * slot + 1] as number;
    if (newer === NONE) this.#front = older;
    else links[2 * newer + 1] = older;
    if (older === NONE) this.#back = newer;
    else links[2 * older] = newer;
  }

  #grow(): void {
    const length = 2 * Math.min(this.maxKeys, this.#state.length);
    const state = new Float64Array(length);
    state.set(this.#state);
    this.#state = state;
    const links = new Int32Array(length);
    links.set(this.#links);
    this.#links = links;
    const fullAt = new Float64Array(length / 2);
    fullAt.set(this.#fullAt);
    this.#fullAt = fullAt;
  }
}
