/**
 * KeyedLimiter's options: their types, and the checks that run once in its constructor (option
 * names, the global bucket, a given store), so that plain JavaScript meets a coded error at
 * construction instead of a TypeError at the first decision.
 */

import type { Clock } from '../clock.js';
import { checkKnownOptions, checkOptions, InvalidOptionError } from '../errors.js';
import { type BucketParams, rateParam, requiredBurstParam } from '../meters/bucket.js';
import type { DurationInput, RateInput, SizeInput } from '../units.js';
import type { PlanOptions } from './plans.js';
import type { KeyedStore } from './store.js';
import type { WindowStore } from './window-store.js';

/** The global bucket's parameters. */
export interface GlobalLimitOptions {
  /** Tokens per second for all keys together. */
  rate: RateInput;
  /** Capacity of the global bucket. */
  burst: SizeInput;
}

/** What every token-bucket {@link KeyedLimiter} takes, whatever gives each key its limits. */
interface BucketCommonOptions {
  /** @default 'token-bucket' */
  algorithm?: 'token-bucket';
  /**
   * Where bucket state lives. Use one store (or one Redis `prefix`) per limiter.
   * @default a MemoryStore with `maxKeys` and `clock`
   */
  store?: KeyedStore;
  /** A bucket over every key: a request needs tokens from both. */
  global?: GlobalLimitOptions;
  /**
   * For the default MemoryStore: the most keys kept (full buckets are dropped first, then the least
   * recently used). Pass it to the store instead when you give a `store`.
   * @default 100_000
   */
  maxKeys?: number;
  /** Time for the default store and for `take`'s waits. @default systemClock */
  clock?: Clock;
}

/** Options for a {@link KeyedLimiter} with a token bucket per key (the default algorithm), every key alike. */
export interface BucketKeyedLimiterOptions extends BucketCommonOptions {
  /** Each key's refill rate: a number per second or a string like `'100/min'`. */
  rate: RateInput;
  /** Each key's capacity (its largest burst). A new key starts full. */
  burst: SizeInput;
  limits?: never;
  plans?: never;
  plan?: never;
}

/**
 * Options for a {@link KeyedLimiter} whose keys have limits of their own: `limits(key)` returns a
 * key's `{ rate, burst }`, or `plan(key)` names one of `plans`; either sync or async. A key whose
 * plan changes keeps its tokens, capped at the new burst.
 */
export interface PlanKeyedLimiterOptions extends BucketCommonOptions, PlanOptions<string> {
  rate?: never;
  burst?: never;
}

/**
 * Options for a {@link KeyedLimiter} that counts per window: at most `limit` cost per key in each
 * fixed window (`'fixed-window'`) or in any window of length `window` (`'sliding-window'`), with
 * the arithmetic of FixedWindow and SlidingWindow (src/meters/windows.ts).
 */
export interface WindowKeyedLimiterOptions {
  algorithm: 'fixed-window' | 'sliding-window';
  /** The most cost (requests, for cost 1) per key per window. */
  limit: number;
  /** The window's length: ms or a string such as `'1 min'`. */
  window: DurationInput;
  /**
   * For `'sliding-window'`: `'log'` (exact, memory only) or `'counter'` (the two-counter estimate,
   * memory or Redis). @default 'log' in memory, 'counter' with a RedisWindowStore
   */
  mode?: 'log' | 'counter';
  /** Where the counters live. @default a MemoryWindowStore with `maxKeys` and `clock` */
  store?: WindowStore;
  /** For the default MemoryWindowStore: the most keys kept. @default 100_000 */
  maxKeys?: number;
  /** Time for the default store. @default systemClock */
  clock?: Clock;
  rate?: never;
  burst?: never;
  /** Not offered with windows: a global limit is a token bucket's. */
  global?: never;
}

/**
 * Options for {@link KeyedLimiter}: a token bucket per key (`rate`, `burst`, or limits by plan: `limits`, or
 * `plans` and `plan`), or a window (`algorithm`, `limit`, `window`).
 */
export type KeyedLimiterOptions = BucketKeyedLimiterOptions | PlanKeyedLimiterOptions | WindowKeyedLimiterOptions;

/** Options for {@link KeyedLimiter.take}. */
export interface KeyedTakeOptions {
  /** Aborting it while waiting gives the tokens back (by the cancel rule) and rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Refuse (charging nothing) a wait longer than this: ms or a string like `'2s'`. @default Infinity */
  maxWait?: DurationInput;
}

export const BUCKET_OPTIONS: ReadonlySet<string> = new Set([
  'algorithm',
  'rate',
  'burst',
  'limits',
  'plans',
  'plan',
  'store',
  'global',
  'maxKeys',
  'clock',
]);
export const WINDOW_OPTIONS: ReadonlySet<string> = new Set([
  'algorithm',
  'limit',
  'window',
  'mode',
  'store',
  'maxKeys',
  'clock',
]);
/** Names users bring from express-rate-limit, rate-limiter-flexible and other buckets, with what to write here instead. */
export const PEER_OPTIONS: Readonly<Record<string, string>> = {
  capacity: "write `burst`: it is each key's capacity, the most it admits at once",
  points: 'write `burst` (the most at once) and `rate` (points per second, or a string such as "100/min")',
  duration: 'write `rate` as a string such as "100/min", or a window: { algorithm: "fixed-window", limit, window }',
  max: 'write `burst` and `rate`, or a window: { algorithm: "fixed-window", limit, window }',
  limit: 'write `burst` and `rate` (a token bucket), or add `algorithm: "fixed-window"` to count per window',
  windowMs: 'write `rate` as a string such as "100/min", or a window: { algorithm: "fixed-window", limit, window }',
  keyGenerator: 'KeyedLimiter takes the key in each call (`tryTake(key)`); rateLimit takes `key`',
};

/** The `global` option: a bucket over every key, parsed with the same bounds as the key's own. */
export function globalParams(global: GlobalLimitOptions | undefined): BucketParams | undefined {
  if (global === undefined) return undefined;
  checkOptions(global, 'global options ({ rate, burst })', true);
  checkKnownOptions(global, GLOBAL_OPTIONS, 'global options');
  return {
    ratePerSecond: rateParam(global.rate, 'global.rate'),
    burst: requiredBurstParam(global.burst, 'global.burst'),
  };
}
const GLOBAL_OPTIONS: ReadonlySet<string> = new Set(['rate', 'burst']);

/** A store given as an option: an object with the methods the limiter calls, else a coded error now, not a TypeError later. */
export function checkStore(store: object, methods: readonly string[], what: string): void {
  checkOptions(store, `store (${what})`, true);
  for (const method of methods) {
    if (typeof (store as Record<string, unknown>)[method] !== 'function') {
      throw new InvalidOptionError(
        'store',
        store,
        `Expected \`store\` to be ${what}: it has no \`${method}()\` method`,
      );
    }
  }
}
