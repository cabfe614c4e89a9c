/**
 * FixedWindow and SlidingWindow: worked sequences, both sides of each bound,
 * and properties over random arrivals (no window ever admits more than the
 * rule says, and nothing conforming is refused).
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FixedWindow, SlidingWindow } from '../../src/index.js';
import {
  newSlidingLog,
  slideLog,
  slidingLogRecord,
  slidingLogWaitMs,
  type WindowParams,
} from '../../src/meters/windows.js';
import { manualClock } from '../helpers/fake-clock.js';

describe('FixedWindow', () => {
  it('admits the limit per window, and the count starts again on the boundary', () => {
    const clock = manualClock(900);
    const w = new FixedWindow({ limit: 100, window: '1s', clock });
    const first = Array.from({ length: 101 }, () => w.tryTake());
    expect(first.filter((d) => d.allowed)).toHaveLength(100);
    expect(first[99]).toEqual({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 100, limit: 100 });
    expect(first[100]).toEqual({ allowed: false, remaining: 0, retryAfterMs: 100, resetAfterMs: 100, limit: 100 });
    clock.set(999.999);
    expect(w.tryTake().allowed).toBe(false);
    clock.set(1000);
    // The boundary: 100 more pass 0.1 s after the first 100 (200 within a window of 1 s).
    const second = Array.from({ length: 101 }, () => w.tryTake());
    expect(second.filter((d) => d.allowed)).toHaveLength(100);
    expect(second[0]?.remaining).toBe(99);
    expect(second[0]?.resetAfterMs).toBe(1000);
  });

  it('counts cost, refuses a cost above the limit with a coded error, and peek changes nothing', () => {
    const clock = manualClock();
    const w = new FixedWindow({ limit: 10, window: 60_000, clock });
    expect(w.tryTake(7).remaining).toBe(3);
    expect(w.peek(3)).toMatchObject({ allowed: true, remaining: 0 });
    expect(w.peek(4)).toMatchObject({ allowed: false, retryAfterMs: 60_000 });
    expect(w.tryTake(4).allowed).toBe(false);
    expect(w.tryTake(3).allowed).toBe(true);
    expect(() => w.tryTake(11)).toThrow(expect.objectContaining({ code: 'ERR_COST_EXCEEDS_CAPACITY', capacity: 10 }));
    expect(() => w.tryTake(-1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_SIZE' }));
  });

  it('an idle window reports no reset; time going backwards stays in the current window', () => {
    const clock = manualClock(5500);
    const w = new FixedWindow({ limit: 2, window: 1000, clock });
    expect(w.peek()).toMatchObject({ allowed: true, remaining: 1, resetAfterMs: 500 });
    w.tryTake();
    w.tryTake();
    clock.set(3000); // backwards: still window 5000-6000, still full
    expect(w.tryTake()).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    expect(w.tryTakeAt(6000).allowed).toBe(true);
  });

  it('validates its options with coded errors', () => {
    expect(() => new FixedWindow({ limit: 0, window: 1000 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'limit' }),
    );
    expect(() => new FixedWindow({ limit: 1, window: 0 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'window' }),
    );
    expect(() => new FixedWindow({ limit: 1, window: 'soon' })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_DURATION' }),
    );
  });

  it('property: every window admits at most the limit, and exactly the limit under enough demand', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 0, max: 5000 }), { minLength: 1, maxLength: 300 }),
        (limit, times) => {
          times.sort((a, b) => a - b);
          const w = new FixedWindow({ limit, window: 1000, clock: manualClock() });
          const offered = new Map<number, number>();
          const admitted = new Map<number, number>();
          for (const t of times) {
            const k = Math.floor(t / 1000);
            offered.set(k, (offered.get(k) ?? 0) + 1);
            if (w.tryTakeAt(t).allowed) admitted.set(k, (admitted.get(k) ?? 0) + 1);
          }
          for (const [k, n] of offered) expect(admitted.get(k) ?? 0).toBe(Math.min(n, limit));
        },
      ),
    );
  });
});

describe('SlidingWindow (log, exact)', () => {
  it('the boundary case: 100 at 0.9 s, then none until 1.9 s, when the first have slid out', () => {
    const clock = manualClock(900);
    const w = new SlidingWindow({ limit: 100, window: '1s', clock });
    for (let i = 0; i < 100; i++) expect(w.tryTake().allowed).toBe(true);
    clock.set(1000);
    expect(w.tryTake()).toEqual({ allowed: false, remaining: 0, retryAfterMs: 900, resetAfterMs: 900, limit: 100 });
    clock.set(1899.999);
    expect(w.tryTake().allowed).toBe(false);
    clock.set(1900); // all 100 admitted at 0.9 s slide out together
    expect(w.tryTake()).toMatchObject({ allowed: true, remaining: 99 });
  });

  it('retryAfterMs is when enough of the oldest admissions have slid out for this cost', () => {
    const clock = manualClock();
    const w = new SlidingWindow({ limit: 10, window: 1000, clock });
    w.tryTakeAt(0, 3);
    w.tryTakeAt(200, 3);
    w.tryTakeAt(400, 4);
    expect(w.peekAt(500, 1).retryAfterMs).toBe(500); // the 3 at 0 go at 1000
    expect(w.peekAt(500, 5).retryAfterMs).toBe(700); // needs the 3 at 200 gone too: 1200
    expect(w.peekAt(500, 10).retryAfterMs).toBe(900); // all of them: 1400
    expect(w.tryTakeAt(1000, 3)).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 1000 });
  });

  it('property: no window of length W (wherever it starts) admits more than the limit, and a request that fits is never refused', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.array(fc.record({ t: fc.integer({ min: 0, max: 4000 }), cost: fc.integer({ min: 1, max: 3 }) }), {
          maxLength: 200,
        }),
        (limit, requests) => {
          requests.sort((a, b) => a.t - b.t);
          const w = new SlidingWindow({ limit, window: 1000, clock: manualClock() });
          const admitted: { t: number; cost: number }[] = [];
          for (const r of requests) {
            if (r.cost > limit) continue;
            const inWindow = admitted.filter((a) => a.t > r.t - 1000).reduce((s, a) => s + a.cost, 0);
            const d = w.tryTakeAt(r.t, r.cost);
            expect(d.allowed).toBe(inWindow + r.cost <= limit);
            if (d.allowed) admitted.push(r);
          }
          for (const a of admitted) {
            const window = admitted.filter((b) => b.t >= a.t && b.t < a.t + 1000).reduce((s, b) => s + b.cost, 0);
            expect(window).toBeLessThanOrEqual(limit);
          }
        },
      ),
    );
  });
});

describe("the sliding log's steps (shared with the Scheduler's window limit)", () => {
  const params = { limit: 10, windowMs: 1000 };

  it('slideLog drops what slid out; slidingLogRecord merges costs recorded at one instant', () => {
    const log = newSlidingLog();
    slidingLogRecord(log, 0, 3);
    slidingLogRecord(log, 0, 2);
    slidingLogRecord(log, 400, 4);
    slidingLogRecord(log, 300, 0); // nothing to record
    expect(log).toMatchObject({ atMs: [0, 400], cost: [5, 4], used: 9, latestMs: 400 });
    expect(slideLog(log, params, 999)).toBe(999);
    expect(log.used).toBe(9);
    slideLog(log, params, 1000); // the 5 at 0 slid out
    expect(log.used).toBe(4);
    expect(slideLog(log, params, 500)).toBe(1000); // time never goes back
    slidingLogRecord(log, 900, 1); // recorded at the latest time seen
    expect(log.atMs.slice(log.head)).toEqual([400, 1000]);
    slideLog(log, params, 5000);
    expect(log.used).toBe(0);
  });

  it('slidingLogWaitMs: until enough of the oldest entries slide out, or Infinity when only held cost is in the way', () => {
    const log = newSlidingLog();
    slidingLogRecord(log, 0, 3);
    slidingLogRecord(log, 200, 3);
    slidingLogRecord(log, 400, 2);
    const now = slideLog(log, params, 500);
    expect(slidingLogWaitMs(log, params, now, 2)).toBe(0);
    expect(slidingLogWaitMs(log, params, now, 3)).toBe(500); // the 3 at 0 go at 1000
    expect(slidingLogWaitMs(log, params, now, 5)).toBe(500);
    expect(slidingLogWaitMs(log, params, now, 6)).toBe(700);
    expect(slidingLogWaitMs(log, params, now, 10)).toBe(900);
    // 4 held (running) count on top and never slide out by themselves.
    expect(slidingLogWaitMs(log, params, now, 4, 4)).toBe(700);
    expect(slidingLogWaitMs(log, params, now, 7, 4)).toBe(Number.POSITIVE_INFINITY);
    expect(slidingLogWaitMs(newSlidingLog(), params, now, 7, 4)).toBe(Number.POSITIVE_INFINITY);
    expect(slidingLogWaitMs(newSlidingLog(), params, now, 6, 4)).toBe(0);
  });

  it('slidingLogWaitMs ends exactly at the newest entry, whatever rounding the sum carries', () => {
    const log = newSlidingLog();
    const tenth = { limit: 0.3, windowMs: 1000 };
    for (const at of [0, 1, 2]) slidingLogRecord(log, at, 0.1);
    expect(slidingLogWaitMs(log, tenth, 2, 0.3)).toBe(1000); // when the last 0.1 goes: 1002 - 2
  });
});

describe('a sliding log whose window grows (slideLog with keepCost)', () => {
  /** A log of `limit` per `windowMs`, taking one request every `stepMs` while it fits, for `untilMs`. */
  function fill(log: ReturnType<typeof newSlidingLog>, params: WindowParams, stepMs: number, untilMs: number): number {
    let t = 0;
    for (; t < untilMs; t += stepMs) {
      const now = slideLog(log, params, t, params.limit);
      if (slidingLogWaitMs(log, params, now, 1) === 0) slidingLogRecord(log, now, 1);
    }
    return t;
  }

  it('a longer window counts the entries that slid out of the shorter one', () => {
    const log = newSlidingLog();
    const short = { limit: 5, windowMs: 50 };
    for (let i = 0; i < 5; i++) slidingLogRecord(log, 0, 1);
    for (let i = 0; i < 5; i++) slidingLogRecord(log, 60, 1);
    slideLog(log, short, 100, 5);
    expect(log.used).toBe(5); // the 5 at 0 slid out of 50 ms
    const long = { limit: 5, windowMs: 1000 };
    const now = slideLog(log, long, 100, 5);
    expect(log.used).toBe(10); // both fives are inside 1000 ms
    expect(slidingLogWaitMs(log, long, now, 1)).toBe(960); // room once the 5 at 60 slide out, at 1060
  });

  it('keeps at most keepCost behind the window, and after compaction still decides exactly for a longer window', () => {
    const log = newSlidingLog();
    const short = { limit: 5, windowMs: 10 };
    const end = fill(log, short, 1, 10_000); // 5 starts every 10 ms: 5000 in all
    expect(log.atMs.length - log.head).toBeLessThanOrEqual(5);
    expect(log.atMs.length).toBeLessThanOrEqual(80); // bounded, however long it ran
    expect(log.atMs[0]).toBeGreaterThan(end - 200);
    // Lengthened to 1 s at 10000: the 5 newest starts (9990-9994) are inside, so the next waits until the
    // oldest of them slides out, at 10990.
    const long = { limit: 5, windowMs: 1000 };
    const now = slideLog(log, long, end, 5);
    expect(log.used).toBeGreaterThanOrEqual(5);
    expect(now + slidingLogWaitMs(log, long, now, 1)).toBe(10_990);
  });

  it('after a higher limit, admits nothing until the entries it dropped have surely slid out', () => {
    const log = newSlidingLog();
    const end = fill(log, { limit: 5, windowMs: 10 }, 1, 10_000);
    const forgottenAtMs = log.forgottenAtMs as number;
    expect(forgottenAtMs).toBeGreaterThan(end - 200);
    const wider = { limit: 500, windowMs: 1000 };
    const now = slideLog(log, wider, end, 500);
    expect(slidingLogWaitMs(log, wider, now, 1)).toBe(forgottenAtMs + 1000 - now);
    expect(slidingLogWaitMs(log, wider, now, 0)).toBe(0); // a cost of 0 adds nothing
    const later = slideLog(log, wider, forgottenAtMs + 1000, 500);
    expect(slidingLogWaitMs(log, wider, later, 1)).toBe(0);
  });

  it('property: across any changes of limit and length, no window of the length in force ending at an admission holds more than its limit', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 30 }), { minLength: 1, maxLength: 300 }),
        fc.array(
          fc.record({
            index: fc.nat(),
            limit: fc.integer({ min: 1, max: 8 }),
            windowMs: fc.integer({ min: 5, max: 2000 }),
          }),
          { maxLength: 6 },
        ),
        (gaps, changes) => {
          const log = newSlidingLog();
          let params: WindowParams = { limit: 3, windowMs: 100 };
          const admitted: number[] = [];
          let t = 0;
          gaps.forEach((gap, i) => {
            for (const change of changes) if (change.index % gaps.length === i) params = change;
            t += gap;
            const now = slideLog(log, params, t, params.limit);
            if (slidingLogWaitMs(log, params, now, 1) !== 0) return;
            slidingLogRecord(log, now, 1);
            admitted.push(now);
            const inWindow = admitted.filter((a) => a > now - params.windowMs).length;
            expect(inWindow).toBeLessThanOrEqual(params.limit);
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('SlidingWindow (counter, approximate)', () => {
  it('weights the previous window by the share of it still inside the sliding window', () => {
    const clock = manualClock(900);
    const w = new SlidingWindow({ limit: 100, window: 1000, mode: 'counter', clock });
    expect(w.mode).toBe('counter');
    for (let i = 0; i < 100; i++) w.tryTake();
    clock.set(1000); // estimate 100 * (1 - 0) + 0 = 100
    expect(w.tryTake()).toMatchObject({ allowed: false, retryAfterMs: 10 });
    clock.set(1010); // 100 * 0.99 = 99: one fits
    expect(w.tryTake()).toMatchObject({ allowed: true, remaining: 0 });
    expect(w.tryTake().allowed).toBe(false);
    clock.set(1500); // 50 + 1
    expect(w.peek(49)).toMatchObject({ allowed: true });
    expect(w.peek(50)).toMatchObject({ allowed: false });
    clock.set(3000); // two windows later: nothing counts
    expect(w.peek(100)).toMatchObject({ allowed: true });
  });

  it('a cost that cannot fit this window waits for the next one', () => {
    const clock = manualClock();
    const w = new SlidingWindow({ limit: 10, window: 1000, mode: 'counter', clock });
    w.tryTakeAt(100, 8);
    // 8 + 5 > 10 in this window; in the next, 8 * (1 - e) + 5 <= 10 once e >= 3/8.
    expect(w.peekAt(500, 5).retryAfterMs).toBe(500 + 375);
    expect(w.tryTakeAt(1375, 5).allowed).toBe(true);
  });

  it('refuses an unknown mode', () => {
    expect(() => new SlidingWindow({ limit: 1, window: 1000, mode: 'exact' as 'log' })).toThrow(/'log' or 'counter'/);
  });
});
