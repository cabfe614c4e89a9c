/**
 * `TokenBucket`: the bucket arithmetic of ./bucket.ts behind a class with a
 * clock, the verbs of Go's x/time/rate, and a timer for `take`.
 *
 * A token bucket of rate R and capacity B admits, over any interval of length
 * T, at most B + R * T. A new bucket starts full. A request of cost c
 * conforms iff the bucket holds c tokens; it then takes them. A refused
 * request changes nothing.
 *
 * Worked example (the seed's): rate 100/s, capacity 200. The bucket starts
 * with 200 tokens, so 200 requests pass at once and the 201st is refused.
 * Emptied, it refills at 100 tokens a second and is full again after
 * 200 / 100 = 2 s. It never sustains more than 100/s: 200 is a reserve, not a
 * rate. With 20/s and 40, after an idle minute (the bucket is full at 40) 30
 * quick calls pass, leaving 10, so of the next 30 quick calls exactly 10 pass.
 *
 * Three verbs, named by what happens when tokens run short (as in x/time):
 * `tryTake` drops (returns false), `reserve` takes now and tells how long to
 * wait (the bucket goes into debt; `cancel()` gives back what no later
 * reservation counts on), `take` waits. Each has an `*At(nowMs, ...)` twin
 * that takes the time explicitly.
 *
 * Exactness, the tolerance rule, and time that goes backwards: see
 * ./bucket.ts, the one place that changes a bucket's state.
 */

import { type Clock, checkClock } from '../clock.js';
import {
  checkKnownOptions,
  checkOptions,
  checkSignal,
  describeValue,
  InvalidOptionError,
  retryHintMs,
  WaitTooLongError,
} from '../errors.js';
import { Watchdog } from '../timer.js';
import { type DurationInput, parseDuration, type RateInput, type SizeInput } from '../units.js';
import {
  type BucketParams,
  type BucketState,
  bucketParams,
  burstParam,
  charge,
  checkCost,
  checkTime,
  conformsAt,
  credit,
  delayUntil,
  rateParam,
  reconfigure,
  refund,
  tokensAt,
  tryCharge,
} from './bucket.js';

// The class's types and limits, with it (src/index.ts exports them from here); the steps are imported from ./bucket.ts.
export { type BucketParams, type BucketState, MAX_BURST, MAX_RATE } from './bucket.js';

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

/** Tokens taken in advance: they are there after `delayMs`. */
export interface Reservation {
  /** True if the reservation was made (the bucket is charged). */
  readonly ok: boolean;
  /** Milliseconds from the reservation until the tokens are really there (0 = now). */
  readonly delayMs: number;
  /** The clock time at which the reservation conforms. */
  readonly readyAtMs: number;
  /**
   * Will not act: gives back the tokens no later reservation counts on, as
   * x/time's `Reservation.Cancel` does (see {@link refund}). Nothing once the
   * reservation came due. Safe to call more than once.
   */
  cancel(): void;
  /** {@link cancel} at an explicit time. */
  cancelAt(nowMs: number): void;
}

/** Options for {@link TokenBucket.reserve}. */
export interface ReserveOptions {
  /**
   * Refuse (charge nothing, `ok: false`) if the wait would be longer than
   * this: milliseconds, or a string such as `'2s'`. The same option, with the
   * same meaning, as the Scheduler's `maxWait`.
   * @default Infinity
   */
  maxWait?: DurationInput;
}

/** Options for {@link TokenBucket.take}. */
export interface TakeOptions extends ReserveOptions {
  /** Aborting it while waiting refunds the tokens and rejects with the signal's reason. */
  signal?: AbortSignal;
}

function noop(): void {}

const RESERVE_OPTIONS: ReadonlySet<string> = new Set(['maxWait']);
const TAKE_OPTIONS: ReadonlySet<string> = new Set(['maxWait', 'signal']);

/** Reserve's or take's options: undefined, or an object of `known` names. */
function checkCallOptions(options: object | undefined, known: ReadonlySet<string>, what: string): void {
  const checked = checkOptions(options, what, false);
  if (checked !== undefined) checkKnownOptions(checked, known, what);
}

/** The `maxWait` of checked options, in milliseconds (Infinity when absent). */
function maxWaitOf(options: ReserveOptions | undefined): number {
  return options?.maxWait === undefined ? Number.POSITIVE_INFINITY : parseDuration(options.maxWait);
}

const TOKEN_BUCKET_OPTIONS: ReadonlySet<string> = new Set(['rate', 'burst', 'tokens', 'clock']);

/**
 * A token bucket of capacity `burst`, initially full, refilled at `rate` tokens per second.
 *
 * @example
 * const bucket = new TokenBucket({ rate: 100, burst: 200 });
 * if (!bucket.tryTake()) reply429(bucket.delayFor());
 */
export class TokenBucket {
  readonly #state: BucketState;
  #params: BucketParams;
  readonly #clock: Clock;

  constructor(options: TokenBucketOptions) {
    checkOptions(options, 'TokenBucket options ({ rate, burst })', true);
    checkKnownOptions(options, TOKEN_BUCKET_OPTIONS, 'TokenBucket options', {
      capacity: "write `burst`: it is the bucket's capacity, the most tokens it holds",
      tokensPerInterval: 'write `rate` (tokens per second, or a string such as "100/min")',
      bucketSize: 'write `burst`',
    });
    const params = bucketParams(options.rate, options.burst);
    this.#clock = checkClock(options.clock);
    const tokens = options.tokens ?? params.burst;
    if (!(typeof tokens === 'number' && tokens >= 0 && tokens <= params.burst)) {
      throw new InvalidOptionError(
        'tokens',
        tokens,
        `invalid tokens ${describeValue(tokens)}: expected a number from 0 to the burst (${params.burst})`,
      );
    }
    this.#params = params;
    this.#state = { tokens, updatedAtMs: this.#clock.now() };
  }

  /** The refill rate, tokens per second. */
  get rate(): number {
    return this.#params.ratePerSecond;
  }

  /** The capacity, tokens. */
  get burst(): number {
    return this.#params.burst;
  }

  /** The tokens in the bucket now (negative while reservations are outstanding). */
  get tokens(): number {
    return tokensAt(this.#state, this.#params, this.#clock.now());
  }

  /** Tokens at `nowMs`, without changing anything. */
  tokensAt(nowMs: number): number {
    checkTime(nowMs);
    return tokensAt(this.#state, this.#params, nowMs);
  }

  /** Takes `cost` tokens if the bucket has them now; returns false (and takes nothing) if not. */
  tryTake(cost = 1): boolean {
    return this.#tryTake(this.#clock.now(), cost);
  }

  /** {@link tryTake} at an explicit time. */
  tryTakeAt(nowMs: number, cost = 1): boolean {
    return this.#tryTake(checkTime(nowMs), cost);
  }

  /** tryTake's decision at a checked time (the clock's own reading is trusted, as in every other part). */
  #tryTake(nowMs: number, cost: number): boolean {
    checkCost(cost, this.#params.burst);
    return tryCharge(this.#state, this.#params, nowMs, cost);
  }

  /** Milliseconds until `cost` tokens are there: 0 means now. Never Infinity: cost above the burst throws. */
  delayFor(cost = 1): number {
    return this.delayForAt(this.#clock.now(), cost);
  }

  /**
   * {@link delayFor} at an explicit time. A time earlier than the bucket's
   * last update waits from that update (time before it counts as none).
   */
  delayForAt(nowMs: number, cost = 1): number {
    checkTime(nowMs);
    checkCost(cost, this.#params.burst);
    return delayUntil(this.#state, this.#params, nowMs, cost);
  }

  /**
   * Takes `cost` tokens now, going into debt if they are not there, and says
   * how long to wait before acting. With `maxWait`, a longer wait charges
   * nothing and returns `ok: false` (with the `delayMs` it would have needed).
   */
  reserve(cost = 1, options?: ReserveOptions): Reservation {
    return this.reserveAt(this.#clock.now(), cost, options);
  }

  /** {@link reserve} at an explicit time. */
  reserveAt(nowMs: number, cost = 1, options?: ReserveOptions): Reservation {
    checkTime(nowMs);
    checkCost(cost, this.#params.burst);
    checkCallOptions(options, RESERVE_OPTIONS, 'reserve options ({ maxWait })');
    return this.#reserve(nowMs, cost, maxWaitOf(options));
  }

  /** reserve's decision at a checked time, for a checked cost. */
  #reserve(nowMs: number, cost: number, maxWaitMs: number): Reservation {
    const state = this.#state;
    const params = this.#params;
    const delayMs = delayUntil(state, params, nowMs, cost);
    const readyAtMs = nowMs + delayMs;
    // The bound is asked in tokens, like every comparison (see bucket.ts): would they be there at nowMs + maxWait?
    if (delayMs > maxWaitMs && !conformsAt(state, params, nowMs + maxWaitMs, cost)) {
      return { ok: false, delayMs, readyAtMs, cancel: noop, cancelAt: noop };
    }
    charge(state, params, nowMs, cost);
    let open = true;
    const cancelAt = (atMs: number): void => {
      if (!open) return;
      open = false;
      refund(this.#state, this.#params, atMs, cost, readyAtMs);
    };
    return { ok: true, delayMs, readyAtMs, cancel: () => cancelAt(this.#clock.now()), cancelAt };
  }

  /** Gives `cost` tokens back (never above the capacity). */
  refund(cost: number): void {
    this.refundAt(this.#clock.now(), cost);
  }

  /** {@link refund} at an explicit time. */
  refundAt(nowMs: number, cost: number): void {
    checkTime(nowMs);
    checkCost(cost, this.#params.burst);
    credit(this.#state, this.#params, nowMs, cost);
  }

  /**
   * Waits until `cost` tokens are taken. Rejects at once, without waiting,
   * with `WaitTooLongError` (`ERR_WAIT_TOO_LONG`) if the wait would exceed
   * `maxWait`, and with the signal's reason if `signal` is or becomes
   * aborted (the tokens no later waiter counts on are given back). Waits of
   * any length are exact: a wait beyond Node's 24.8-day timer limit is armed
   * in steps (see src/timer.ts).
   */
  take(cost = 1, options?: TakeOptions): Promise<void> {
    let signal: AbortSignal | undefined;
    let maxWaitMs: number;
    let reservation: Reservation;
    try {
      // Checked before anything is charged or armed: a bad option or signal costs no token.
      checkCallOptions(options, TAKE_OPTIONS, 'take options ({ signal, maxWait })');
      signal = checkSignal(options?.signal);
      if (signal?.aborted) return Promise.reject(signal.reason);
      checkCost(cost, this.#params.burst);
      maxWaitMs = maxWaitOf(options);
      reservation = this.#reserve(this.#clock.now(), cost, maxWaitMs);
    } catch (error) {
      return Promise.reject(error); // a bad cost, signal or maxWait rejects, like every other failure of take()
    }
    if (!reservation.ok) {
      // retryAfterMs means the same as in the Scheduler: how long until this wait would fit maxWait.
      const { delayMs } = reservation;
      return Promise.reject(
        new WaitTooLongError({ waitMs: delayMs, maxWaitMs, retryAfterMs: retryHintMs(delayMs - maxWaitMs) }),
      );
    }
    if (reservation.delayMs === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        watchdog.disarm();
        try {
          reservation.cancel();
        } finally {
          reject(signal?.reason);
        }
      };
      const watchdog = new Watchdog(this.#clock, () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
      watchdog.armAt(reservation.readyAtMs, this.#clock.now());
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Changes the rate from now on: tokens earned so far are kept, and refill
   * runs at the new rate from now. (Linux's `tbf_change` refills the bucket
   * instead; see {@link reconfigure}.)
   */
  setRate(rate: RateInput): void {
    this.#reconfigure({ ratePerSecond: rateParam(rate), burst: this.#params.burst });
  }

  /**
   * Changes the capacity from now on: tokens earned so far are kept, capped
   * at the new capacity. Outstanding reservations stand; cancelling one later
   * gives back at most the new capacity.
   */
  setBurst(burst: SizeInput): void {
    this.#reconfigure({ ratePerSecond: this.#params.ratePerSecond, burst: burstParam(burst) });
  }

  #reconfigure(next: BucketParams): void {
    reconfigure(this.#state, this.#params, this.#clock.now(), next);
    this.#params = next;
  }
}
