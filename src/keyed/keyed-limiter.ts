/**
 * KeyedLimiter: one token bucket per key (client, API key, tenant, route),
 * an optional global bucket over all of them, state in a store.
 *
 * The verbs are the bucket's with a key in front:
 *
 * - `tryTake(key, cost)` decides now. A refusal is a returned `Decision`
 *   (`allowed: false`, with `retryAfterMs`), never a rejected promise.
 * - `take(key, cost, { signal, maxWait })` reserves in the store (the bucket
 *   may go into debt) and waits until the tokens are there, so a fleet can
 *   pace itself to a shared limit instead of only refusing. A wait longer than
 *   `maxWait` charges nothing and rejects with `WaitTooLongError`; an abort
 *   gives back what Go's cancel rule allows and rejects with the signal's reason.
 * - `peek(key, cost)` says what `tryTake` would, spending nothing; `reset(key)`
 *   forgets a key (its bucket is full again); `credit(key, cost)` gives back
 *   the cost of a request that, once done, should not count.
 *
 * Limits by plan: instead of one `rate` and `burst` for every key, `limits(key)`
 * returns a key's `{ rate, burst }`, or `plan(key)` names one of `plans`
 * (src/keyed/plans.ts), sync or async. The store keeps no parameters, only
 * each key's tokens, so a key whose plan changes keeps its tokens, capped at
 * the new burst, and refills at the new rate; a key the store has forgotten
 * (it had refilled to full) starts full on its current plan, as a new key does.
 *
 * With `global`, a request is admitted only if the key's bucket and the global
 * bucket both have the tokens; when either refuses, neither is charged. The
 * store makes each decision in one atomic step (one synchronous call in
 * memory, one Lua script in Redis), so this holds under any concurrency.
 *
 * Each answer of the store to `tryTake` or `take` is published on
 * `tokenpace:keyed:decision`, and each refusal on `tokenpace:keyed:rejected`
 * (src/diagnostics.ts), only while someone subscribes.
 *
 * Worked example: rate 20/s, burst 40. After an idle minute a key's bucket is
 * full at 40 (not 1200: the burst is a reserve, not a rate), so 30 quick
 * calls pass and leave 10; of the next 30 quick calls exactly 10 pass, and
 * each refused one is told to retry in (1 - tokens) / 20 s.
 */

import { type Clock, checkClock } from '../clock.js';
import { keyedDecisionChannel, keyedRejectedChannel } from '../diagnostics.js';
import {
  checkKnownOptions,
  checkOptions,
  checkSignal,
  InvalidOptionError,
  NotSupportedError,
  StoreUnavailableError,
  WaitTooLongError,
} from '../errors.js';
import {
  type BucketParams,
  bucketParams,
  burstParam,
  checkCost,
  largestConforming,
  rateParam,
  timeToFullMs,
  tokensAt,
} from '../meters/bucket.js';
import type { Decision } from '../meters/decision.js';
import { checkWindowCost, type WindowParams, windowParams } from '../meters/windows.js';
import { parseDuration, type RateInput, type SizeInput } from '../units.js';
import {
  BUCKET_OPTIONS,
  type BucketKeyedLimiterOptions,
  checkStore,
  globalParams,
  type KeyedLimiterOptions,
  type KeyedTakeOptions,
  PEER_OPTIONS,
  type PlanKeyedLimiterOptions,
  WINDOW_OPTIONS,
  type WindowKeyedLimiterOptions,
} from './keyed-options.js';
import { MemoryStore } from './memory-store.js';
import { type LimitsResolver, limitsResolver } from './plans.js';
import type { KeyedStore, StoreOp, StoreResult } from './store.js';
import { MemoryWindowStore, type WindowKind, type WindowStore } from './window-store.js';

export type {
  BucketKeyedLimiterOptions,
  GlobalLimitOptions,
  KeyedLimiterOptions,
  KeyedTakeOptions,
  PlanKeyedLimiterOptions,
  WindowKeyedLimiterOptions,
} from './keyed-options.js';
export type { LimitsFunction, PlanFunction, PlanLimits } from './plans.js';

/** `tokenpace:keyed:decision`: a KeyedLimiter's store answered (`peek` is not published). */
export interface KeyedDecisionMessage {
  readonly limiter: KeyedLimiter;
  readonly key: string;
  readonly cost: number;
  /** `'try'` for `tryTake`, `'reserve'` for `take`. */
  readonly mode: 'try' | 'reserve';
  /**
   * The decision as the store made it. For `take`: `allowed` means reserved (charged); the caller
   * then waits `waitMs`. A `take` over `maxWait` is `allowed: false` with the wait it would have needed.
   */
  readonly decision: Decision;
  /** For `take`: how long the caller waits before acting, ms (0 = now); for `tryTake`, 0. */
  readonly waitMs: number;
  /** Who decided: the store, or a RedisStore's failure policy (`'allow'`, `'deny'`, `'local'`). */
  readonly source: StoreResult['source'];
}

/** `tokenpace:keyed:rejected`: a KeyedLimiter turned a request away. */
export interface KeyedRejectedMessage {
  readonly limiter: KeyedLimiter;
  readonly key: string;
  readonly cost: number;
  readonly mode: 'try' | 'reserve';
  /**
   * `'limit'`: the buckets do not hold the cost (`tryTake`); `'max-wait'`: the wait would exceed
   * `take`'s `maxWait` (nothing charged); `'store-unavailable'`: a RedisStore with `onError: 'deny'`
   * could not reach Redis.
   */
  readonly reason: 'limit' | 'max-wait' | 'store-unavailable';
  /** When to try again, ms. */
  readonly retryAfterMs: number;
}

/**
 * One token bucket per key, an optional global bucket, state in a store.
 *
 * @example
 * const limiter = new KeyedLimiter({ rate: '100/min', burst: 20, global: { rate: 1000, burst: 2000 } });
 * const d = await limiter.tryTake(req.ip);
 * if (!d.allowed) res.writeHead(429, { 'retry-after': Math.ceil(d.retryAfterMs / 1000) }).end();
 */
export class KeyedLimiter {
  /** The bucket store (for a window limiter: a placeholder; its counters are in `windowStore`). */
  readonly store: KeyedStore;
  /** The window store, for a window `algorithm`; undefined for token buckets. */
  readonly windowStore: WindowStore | undefined;
  /** `'token-bucket'`, `'fixed-window'` or `'sliding-window'`. */
  readonly algorithm: 'token-bucket' | 'fixed-window' | 'sliding-window';
  readonly #window: { kind: WindowKind; params: WindowParams } | undefined;
  /** Every key's limits; with limits by plan, unused (each decision resolves its key's). */
  #bucket: BucketParams;
  /** Each key's limits by plan (`limits`, or `plans` and `plan`); undefined when every key has `#bucket`. */
  readonly #limitsOf: LimitsResolver<string> | undefined;
  #global: BucketParams | undefined;
  readonly #clock: Clock;

  constructor(options: KeyedLimiterOptions) {
    checkOptions(
      options,
      "KeyedLimiter options ({ rate, burst } or { algorithm: 'fixed-window', limit, window })",
      true,
    );
    const algorithm = options.algorithm ?? 'token-bucket';
    if (algorithm === 'fixed-window' || algorithm === 'sliding-window') {
      const o = options as WindowKeyedLimiterOptions;
      checkKnownOptions(o, WINDOW_OPTIONS, `KeyedLimiter options (algorithm '${algorithm}')`, PEER_OPTIONS);
      if (o.global !== undefined) {
        throw new InvalidOptionError(
          'global',
          o.global,
          'a global limit is a token bucket over every key and is not offered with a window `algorithm`; ' +
            "remove `global`, or use algorithm: 'token-bucket' (rate, burst) for a global limit",
        );
      }
      if (o.rate !== undefined || o.burst !== undefined) {
        throw new InvalidOptionError(
          o.rate !== undefined ? 'rate' : 'burst',
          o.rate ?? o.burst,
          `\`rate\` and \`burst\` configure a token bucket; algorithm '${algorithm}' takes \`limit\` and \`window\``,
        );
      }
      const params = windowParams({ limit: o.limit, window: o.window });
      let kind: WindowKind = 'fixed';
      if (algorithm === 'sliding-window') {
        const mode = o.mode ?? (o.store !== undefined && !(o.store instanceof MemoryWindowStore) ? 'counter' : 'log');
        if (mode !== 'log' && mode !== 'counter') {
          throw new InvalidOptionError('mode', mode, `Expected \`mode\` to be 'log' or 'counter', got ${String(mode)}`);
        }
        kind = mode;
      } else if (o.mode !== undefined) {
        throw new InvalidOptionError('mode', o.mode, "`mode` is for algorithm 'sliding-window'; remove it");
      }
      if (o.store !== undefined && o.maxKeys !== undefined) {
        throw new InvalidOptionError(
          'maxKeys',
          o.maxKeys,
          '`maxKeys` configures the default memory store; with a `store`, pass it to the store instead',
        );
      }
      if (o.store !== undefined) checkOptions(o.store, 'store (a MemoryWindowStore or RedisWindowStore)', true);
      if (o.store !== undefined && typeof (o.store as Partial<WindowStore>).decideWindow !== 'function') {
        throw new InvalidOptionError(
          'store',
          o.store,
          `algorithm '${algorithm}' needs a window store (MemoryWindowStore or RedisWindowStore), not a token-bucket store`,
        );
      }
      this.algorithm = algorithm;
      this.#window = { kind, params };
      this.#clock = checkClock(o.clock);
      this.windowStore = o.store ?? new MemoryWindowStore({ maxKeys: o.maxKeys, clock: this.#clock });
      this.#bucket = { ratePerSecond: params.limit / (params.windowMs / 1000), burst: params.limit };
      this.#global = undefined;
      this.#limitsOf = undefined;
      this.store = new MemoryStore({ maxKeys: 1, clock: this.#clock });
      return;
    }
    if (algorithm !== 'token-bucket') {
      throw new InvalidOptionError(
        'algorithm',
        algorithm,
        `Expected \`algorithm\` to be 'token-bucket', 'fixed-window' or 'sliding-window', got ${String(algorithm)}`,
      );
    }
    this.algorithm = 'token-bucket';
    this.#window = undefined;
    this.windowStore = undefined;
    options = options as BucketKeyedLimiterOptions | PlanKeyedLimiterOptions;
    checkKnownOptions(options, BUCKET_OPTIONS, 'KeyedLimiter options', PEER_OPTIONS);
    this.#limitsOf = limitsResolver(options, options.rate !== undefined || options.burst !== undefined);
    this.#bucket =
      this.#limitsOf === undefined
        ? bucketParams(options.rate as RateInput, options.burst as SizeInput)
        : { ratePerSecond: Number.NaN, burst: Number.NaN };
    this.#global = globalParams(options.global);
    this.#clock = checkClock(options.clock);
    if (options.store !== undefined)
      checkStore(options.store, ['decide', 'refund', 'reset'], 'a KeyedStore (MemoryStore, RedisStore)');
    if (options.store !== undefined && options.maxKeys !== undefined) {
      throw new InvalidOptionError(
        'maxKeys',
        options.maxKeys,
        '`maxKeys` configures the default memory store; with a `store`, pass it to the store instead ' +
          '(new MemoryStore({ maxKeys }))',
      );
    }
    this.store = options.store ?? new MemoryStore({ maxKeys: options.maxKeys, clock: this.#clock });
  }

  /** A window limiter's limit and window length (ms); undefined for token buckets. */
  get window(): Readonly<WindowParams> | undefined {
    return this.#window?.params;
  }

  /** Each key's rate, tokens per second (for a window: limit per window, per second); undefined with limits by plan. */
  get rate(): number | undefined {
    return this.#limitsOf === undefined ? this.#bucket.ratePerSecond : undefined;
  }

  /** Each key's burst; undefined with limits by plan. */
  get burst(): number | undefined {
    return this.#limitsOf === undefined ? this.#bucket.burst : undefined;
  }

  /**
   * `key`'s limits: the fixed ones, or its plan's (sync when the plan function answered
   * synchronously). Rejects, or throws, for a bad key or what the plan function throws. @internal
   */
  limitsFor(key: string): BucketParams | Promise<BucketParams> {
    const resolve = this.#limitsOf;
    if (resolve === undefined) return this.#bucket;
    this.#checkKey(key);
    return resolve(key);
  }

  /** The global bucket's parameters, if any. */
  get global(): Readonly<BucketParams> | undefined {
    return this.#global;
  }

  /**
   * Takes `cost` tokens from `key`'s bucket (and the global one) if they are there now.
   * Resolves with a Decision either way; rejects only for a bad key or cost, or a store that fails
   * without a policy.
   */
  tryTake(key: string, cost = 1): Promise<Decision> {
    return this.#decide('try', key, cost);
  }

  /** What {@link tryTake} would decide now, spending nothing. */
  peek(key: string, cost = 1): Promise<Decision> {
    return this.#decide('peek', key, cost);
  }

  /**
   * Reserves `cost` tokens in the store and waits until they are there. Resolves with the
   * Decision (allowed) once the caller may act.
   *
   * Rejects with `WaitTooLongError` (`ERR_WAIT_TOO_LONG`, charging nothing) if the wait would
   * exceed `maxWait`; with the signal's reason if `signal` aborts (the tokens go back by the cancel
   * rule); with `StoreUnavailableError` if the store cannot be reached and its policy is to deny.
   */
  async take(key: string, cost = 1, options: KeyedTakeOptions = {}): Promise<Decision> {
    if (this.#window !== undefined) {
      throw new NotSupportedError(
        `take() waits on a token bucket; a '${this.algorithm}' limiter decides with tryTake() and peek() ` +
          '(wait retryAfterMs yourself), or use rate and burst for a limiter that can wait',
      );
    }
    return this.takeOn(this.#limitsOf === undefined ? this.#bucket : await this.limitsFor(key), key, cost, options);
  }

  /** {@link take} with `key`'s limits resolved. @internal */
  async takeOn(bucket: BucketParams, key: string, cost = 1, options: KeyedTakeOptions = {}): Promise<Decision> {
    checkOptions(options, 'take options ({ signal, maxWait })', false);
    const signal = checkSignal(options.signal);
    const maxWaitMs = options.maxWait === undefined ? Number.POSITIVE_INFINITY : parseDuration(options.maxWait);
    this.#check(key, cost, bucket);
    signal?.throwIfAborted();
    const op: StoreOp = {
      mode: 'reserve',
      key,
      cost,
      bucket,
      global: this.#global,
      maxWaitMs,
    };
    const result = await this.store.decide(op);
    if (keyedDecisionChannel.hasSubscribers || keyedRejectedChannel.hasSubscribers) {
      this.#publish(op, this.#decision(result, op.bucket), result);
    }
    if (!result.allowed) {
      if (result.source === 'deny') {
        throw new StoreUnavailableError(
          `the store could not be reached and its policy is to deny: key ${JSON.stringify(key)} was not admitted; ` +
            `retry in about ${Math.ceil(result.waitMs)} ms`,
        );
      }
      throw new WaitTooLongError({ waitMs: result.waitMs, maxWaitMs, retryAfterMs: result.waitMs - maxWaitMs });
    }
    if (signal?.aborted) {
      await this.store.refund(op, result);
      throw signal.reason;
    }
    if (result.waitMs > 0) await this.#wait(result.waitMs, signal, op, result);
    // The decision as of the end of the wait, when the caller acts: the buckets as the store left
    // them, refilled for the time waited (later decisions by others are not known here).
    const waitedMs = result.source === 'store' || result.source === 'local' ? result.waitMs : 0;
    const endMs = result.nowMs + waitedMs;
    const tokens = tokensAt({ tokens: result.tokens, updatedAtMs: result.nowMs }, op.bucket, endMs);
    const globalTokens =
      op.global === undefined || result.globalTokens === Number.POSITIVE_INFINITY
        ? result.globalTokens
        : tokensAt({ tokens: result.globalTokens, updatedAtMs: result.nowMs }, op.global, endMs);
    return {
      allowed: true,
      remaining: this.#remaining({ tokens, globalTokens }, op.bucket),
      retryAfterMs: 0,
      resetAfterMs: timeToFullMs(tokens, op.bucket),
      limit: op.bucket.burst,
    };
  }

  /**
   * Gives `cost` tokens back to `key`'s bucket (and the global one), never above the capacity, for a
   * request that, once done, should not count (bucket.ts's `credit`; `rateLimit`'s
   * `skipSuccessfulRequests`). Rejects for a window limiter or a store without `credit`.
   */
  credit(key: string, cost = 1): Promise<void> {
    if (this.#limitsOf === undefined || this.#window !== undefined) return this.creditOn(this.#bucket, key, cost);
    try {
      const limits = this.limitsFor(key);
      return limits instanceof Promise
        ? limits.then((bucket) => this.creditOn(bucket, key, cost))
        : this.creditOn(limits, key, cost);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** {@link credit} with `key`'s limits resolved. @internal */
  creditOn(bucket: BucketParams, key: string, cost = 1): Promise<void> {
    const store = this.store;
    try {
      if (this.#window !== undefined || store.credit === undefined) {
        throw new NotSupportedError(
          `credit() gives tokens back to a token bucket; ${this.#window !== undefined ? `a '${this.algorithm}' limiter` : 'this store'} ` +
            'has none to give them to: use rate and burst with a MemoryStore or RedisStore',
        );
      }
      this.#check(key, cost, bucket);
    } catch (error) {
      return Promise.reject(error);
    }
    return store.credit({ key, cost, bucket, global: this.#global });
  }

  /** Forgets `key`: its bucket is full again. The global bucket is untouched. */
  reset(key: string): Promise<void> {
    try {
      this.#checkKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.windowStore !== undefined) return this.windowStore.reset(key);
    return this.store.reset(key);
  }

  /**
   * Changes each key's rate from now on. A key's bucket is brought up to date at its next
   * decision, so the time since its last decision refills at the new rate.
   */
  setRate(rate: RateInput): void {
    this.#bucketOnly('setRate');
    this.#bucket = { ratePerSecond: rateParam(rate), burst: this.#bucket.burst };
  }

  /** Changes each key's burst from now on; tokens above a smaller burst are dropped at the key's next decision. */
  setBurst(burst: SizeInput): void {
    this.#bucketOnly('setBurst');
    this.#bucket = { ratePerSecond: this.#bucket.ratePerSecond, burst: burstParam(burst) };
  }

  #bucketOnly(verb: string): void {
    if (this.#window !== undefined) {
      throw new NotSupportedError(
        `${verb}() changes a token bucket; a '${this.algorithm}' limiter's limit and window are fixed: make a new limiter`,
      );
    }
    if (this.#limitsOf !== undefined) {
      throw new NotSupportedError(
        `${verb}() changes the limits every key shares; with limits by plan, change what \`limits\` or \`plans\` ` +
          'and `plan` return: each key takes its new limits at its next decision',
      );
    }
  }

  #decideWindow(mode: 'try' | 'peek', key: string, cost: number): Promise<Decision> {
    const window = this.#window as { kind: WindowKind; params: WindowParams };
    try {
      this.#checkKey(key);
      checkWindowCost(cost, window.params.limit);
    } catch (error) {
      return Promise.reject(error);
    }
    return (this.windowStore as WindowStore).decideWindow({
      mode,
      key,
      cost,
      kind: window.kind,
      params: window.params,
    });
  }

  /**
   * A `try` or `peek`: by the store's `decideSync` when it offers one, else by its `decide`.
   * Either way a bad key or cost, or a store that fails, rejects the returned promise.
   */
  #decide(mode: 'try' | 'peek', key: string, cost: number): Promise<Decision> {
    if (this.#window !== undefined) return this.#decideWindow(mode, key, cost);
    if (this.#limitsOf === undefined) return this.decideOn(mode, this.#bucket, key, cost);
    let limits: BucketParams | Promise<BucketParams>;
    try {
      limits = this.limitsFor(key);
    } catch (error) {
      return Promise.reject(error);
    }
    if (limits instanceof Promise) return limits.then((bucket) => this.decideOn(mode, bucket, key, cost));
    return this.decideOn(mode, limits, key, cost);
  }

  /** A `try` or `peek` with `key`'s limits resolved (`tryTake`'s with `mode: 'try'`). @internal */
  decideOn(mode: 'try' | 'peek', bucket: BucketParams, key: string, cost = 1): Promise<Decision> {
    let op: StoreOp;
    try {
      this.#check(key, cost, bucket);
      op = { mode, key, cost, bucket, global: this.#global, maxWaitMs: Number.POSITIVE_INFINITY };
      const store = this.store;
      if (store.decideSync !== undefined) return Promise.resolve(this.#decided(op, store.decideSync(op)));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.store.decide(op).then((result) => this.#decided(op, result));
  }

  /** The Decision of a `try` or `peek`, published (for `try`) when someone listens. */
  #decided(op: StoreOp, result: StoreResult): Decision {
    const decision = this.#decision(result, op.bucket);
    if (op.mode === 'try' && (keyedDecisionChannel.hasSubscribers || keyedRejectedChannel.hasSubscribers)) {
      this.#publish(op, decision, result);
    }
    return decision;
  }

  /** Publishes a store's answer to a `try` or `reserve` on the keyed channels (called only when one has subscribers). */
  #publish(op: StoreOp, decision: Decision, result: StoreResult): void {
    const { key, cost, maxWaitMs } = op;
    const mode = op.mode === 'reserve' ? 'reserve' : 'try';
    const { source } = result;
    if (keyedDecisionChannel.hasSubscribers) {
      const waitMs = mode === 'reserve' && result.allowed ? result.waitMs : 0;
      keyedDecisionChannel.publish({
        limiter: this,
        key,
        cost,
        mode,
        decision,
        waitMs,
        source,
      } satisfies KeyedDecisionMessage);
    }
    if (!result.allowed && keyedRejectedChannel.hasSubscribers) {
      const reason = source === 'deny' ? 'store-unavailable' : mode === 'reserve' ? 'max-wait' : 'limit';
      const retryAfterMs = reason === 'max-wait' ? result.waitMs - maxWaitMs : decision.retryAfterMs;
      keyedRejectedChannel.publish({
        limiter: this,
        key,
        cost,
        mode,
        reason,
        retryAfterMs,
      } satisfies KeyedRejectedMessage);
    }
  }

  #decision(result: StoreResult, bucket: BucketParams): Decision {
    if (result.source === 'allow') {
      return { allowed: true, remaining: bucket.burst, retryAfterMs: 0, resetAfterMs: 0, limit: bucket.burst };
    }
    return {
      allowed: result.allowed,
      remaining: this.#remaining(result, bucket),
      retryAfterMs: result.allowed ? 0 : result.waitMs,
      resetAfterMs: result.source === 'deny' ? result.waitMs : timeToFullMs(result.tokens, bucket),
      limit: bucket.burst,
    };
  }

  #remaining(result: Pick<StoreResult, 'tokens' | 'globalTokens'>, bucket: BucketParams): number {
    const tokens = Math.min(result.tokens, result.globalTokens);
    const whole = Math.floor(largestConforming(tokens, bucket.burst));
    return Math.max(whole, 0);
  }

  #check(key: string, cost: number, bucket: BucketParams): void {
    this.#checkKey(key);
    checkCost(cost, bucket.burst);
    if (this.#global !== undefined) checkCost(cost, this.#global.burst);
  }

  #checkKey(key: string): void {
    if (typeof key !== 'string' || key.length === 0) {
      throw new InvalidOptionError(
        'key',
        key,
        `Expected \`key\` to be a non-empty string, got ${typeof key === 'string' ? 'an empty string' : typeof key}; ` +
          'convert numbers and other ids with String(id)',
      );
    }
  }

  #wait(ms: number, signal: AbortSignal | undefined, op: StoreOp, result: StoreResult): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#clock.clearTimeout(timer);
        this.store.refund(op, result).then(
          () => reject(signal?.reason),
          () => reject(signal?.reason),
        );
      };
      const timer = this.#clock.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
