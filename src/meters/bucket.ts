/**
 * The bucket arithmetic: every step that computes a token bucket's tokens or
 * times, as pure functions over plain state (no timers, no I/O). The code
 * around a bucket (`TokenBucket`, the `Scheduler`, the streams' meter, the
 * keyed and fleet stores) loads and saves the state and calls these steps; in
 * Redis the scripts call their Lua twin, src/redis/bucket-lua.ts, held to this
 * file's test tables on a real redis-server. This file and that twin are the
 * only places the sums are written (tcm.ts's three-colour markers are RFC
 * 2697/2698's coupled buckets, another model).
 *
 * A flow conforms to a token bucket of rate R and capacity B if, over any
 * interval of length T, the cost it is admitted does not exceed B + R * T.
 * (The same inequality opens Linux's sch_tbf.c.)
 *
 * State is two numbers, `tokens` and `updatedAtMs` ({@link BucketState}).
 * Refill is computed lazily, never by a timer:
 *
 *   tokens(t) = min(capacity, tokens + (t - updatedAtMs) * rate / 1000)
 *
 * and time before `updatedAtMs` counts as no time at all (a clock that goes
 * backwards creates no tokens; `updatedAtMs` never moves back). Tokens go
 * negative while reservations are outstanding: the debt is paid off by refill.
 *
 * The steps, each one function:
 *
 * - {@link tokensAt}, {@link advance}: the refill above, read or applied.
 * - {@link charge}: take `cost` at time t, in debt if need be
 *   (`tokens = tokens(t) - cost`). {@link tryCharge}: only if it conforms.
 *   {@link chargeNew}: the first charge of a new (full) bucket, stateless.
 * - {@link readyAt}, {@link delayUntil}, {@link msUntil}: when the bucket
 *   holds `cost`; the scheduler's theoretical start ({@link startAt}) is built
 *   on them.
 * - {@link refund}: give back a cancelled reservation, as x/time's
 *   `Reservation.CancelAt` does: only what no later reservation counts on,
 *   and never above the capacity.
 * - {@link credit}: add tokens, capped at the capacity (work billed too high);
 *   {@link rebill}: a running job's bill changes (a charge or a credit).
 * - {@link reconfigure}: new rate or capacity from now on; tokens earned so
 *   far are kept, capped at the new capacity. {@link clampToCapacity}: the
 *   same cap for a store, which keeps state but no parameters.
 * - {@link timeToFullMs}: when the bucket is full again, so holds no
 *   information (a store may forget it, a Redis key may expire).
 * - {@link slackFor}, {@link conforms}, {@link conformsAt},
 *   {@link largestConforming}: the one tolerance rule.
 *
 * The one tolerance rule: an amount conforms when it is short by at most
 * `capacity * 2^-36`, so float rounding neither refuses an exact refill nor
 * creates a token. Every question about time is asked in tokens ("does the
 * bucket hold the cost at t?"), and every computed instant is the first at
 * which that question says yes, so a timer armed for it never wakes early.
 * Why, and how the Lua twin stays equal to the last bit:
 * docs/internals/arithmetic.md.
 *
 * Worked example: rate 10/s, capacity 2, empty at t = 0 (`{ tokens: 0,
 * updatedAtMs: 0 }`). A reservation B of 2 is charged at 0 (tokens -2) and is
 * ready at 200 ms; C of 1 is charged next (tokens -3), ready at 300 ms.
 * Cancelling B at 100 ms: at B's due time the bucket still owes 1 token (C's),
 * so 2 - 1 = 1 comes back (tokens at 100 ms: -2 + 1 = -1). Cancelling C
 * instead would give back all of its 1: nothing came after it.
 */

import {
  CostExceedsCapacityError,
  describeValue,
  InvalidOptionError,
  InvalidRateError,
  InvalidSizeError,
} from '../errors.js';
import { parseRateOption, parseSizeOption, type RateInput, type SizeInput } from '../units.js';

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
  /** The burst: the bucket's capacity, the most tokens it holds. */
  burst: number;
}

/** The tolerance of the one comparison rule: `capacity * 2^-36` tokens (see the file's opening comment). */
export function slackFor(capacity: number): number {
  return capacity * 2 ** -36;
}

/** True if `available` covers `cost` within the tolerance of a quantity of size `capacity`. */
export function conforms(available: number, cost: number, capacity: number): boolean {
  return available + slackFor(capacity) >= cost;
}

/** The largest cost that `available` tokens cover by {@link conforms} (fractional; floor it for whole tokens). */
export function largestConforming(available: number, capacity: number): number {
  return available + slackFor(capacity);
}

/**
 * Tokens in the bucket at `nowMs`, without changing the state.
 * Time before `state.updatedAtMs` counts as no time at all.
 */
export function tokensAt(state: BucketState, params: BucketParams, nowMs: number): number {
  const elapsedMs = nowMs - state.updatedAtMs;
  if (!(elapsedMs > 0)) return state.tokens;
  return Math.min(params.burst, state.tokens + (elapsedMs * params.ratePerSecond) / 1000);
}

/** Brings `state` up to `nowMs` in place: refill, and move `updatedAtMs` forward (never back). */
export function advance(state: BucketState, params: BucketParams, nowMs: number): void {
  state.tokens = tokensAt(state, params, nowMs);
  if (nowMs > state.updatedAtMs) state.updatedAtMs = nowMs;
}

/**
 * A clock that went backwards (a fail-over to a server whose clock is behind, an NTP step): a
 * `nowMs` before `updatedAtMs` becomes the last update, the tokens unchanged (Go's x/time re-counts
 * from the earlier time). No token is created (the step back earns nothing; refill starts at
 * `nowMs`), and a key is never shut longer than its tokens say: without this, every key would wait
 * out the whole step. For stores whose time comes from outside (Redis's `TIME`, a `now` hook), at
 * the start of a decision; the meters' own steps keep "time before `updatedAtMs` counts as none"
 * (a catch-up charges at a past instant on purpose).
 */
export function rewind(state: BucketState, nowMs: number): void {
  if (nowMs < state.updatedAtMs) state.updatedAtMs = nowMs;
}

/**
 * Milliseconds of refill until a bucket holding `tokens` has `cost`: 0 if it
 * has them now (within the tolerance). Linear: it does not stop at the
 * capacity, so it also answers "when has the bucket paid for all these jobs".
 */
export function msUntil(tokens: number, cost: number, params: BucketParams): number {
  const deficit = cost - tokens;
  return deficit > slackFor(params.burst) ? (deficit * 1000) / params.ratePerSecond : 0;
}

/**
 * The first instant `fromMs + delayMs` (delayMs >= the estimate given) at
 * which the bucket holds `cost`: the estimate, nudged up by ulps where float
 * rounding lands it a hair early. Bounded: the estimate is within a few ulps.
 */
function firstConforming(
  state: BucketState,
  params: BucketParams,
  cost: number,
  fromMs: number,
  estimateMs: number,
): number {
  let delayMs = estimateMs;
  let nudge = Math.max(Math.abs(fromMs), delayMs) * Number.EPSILON;
  for (let i = 0; i < 64 && !conforms(tokensAt(state, params, fromMs + delayMs), cost, params.burst); i++) {
    delayMs += nudge;
    nudge *= 2;
  }
  return delayMs;
}

/**
 * The first instant, at or after `state.updatedAtMs`, at which the bucket
 * holds `cost` (`cost` at most the capacity): when a reservation charged now
 * may act, and the earliest a waiting job may start.
 */
export function readyAt(state: BucketState, params: BucketParams, cost: number): number {
  const fromMs = state.updatedAtMs;
  return fromMs + firstConforming(state, params, cost, fromMs, msUntil(state.tokens, cost, params));
}

/**
 * Milliseconds from `nowMs` until the bucket holds `cost`, such that reading
 * the bucket at exactly `nowMs + delay` finds them (0 = now). A `nowMs`
 * earlier than the last update waits from the last update: time before it
 * counts as no time, so nothing is admitted that the bucket did not earn.
 */
export function delayUntil(state: BucketState, params: BucketParams, nowMs: number, cost: number): number {
  if (conforms(tokensAt(state, params, nowMs), cost, params.burst)) return 0;
  return firstConforming(state, params, cost, nowMs, readyAt(state, params, cost) - nowMs);
}

/** Takes `cost` at `atMs`, in debt if the tokens are not there. `updatedAtMs` moves forward only. */
export function charge(state: BucketState, params: BucketParams, atMs: number, cost: number): void {
  state.tokens = tokensAt(state, params, atMs) - cost;
  if (atMs > state.updatedAtMs) state.updatedAtMs = atMs;
}

/**
 * The tokens a new bucket (full) has left after `cost` is charged at its
 * creation: what {@link charge} leaves with no time elapsed, without a state.
 */
export function chargeNew(params: BucketParams, cost: number): number {
  return params.burst - cost;
}

/** Takes `cost` at `atMs` if the bucket holds it then; returns false and changes nothing if not. */
export function tryCharge(state: BucketState, params: BucketParams, atMs: number, cost: number): boolean {
  const tokens = tokensAt(state, params, atMs);
  if (!conforms(tokens, cost, params.burst)) return false;
  state.tokens = tokens - cost;
  if (atMs > state.updatedAtMs) state.updatedAtMs = atMs;
  return true;
}

/**
 * Gives back a reservation of `cost`, charged earlier and due at `readyAtMs`,
 * that will not be used; returns the tokens given back. The rule is x/time's
 * `CancelAt`:
 *
 * - a reservation that came due before `nowMs` gives nothing back (it was used);
 * - the tokens that later reservations count on stay taken: that is the debt
 *   the bucket still has at `readyAtMs` (`-tokensAt(readyAtMs)`, the tokens
 *   reserved after this one), so `cost - debt` comes back, or nothing;
 * - the bucket never goes above its capacity, whatever the cost (a burst
 *   lowered since the reservation was made is not an error).
 *
 * At a constant rate the debt at `readyAtMs` is exactly x/time's
 * `limit * (lastEvent - timeToAct)`; it needs no third state variable, and
 * after a rate change it is measured at the current rate (see the README).
 */
export function refund(
  state: BucketState,
  params: BucketParams,
  nowMs: number,
  cost: number,
  readyAtMs: number,
): number {
  if (readyAtMs < nowMs) return 0;
  const debtAtReady = -tokensAt(state, params, readyAtMs);
  const back = debtAtReady > 0 ? cost - debtAtReady : cost;
  if (!(back > 0)) return 0;
  return credit(state, params, nowMs, back);
}

/**
 * Adds `amount` tokens at `nowMs`, never above the capacity; returns the
 * tokens added. A credit is not a {@link refund}: it gives back what was
 * charged for work already done (a job that cost less than it was billed,
 * `TokenBucket.refund`), with no later reservation to protect.
 */
export function credit(state: BucketState, params: BucketParams, nowMs: number, amount: number): number {
  advance(state, params, nowMs);
  const before = state.tokens;
  state.tokens = Math.min(params.burst, before + amount);
  return Math.max(0, state.tokens - before);
}

/**
 * A running job's bill changes by `deltaCost` at `nowMs`: a positive delta is
 * charged (in debt if need be), a negative one credited (capped at the
 * capacity). The Scheduler's `ctx.adjust` and the fleet store's `adjust`.
 */
export function rebill(state: BucketState, params: BucketParams, nowMs: number, deltaCost: number): void {
  if (deltaCost > 0) charge(state, params, nowMs, deltaCost);
  else if (deltaCost < 0) credit(state, params, nowMs, -deltaCost);
}

/**
 * Changes a bucket's parameters from `nowMs` on: tokens earned so far (at the
 * old rate) are kept, capped at the new capacity, and refill runs at the new
 * rate from now. (Linux's `tbf_change` refills the bucket to the new burst
 * instead; we keep what was earned, so a change never hands out a burst.)
 */
export function reconfigure(state: BucketState, params: BucketParams, nowMs: number, next: BucketParams): void {
  advance(state, params, nowMs);
  if (state.tokens > next.burst) state.tokens = next.burst;
}

/**
 * Drops tokens above `params.capacity`, nothing else. For a store: it keeps a
 * bucket's state but not the parameters it was written under, so a capacity
 * lowered since is applied when the bucket is next read ({@link reconfigure}
 * does this for a bucket that knows its old parameters). A bucket within its
 * capacity is left exactly as it was, so the steps that follow take the same
 * float path as on a bucket that was never clamped.
 */
export function clampToCapacity(state: BucketState, params: BucketParams): void {
  if (state.tokens > params.burst) state.tokens = params.burst;
}

/**
 * True if the bucket holds `cost` at `atMs` (within the tolerance): the test
 * every refusal is asked by. A reservation may wait `maxWaitMs` iff its delay is
 * at most that, or the bucket holds the cost at `nowMs + maxWaitMs` (the bound
 * asked in tokens, so an ulp in the computed delay refuses nothing).
 */
export function conformsAt(state: BucketState, params: BucketParams, atMs: number, cost: number): boolean {
  return conforms(tokensAt(state, params, atMs), cost, params.burst);
}

/**
 * Milliseconds until a bucket holding `tokens` is full: 0 if it is. A full
 * bucket holds no information (it equals a new one), so this is when a store
 * may forget it and when a Redis key may expire.
 */
export function timeToFullMs(tokens: number, params: BucketParams): number {
  const missing = params.burst - tokens;
  return missing > 0 ? (missing * 1000) / params.ratePerSecond : 0;
}

/**
 * The scheduler's theoretical start for the head job of `cost`: when to
 * charge it, so that jobs that came due while a timer was late start together,
 * each charged at its own due time (see docs/internals/scheduler.md).
 *
 * Returns a time `<= nowMs` when the job may start now (charge it then, with
 * {@link charge}), or the time `> nowMs` to wake up at when the bucket does not
 * hold `cost` yet. The start is the latest of: when the bucket had the tokens
 * ({@link readyAt}); `notBeforeMs` (when the job arrived, or could otherwise
 * have started); and `nowMs - lagMs`, where `lagMs = catchUpMs - (capacity -
 * cost) / rate` is the lateness the bucket itself could not absorb (its tokens
 * keep accumulating while a timer is late, up to the capacity).
 */
export function startAt(
  state: BucketState,
  params: BucketParams,
  nowMs: number,
  cost: number,
  notBeforeMs: number,
  catchUpMs: number,
): number {
  const readyMs = readyAt(state, params, cost);
  if (!conforms(tokensAt(state, params, nowMs), cost, params.burst)) return readyMs;
  const lagMs = catchUpMs - ((params.burst - cost) * 1000) / params.ratePerSecond;
  const earliestMs = lagMs > 0 ? nowMs - lagMs : nowMs;
  return Math.min(nowMs, Math.max(readyMs, notBeforeMs, earliestMs));
}

/**
 * {@link msUntil}, with a wait of at most `withinMs` counted as none (0): the
 * bound asked in tokens, by the tolerance rule, so that an ulp in a computed
 * wait turns nothing away. The Scheduler's `maxWait` check up front.
 */
export function msUntilWithin(tokens: number, cost: number, params: BucketParams, withinMs: number): number {
  if (withinMs > 0 && msUntil(tokens + (withinMs * params.ratePerSecond) / 1000, cost, params) === 0) return 0;
  return msUntil(tokens, cost, params);
}

/** Validates a cost against a capacity: a finite number, >= 0, and <= capacity. */
export function checkCost(cost: number, capacity: number): void {
  if (typeof cost === 'number' && cost >= 0 && cost <= capacity) return;
  if (typeof cost === 'number' && cost > capacity) throw new CostExceedsCapacityError({ cost, capacity });
  throw new InvalidSizeError(cost, `invalid cost ${describeValue(cost)}: expected a finite number >= 0`);
}

/**
 * The largest rate (tokens per second) and burst (tokens) a bucket supports: 2^53
 * (9,007,199,254,740,992). Up to it every integer count of tokens is exact in a double, and
 * a wait of one token is still a positive time; beyond it (1e306/s, say) the refill in one
 * millisecond rounds away the cost of a job and a waiting job would never see its tokens.
 * Larger values are refused with `ERR_INVALID_RATE` / `ERR_INVALID_SIZE`. (2^53 bytes per
 * second is 8 PiB/s.)
 */
export const MAX_RATE = 2 ** 53;
/** The largest burst: see {@link MAX_RATE}. */
export const MAX_BURST = 2 ** 53;

/** A rate option, parsed and checked against {@link MAX_RATE}. */
export function rateParam(rate: RateInput, option = 'rate'): number {
  const ratePerSecond = parseRateOption(rate, option);
  if (ratePerSecond <= MAX_RATE) return ratePerSecond;
  throw new InvalidRateError(
    rate,
    `invalid ${option} ${describeValue(rate)}: the largest supported rate is 2^53 (${MAX_RATE}) per second`,
  );
}

/** A burst option, parsed and checked against {@link MAX_BURST}. */
export function burstParam(burst: SizeInput, option = 'burst'): number {
  const capacity = parseSizeOption(burst, option);
  if (capacity <= MAX_BURST) return capacity;
  throw new InvalidSizeError(
    burst,
    `invalid ${option} ${describeValue(burst)}: the largest supported burst is 2^53 (${MAX_BURST})`,
  );
}

/** An explicit time (`nowMs` of the `*At` twins): a finite number, or `InvalidOptionError`. */
export function checkTime(nowMs: unknown, option = 'nowMs'): number {
  if (typeof nowMs === 'number' && Number.isFinite(nowMs)) return nowMs;
  throw new InvalidOptionError(
    option,
    nowMs,
    `Expected \`${option}\` to be a finite clock time in ms, got ${describeValue(nowMs)}`,
  );
}

/**
 * The one rule for a missing `burst` (docs/buckets.md#a-missing-burst): a bucket that refuses work
 * (`TokenBucket`, `KeyedLimiter` and its `global`, `rateLimit`) needs it stated, because it is the
 * largest burst promised to callers and no default suits every caller; a bucket that only paces work
 * (the Scheduler and the interceptor: one job; streams: a little time of the rate, see
 * stream/pacing.ts) takes the smallest burst that sustains its rate. This is the first half.
 */
export function requiredBurstParam(burst: SizeInput | undefined, option = 'burst'): number {
  if (burst !== undefined) return burstParam(burst, option);
  throw new InvalidOptionError(
    option,
    undefined,
    `\`${option}\` is required: a limit that refuses work states its largest burst (the bucket's capacity, and how ` +
      'much a new or idle key admits at once). Give the largest cost to pass at once, e.g. `burst: rate` for one ' +
      'second of it (docs/buckets.md#a-missing-burst)',
  );
}

/** A missing `burst` of a bucket that paces jobs (the Scheduler, the interceptor): one job, evenly spaced. */
export const PACED_JOB_BURST = 1;

/**
 * Parses and validates `rate` and `burst` options into bucket parameters.
 * The error names the option, so a message reads "invalid rate ..." or "invalid burst ...".
 */
export function bucketParams(rate: RateInput, burst: SizeInput | undefined): BucketParams {
  return { ratePerSecond: rateParam(rate), burst: requiredBurstParam(burst) };
}
