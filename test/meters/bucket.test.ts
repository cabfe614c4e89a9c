/**
 * The pure bucket arithmetic (src/meters/bucket.ts), table by table: the
 * steps a TokenBucket, the Scheduler, a keyed store and a Redis script share.
 * The tables live in ./bucket-cases.ts, which test/redis/bucket-lua.test.ts
 * also runs through the Lua twin on a real Redis.
 */

import { describe, expect, it } from 'vitest';
import {
  advance,
  type BucketParams,
  type BucketState,
  charge,
  chargeNew,
  clampToCapacity,
  conforms,
  conformsAt,
  credit,
  delayUntil,
  largestConforming,
  msUntil,
  msUntilWithin,
  readyAt,
  rebill,
  reconfigure,
  refund,
  startAt,
  timeToFullMs,
  tokensAt,
  tryCharge,
} from '../../src/meters/bucket.js';
import {
  advanceCases,
  chargeCases,
  chargeNewCases,
  clampCases,
  conformsAtCases,
  conformsCases,
  creditCases,
  delayUntilCases,
  earlierNowOrigins,
  fast,
  landingBuckets,
  landingOrigins,
  largestConformingCases,
  lateTimer,
  msUntilCases,
  msUntilWithinCases,
  params,
  readyAtCases,
  rebillCases,
  reconfigureCases,
  refundCases,
  refundEdgeCases,
  slow,
  startAtCases,
  timeToFullCases,
  tokensAtCases,
  tryChargeCases,
} from './bucket-cases.js';

const state = (tokens: number, updatedAtMs: number): BucketState => ({ tokens, updatedAtMs });

describe('conforms: the one tolerance rule', () => {
  it.each(conformsCases)('conforms(%d, %d, capacity %d) = %s', (available, cost, capacity, expected) => {
    expect(conforms(available, cost, capacity)).toBe(expected);
  });

  it.each(largestConformingCases)('largestConforming(%d, capacity %d) = %d', (available, capacity, expected) => {
    expect(largestConforming(available, capacity)).toBe(expected);
    // it is the bound of conforms: that cost conforms, the next double above it does not
    expect(conforms(available, expected, capacity)).toBe(true);
    expect(conforms(available, expected + Math.abs(expected) * 2 ** -52 + 2 ** -1074, capacity)).toBe(false);
  });
});

describe('tokensAt, advance and msUntil', () => {
  it.each(tokensAtCases)('tokensAt(%d tokens @%d ms, now %d ms) = %d', (tokens, updatedAtMs, nowMs, expected) => {
    expect(tokensAt({ tokens, updatedAtMs }, params, nowMs)).toBeCloseTo(expected, 12);
  });

  it.each(advanceCases)(
    'advance(%d tokens @%d, to %d) -> %d @%d: time moves forward, never back',
    (tokens, at, nowMs, expTokens, expAt) => {
      const s = state(tokens, at);
      advance(s, params, nowMs);
      expect(s).toEqual({ tokens: expTokens, updatedAtMs: expAt });
    },
  );

  it.each(msUntilWithinCases)(
    'msUntilWithin(%d tokens, cost %d, within %d ms) = %d ms',
    (tokens, cost, within, expected) => {
      expect(msUntilWithin(tokens, cost, params, within)).toBe(expected);
    },
  );

  it.each(msUntilCases)('msUntil(%d tokens, cost %d) = %d ms', (tokens, cost, expected) => {
    expect(msUntil(tokens, cost, params)).toBeCloseTo(expected, 9);
  });
});

describe('charge and tryCharge', () => {
  it.each(chargeCases)(
    'charge(%d tokens @%d, at %d, cost %d) -> %d @%d',
    (tokens, updatedAtMs, atMs, cost, expTokens, expAt) => {
      const s = state(tokens, updatedAtMs);
      charge(s, params, atMs, cost);
      expect(s).toEqual({ tokens: expTokens, updatedAtMs: expAt });
    },
  );

  it.each(chargeNewCases)('chargeNew(cost %d) leaves %d: what charge leaves on a new bucket', (cost, left) => {
    expect(chargeNew(params, cost)).toBe(left);
    const s = state(params.burst, 1234.5);
    charge(s, params, 1234.5, cost);
    expect(s.tokens).toBe(chargeNew(params, cost));
  });

  it.each(tryChargeCases)(
    'tryCharge(%d tokens @%d, at %d, cost %d) = %s, leaving %d',
    (tokens, updatedAtMs, atMs, cost, ok, left) => {
      const s = state(tokens, updatedAtMs);
      expect(tryCharge(s, params, atMs, cost)).toBe(ok);
      expect(s.tokens).toBeCloseTo(left, 12);
      if (!ok) expect(s.updatedAtMs).toBe(updatedAtMs); // a refusal changes nothing
    },
  );
});

describe('readyAt and delayUntil', () => {
  it.each(readyAtCases)('readyAt(%d tokens @%d, cost %d) = %d', (tokens, updatedAtMs, cost, expected) => {
    expect(readyAt(state(tokens, updatedAtMs), params, cost)).toBe(expected);
  });

  // An earlier `now` than the last update waits from the update: 300 ms from
  // t, whatever the clock's origin. (The old doubling nudge answered 400, 344
  // or 338 ms depending on the origin.)
  it.each(earlierNowOrigins)(
    'at a time 100 ms before the last update, with origin %d, the wait is exactly 300 ms',
    (originMs) => {
      const s = state(0, originMs + 100);
      expect(delayUntil(s, params, originMs, 2)).toBeCloseTo(300, originMs > 1e9 ? 3 : 9);
      // and the bucket really holds the cost at that instant, not a hair before
      const delay = delayUntil(s, params, originMs, 2);
      expect(conforms(tokensAt(s, params, originMs + delay), 2, params.burst)).toBe(true);
    },
  );

  it.each(delayUntilCases)(
    'delayUntil(%d tokens @%d, at %d, cost %d) = %d: 0 when the tokens are there, even at an earlier time',
    (tokens, updatedAtMs, nowMs, cost, expected) => {
      expect(delayUntil(state(tokens, updatedAtMs), params, nowMs, cost)).toBe(expected);
    },
  );

  it('lands on an instant where the tokens are there, at large clock values too', () => {
    for (const originMs of landingOrigins) {
      for (const [rate, capacity, cost] of landingBuckets) {
        const p = { ratePerSecond: rate, burst: capacity };
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
  it.each(refundCases)('%s', (_name, tokens, cost, readyAtMs, atMs, back, after) => {
    const s = state(tokens, 0);
    expect(refund(s, slow, atMs, cost, readyAtMs)).toBeCloseTo(back, 9);
    expect(tokensAt(s, slow, atMs)).toBeCloseTo(after, 9);
  });

  for (const [
    name,
    ratePerSecond,
    capacity,
    tokens,
    updatedAtMs,
    atMs,
    cost,
    readyAtMs,
    back,
    after,
    afterAt,
  ] of refundEdgeCases) {
    it(name, () => {
      const s = state(tokens, updatedAtMs);
      expect(refund(s, { ratePerSecond, burst: capacity }, atMs, cost, readyAtMs)).toBe(back);
      expect(s).toEqual({ tokens: after, updatedAtMs: afterAt });
    });
  }
});

describe('credit and rebill', () => {
  it.each(creditCases)('credit: %s', (_name, tokens, updatedAtMs, nowMs, amount, added, after, afterAt) => {
    const s = state(tokens, updatedAtMs);
    expect(credit(s, params, nowMs, amount)).toBe(added);
    expect(s).toEqual({ tokens: after, updatedAtMs: afterAt });
  });

  it.each(rebillCases)('rebill: %s', (_name, tokens, updatedAtMs, nowMs, delta, after, afterAt) => {
    const s = state(tokens, updatedAtMs);
    rebill(s, params, nowMs, delta);
    expect(s).toEqual({ tokens: after, updatedAtMs: afterAt });
  });
});

describe('reconfigure', () => {
  it.each(reconfigureCases)('%s', (_name, tokens, updatedAtMs, nowMs, next, after) => {
    const s = state(tokens, updatedAtMs);
    reconfigure(s, params, nowMs, next);
    expect(s).toEqual({ tokens: after, updatedAtMs: nowMs });
    // and from then on refill runs at the new rate up to the new capacity
    expect(tokensAt(s, next, nowMs + 100)).toBeCloseTo(Math.min(next.burst, after + next.ratePerSecond / 10), 9);
  });
});

describe('clampToCapacity, conformsAt and timeToFullMs: the steps a store adds', () => {
  it.each(clampCases)(
    'clampToCapacity(%d tokens, capacity %d) leaves %d, and never moves the time',
    (tokens, capacity, after) => {
      const s = state(tokens, 123.25);
      clampToCapacity(s, { ratePerSecond: 10, burst: capacity });
      expect(s).toEqual({ tokens: after, updatedAtMs: 123.25 });
    },
  );

  it.each(conformsAtCases)(
    'conformsAt(%d tokens at %d, at %d, cost %d) = %s',
    (tokens, updatedAtMs, atMs, cost, expected) => {
      expect(conformsAt(state(tokens, updatedAtMs), params, atMs, cost)).toBe(expected);
    },
  );

  it.each(timeToFullCases)('timeToFullMs(%d tokens) at 10/s, capacity 20 = %d ms', (tokens, expected) => {
    expect(timeToFullMs(tokens, params)).toBe(expected);
    if (expected > 0) expect(tokensAt(state(tokens, 0), params, expected)).toBe(params.burst);
  });
});

describe('startAt: the theoretical start of the head job', () => {
  it.each(startAtCases)('%s', (_name, tokens, updatedAtMs, nowMs, cost, notBeforeMs, catchUpMs, expected) => {
    expect(startAt(state(tokens, updatedAtMs), fast, nowMs, cost, notBeforeMs, catchUpMs)).toBeCloseTo(expected, 12);
  });

  it('lets the bucket absorb the lateness it can: with burst 10 nothing is charged in the past', () => {
    const p: BucketParams = { ratePerSecond: 1000, burst: 10 };
    // lagMs = 5 - (10 - 1) / 1 ms < 0: charged at now
    expect(startAt(state(0, 0), p, 3.5, 1, 0, 5)).toBe(3.5);
  });

  it('jobs due during a late timer start together, each at its own due time', () => {
    const s = state(0, 0);
    const { nowMs, cost, notBeforeMs, catchUpMs } = lateTimer;
    const starts: number[] = [];
    for (;;) {
      const at = startAt(s, fast, nowMs, cost, notBeforeMs, catchUpMs);
      if (at > nowMs) {
        expect(at).toBeCloseTo(4, 9); // the next wake-up
        break;
      }
      starts.push(at);
      charge(s, fast, at, cost);
    }
    expect(starts.map((t) => Math.round(t * 1e6) / 1e6)).toEqual([1, 2, 3]);
  });
});
