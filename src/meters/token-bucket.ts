/**
 * The token bucket: the meter everything in tokenpace is built on.
 *
 * A flow conforms to a token bucket of rate R and capacity B if, over any
 * interval of length T, the cost it is admitted does not exceed B + R * T.
 * (The same inequality opens Linux's sch_tbf.c.)
 *
 * State is two numbers, `tokens` and `updatedAtMs`. Refill is computed lazily
 * on each call, never by a timer:
 *
 *   tokens = min(capacity, tokens + elapsedSeconds * rate)
 *
 * A request of cost c conforms iff tokens >= c; it then takes c tokens. A
 * refused request changes nothing. A new bucket starts full.
 *
 * Worked example (the seed's): rate 100/s, capacity 200. The bucket starts
 * with 200 tokens, so 200 requests pass at once and the 201st is refused.
 * Emptied, it refills at 100 tokens a second and is full again after
 * 200 / 100 = 2 s. It never sustains more than 100/s: 200 is a reserve, not a
 * rate. With 20/s and 40, after an idle minute (the bucket is full at 40) 30
 * quick calls pass, leaving 10, so of the next 30 quick calls exactly 10 pass.
 *
 * Three verbs, named by what happens when tokens run short (as in Go's
 * x/time/rate): `tryTake` drops (returns false), `reserve` takes now and tells
 * how long to wait (the bucket goes into debt, and `cancel()` refunds), `take`
 * waits. Each has an `*At(nowMs, ...)` twin that takes the time explicitly, so
 * a scheduler can charge a job at its theoretical start rather than at the
 * moment a late timer fired.
 *
 * Exactness. Refill is computed as `elapsedMs * rate / 1000` (multiply first,
 * so integer times and rates give exact products) and the tokens stay within
 * [-debt, capacity], so rounding error does not grow with time. Comparisons
 * allow a slack of capacity * 2^-36 tokens (about 1.5e-11 of the capacity) so
 * that a refill which is exactly the cost in real arithmetic, but one ulp short
 * in floating point, still conforms: a million tiny takes match the exact
 * count. A take admitted within the slack leaves the bucket that much in debt,
 * so no token is ever created from rounding.
 *
 * Time that goes backwards (an injected clock, a fail-over) counts as zero
 * elapsed: `updatedAtMs` never moves back, and no tokens appear.
 */

import { type Clock, systemClock } from '../clock.js';
import { CostExceedsCapacityError, InvalidOptionError, InvalidSizeError, WaitTooLongError } from '../errors.js';
import { parseRate, parseSizeOption, type RateInput, type SizeInput } from '../units.js';

/** The variables of a bucket: all a store has to keep. */
export interface BucketState {
  /** Tokens at `updatedAtMs`; negative while reservations are outstanding. */
  tokens: number;
  /** When `tokens` was last brought up to date, in the clock's milliseconds. */
  updatedAtMs: number;
}

/** The parameters of a bucket. */
export interface BucketParams {
  /** Refill rate, tokens per second. */
  ratePerSecond: number;
  /** Capacity (the burst), tokens. */
  capacity: number;
}

/** The comparison slack for a bucket of this capacity (see the file's opening comment). */
export function slackFor(capacity: number): number {
  return capacity * 2 ** -36;
}

/**
 * Tokens in the bucket at `nowMs`, without changing the state.
 * Time before `state.updatedAtMs` counts as no time at all.
 */
export function tokensAt(state: BucketState, params: BucketParams, nowMs: number): number {
  const elapsedMs = nowMs - state.updatedAtMs;
  if (!(elapsedMs > 0)) return state.tokens;
  const tokens = state.tokens + (elapsedMs * params.ratePerSecond) / 1000;
  return Math.min(tokens, params.capacity);
}

/** Brings `state` up to `nowMs` in place: refill, and move `updatedAtMs` forward (never back). */
export function advance(state: BucketState, params: BucketParams, nowMs: number): void {
  state.tokens = tokensAt(state, params, nowMs);
  if (nowMs > state.updatedAtMs) state.updatedAtMs = nowMs;
}

/**
 * Milliseconds until a bucket holding `tokens` has `cost`: 0 if it has them now.
 * (Infinity only for a zero rate, which the constructors refuse.)
 */
export function msUntil(tokens: number, cost: number, params: BucketParams): number {
  const deficit = cost - tokens;
  return deficit > slackFor(params.capacity) ? (deficit * 1000) / params.ratePerSecond : 0;
}

/**
 * Milliseconds from `nowMs` until the bucket holds `cost`, such that reading
 * the bucket at exactly `nowMs + delay` finds them: {@link msUntil}, nudged up
 * by a few ulps where the clock's finite precision would land a hair early.
 */
export function delayUntil(state: BucketState, params: BucketParams, nowMs: number, cost: number): number {
  let delayMs = msUntil(tokensAt(state, params, nowMs), cost, params);
  if (delayMs === 0) return 0;
  const slack = slackFor(params.capacity);
  let nudge = Math.max(Math.abs(nowMs), delayMs) * Number.EPSILON;
  while (tokensAt(state, params, nowMs + delayMs) + slack < cost) {
    delayMs += nudge;
    nudge *= 2;
  }
  return delayMs;
}

/** Validates a cost against a capacity: a finite number, >= 0, and <= capacity. */
export function checkCost(cost: number, capacity: number): void {
  if (cost <= capacity) {
    if (cost >= 0) return;
  } else if (cost > capacity) {
    throw new CostExceedsCapacityError(cost, capacity);
  }
  throw new InvalidSizeError(cost, `invalid cost ${cost}: expected a finite number >= 0`);
}

/**
 * Parses and validates `rate` and `burst` options into bucket parameters.
 * The error names the option, so a message reads "invalid rate ..." or "invalid burst ...".
 */
export function bucketParams(rate: RateInput, burst: SizeInput): BucketParams {
  return { ratePerSecond: parseRate(rate), capacity: parseSizeOption(burst, 'burst') };
}

/** Options for {@link TokenBucket}. */
export interface TokenBucketOptions {
  /**
   * Refill rate: tokens per second, or a string such as `'100/s'`, `'6000/min'`, `'10MiB/s'`.
   * Must be positive and finite.
   */
  rate: RateInput;
  /** Capacity, the largest burst: a number of tokens or a size such as `'64KiB'`. Must be positive. */
  burst: SizeInput;
  /**
   * Tokens at creation.
   * @default burst (a new bucket starts full, as in TBF)
   */
  tokens?: number;
  /** The time source. @default systemClock */
  clock?: Clock;
}

/** A token taken in advance: it conforms after `delayMs`. */
export interface Reservation {
  /** True if the reservation was made (the bucket is charged). */
  readonly ok: boolean;
  /** Milliseconds from the reservation until the tokens are really there (0 = now). */
  readonly delayMs: number;
  /** The clock time at which the reservation conforms. */
  readonly readyAtMs: number;
  /** Gives the tokens back, if the reservation has not come due yet. Safe to call more than once. */
  cancel(): void;
}

/** Options for {@link TokenBucket.reserve}. */
export interface ReserveOptions {
  /** Refuse (charge nothing, `ok: false`) if the wait would be longer than this. @default Infinity */
  maxWaitMs?: number;
}

/** Options for {@link TokenBucket.take}. */
export interface TakeOptions extends ReserveOptions {
  /** Aborting it while waiting refunds the tokens and rejects with the signal's reason. */
  signal?: AbortSignal;
}

const noop = (): void => {};

/**
 * A token bucket of capacity `burst`, initially full, refilled at `rate` tokens per second.
 *
 * @example
 * const bucket = new TokenBucket({ rate: 100, burst: 200 });
 * if (!bucket.tryTake()) reply429(bucket.delayFor());
 */
export class TokenBucket {
  #params: BucketParams;
  #slack: number;
  readonly #state: BucketState;
  readonly #clock: Clock;

  constructor(options: TokenBucketOptions) {
    this.#params = bucketParams(options.rate, options.burst);
    this.#slack = slackFor(this.#params.capacity);
    this.#clock = options.clock ?? systemClock;
    const tokens = options.tokens ?? this.#params.capacity;
    if (!(tokens >= 0 && tokens <= this.#params.capacity)) {
      throw new InvalidOptionError(
        'tokens',
        tokens,
        `invalid tokens ${tokens}: expected a number from 0 to the burst (${this.#params.capacity})`,
      );
    }
    this.#state = { tokens, updatedAtMs: this.#clock.now() };
  }

  /** The refill rate, tokens per second. */
  get rate(): number {
    return this.#params.ratePerSecond;
  }

  /** The capacity, tokens. */
  get burst(): number {
    return this.#params.capacity;
  }

  /** The tokens in the bucket now (negative while reservations are outstanding). */
  get tokens(): number {
    return tokensAt(this.#state, this.#params, this.#clock.now());
  }

  /** Tokens at `nowMs`, without changing anything. */
  tokensAt(nowMs: number): number {
    return tokensAt(this.#state, this.#params, nowMs);
  }

  /** Takes `cost` tokens if the bucket has them now; returns false (and takes nothing) if not. */
  tryTake(cost = 1): boolean {
    return this.tryTakeAt(this.#clock.now(), cost);
  }

  /** {@link tryTake} at an explicit time. */
  tryTakeAt(nowMs: number, cost = 1): boolean {
    checkCost(cost, this.#params.capacity);
    const state = this.#state;
    const tokens = tokensAt(state, this.#params, nowMs);
    if (tokens + this.#slack < cost) return false;
    state.tokens = tokens - cost;
    if (nowMs > state.updatedAtMs) state.updatedAtMs = nowMs;
    return true;
  }

  /** Milliseconds until `cost` tokens are there: 0 means now. Never Infinity: cost above the burst throws. */
  delayFor(cost = 1): number {
    return this.delayForAt(this.#clock.now(), cost);
  }

  /** {@link delayFor} at an explicit time. */
  delayForAt(nowMs: number, cost = 1): number {
    checkCost(cost, this.#params.capacity);
    return delayUntil(this.#state, this.#params, nowMs, cost);
  }

  /**
   * Takes `cost` tokens now, going into debt if they are not there, and says
   * how long to wait before acting. With `maxWaitMs`, a longer wait charges
   * nothing and returns `ok: false` (with the `delayMs` it would have needed).
   */
  reserve(cost = 1, options?: ReserveOptions): Reservation {
    return this.reserveAt(this.#clock.now(), cost, options);
  }

  /** {@link reserve} at an explicit time. */
  reserveAt(nowMs: number, cost = 1, options?: ReserveOptions): Reservation {
    checkCost(cost, this.#params.capacity);
    const state = this.#state;
    const tokens = tokensAt(state, this.#params, nowMs);
    const delayMs = delayUntil(state, this.#params, nowMs, cost);
    const readyAtMs = nowMs + delayMs;
    if (delayMs > (options?.maxWaitMs ?? Number.POSITIVE_INFINITY)) {
      return { ok: false, delayMs, readyAtMs, cancel: noop };
    }
    state.tokens = tokens - cost;
    if (nowMs > state.updatedAtMs) state.updatedAtMs = nowMs;
    let open = delayMs > 0;
    return {
      ok: true,
      delayMs,
      readyAtMs,
      cancel: () => {
        if (!open) return;
        open = false;
        const now = this.#clock.now();
        if (now >= readyAtMs) return; // it came due: the tokens were used
        this.refundAt(now, cost);
      },
    };
  }

  /** Gives `cost` tokens back (never above the capacity). */
  refund(cost: number): void {
    this.refundAt(this.#clock.now(), cost);
  }

  /** {@link refund} at an explicit time. */
  refundAt(nowMs: number, cost: number): void {
    checkCost(cost, this.#params.capacity);
    advance(this.#state, this.#params, nowMs);
    this.#state.tokens = Math.min(this.#params.capacity, this.#state.tokens + cost);
  }

  /**
   * Waits until `cost` tokens are taken. Rejects at once, without waiting,
   * with `WaitTooLongError` (`ERR_WAIT_TOO_LONG`) if the wait would exceed
   * `maxWaitMs`, and with the signal's reason if `signal` is or becomes
   * aborted (the tokens are refunded).
   */
  take(cost = 1, options?: TakeOptions): Promise<void> {
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    let reservation: Reservation;
    try {
      reservation = this.reserve(cost, options);
    } catch (error) {
      return Promise.reject(error); // a bad cost rejects, like every other failure of take()
    }
    if (!reservation.ok) {
      const { delayMs } = reservation;
      return Promise.reject(new WaitTooLongError(delayMs, options?.maxWaitMs ?? Number.POSITIVE_INFINITY, delayMs));
    }
    if (reservation.delayMs === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#clock.clearTimeout(timer);
        reservation.cancel();
        reject(signal?.reason);
      };
      const timer = this.#clock.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, reservation.delayMs);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Changes the rate from now on (like `tc change`): tokens earned so far are
   * kept, future refill uses the new rate.
   */
  setRate(rate: RateInput): void {
    const ratePerSecond = parseRate(rate);
    advance(this.#state, this.#params, this.#clock.now());
    this.#params = { ...this.#params, ratePerSecond };
  }

  /** Changes the capacity from now on; tokens above a smaller capacity are dropped. */
  setBurst(burst: SizeInput): void {
    const { capacity } = bucketParams(this.#params.ratePerSecond, burst);
    advance(this.#state, this.#params, this.#clock.now());
    this.#params = { ...this.#params, capacity };
    this.#slack = slackFor(capacity);
    if (this.#state.tokens > capacity) this.#state.tokens = capacity;
  }
}
