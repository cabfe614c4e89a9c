/**
 * golang.org/x/time/rate's own test cases (rate_test.go), ported table by
 * table to TokenBucket: the same steps at the same instants (`d` = 100 ms,
 * `tN` = N * d) with the same expected answers, except where a comment says
 * "DIFFERENCE", each a deliberate choice also written in the README:
 *
 * 1. A cost above the burst throws `CostExceedsCapacityError` (Go: `ok`
 *    false), so the mistake is a clear error, not a refusal that looks like
 *    load.
 * 2. Time before the bucket's last update counts as no time at all, and the
 *    last update never moves back. Go moves its `last` back to an earlier
 *    time and then earns the same interval again (its tests say "should
 *    violate Limit,Burst"); we answer as if the call came at the last update,
 *    so nothing is admitted that the bucket did not earn.
 * 3. A zero or infinite rate is refused at construction (Go allows `0` and
 *    `Inf`): a bucket that never refills, or never limits, is not a token
 *    bucket.
 * 4. Cancelling twice gives back once (Go would give back again).
 * 5. The tokens "reserved after" a cancelled reservation are the debt the
 *    bucket still has at its due time. At a constant rate that is exactly
 *    Go's `limit * (lastEvent - timeToAct)`; after a rate change it is
 *    measured at the new rate (see the last cases).
 */

import { describe, expect, it } from 'vitest';
import { type Reservation, TokenBucket } from '../../src/meters/token-bucket.js';
import { fakeClock, manualClock } from '../helpers/fake-clock.js';

const d = 100;

/** A step of `run`: at tN, TokensAt should be `toks`; AllowN(n) should answer `ok`. */
type Allow = [t: number, toks: number, n: number, ok: boolean | 'throws'];

function run(bucket: TokenBucket, steps: readonly Allow[]): void {
  steps.forEach(([t, toks, n, ok], i) => {
    expect(bucket.tokensAt(t * d), `step ${i}: tokensAt(t${t})`).toBeCloseTo(toks, 9);
    if (ok === 'throws') {
      expect(() => bucket.tryTakeAt(t * d, n), `step ${i}`).toThrow(
        expect.objectContaining({ code: 'ERR_COST_EXCEEDS_CAPACITY' }),
      );
    } else {
      expect(bucket.tryTakeAt(t * d, n), `step ${i}: tryTakeAt(t${t}, ${n})`).toBe(ok);
    }
  });
}

/** Go's runReserve / runReserveMax: reserve n at tN; it should be ok and act at tAct. */
function reserve(bucket: TokenBucket, t: number, n: number, act: number | false, maxWait?: number): Reservation {
  const r = bucket.reserveAt(t * d, n, maxWait === undefined ? undefined : { maxWait });
  if (act === false) {
    expect(r.ok, `reserve(t${t}, ${n}) should be refused`).toBe(false);
  } else {
    expect(r.ok, `reserve(t${t}, ${n})`).toBe(true);
    expect(r.readyAtMs / d, `reserve(t${t}, ${n}) acts at`).toBeCloseTo(act, 9);
  }
  return r;
}

const bucket = (rate: number, burst: number) => new TokenBucket({ rate, burst, clock: manualClock() });

describe('x/time/rate: AllowN tables', () => {
  it('TestLimiterBurst1', () => {
    run(bucket(10, 1), [
      [0, 1, 1, true],
      [0, 0, 1, false],
      [0, 0, 1, false],
      [1, 1, 1, true],
      [1, 0, 1, false],
      [1, 0, 1, false],
      [2, 1, 2, 'throws'], // DIFFERENCE 1 (Go: false, "burst size is 1, so n=2 always fails")
      [2, 1, 1, true],
      [2, 0, 1, false],
    ]);
  });

  it('TestLimiterBurst3', () => {
    run(bucket(10, 3), [
      [0, 3, 2, true],
      [0, 1, 2, false],
      [0, 1, 1, true],
      [0, 0, 1, false],
      [1, 1, 4, 'throws'], // DIFFERENCE 1
      [2, 2, 1, true],
      [3, 2, 1, true],
      [4, 2, 1, true],
      [4, 1, 1, true],
      [4, 0, 1, false],
      [4, 0, 1, false],
      [9, 3, 3, true],
      [9, 0, 0, true],
    ]);
  });

  it('TestLimiterJumpBackwards', () => {
    run(bucket(10, 3), [
      [1, 3, 1, true], // start at t1
      [0, 2, 1, true], // jump back to t0, two tokens remain
      [0, 1, 1, true],
      [0, 0, 1, false],
      [0, 0, 1, false],
      // DIFFERENCE 2: Go moved its clock back to t0 and earns t0..t1 again ("got a token");
      // here t0..t1 was already counted, so the next token comes at t2.
      [1, 0, 1, false],
      [1, 0, 1, false],
      [1, 0, 1, false],
      [2, 1, 1, true], // got a token
      [2, 0, 1, false],
      [2, 0, 1, false],
    ]);
  });

  it('TestLimiter_noTruncationErrors', () => {
    expect(bucket(0.7692307692307693, 1).tryTake()).toBe(true);
  });

  it('TestTinyLimit: a tiny rate admits the burst and no more', () => {
    const b = bucket(1e-10, 1);
    expect(b.tryTake()).toBe(true);
    expect(b.tryTake()).toBe(false);
    expect(b.delayFor()).toBeCloseTo(1e13, -1);
  });

  it('TestZeroLimit / TestWaitInf: DIFFERENCE 3, a zero or infinite rate is refused', () => {
    expect(() => bucket(0, 1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_RATE' }));
    expect(() => bucket(Number.POSITIVE_INFINITY, 1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_RATE' }));
  });

  it('TestLongRunningQPS: 5 s of requests every 2 ms admit burst + rate * 5 s, within one', () => {
    const clock = manualClock();
    const b = new TokenBucket({ rate: 100, burst: 100, clock });
    let ok = 0;
    for (; clock.now() < 5000; clock.advance(2)) if (b.tryTake()) ok++;
    const ideal = 100 + 100 * (clock.now() / 1000);
    expect(ok).toBeLessThanOrEqual(ideal + 1);
    expect(ok).toBeGreaterThanOrEqual(Math.floor(0.999 * ideal));
  });

  it('TestSimultaneousRequests: 15 at once against burst 5 admit 5', () => {
    const b = bucket(1, 5);
    expect(Array.from({ length: 15 }, () => b.tryTake()).filter(Boolean)).toHaveLength(5);
  });
});

describe('x/time/rate: reservations', () => {
  it('TestSimpleReserve', () => {
    const b = bucket(10, 2);
    reserve(b, 0, 2, 0);
    reserve(b, 0, 2, 2);
    reserve(b, 3, 2, 4);
  });

  it('TestMix', () => {
    const b = bucket(10, 2);
    expect(() => b.reserveAt(0, 3)).toThrow(expect.objectContaining({ code: 'ERR_COST_EXCEEDS_CAPACITY' })); // DIFFERENCE 1
    reserve(b, 0, 2, 0);
    run(b, [[1, 1, 2, false]]); // not enough tokens - don't allow
    reserve(b, 1, 2, 2);
    run(b, [[1, -1, 1, false]]); // negative tokens - don't allow
    run(b, [[3, 1, 1, true]]);
  });

  it('TestCancelInvalid', () => {
    const b = bucket(10, 2);
    reserve(b, 0, 2, 0);
    const r = b.reserveAt(0, 2, { maxWait: 0 }); // refused (Go: n > burst; a refused reservation either way)
    expect(r.ok).toBe(false);
    r.cancelAt(0); // should have no effect
    reserve(b, 0, 2, 2); // did not get extra tokens
  });

  it('TestCancelLast', () => {
    const b = bucket(10, 2);
    reserve(b, 0, 2, 0);
    const r = reserve(b, 0, 2, 2);
    r.cancelAt(1 * d); // got 2 tokens back
    reserve(b, 1, 2, 2);
  });

  it('TestCancelTooLate', () => {
    const b = bucket(10, 2);
    reserve(b, 0, 2, 0);
    const r = reserve(b, 0, 2, 2);
    r.cancelAt(3 * d); // too late to cancel - should have no effect
    reserve(b, 3, 2, 4);
  });

  it('TestCancel0Tokens', () => {
    const b = bucket(10, 2);
    reserve(b, 0, 2, 0);
    const r = reserve(b, 0, 1, 1);
    reserve(b, 0, 1, 2);
    r.cancelAt(0); // got 0 tokens back
    reserve(b, 0, 1, 3);
  });

  it('TestCancel1Token', () => {
    const b = bucket(10, 2);
    reserve(b, 0, 2, 0);
    const r = reserve(b, 0, 2, 2);
    reserve(b, 0, 1, 3);
    r.cancelAt(2 * d); // got 1 token back
    reserve(b, 2, 2, 4);
  });

  it('TestCancelMulti', () => {
    const b = bucket(10, 4);
    reserve(b, 0, 4, 0);
    const rA = reserve(b, 0, 3, 3);
    reserve(b, 0, 1, 4);
    const rC = reserve(b, 0, 1, 5);
    rC.cancelAt(1 * d); // get 1 token back
    rA.cancelAt(1 * d); // get 2 tokens back, as if C was never reserved
    reserve(b, 1, 3, 5);
  });

  it('TestReserveJumpBack (DIFFERENCE 2: an earlier time waits from the last update)', () => {
    const clock = manualClock();
    const b = new TokenBucket({ rate: 10, burst: 2, clock });
    reserve(b, 1, 2, 1); // start at t1
    reserve(b, 0, 1, 2); // Go: t1, "should violate Limit,Burst"
    reserve(b, 2, 2, 4); // Go: t3
    expect(() => b.reserveAt(0, 3)).toThrow(/exceeds/); // n > burst: DIFFERENCE 1, and nothing changed
    reserve(b, 2, 1, 5); // Go: t4
    reserve(b, 0, 2, false, d); // the maxWait is not enough, and nothing changed
    reserve(b, 2, 1, 6); // Go: t5
  });

  it('TestReserveJumpBackCancel (DIFFERENCE 2)', () => {
    const b = bucket(10, 2);
    reserve(b, 1, 2, 1); // start at t1
    const r = reserve(b, 1, 2, 3);
    reserve(b, 1, 1, 4);
    r.cancelAt(0); // cancel at t0, get 1 token back (the same as Go)
    reserve(b, 1, 2, 5); // Go: t4, because it moved its clock back to t0 and earns t0..t1 again
  });

  it('TestReserveSetLimit', () => {
    const clock = manualClock();
    const b = new TokenBucket({ rate: 5, burst: 2, clock });
    reserve(b, 0, 2, 0);
    reserve(b, 0, 2, 4);
    clock.set(2 * d);
    b.setRate(10); // SetLimitAt(t2, 10)
    reserve(b, 2, 1, 4); // Go: "violates Limit and Burst"; the same answer here
  });

  it('TestReserveSetBurst (DIFFERENCE 2)', () => {
    const clock = manualClock();
    const b = new TokenBucket({ rate: 5, burst: 2, clock });
    reserve(b, 0, 2, 0);
    reserve(b, 0, 2, 4);
    clock.set(3 * d);
    b.setBurst(4);
    reserve(b, 0, 4, 12); // Go: t9 (from t0, after moving its clock back); here from t3: -0.5 - 4 at 5/s is 900 ms
  });

  it('TestReserveSetLimitCancel', () => {
    const clock = manualClock();
    const b = new TokenBucket({ rate: 5, burst: 2, clock });
    reserve(b, 0, 2, 0);
    const r = reserve(b, 0, 2, 4);
    clock.set(2 * d);
    b.setRate(10);
    r.cancelAt(2 * d); // 2 tokens back
    reserve(b, 2, 2, 3);
  });

  it('TestReserveMax', () => {
    const b = bucket(10, 2);
    reserve(b, 0, 2, 0, d);
    reserve(b, 0, 1, 1, d); // reserve for close future
    reserve(b, 0, 1, false, d); // time to act too far in the future
  });

  it('DIFFERENCE 4: cancelling twice gives back once', () => {
    const b = bucket(10, 2);
    reserve(b, 0, 2, 0);
    const r = reserve(b, 0, 2, 2);
    r.cancelAt(1 * d);
    r.cancelAt(1 * d);
    expect(b.tokensAt(1 * d)).toBeCloseTo(1, 9);
  });

  it('DIFFERENCE 5: after a rate change, what later reservations count on is measured at the new rate', () => {
    // rate 1/s, burst 10, empty at 0: B (10, due 10 s); the rate becomes 10/s; C (10) is due at 2 s, before B.
    const clock = manualClock();
    const b = new TokenBucket({ rate: 1, burst: 10, tokens: 0, clock });
    const B = b.reserveAt(0, 10);
    expect(B.readyAtMs).toBe(10_000);
    b.setRate(10);
    expect(b.reserveAt(0, 10).readyAtMs).toBe(2000);
    // Go gives back 10 - 1 * (2 s - 10 s) = 18 tokens, more than B cost; here 10, as if B was never reserved.
    B.cancelAt(1000);
    expect(b.tokensAt(1000)).toBeCloseTo(0, 9);
  });
});

describe('x/time/rate: Wait (take)', () => {
  it('TestWaitSimple', async () => {
    const { clock, timers } = fakeClock();
    const b = new TokenBucket({ rate: 10, burst: 3, clock });
    await expect(b.take(1, { signal: AbortSignal.abort() })).rejects.toThrow(); // already cancelled
    await expect(b.take(4)).rejects.toMatchObject({ code: 'ERR_COST_EXCEEDS_CAPACITY' }); // exceed burst
    await b.take(2); // act now
    const started = clock.now();
    const later = b.take(3);
    await timers.tickAsync(2 * d);
    await later; // act later: 2 d
    expect(clock.now() - started).toBe(2 * d);
  });

  it('TestWaitCancel', async () => {
    const { clock, timers } = fakeClock();
    const b = new TokenBucket({ rate: 10, burst: 3, clock });
    await b.take(2); // after this, 1 token
    const controller = new AbortController();
    timers.setTimeout(() => controller.abort(), d);
    const cancelled = b.take(3, { signal: controller.signal });
    const outcome = cancelled.then(
      () => 'resolved',
      () => 'rejected',
    );
    await timers.tickAsync(d);
    expect(await outcome).toBe('rejected');
    // should get 3 tokens back, and hold 2
    expect(b.tokens).toBeCloseTo(2, 9);
    await b.take(2); // act now after cancel
    expect(clock.now()).toBe(d);
  });

  it('TestWaitTimeout: a wait past the deadline is refused at once', async () => {
    const { clock } = fakeClock();
    const b = new TokenBucket({ rate: 10, burst: 3, clock });
    await b.take(2);
    await expect(b.take(3, { maxWait: d })).rejects.toMatchObject({ code: 'ERR_WAIT_TOO_LONG', waitMs: 2 * d });
    expect(b.tokens).toBe(1); // charged nothing
  });
});
