import { describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/index.js';
import { bucketParams, checkCost } from '../../src/meters/bucket.js';
import { TokenBucket } from '../../src/meters/token-bucket.js';
import { fakeClock, manualClock } from '../helpers/fake-clock.js';

describe('bucket options and costs', () => {
  // (the arithmetic itself: test/meters/bucket.test.ts)
  it.each([
    [1, 20, undefined],
    [0, 20, undefined],
    [20, 20, undefined],
    [21, 20, 'ERR_COST_EXCEEDS_CAPACITY'],
    [Number.POSITIVE_INFINITY, 20, 'ERR_COST_EXCEEDS_CAPACITY'],
    [-1, 20, 'ERR_INVALID_SIZE'],
    [Number.NaN, 20, 'ERR_INVALID_SIZE'],
  ])('checkCost(%d, capacity %d) -> %s', (cost, capacity, code) => {
    if (code === undefined) expect(() => checkCost(cost, capacity)).not.toThrow();
    else expect(() => checkCost(cost, capacity)).toThrow(expect.objectContaining({ code }));
  });

  it('bucketParams names the burst in its message', () => {
    expect(bucketParams('10/s', '64KiB')).toEqual({ ratePerSecond: 10, burst: 65536 });
    expect(() => bucketParams(10, 0)).toThrow(/invalid burst 0/);
    expect(() => bucketParams(0, 10)).toThrow(/invalid rate 0/);
  });
});

describe('TokenBucket', () => {
  it('starts full unless told otherwise', () => {
    const clock = manualClock();
    expect(new TokenBucket({ rate: 1, burst: 5, clock }).tokens).toBe(5);
    expect(new TokenBucket({ rate: 1, burst: 5, tokens: 2, clock }).tokens).toBe(2);
    expect(() => new TokenBucket({ rate: 1, burst: 5, tokens: 6, clock })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'tokens' }),
    );
    expect(() => new TokenBucket({ rate: 1, burst: 5, tokens: Number.NaN, clock })).toThrow(/invalid tokens/);
  });

  it('exposes rate and burst, parsed from strings', () => {
    const bucket = new TokenBucket({ rate: '1MiB/s', burst: '64KiB', clock: manualClock() });
    expect(bucket.rate).toBe(1048576);
    expect(bucket.burst).toBe(65536);
  });

  it('uses the system clock by default', () => {
    const bucket = new TokenBucket({ rate: 1, burst: 1 });
    expect(bucket.tryTake()).toBe(true);
    expect(bucket.tryTake()).toBe(false);
    expect(bucket.delayFor()).toBeGreaterThan(900);
  });

  it.each([
    // a script of [advance ms, cost, expected result] against rate 10/s, burst 5
    {
      name: 'burst then refusal',
      steps: [
        [0, 5, true],
        [0, 1, false],
        [100, 1, true],
        [0, 1, false],
      ],
    },
    {
      name: 'a refused large cost leaves small ones possible',
      steps: [
        [0, 4, true],
        [0, 2, false],
        [0, 1, true],
      ],
    },
    {
      name: 'fractional costs',
      steps: [
        [0, 2.5, true],
        [0, 2.5, true],
        [0, 0.1, false],
        [10, 0.1, true],
      ],
    },
    {
      name: 'refill caps at the burst',
      steps: [
        [0, 5, true],
        [10_000, 5, true],
        [0, 0.5, false],
      ],
    },
    {
      name: 'zero cost always conforms when not in debt',
      steps: [
        [0, 5, true],
        [0, 0, true],
      ],
    },
  ] as const)('tryTake: $name', ({ steps }) => {
    const clock = manualClock();
    const bucket = new TokenBucket({ rate: 10, burst: 5, clock });
    for (const [advanceMs, cost, expected] of steps) {
      clock.advance(advanceMs);
      expect(bucket.tryTake(cost)).toBe(expected);
    }
  });

  it.each([
    ['capacity', "write `burst`: it is the bucket's capacity"],
    ['bucketSize', 'write `burst`'],
    ['tokensPerInterval', 'write `rate`'],
  ])('refuses %s, saying what to write instead', (name, hint) => {
    let caught: unknown;
    try {
      new TokenBucket({ rate: 10, burst: 10, [name]: 10 } as never);
    } catch (error) {
      caught = error;
    }
    expect(isTokenpaceError(caught, 'ERR_INVALID_OPTION')).toBe(true);
    expect(caught).toMatchObject({ option: name });
    expect((caught as Error).message).toContain(hint);
  });

  it('throws for a cost above the burst, naming both numbers', () => {
    const bucket = new TokenBucket({ rate: 100, burst: 200, clock: manualClock() });
    let caught: unknown;
    try {
      bucket.tryTake(300);
    } catch (error) {
      caught = error;
    }
    expect(isTokenpaceError(caught, 'ERR_COST_EXCEEDS_CAPACITY')).toBe(true);
    expect(caught).toMatchObject({ cost: 300, capacity: 200 });
    expect((caught as Error).message).toMatch(/cost 300 exceeds .* 200/);
    expect(() => bucket.delayFor(300)).toThrow(/cost 300/);
    expect(() => bucket.reserve(300)).toThrow(/cost 300/);
  });

  it('delayFor is exact and changes nothing', () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ rate: 4, burst: 8, clock });
    bucket.tryTake(8);
    expect(bucket.delayFor(1)).toBe(250);
    expect(bucket.delayFor(8)).toBe(2000);
    expect(bucket.delayFor(1)).toBe(250);
    clock.advance(250);
    expect(bucket.delayFor(1)).toBe(0);
  });

  it('time going backwards creates no tokens and is not counted twice', () => {
    const clock = manualClock(10_000);
    const bucket = new TokenBucket({ rate: 10, burst: 10, clock });
    bucket.tryTake(10);
    clock.set(5_000); // backwards by 5 s
    expect(bucket.tokens).toBe(0);
    expect(bucket.tryTake()).toBe(false);
    clock.set(10_100); // 100 ms after the take: one token
    expect(bucket.tokens).toBeCloseTo(1, 12);
  });

  it('*At twins evaluate at the given time', () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ rate: 1000, burst: 1, clock });
    expect(bucket.tryTakeAt(0)).toBe(true);
    expect(bucket.tryTakeAt(0.5)).toBe(false);
    expect(bucket.delayForAt(0.5)).toBeCloseTo(0.5, 12);
    expect(bucket.tryTakeAt(1)).toBe(true);
    expect(bucket.tokensAt(1.25)).toBeCloseTo(0.25, 12);
    // Jobs charged at their theoretical times 2, 3, 4 ms all pass, even when evaluated late.
    expect([2, 3, 4].map((t) => bucket.tryTakeAt(t))).toEqual([true, true, true]);
  });

  describe('reserve', () => {
    it('takes now, going into debt, and says how long to wait', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 10, burst: 10, clock });
      const a = bucket.reserve(10);
      expect(a).toMatchObject({ ok: true, delayMs: 0, readyAtMs: 0 });
      const b = bucket.reserve(5);
      expect(b).toMatchObject({ ok: true, delayMs: 500, readyAtMs: 500 });
      const c = bucket.reserve(10);
      expect(c).toMatchObject({ ok: true, delayMs: 1500, readyAtMs: 1500 });
      expect(bucket.tokens).toBe(-15);
    });

    it('cancel refunds before the reservation is due, not after, and only once', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 10, burst: 10, clock });
      bucket.reserve(10);
      const b = bucket.reserve(5);
      clock.advance(100);
      b.cancel();
      expect(bucket.tokens).toBeCloseTo(1, 12);
      b.cancel();
      expect(bucket.tokens).toBeCloseTo(1, 12);

      const c = bucket.reserve(5);
      clock.advance(1000); // c is due at 400 ms after its reservation: it was used
      c.cancel();
      expect(bucket.tokens).toBeCloseTo(6, 9);
    });

    it('refunds never overfill the bucket', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 10, burst: 10, clock });
      bucket.refund(5);
      expect(bucket.tokens).toBe(10);
    });

    it('maxWait refuses a long wait and charges nothing', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 10, burst: 10, clock });
      bucket.reserve(10);
      const r = bucket.reserve(5, { maxWait: 499 });
      expect(r).toMatchObject({ ok: false, delayMs: 500 });
      r.cancel();
      expect(bucket.tokens).toBe(0);
      expect(bucket.reserve(5, { maxWait: 500 })).toMatchObject({ ok: true, delayMs: 500 });
    });
  });

  describe('take', () => {
    it('resolves at once when the tokens are there, and after the exact wait when not', async () => {
      const { clock, timers, pending } = fakeClock();
      const bucket = new TokenBucket({ rate: 10, burst: 1, clock });
      await bucket.take();
      let done = false;
      const waiting = bucket.take().then(() => {
        done = true;
      });
      await timers.tickAsync(99);
      expect(done).toBe(false);
      await timers.tickAsync(1);
      await waiting;
      expect(done).toBe(true);
      expect(pending()).toBe(0);
    });

    it('rejects with WaitTooLongError instead of waiting past maxWait', async () => {
      const { clock } = fakeClock();
      const bucket = new TokenBucket({ rate: 10, burst: 1, clock });
      await bucket.take();
      await expect(bucket.take(1, { maxWait: 50 })).rejects.toMatchObject({
        code: 'ERR_WAIT_TOO_LONG',
        waitMs: 100,
        maxWaitMs: 50,
        retryAfterMs: 52, // wait - maxWait (as in the Scheduler), whole ms up, + TIMER_EARLY_MS
      });
      expect(bucket.tokens).toBe(0); // charged nothing
    });

    it('an abort while waiting clears the timer, refunds and rejects with the reason', async () => {
      const { clock, timers, pending } = fakeClock();
      const bucket = new TokenBucket({ rate: 10, burst: 1, clock });
      await bucket.take();
      const controller = new AbortController();
      const waiting = bucket.take(1, { signal: controller.signal });
      expect(pending()).toBe(1);
      await timers.tickAsync(30);
      const reason = new Error('stop');
      controller.abort(reason);
      await expect(waiting).rejects.toBe(reason);
      expect(pending()).toBe(0);
      expect(bucket.tokens).toBeCloseTo(0.3, 12);
    });

    it('rejects (does not throw) for a cost above the burst or an invalid cost', async () => {
      const bucket = new TokenBucket({ rate: 10, burst: 1, clock: manualClock() });
      const tooBig = bucket.take(2);
      await expect(tooBig).rejects.toMatchObject({ code: 'ERR_COST_EXCEEDS_CAPACITY', cost: 2, capacity: 1 });
      await expect(bucket.take(-1)).rejects.toMatchObject({ code: 'ERR_INVALID_SIZE' });
      expect(bucket.tokens).toBe(1);
    });

    it('rejects at once for an already aborted signal', async () => {
      const bucket = new TokenBucket({ rate: 10, burst: 1, clock: manualClock() });
      const reason = new Error('already');
      await expect(bucket.take(1, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
      expect(bucket.tokens).toBe(1);
    });
  });

  describe('cancel gives back only what no later reservation counts on (x/time CancelAt)', () => {
    it("cancelling B, with C reserved after it, does not let D share C's instant", () => {
      // rate 1/s, burst 10, emptied; B (10, due 10 s), then C (10, due 20 s); at 1 s cancel B.
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 1, burst: 10, tokens: 0, clock });
      const b = bucket.reserve(10);
      const c = bucket.reserve(10);
      expect([b.readyAtMs, c.readyAtMs]).toEqual([10_000, 20_000]);
      clock.set(1000);
      b.cancel();
      const dRes = bucket.reserve(10);
      // C counts on B's tokens (it was due after them): nothing comes back, and D is due 10 s after C.
      expect(dRes.readyAtMs).toBeCloseTo(30_000, 6);
    });

    it('cancelling the last reservation gives all of it back; cancelAt takes the time', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 1, burst: 10, tokens: 0, clock });
      bucket.reserve(10);
      const c = bucket.reserve(10);
      c.cancelAt(1000);
      expect(bucket.tokensAt(1000)).toBeCloseTo(-9, 9);
      expect(bucket.reserveAt(1000, 10).readyAtMs).toBeCloseTo(20_000, 6);
    });

    it('take() + abort on a burst-1 bucket: the next two waiters never resolve in the same millisecond', async () => {
      const { clock, timers } = fakeClock();
      const bucket = new TokenBucket({ rate: 10, burst: 1, clock });
      await bucket.take();
      const controller = new AbortController();
      const resolvedAt: number[] = [];
      const first = bucket.take(1, { signal: controller.signal }).catch(() => 'aborted'); // due 100
      const second = bucket.take().then(() => resolvedAt.push(clock.now())); // due 200
      await timers.tickAsync(50);
      controller.abort();
      expect(await first).toBe('aborted');
      const third = bucket.take().then(() => resolvedAt.push(clock.now()));
      await timers.tickAsync(1000);
      await Promise.all([second, third]);
      expect(resolvedAt).toEqual([200, 300]);
    });

    it('cancel after setBurst lowered the burst below the cost does not throw, and caps at the burst', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 1, burst: 10, tokens: 5, clock });
      const r = bucket.reserve(10); // due at 5 s
      bucket.setBurst(3);
      clock.set(1000);
      expect(() => r.cancel()).not.toThrow();
      expect(bucket.tokens).toBe(3);
    });

    it('take() + abort after setBurst lowered the burst: the promise rejects with the reason, nothing escapes', async () => {
      const { clock, timers, pending } = fakeClock();
      const bucket = new TokenBucket({ rate: 1, burst: 10, tokens: 5, clock });
      const controller = new AbortController();
      const waiting = bucket.take(10, { signal: controller.signal }); // due at 5 s
      bucket.setBurst(3);
      await timers.tickAsync(1000);
      const reason = new Error('stop');
      expect(() => controller.abort(reason)).not.toThrow();
      await expect(waiting).rejects.toBe(reason);
      expect(pending()).toBe(0);
      expect(bucket.tokens).toBe(3);
    });

    it('a reservation due now can still be cancelled at that instant; once past due, nothing comes back', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 10, burst: 10, clock });
      const now = bucket.reserve(4); // delay 0
      now.cancel();
      expect(bucket.tokens).toBe(10);
      const used = bucket.reserve(4);
      clock.advance(1);
      used.cancel();
      expect(bucket.tokens).toBeCloseTo(6.01, 9);
    });
  });

  describe("long waits (beyond Node's 2^31 - 1 ms timer limit)", () => {
    it('take() on a monthly quota waits the month, in steps, and never resolves early', async () => {
      const { clock, timers, pending } = fakeClock();
      const bucket = new TokenBucket({ rate: '10000/30d', burst: 10_000, clock });
      await bucket.take(10_000);
      let done = false;
      const waiting = bucket.take(1000).then(() => {
        done = true;
      });
      const dueMs = 3 * 24 * 3600 * 1000; // 1000 of 10000 a month: 3 days
      expect(bucket.tokens).toBeCloseTo(-1000, 6);
      await timers.tickAsync(1);
      expect(done).toBe(false);
      await timers.tickAsync(dueMs - 2);
      expect(done).toBe(false);
      await timers.tickAsync(1);
      await waiting;
      expect(done).toBe(true);

      const month = 30 * 24 * 3600 * 1000;
      let full = false;
      const whole = bucket.take(10_000).then(() => {
        full = true;
      });
      await timers.tickAsync(1);
      expect(full).toBe(false); // Node alone would fire a 30-day timer after 1 ms
      expect(bucket.tokens).toBeGreaterThan(-10_001);
      await timers.tickAsync(2 ** 31); // past one step
      expect(full).toBe(false);
      expect(pending()).toBe(1);
      await timers.tickAsync(month - 2 ** 31 - 2);
      expect(full).toBe(false);
      await timers.tickAsync(1);
      await whole;
      expect(full).toBe(true);
      expect(pending()).toBe(0);
    });
  });

  describe('maxWait (one option, as on the Scheduler)', () => {
    it('refuses any other name for it, charging nothing', async () => {
      const { clock } = fakeClock();
      const bucket = new TokenBucket({ rate: 10, burst: 1, clock });
      let caught: unknown;
      try {
        bucket.reserve(1, { maxWaitMs: 50 } as never);
      } catch (error) {
        caught = error;
      }
      expect(isTokenpaceError(caught, 'ERR_INVALID_OPTION')).toBe(true);
      expect((caught as Error).message).toContain('did you mean `maxWait`?');
      await expect(bucket.take(1, { timeout: 50 } as never)).rejects.toMatchObject({
        code: 'ERR_INVALID_OPTION',
        option: 'timeout',
      });
      expect(bucket.tokens).toBe(1);
    });

    it('accepts milliseconds or a duration string', async () => {
      const { clock } = fakeClock();
      const bucket = new TokenBucket({ rate: 10, burst: 1, clock });
      await bucket.take();
      expect(bucket.reserve(1, { maxWait: '50ms' })).toMatchObject({ ok: false, delayMs: 100 });
      expect(bucket.reserve(1, { maxWait: 50 })).toMatchObject({ ok: false, delayMs: 100 });
      await expect(bucket.take(1, { maxWait: '0.05s' })).rejects.toMatchObject({
        code: 'ERR_WAIT_TOO_LONG',
        maxWaitMs: 50,
      });
      await expect(bucket.take(1, { maxWait: 'soon' })).rejects.toMatchObject({ code: 'ERR_INVALID_DURATION' });
      expect(bucket.reserve(1, { maxWait: '100ms' })).toMatchObject({ ok: true, delayMs: 100 });
    });
  });

  describe('live changes', () => {
    it('setRate keeps tokens earned so far and refills at the new rate from now', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 10, burst: 100, clock });
      bucket.tryTake(100);
      clock.advance(1000); // 10 tokens at the old rate
      bucket.setRate('100/s');
      expect(bucket.rate).toBe(100);
      clock.advance(100); // 10 more at the new rate
      expect(bucket.tokens).toBeCloseTo(20, 9);
      expect(() => bucket.setRate(-1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_RATE' }));
    });

    it('setBurst drops tokens above a smaller capacity and lets a larger one fill', () => {
      const clock = manualClock();
      const bucket = new TokenBucket({ rate: 10, burst: 100, clock });
      bucket.setBurst(40);
      expect(bucket.burst).toBe(40);
      expect(bucket.tokens).toBe(40);
      expect(() => bucket.tryTake(41)).toThrow(/exceeds/);
      bucket.setBurst('200');
      clock.advance(100_000);
      expect(bucket.tokens).toBe(200);
      expect(() => bucket.setBurst(0)).toThrow(/invalid burst 0/);
    });
  });
});
