/**
 * The test tables of the bucket arithmetic (src/meters/bucket.ts), shared by
 * three suites: test/meters/bucket.test.ts holds bucket.ts to each row's
 * expected answer, and the twins' suites (test/redis/bucket-lua.test.ts on a
 * real redis-server, test/postgres/bucket-sql.test.ts on a real PostgreSQL)
 * run every row through the Lua or SQL twin and ask for bucket.ts's answer to
 * the last bit.
 *
 * A row is a tuple: its comment says the fields. {@link tableCalls} turns
 * every row into the step calls it makes; {@link TS_STEPS} answers them as
 * bucket.ts does; {@link stepCallArb} makes random ones, for the twins.
 */

import fc from 'fast-check';
import type { BucketParams, BucketState } from '../../src/meters/bucket.js';
import * as bucket from '../../src/meters/bucket.js';
import { charge, startAt } from '../../src/meters/bucket.js';

/** rate 10/s, capacity 20: the tables' bucket unless a table says otherwise. */
/**
 * What bucket.ts exports besides its steps: option checks and limits, which the twins (Lua, SQL) do
 * not repeat because the stores receive checked numbers.
 */
export const NOT_STEPS = [
  'checkCost',
  'rateParam',
  'burstParam',
  'requiredBurstParam',
  'PACED_JOB_BURST',
  'checkTime',
  'bucketParams',
  'MAX_RATE',
  'MAX_BURST',
];

export const params: BucketParams = { ratePerSecond: 10, burst: 20 };
/** rate 1/s, capacity 10: the refund tables (the reproduction, x/time's cases in ms). */
export const slow: BucketParams = { ratePerSecond: 1, burst: 10 };
/** rate 1000/s, capacity 1: the startAt tables. */
export const fast: BucketParams = { ratePerSecond: 1000, burst: 1 };

/** [available, cost, capacity, expected] */
export const conformsCases = [
  [1, 1, 1, true],
  [1 - 2 ** -40, 1, 1, true], // short by less than capacity * 2^-36: conforms
  [1 - 2 ** -30, 1, 1, false], // short by more: does not
  [1000 - 2 ** -30, 1000, 2 ** 20, true], // the slack scales with the capacity
  [0, 0, 1, true],
  [-1e-20, 0, 1, true],
  [-1, 0, 1, false], // a debt must be paid before even a zero cost
] as const;

/** [available, capacity, the largest cost that conforms] */
export const largestConformingCases = [
  [1, 1, 1 + 2 ** -36],
  [0, 2 ** 20, 2 ** -16],
  [-3, 4, -3 + 2 ** -34], // in debt: not even a zero cost
  [2.5, 10, 2.5 + 10 * 2 ** -36],
] as const;

/** [tokens, updatedAtMs, nowMs, expected tokens] at {@link params} */
export const tokensAtCases = [
  [0, 0, 0, 0],
  [0, 0, 100, 1], // 100 ms at 10/s
  [0, 0, 1000, 10],
  [0, 0, 5000, 20], // capped at capacity
  [5, 1000, 500, 5], // time went backwards: no change
  [-3, 0, 300, 0], // debt is paid off by refill
] as const;

/** [tokens, updatedAtMs, nowMs, tokens after, updatedAtMs after] at {@link params} */
export const advanceCases = [
  [0, 1000, 500, 0, 1000], // an earlier time: nothing moves back
  [0, 1000, 1500, 5, 1500],
  [19, 0, 1e6, 20, 1e6], // capped at the capacity
] as const;

/** [tokens, cost, expected ms] at {@link params} */
export const msUntilCases = [
  [20, 1, 0],
  [0, 1, 100],
  [0.5, 1, 50],
  [-5, 0, 500], // a zero cost waits for the debt ahead of it
  [0, 20, 2000],
] as const;

/** [tokens, cost, withinMs, expected ms] at {@link params}: a wait of at most withinMs counts as none */
export const msUntilWithinCases = [
  [0, 1, 100, 0], // exactly within
  [0, 1, 99.99, 100],
  [0, 1, 0, 100],
  [20, 1, 0, 0],
  [0.5, 1, 50, 0],
  [-5, 0, 499, 500],
] as const;

/** [tokens, updatedAtMs, atMs, cost, tokens after, updatedAtMs after] at {@link params} */
export const chargeCases = [
  [20, 0, 0, 5, 15, 0],
  [0, 0, 1000, 5, 5, 1000], // refill 10 then take 5
  [0, 0, 0, 5, -5, 0], // into debt
  [0, 1000, 500, 5, -5, 1000], // an earlier time: no refill, and the time stays
  [20, 0, 9999, 20, 0, 9999], // refill capped at the capacity
] as const;

/** [cost, tokens left] when a new bucket at {@link params} is charged at once */
export const chargeNewCases = [
  [5, 15],
  [20, 0],
  [0, 20],
  [0.1, 19.9],
] as const;

/** [tokens, updatedAtMs, atMs, cost, taken, tokens left] at {@link params} */
export const tryChargeCases = [
  [5, 0, 0, 5, true, 0],
  [4, 0, 0, 5, false, 4],
  [4, 0, 100, 5, true, 0],
  [-1, 0, 100, 0, true, 0], // the debt is paid at 100 ms: a zero cost conforms then
  [-1, 0, 99, 0, false, -1],
] as const;

/** [tokens, updatedAtMs, cost, ready at] at {@link params} */
export const readyAtCases = [
  [20, 0, 20, 0],
  [0, 0, 1, 100],
  [-5, 1000, 5, 2000], // pay the debt (500 ms), then earn 5 (500 ms)
  [0.5, 250, 1, 300],
] as const;

/** Clock origins for "100 ms before the last update, the wait is 300 ms" (a cost of 2 at {@link params}). */
export const earlierNowOrigins = [0, 1, 12_345.678, 1e6, 1.7e12] as const;

/** [tokens, updatedAtMs, nowMs, cost, expected delay] at {@link params} */
export const delayUntilCases = [
  [5, 1000, 0, 5, 0], // the tokens are there, even at an earlier time
  [5, 1000, 0, 6, 1100],
] as const;

/** Clock origins and [rate, capacity, cost] of the "lands where the tokens are" cases, each from empty. */
export const landingOrigins = [0, 0.1, 1e9 + 0.3, 1.7e12 + 0.7] as const;
export const landingBuckets = [
  [3, 7, 7],
  [1e7, 1, 1],
  [0.01, 1, 0.3],
  [1024 * 1024, 65536, 4096],
] as const;

/**
 * [name, tokens after all charges (at 0), cost, readyAtMs, cancel at, given back, tokens at cancel after],
 * at {@link slow}.
 */
export const refundCases = [
  ['the last one: all of it', -10, 10, 10_000, 1000, 10, 1],
  ['one with 10 reserved after it: nothing', -20, 10, 10_000, 1000, 0, -19],
  ['one with 5 reserved after it: 5', -15, 10, 10_000, 1000, 5, -9],
  ['due before the cancel: nothing (it was used)', -10, 10, 10_000, 10_001, 0, 0.001],
  ['due exactly at the cancel: still given back (as CancelAt does)', -10, 10, 10_000, 10_000, 10, 10],
  ['a zero cost gives nothing', -10, 0, 10_000, 1000, 0, -9],
] as const;

/**
 * [name, rate, capacity, tokens, updatedAtMs, cancel at, cost, readyAtMs, given back, tokens after, updatedAtMs after]:
 * the refunds that test the cap and the time.
 */
export const refundEdgeCases = [
  // A reservation of 10 due at 2 s; the burst is 3 now: from -1 up to the capacity 3.
  [
    'never fills above the capacity, even for a cost above it (a burst lowered since)',
    1,
    3,
    -2,
    0,
    1000,
    10,
    2000,
    4,
    3,
    1000,
  ],
  // Reserved at 1000 ms: a (2, due 3000), then b (1, due 4000); a is cancelled at 0 ms.
  ['does not move the time back when cancelled at an earlier time', 10, 20, -3, 1000, 0, 2, 3000, 2, -1, 1000],
] as const;

/** [name, tokens, updatedAtMs, nowMs, amount, added, tokens after, updatedAtMs after] at {@link params} */
export const creditCases = [
  ['adds after the refill', 0, 0, 100, 3, 3, 4, 100],
  ['never above the capacity', 18, 0, 100, 5, 1, 20, 100],
  ['a full bucket takes nothing', 20, 0, 0, 5, 0, 20, 0],
  ['a debt is paid down', -5, 0, 0, 2, 2, -3, 0],
  ['an earlier time adds at the last update (time stays)', 0, 1000, 500, 1, 1, 1, 1000],
] as const;

/** [name, tokens, updatedAtMs, nowMs, deltaCost, tokens after, updatedAtMs after] at {@link params} */
export const rebillCases = [
  ['a larger bill is charged now, into debt', 0, 0, 100, 5, -4, 100],
  ['a smaller bill is credited, capped at the capacity', 18, 0, 100, -5, 20, 100],
  ['no change is no step: the bucket is not brought up to date', 0, 0, 100, 0, 0, 0],
] as const;

/** [name, tokens, updatedAtMs, now, next params, tokens after] from {@link params} */
export const reconfigureCases = [
  ['a faster rate keeps the tokens earned so far', 0, 0, 1000, { ratePerSecond: 100, burst: 20 }, 10],
  ['a smaller capacity caps them', 0, 0, 5000, { ratePerSecond: 10, burst: 4 }, 4],
  ['a larger capacity does not refill (tbf_change would)', 5, 0, 0, { ratePerSecond: 10, burst: 100 }, 5],
  ['a debt stays a debt', -5, 0, 0, { ratePerSecond: 10, burst: 1 }, -5],
] as const;

/** [tokens, capacity, after] */
export const clampCases = [
  [30, 20, 20], // a capacity lowered since the state was written
  [20, 20, 20],
  [19.5, 20, 19.5], // within the capacity: untouched, bit for bit
  [-3, 20, -3],
] as const;

/** [tokens, updatedAtMs, atMs, cost, expected] at {@link params} */
export const conformsAtCases = [
  [0, 0, 500, 5, true], // 5 refilled by 500 ms
  [0, 0, 499, 5, false],
  [5 - 2 ** -40, 0, 0, 5, true], // within the tolerance
  [20, 0, -1000, 20, true], // time before the update counts as none
  [-10, 0, 1000, 0, true], // a debt of 10 is paid by 1 s
  [-10, 0, 999, 0, false],
] as const;

/** [tokens, expected ms] at {@link params} */
export const timeToFullCases = [
  [20, 0],
  [25, 0], // above the capacity (lowered since): already full
  [19, 100],
  [0, 2000],
  [-10, 3000], // a debt is paid first
] as const;

/** [name, tokens, updatedAtMs, now, cost, notBefore, catchUp, expected] at {@link fast} */
export const startAtCases = [
  ['tokens there since 0: charged now when nothing is late', 1, 0, 0, 1, 0, 5, 0],
  ['not there yet: wake at its ready time', 0, 0, 0.5, 1, 0, 5, 1],
  ['a timer 1.15 ms late: charged at its due time', 0, 0, 2.15, 1, 0, 5, 1],
  ['late by more than catchUp: charged catchUp before now', 0, 0, 20, 1, 0, 5, 15],
  ['catchUp 0: charged now', 0, 0, 2.15, 1, 0, 0, 2.15],
  ['not before it arrived', 0, 0, 2.15, 1, 1.5, 5, 1.5],
] as const;

/** The late timer of the startAt tables: at 3.2 ms, catchUp 5, every job of 1 due by then starts (at {@link fast}). */
export const lateTimer = { nowMs: 3.2, cost: 1, notBeforeMs: 0, catchUpMs: 5 } as const;

/** The step names of a {@link StepCall}: bucket.ts's exported steps. */
export type StepName =
  | 'slackFor'
  | 'conforms'
  | 'largestConforming'
  | 'tokensAt'
  | 'advance'
  | 'rewind'
  | 'msUntil'
  | 'msUntilWithin'
  | 'readyAt'
  | 'delayUntil'
  | 'charge'
  | 'chargeNew'
  | 'tryCharge'
  | 'refund'
  | 'credit'
  | 'rebill'
  | 'reconfigure'
  | 'clampToCapacity'
  | 'conformsAt'
  | 'timeToFullMs'
  | 'startAt';

/**
 * One call of a step: the state it starts from (`[tokens, updatedAtMs]`; ignored by a step
 * without one), the bucket's parameters, and the step's other arguments in bucket.ts's order
 * (`reconfigure`: nowMs, next rate, next capacity; a step taking a capacity alone takes
 * `params.capacity`).
 */
export interface StepCall {
  step: StepName;
  state: readonly [number, number];
  params: BucketParams;
  args: readonly number[];
}

const call = (
  step: StepName,
  state: readonly [number, number],
  p: BucketParams,
  ...args: readonly number[]
): StepCall => ({ step, state, params: p, args });

/** Every step call the tables above make, by bucket.ts's steps (sequences as their single steps). */
export function tableCalls(): StepCall[] {
  const calls: StepCall[] = [];
  const none = [0, 0] as const;
  for (const [available, cost, capacity] of conformsCases) {
    const p = { ratePerSecond: 1, burst: capacity };
    calls.push(call('conforms', none, p, available, cost), call('slackFor', none, p));
  }
  for (const [available, capacity] of largestConformingCases) {
    calls.push(call('largestConforming', none, { ratePerSecond: 1, burst: capacity }, available));
  }
  for (const [tokens, at, now] of tokensAtCases) calls.push(call('tokensAt', [tokens, at], params, now));
  for (const [tokens, at, now] of advanceCases) {
    calls.push(call('advance', [tokens, at], params, now), call('rewind', [tokens, at], params, now));
  }
  for (const [tokens, cost] of msUntilCases) calls.push(call('msUntil', none, params, tokens, cost));
  for (const [tokens, cost, within] of msUntilWithinCases) {
    calls.push(call('msUntilWithin', none, params, tokens, cost, within));
  }
  for (const [tokens, upd, at, cost] of chargeCases) calls.push(call('charge', [tokens, upd], params, at, cost));
  for (const [cost] of chargeNewCases) calls.push(call('chargeNew', none, params, cost));
  for (const [tokens, upd, at, cost] of tryChargeCases) {
    calls.push(call('tryCharge', [tokens, upd], params, at, cost));
  }
  for (const [tokens, upd, cost] of readyAtCases) calls.push(call('readyAt', [tokens, upd], params, cost));
  for (const origin of earlierNowOrigins) {
    calls.push(call('delayUntil', [0, origin + 100], params, origin, 2));
  }
  for (const [tokens, upd, now, cost] of delayUntilCases) {
    calls.push(call('delayUntil', [tokens, upd], params, now, cost));
  }
  for (const origin of landingOrigins) {
    for (const [ratePerSecond, capacity, cost] of landingBuckets) {
      const p = { ratePerSecond, burst: capacity };
      calls.push(call('readyAt', [0, origin], p, cost), call('delayUntil', [0, origin], p, origin, cost));
    }
  }
  for (const [, tokens, cost, readyAtMs, atMs] of refundCases) {
    calls.push(call('refund', [tokens, 0], slow, atMs, cost, readyAtMs));
  }
  for (const [, ratePerSecond, capacity, tokens, upd, atMs, cost, readyAtMs] of refundEdgeCases) {
    calls.push(call('refund', [tokens, upd], { ratePerSecond, burst: capacity }, atMs, cost, readyAtMs));
  }
  for (const [, tokens, upd, now, amount] of creditCases)
    calls.push(call('credit', [tokens, upd], params, now, amount));
  for (const [, tokens, upd, now, delta] of rebillCases) calls.push(call('rebill', [tokens, upd], params, now, delta));
  for (const [, tokens, upd, now, next] of reconfigureCases) {
    calls.push(call('reconfigure', [tokens, upd], params, now, next.ratePerSecond, next.burst));
  }
  for (const [tokens, capacity] of clampCases) {
    calls.push(call('clampToCapacity', [tokens, 123.25], { ratePerSecond: 10, burst: capacity }));
  }
  for (const [tokens, upd, at, cost] of conformsAtCases)
    calls.push(call('conformsAt', [tokens, upd], params, at, cost));
  for (const [tokens] of timeToFullCases) calls.push(call('timeToFullMs', none, params, tokens));
  for (const [, tokens, upd, now, cost, notBefore, catchUp] of startAtCases) {
    calls.push(call('startAt', [tokens, upd], fast, now, cost, notBefore, catchUp));
  }
  calls.push(call('startAt', [0, 0], { ratePerSecond: 1000, burst: 10 }, 3.5, 1, 0, 5));
  // the late timer's sequence, step by step from bucket.ts's own states
  const s: BucketState = { tokens: 0, updatedAtMs: 0 };
  const { nowMs, cost, notBeforeMs, catchUpMs } = lateTimer;
  for (let i = 0; i < 10; i++) {
    calls.push(call('startAt', [s.tokens, s.updatedAtMs], fast, nowMs, cost, notBeforeMs, catchUpMs));
    const at = startAt(s, fast, nowMs, cost, notBeforeMs, catchUpMs);
    if (at > nowMs) break;
    calls.push(call('charge', [s.tokens, s.updatedAtMs], fast, at, cost));
    charge(s, fast, at, cost);
  }
  return calls;
}

export type StepResult = unknown; // a number, a boolean, or undefined (a step that only changes the state)

/** bucket.ts's steps (the twins' suites hold their answers to these), called the way a {@link StepCall} says. */
export const TS_STEPS: Record<StepName, (s: BucketState, p: BucketParams, a: readonly number[]) => StepResult> = {
  slackFor: (_s, p) => bucket.slackFor(p.burst),
  conforms: (_s, p, a) => bucket.conforms(n(a[0]), n(a[1]), p.burst),
  largestConforming: (_s, p, a) => bucket.largestConforming(n(a[0]), p.burst),
  tokensAt: (s, p, a) => bucket.tokensAt(s, p, n(a[0])),
  advance: (s, p, a) => bucket.advance(s, p, n(a[0])),
  rewind: (s, _p, a) => bucket.rewind(s, n(a[0])),
  msUntil: (_s, p, a) => bucket.msUntil(n(a[0]), n(a[1]), p),
  msUntilWithin: (_s, p, a) => bucket.msUntilWithin(n(a[0]), n(a[1]), p, n(a[2])),
  readyAt: (s, p, a) => bucket.readyAt(s, p, n(a[0])),
  delayUntil: (s, p, a) => bucket.delayUntil(s, p, n(a[0]), n(a[1])),
  charge: (s, p, a) => bucket.charge(s, p, n(a[0]), n(a[1])),
  chargeNew: (_s, p, a) => bucket.chargeNew(p, n(a[0])),
  tryCharge: (s, p, a) => bucket.tryCharge(s, p, n(a[0]), n(a[1])),
  refund: (s, p, a) => bucket.refund(s, p, n(a[0]), n(a[1]), n(a[2])),
  credit: (s, p, a) => bucket.credit(s, p, n(a[0]), n(a[1])),
  rebill: (s, p, a) => bucket.rebill(s, p, n(a[0]), n(a[1])),
  reconfigure: (s, p, a) => bucket.reconfigure(s, p, n(a[0]), { ratePerSecond: n(a[1]), burst: n(a[2]) }),
  clampToCapacity: (s, p) => bucket.clampToCapacity(s, p),
  conformsAt: (s, p, a) => bucket.conformsAt(s, p, n(a[0]), n(a[1])),
  timeToFullMs: (_s, p, a) => bucket.timeToFullMs(n(a[0]), p),
  startAt: (s, p, a) => bucket.startAt(s, p, n(a[0]), n(a[1]), n(a[2]), n(a[3])),
};

export function n(x: number | undefined): number {
  if (x === undefined) throw new Error('a step call is missing an argument');
  return x;
}

/**
 * Random calls of every step, for the twins' property suites: parameters from tiny to large, states
 * from debt to a little above full, times before and after the last update. `clear` maps every random
 * double (PostgreSQL's suite rounds those near underflow to 0).
 */
export function stepCallArb(clear: (v: number) => number = (v) => v): fc.Arbitrary<StepCall> {
  const double = (min: number, max: number) => fc.double({ min, max, noNaN: true, noDefaultInfinity: true }).map(clear);
  const paramsArb: fc.Arbitrary<BucketParams> = fc.record({
    ratePerSecond: fc.oneof(fc.constantFrom(1, 10, 1000, 1024 * 1024), double(1e-3, 1e7)),
    burst: fc.oneof(fc.constantFrom(1, 7, 20, 65536), double(1e-3, 1e7)),
  });
  return fc
    .tuple(
      fc.constantFrom(...(Object.keys(TS_STEPS) as StepName[])),
      paramsArb,
      fc.oneof(fc.constantFrom(0, 1e6, 1.7e12), double(0, 2e12)), // the last update
      fc.array(fc.double({ min: -1.5, max: 1.5, noNaN: true }).map(clear), { minLength: 6, maxLength: 6 }),
    )
    .map(([step, params, upd, [t, x, y, z, w, v]]): StepCall => {
      const { burst: cap, ratePerSecond: rate } = params;
      const tokens = n(t) * cap; // debt to full, and a little above (a capacity lowered since)
      const fillMs = (cap * 1000) / rate;
      const time = (f: number | undefined) => upd + n(f) * 3 * fillMs; // before and after the update
      const cost = Math.abs(n(x)) * cap * (2 / 3); // at most the capacity
      const args: Record<StepName, number[]> = {
        slackFor: [],
        conforms: [tokens, cost],
        largestConforming: [tokens],
        tokensAt: [time(y)],
        advance: [time(y)],
        rewind: [time(y)],
        msUntil: [tokens, cost],
        msUntilWithin: [tokens, cost, Math.abs(n(z)) * fillMs],
        readyAt: [cost],
        delayUntil: [time(y), cost],
        charge: [time(y), cost],
        chargeNew: [cost],
        tryCharge: [time(y), cost],
        refund: [time(y), cost, time(z)],
        credit: [time(y), Math.abs(n(z)) * cap],
        rebill: [time(y), n(z) === 0 ? 0 : n(z) * cap],
        reconfigure: [time(y), rate * (1 + n(z)), cap * (1 + Math.abs(n(w)))],
        clampToCapacity: [],
        conformsAt: [time(y), cost],
        timeToFullMs: [tokens],
        startAt: [time(y), cost, time(z), Math.abs(n(v)) * 10],
      };
      return { step, state: [tokens, upd], params, args: args[step] };
    });
}
