/**
 * The store contract: where a keyed limiter's bucket state lives.
 *
 * A store holds one token bucket per key (and, with a global limit, one more
 * bucket shared by every key) and performs each decision as ONE atomic step:
 * read both buckets at the store's own time, decide, charge both or neither.
 * Two concurrent decisions never spend the same token, whichever process
 * they come from.
 *
 * The arithmetic is the meter's (`src/meters/bucket.ts`): tokens refill
 * lazily, `tokens = min(capacity, tokens + elapsed * rate)`, time that goes
 * backwards counts as zero elapsed, a request conforms iff the tokens are
 * there (within the meter's slack), and a refused request changes nothing.
 *
 * Three kinds of operation:
 *
 * - `try`: take `cost` from the key's bucket (and the global one) if both
 *   have it now; otherwise change nothing and say how long until they would.
 * - `reserve`: take `cost` now even if the buckets go into debt, provided the
 *   wait until both conform is at most `maxWaitMs`; a longer wait charges
 *   nothing. The caller then waits `waitMs` before acting.
 * - `peek`: what `try` would say, changing nothing.
 *
 * A reservation is cancelled with `refund(op, result)`, which gives back what
 * Go's cancel rule allows (`refund` in src/meters/bucket.ts). A cost that was
 * charged for a request that, once done, should not count is given back with
 * `credit(op)` (bucket.ts's `credit`: added, capped at the capacity; there
 * is no later reservation to protect).
 */

import type { BucketParams } from '../meters/bucket.js';

/** What a decision asks for. */
export type StoreMode = 'try' | 'reserve' | 'peek';

/** One decision for a store to make atomically. */
export interface StoreOp {
  mode: StoreMode;
  /** The key (any non-empty string; `'__proto__'` is an ordinary key). */
  key: string;
  /** Tokens to take (0 < cost <= capacity; the limiter has checked it). */
  cost: number;
  /** The key's bucket. */
  bucket: BucketParams;
  /** The global bucket over every key, if any. */
  global: BucketParams | undefined;
  /** For `reserve`: the longest acceptable wait in milliseconds (Infinity = any). */
  maxWaitMs: number;
}

/** What a store answers. Times are in the store's own clock (Redis's `TIME` for Redis). */
export interface StoreResult {
  /** `try`: taken now. `reserve`: charged (wait `waitMs` before acting). `peek`: would be taken now. */
  allowed: boolean;
  /** The key bucket's tokens after the decision (negative while in debt). */
  tokens: number;
  /** The global bucket's tokens after the decision (Infinity without a global limit). */
  globalTokens: number;
  /**
   * Milliseconds until both buckets hold `cost` (measured before charging): 0 when they do now.
   * For a refused `try` this is the retry-after; for an allowed `reserve`, the wait.
   */
  waitMs: number;
  /** The store's time of the decision, ms. */
  nowMs: number;
  /** When the key's bucket held `cost`, in the store's ms (for refunds). */
  readyAtMs: number;
  /** When the global bucket held `cost`, in the store's ms (for refunds). */
  globalReadyAtMs: number;
  /**
   * Who decided: `'store'` normally; a RedisStore that could not reach Redis answers by
   * its `onError` policy with `'allow'`, `'deny'` or `'local'`.
   */
  source: 'store' | 'allow' | 'deny' | 'local';
}

/**
 * A place to keep keyed buckets. `MemoryStore` and `RedisStore` implement it;
 * anything that performs each decision atomically can.
 */
export interface KeyedStore {
  /** Makes one decision atomically. Never rejects for a refusal; rejects only if the store itself fails. */
  decide(op: StoreOp): Promise<StoreResult>;
  /**
   * Optional: the same decision as {@link decide}, made and answered synchronously, for a store that
   * decides without I/O (MemoryStore offers it, and so may a store that wraps one). When a store has
   * it, KeyedLimiter's `tryTake` and `peek` call it instead of `decide`, so their answer needs no
   * round through the store's promise. It must change the store exactly as `decide` would; it may
   * throw only if the store itself fails.
   */
  decideSync?(op: StoreOp): StoreResult;
  /** Cancels a reservation that `decide` made (`mode: 'reserve'`, allowed), by Go's cancel rule. */
  refund(op: StoreOp, result: StoreResult): Promise<void>;
  /**
   * Gives `op.cost` back to the key's bucket and the global one, never above their capacities
   * (a key the store no longer has is full: nothing to give). Optional for stores of your own;
   * `KeyedLimiter.credit` needs it.
   */
  credit?(op: StoreCredit): Promise<void>;
  /** Forgets a key: its bucket is full again. The global bucket is untouched. */
  reset(key: string): Promise<void>;
}

/** What a {@link KeyedStore.credit} gives back, and to which buckets. */
export type StoreCredit = Pick<StoreOp, 'key' | 'cost' | 'bucket' | 'global'>;
