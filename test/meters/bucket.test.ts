/**
 * The pure bucket arithmetic (src/meters/bucket.ts), table by table: the
 * steps a TokenBucket, the Scheduler, a keyed store and a Redis script share.
 */

import { describe, expect, it } from 'vitest';
import {
  type BucketParams,
  type BucketState,
  charge,
  clampToCapacity,
  conforms,
  conformsAt,
  delayUntil,
  readyAt,
  reconfigure,
  refund,
  startAt,
  timeToFullMs,
  tokensAt,
  tryCharge,
} from '../../src/meters/bucket.js';

const params: BucketParams = { ratePerSecond: 10, capacity: 20 };
const state = (tokens: number, updatedAtMs: number): BucketState => ({ tokens, updatedAtMs });

describe('conforms: the one tolerance rule', () => {
  it.each([
    // [available, cost, capacity, expected]
    [1, 1, 1, true],
    [1 - 2 ** -40, 1, 1, true], // short by less than capacity * 2^-36: conforms
    [1 - 2 ** -30, 1, 1, false], // short by more: does not
    [1000 - 2 ** -30, 1000, 2 ** 20, true], // the slack scales with the capacity
    [0, 0, 1, true],
    [-1e-20, 0, 1, true],
    [-1, 0, 1, false], // a debt must be paid before even a zero cost
  ])('conforms(%d, %d, capacity %d) = %s', (available, cost, capacity, expected) => {
    expect(conforms(available, cost, capacity)).toBe(expected);
  });
});

describe('charge and tryCharge', () => {
  it.each([
    // [tokens, updatedAtMs, atMs, cost, tokens after, updatedAtMs after]
    [20, 0, 0, 5, 15, 0],
    [0, 0, 1000, 5, 5, 1000], // refill 10 then take 5
    [0, 0, 0, 5, -5, 0], // into debt
    [0, 1000, 500, 5, -5, 1000], // an earlier time: no refill, and the time stays
    [20, 0, 9999, 20, 0, 9999], // refill capped at the capacity
  ])('charge(%d tokens @%d, at %d, cost %d) -> %d @%d', (tokens, updatedAtMs, atMs, cost, expTokens, expAt) => {
    const s = state(tokens, updatedAtMs);
    charge(s, params, atMs, cost);
    expect(s).toEqual({ tokens: expTokens, updatedAtMs: expAt });
  });

  it.each([
    [5, 0, 0, 5, true, 0],
    [4, 0, 0, 5, false, 4],
    [4, 0, 100, 5, true, 0],
    [-1, 0, 100, 0, true, 0], // the debt is paid at 100 ms: a zero cost conforms then
    [-1, 0, 99, 0, false, -1],
  ])('tryCharge(%d tokens @%d, at %d, cost %d) = %s, leaving %d', (tokens, updatedAtMs, atMs, cost, ok, left) => {
    const s = state(tokens, updatedAtMs);
    expect(tryCharge(s, params, atMs, cost)).toBe(ok);
    expect(s.tokens).toBeCloseTo(left, 12);
    if (!ok) expect(s.updatedAtMs).toBe(updatedAtMs); // a refusal changes nothing
  });
});

describe('readyAt and delayUntil', () => {
  it.each([
    // [tokens, updatedAtMs, cost, ready at]
    [20, 0, 20, 0],
    [0, 0, 1, 100],
    [-5, 1000, 5, 2000], // pay the debt (500 ms), then earn 5 (500 ms)
    [0.5, 250, 1, 300],
  ])('readyAt(%d tokens @%d, cost %d) = %d', (tokens, updatedAtMs, cost, expected) => {
    expect(readyAt(state(tokens, updatedAtMs), params, cost)).toBe(expected);
  });

  // An earlier `now` than the last update waits from the update: 300 ms from
  // t, whatever the clock's origin. (The old doubling nudge answered 400, 344
  // or 338 ms depending on the origin.)
  it.each([0, 1, 12_345.678, 1e6, 1.7e12])(
    'at a time 100 ms before the last update, with origin %d, the wait is exactly 300 ms',
    (originMs) => {
      const s = state(0, originMs + 100);
      expect(delayUntil(s, params, originMs, 2)).toBeCloseTo(300, originMs > 1e9 ? 3 : 9);
      // and the bucket really holds the cost at that instant, not a hair before
      const delay = delayUntil(s, params, originMs, 2);
      expect(conforms(tokensAt(s, params, originMs + delay), 2, params.capacity)).toBe(true);
    },
  );

  it('is 0 when the tokens are there, even at an earlier time', () => {
    expect(delayUntil(state(5, 1000), params, 0, 5)).toBe(0);
    expect(delayUntil(state(5, 1000), params, 0, 6)).toBe(1100);
  });

  it('lands on an instant where the tokens are there, at large clock values too', () => {
    for (const originMs of [0, 0.1, 1e9 + 0.3, 1.7e12 + 0.7]) {
      for (const [rate, capacity, cost] of [
        [3, 7, 7],
        [1e7, 1, 1],
        [0.01, 1, 0.3],
        [1024 * 1024, 65536, 4096],
      ] as const) {
        const p = { ratePerSecond: rate, capacity };
        const s = state(0, originMs);
        const at = readyAt(s, p, cost);
        expect(conforms(tokensAt(s, p, at), cost, capacity)).toBe(true);
        expect(at - originMs).toBeGreaterThan(0);
        const delay = delayUntil(s, p, originMs, cost);
        expect(conforms(tokensAt(s, p, originMs + delay), cost, capacity)).toBe(true);
      }
    }
  });
});

describe('refund: what no later reservation counts on', () => {
  // rate 1/s, capacity 10 (the reproduction), and x/time's own cases in ms.
  const slow: BucketParams = { ratePerSecond: 1, capacity: 10 };

  it.each([
    // [name, tokens after all charges (at 0), reservation {cost, readyAtMs}, cancel at, given back, tokens at cancel after]
    ['the last one: all of it', -10, 10, 10_000, 1000, 10, 1],
    ['one with 10 reserved after it: nothing', -20, 10, 10_000, 1000, 0, -19],
    ['one with 5 reserved after it: 5', -15, 10, 10_000, 1000, 5, -9],
    ['due before the cancel: nothing (it was used)', -10, 10, 10_000, 10_001, 0, 0.001],
    ['due exactly at the cancel: still given back (as CancelAt does)', -10, 10, 10_000, 10_000, 10, 10],
    ['a zero cost gives nothing', -10, 0, 10_000, 1000, 0, -9],
  ] as const)('%s', (_name, tokens, cost, readyAtMs, atMs, back, after) => {
    const s = state(tokens, 0);
    expect(refund(s, slow, atMs, cost, readyAtMs)).toBeCloseTo(back, 9);
    expect(tokensAt(s, slow, atMs)).toBeCloseTo(after, 9);
  });

  it('never fills above the capacity, even for a cost above it (a burst lowered since)', () => {
    const s = state(-2, 0);
    const lowered = { ratePerSecond: 1, capacity: 3 };
    // A reservation of 10 due at 2 s; the burst is 3 now.
    expect(refund(s, lowered, 1000, 10, 2000)).toBe(4); // from -1 up to the capacity 3
    expect(s).toEqual({ tokens: 3, updatedAtMs: 1000 });
  });

  it('does not move the time back when cancelled at an earlier time', () => {
    const s = state(-3, 1000);
    // reserved at 1000 ms: a (2, due 3000), then b (1, due 4000); a is cancelled at 0 ms.
    expect(refund(s, params, 0, 2, 3000)).toBe(2);
    expect(s).toEqual({ tokens: -1, updatedAtMs: 1000 });
  });
});

describe('reconfigure', () => {
  it.each([
    // [name, tokens, updatedAtMs, now, next params, tokens after]
    ['a faster rate keeps the tokens earned so far', 0, 0, 1000, { ratePerSecond: 100, capacity: 20 }, 10],
    ['a smaller capacity caps them', 0, 0, 5000, { ratePerSecond: 10, capacity: 4 }, 4],
    ['a larger capacity does not refill (tbf_change would)', 5, 0, 0, { ratePerSecond: 10, capacity: 100 }, 5],
    ['a debt stays a debt', -5, 0, 0, { ratePerSecond: 10, capacity: 1 }, -5],
  ] as const)('%s', (_name, tokens, updatedAtMs, nowMs, next, after) => {
    const s = state(tokens, updatedAtMs);
    reconfigure(s, params, nowMs, next);
    expect(s).toEqual({ tokens: after, updatedAtMs: nowMs });
    // and from then on refill runs at the new rate up to the new capacity
    expect(tokensAt(s, next, nowMs + 100)).toBeCloseTo(Math.min(next.capacity, after + next.ratePerSecond / 10), 9);
  });
});

describe('clampToCapacity, conformsAt and timeToFullMs: the steps a store adds', () => {
  it.each([
    // [tokens, capacity, after]
    [30, 20, 20], // a capacity lowered since the state was written
    [20, 20, 20],
    [19.5, 20, 19.5], // within the capacity: untouched, bit for bit
    [-3, 20, -3],
  ])('clampToCapacity(%d tokens, capacity %d) leaves %d, and never moves the time', (tokens, capacity, after) => {
    const s = state(tokens, 123.25);
    clampToCapacity(s, { ratePerSecond: 10, capacity });
    expect(s).toEqual({ tokens: after, updatedAtMs: 123.25 });
  });

  it.each([
    // [tokens, updatedAtMs, atMs, cost, expected]
    [0, 0, 500, 5, true], // 5 refilled by 500 ms
    [0, 0, 499, 5, false],
    [5 - 2 ** -40, 0, 0, 5, true], // within the tolerance
    [20, 0, -1000, 20, true], // time before the update counts as none
    [-10, 0, 1000, 0, true], // a debt of 10 is paid by 1 s
    [-10, 0, 999, 0, false],
  ])('conformsAt(%d tokens at %d, at %d, cost %d) = %s', (tokens, updatedAtMs, atMs, cost, expected) => {
    expect(conformsAt(state(tokens, updatedAtMs), params, atMs, cost)).toBe(expected);
  });

  it.each([
    // [tokens, expected ms]
    [20, 0],
    [25, 0], // above the capacity (lowered since): already full
    [19, 100],
    [0, 2000],
    [-10, 3000], // a debt is paid first
  ])('timeToFullMs(%d tokens) at 10/s, capacity 20 = %d ms', (tokens, expected) => {
    expect(timeToFullMs(tokens, params)).toBe(expected);
    if (expected > 0) expect(tokensAt(state(tokens, 0), params, expected)).toBe(params.capacity);
  });
});

describe('startAt: the theoretical start of the head job', () => {
  const fast: BucketParams = { ratePerSecond: 1000, capacity: 1 };

  it.each([
    // [name, tokens, updatedAtMs, now, cost, notBefore, catchUp, expected]
    ['tokens there since 0: charged now when nothing is late', 1, 0, 0, 1, 0, 5, 0],
    ['not there yet: wake at its ready time', 0, 0, 0.5, 1, 0, 5, 1],
    ['a timer 1.15 ms late: charged at its due time', 0, 0, 2.15, 1, 0, 5, 1],
    ['late by more than catchUp: charged catchUp before now', 0, 0, 20, 1, 0, 5, 15],
    ['catchUp 0: charged now', 0, 0, 2.15, 1, 0, 0, 2.15],
    ['not before it arrived', 0, 0, 2.15, 1, 1.5, 5, 1.5],
  ] as const)('%s', (_name, tokens, updatedAtMs, nowMs, cost, notBeforeMs, catchUpMs, expected) => {
    expect(startAt(state(tokens, updatedAtMs), fast, nowMs, cost, notBeforeMs, catchUpMs)).toBeCloseTo(expected, 12);
  });

  it('lets the bucket absorb the lateness it can: with burst 10 nothing is charged in the past', () => {
    const p = { ratePerSecond: 1000, capacity: 10 };
    // lagMs = 5 - (10 - 1) / 1 ms < 0: charged at now
    expect(startAt(state(0, 0), p, 3.5, 1, 0, 5)).toBe(3.5);
  });

  it('jobs due during a late timer start together, each at its own due time', () => {
    const s = state(0, 0);
    const starts: number[] = [];
    for (;;) {
      const at = startAt(s, fast, 3.2, 1, 0, 5);
      if (at > 3.2) {
        expect(at).toBeCloseTo(4, 9); // the next wake-up
        break;
      }
      starts.push(at);
      charge(s, fast, at, 1);
    }
    expect(starts.map((t) => Math.round(t * 1e6) / 1e6)).toEqual([1, 2, 3]);
  });
});
