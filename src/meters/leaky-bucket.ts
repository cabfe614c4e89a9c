/**
 * The leaky bucket, in its shaping form: requests pour into a bucket (a
 * bounded queue) that leaks at a constant `rate`, so what comes out is evenly
 * spaced, 1 / rate apart for cost-1 requests, however bursty what goes in.
 * A request that would overflow the bucket is refused at once.
 *
 * Where a token bucket lets a saved-up burst through at once, a leaky bucket
 * never does: a burst waits in the queue and leaves at the rate. That is the
 * choice when the downstream needs a smooth load, and the price is latency:
 * a request that finds q cost queued ahead of it leaves q / rate later.
 *
 * State is one number, `nextFreeMs`: when the leak will have passed
 * everything admitted so far (the virtual finish time of the last request).
 * A request of cost c arriving at t:
 *
 *   backlog   = max(0, nextFreeMs - t) * rate        (cost still in the bucket)
 *   conforms  iff backlog + c <= maxQueue
 *   leaves at departAt = max(t, nextFreeMs)          (delayMs = departAt - t)
 *   then        nextFreeMs = departAt + c / rate
 *
 * The request being leaked counts in the bucket until it has fully leaked, so
 * a bucket of `maxQueue` cost-1 requests holds the one leaving plus
 * `maxQueue - 1` waiting. As a meter (without the wait) this is the GCRA /
 * "leaky bucket as a meter" of ATM, which conforms exactly like a token bucket
 * of capacity `maxQueue`; the difference is what happens to a conforming
 * request: here it is delayed to its slot, there it passes at once.
 *
 * Worked example: rate 100/s, maxQueue 5, ten requests at t = 0. The first
 * five are admitted and leave at 0, 10, 20, 30 and 40 ms; the other five are
 * refused (retry after 10 ms, when the first has leaked out). At 25 ms the
 * bucket holds 2.5 (the rest of the third, the fourth and the fifth), so two
 * more requests fit, leaving at 50 and 60 ms.
 *
 * Time that goes backwards counts as no time at all.
 */

import { type Clock, checkClock } from '../clock.js';
import { CostExceedsCapacityError, checkKnownOptions, InvalidOptionError, InvalidSizeError } from '../errors.js';
import { parseRate, type RateInput } from '../units.js';
import { slackFor } from './bucket.js';
import type { Decision } from './decision.js';

/** The parameters of a leaky bucket. */
export interface LeakyParams {
  /** The leak (drain) rate, cost per second. */
  ratePerSecond: number;
  /** The bucket's size: the most cost in it at once (leaving plus waiting). */
  maxQueue: number;
}

/** The variables of a leaky bucket. */
export interface LeakyState {
  /** When everything admitted so far will have leaked out, ms. */
  nextFreeMs: number;
  /** The latest time seen, ms (time never goes back). */
  latestMs: number;
}

/** A leaky bucket's decision: a {@link Decision}, plus when an admitted request leaves. */
export interface LeakyDecision extends Decision {
  /** Milliseconds from now until the request leaves the bucket (its turn at the rate); 0 if refused. */
  delayMs: number;
}

/** The comparison slack, the token bucket's ({@link slackFor}): a leak exact in real arithmetic still conforms. */
function slack(params: LeakyParams): number {
  return slackFor(params.maxQueue);
}

/** Cost still in the bucket at `nowMs`. */
export function leakyBacklog(state: LeakyState, params: LeakyParams, nowMs: number): number {
  const now = Math.max(nowMs, state.latestMs);
  return (Math.max(0, state.nextFreeMs - now) * params.ratePerSecond) / 1000;
}

/** Admits `cost` into the bucket at `nowMs` if it fits (and says when it leaves); changes nothing if not. */
export function leakyTake(state: LeakyState, params: LeakyParams, nowMs: number, cost: number): LeakyDecision {
  if (cost > params.maxQueue)
    throw new CostExceedsCapacityError({
      cost,
      capacity: params.maxQueue,
      capacityName: "the leaky bucket's maxQueue",
    });
  if (!(cost >= 0)) throw new InvalidSizeError(cost, `invalid cost ${cost}: expected a finite number >= 0`);
  const now = Math.max(nowMs, state.latestMs);
  state.latestMs = now;
  const { ratePerSecond, maxQueue } = params;
  const backlog = leakyBacklog(state, params, now);
  const allowed = backlog + cost <= maxQueue + slack(params);
  let delayMs = 0;
  if (allowed) {
    const departAtMs = Math.max(now, state.nextFreeMs);
    delayMs = departAtMs - now;
    state.nextFreeMs = departAtMs + (cost * 1000) / ratePerSecond;
  }
  const after = leakyBacklog(state, params, now);
  return {
    allowed,
    remaining: Math.max(0, Math.floor(maxQueue - after + slack(params))),
    retryAfterMs: allowed ? 0 : ((backlog + cost - maxQueue) * 1000) / ratePerSecond,
    resetAfterMs: Math.max(0, state.nextFreeMs - now),
    limit: maxQueue,
    delayMs,
  };
}

/** Options for {@link LeakyBucket}. */
export interface LeakyBucketOptions {
  /** The leak rate: cost per second, or a string such as `'100/s'`. Positive and finite. */
  rate: RateInput;
  /**
   * The bucket's size: the most cost in it at once, the one leaving included.
   * A positive finite number: the queue is bounded on purpose.
   */
  maxQueue: number;
  /** The time source. @default systemClock */
  clock?: Clock;
}

const LEAKY_OPTIONS: ReadonlySet<string> = new Set(['rate', 'maxQueue', 'clock']);

/**
 * A leaky bucket that shapes: admitted requests leave evenly spaced at `rate`,
 * at most `maxQueue` of them in the bucket; the rest are refused at once.
 *
 * @example
 * const smooth = new LeakyBucket({ rate: '100/s', maxQueue: 50 });
 * const d = smooth.tryTake();
 * if (d.allowed) setTimeout(send, d.delayMs); else reply429(d.retryAfterMs);
 */
export class LeakyBucket {
  readonly #params: LeakyParams;
  readonly #clock: Clock;
  readonly #state: LeakyState;

  constructor(options: LeakyBucketOptions) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError(
        'options',
        options,
        'expected an options object such as { rate: "100/s", maxQueue: 50 }',
      );
    }
    checkKnownOptions(options, LEAKY_OPTIONS, 'LeakyBucket options', {
      burst: 'write `maxQueue` (the bucket holds at most that much cost)',
    });
    const ratePerSecond = parseRate(options.rate);
    const { maxQueue } = options;
    if (!(typeof maxQueue === 'number' && Number.isFinite(maxQueue) && maxQueue > 0)) {
      throw new InvalidOptionError(
        'maxQueue',
        maxQueue,
        `Expected \`maxQueue\` to be a positive finite number, got ${String(maxQueue)}: the queue is bounded on purpose`,
      );
    }
    this.#params = { ratePerSecond, maxQueue };
    this.#clock = checkClock(options.clock);
    const now = this.#clock.now();
    this.#state = { nextFreeMs: now, latestMs: now };
  }

  /** The leak rate, cost per second. */
  get rate(): number {
    return this.#params.ratePerSecond;
  }

  /** The bucket's size. */
  get maxQueue(): number {
    return this.#params.maxQueue;
  }

  /** Cost in the bucket now (leaving and waiting). */
  get backlog(): number {
    return leakyBacklog(this.#state, this.#params, this.#clock.now());
  }

  /** Admits `cost` if it fits; `delayMs` says when it leaves. */
  tryTake(cost = 1): LeakyDecision {
    return this.tryTakeAt(this.#clock.now(), cost);
  }

  /** {@link tryTake} at an explicit time. */
  tryTakeAt(nowMs: number, cost = 1): LeakyDecision {
    return leakyTake(this.#state, this.#params, nowMs, cost);
  }

  /** What a request of `cost` would get now, without admitting it. */
  peek(cost = 1): LeakyDecision {
    return this.peekAt(this.#clock.now(), cost);
  }

  /** {@link peek} at an explicit time. */
  peekAt(nowMs: number, cost = 1): LeakyDecision {
    return leakyTake({ ...this.#state }, this.#params, nowMs, cost);
  }
}
