/**
 * ByteMeter (src/meters/byte-meter.ts): TBF's two buckets over bytes, on the
 * steps of meters/bucket.ts. Exact times and amounts, and a property against
 * an exact model of a packet TBF.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ByteMeter } from '../../src/meters/byte-meter.js';

describe('ByteMeter', () => {
  it('starts full, takes what conforms, and says when a piece will', () => {
    const meter = new ByteMeter(1000, 100, 0);
    expect(meter.available(0)).toBeCloseTo(100, 6);
    expect(meter.tryTake(0, 101)).toBe(false);
    expect(meter.tryTake(0, 100)).toBe(true);
    expect(meter.tryTake(0, 1)).toBe(false);
    expect(meter.readyAt(0, 50)).toBe(50); // 50 bytes at 1000 B/s
    expect(meter.msUntil(10, 50)).toBe(40);
    expect(meter.tryTake(49, 50)).toBe(false);
    expect(meter.tryTake(50, 50)).toBe(true);
    // Refill stops at the burst: an hour later, still 100.
    expect(meter.available(3_600_000)).toBeCloseTo(100, 6);
  });

  it('the peak bucket caps how fast a burst drains: max(-toks, -ptoks)', () => {
    const meter = new ByteMeter(1000, 1000, 0, { ratePerSecond: 10_000, burstBytes: 100 });
    expect(meter.available(0)).toBeCloseTo(100, 6);
    expect(meter.tryTake(0, 100)).toBe(true);
    expect(meter.readyAt(0, 100)).toBe(10); // the peak bucket refills 100 in 10 ms; the main one holds 900
    meter.take(10, 100);
    expect(meter.available(10)).toBeCloseTo(0, 6);
    // Charging at the time it passes, each bucket capped at its own capacity.
    expect(meter.available(1000)).toBeCloseTo(100, 6);
  });

  it('a charge at the time the piece passes keeps the tokens earned meanwhile (no overflow lost, none invented)', () => {
    const meter = new ByteMeter(1000, 100, 0);
    // Pieces of 30 bytes every 30 ms from a full bucket: the bucket stays full, nothing is lost.
    for (let t = 0; t <= 3000; t += 30) expect(meter.tryTake(t, 30)).toBe(true);
    expect(meter.available(3000)).toBeCloseTo(70, 6);
  });

  it('reconfigure keeps the tokens earned, capped at the new burst (no burst handed out)', () => {
    const meter = new ByteMeter(1000, 100, 0);
    meter.take(0, 100);
    meter.reconfigure(50, { ratePerSecond: 2000, burstBytes: 40 });
    expect(meter.available(50)).toBeCloseTo(40, 6); // 50 earned, capped at 40
    expect(meter.ratePerSecond).toBe(2000);
    expect(meter.burstBytes).toBe(40);
    meter.take(50, 40);
    expect(meter.readyAt(50, 20)).toBe(60); // at the new rate
    meter.reconfigurePeak(60, { ratePerSecond: 4000, burstBytes: 10 });
    expect(meter.available(60)).toBeCloseTo(10, 6); // a new peak bucket starts full; the main holds 20
  });

  it('for any pieces and times: a piece conforms exactly when a packet TBF would pass it, and readyAt is the first such instant', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1e6 }),
        fc.integer({ min: 1, max: 1e5 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 1, max: 1e5 })), { maxLength: 60 }),
        (ratePerSecond, burst, steps) => {
          const meter = new ByteMeter(ratePerSecond, burst, 0);
          // The model: TBF's tokens, refilled and capped at each event, in exact rationals scaled by 1000.
          let tokens = burst * 1000; // tokens * 1000 (ms * rate is then an integer)
          let lastMs = 0;
          let nowMs = 0;
          for (const [gapMs, bytes] of steps) {
            nowMs += gapMs;
            tokens = Math.min(burst * 1000, tokens + (nowMs - lastMs) * ratePerSecond);
            lastMs = nowMs;
            const modelPasses = tokens >= bytes * 1000;
            expect(meter.tryTake(nowMs, bytes)).toBe(modelPasses);
            if (modelPasses) tokens -= bytes * 1000;
            else if (bytes <= burst) {
              const readyMs = meter.readyAt(nowMs, bytes);
              const shortMs = (bytes * 1000 - tokens) / ratePerSecond;
              expect(readyMs).toBeGreaterThanOrEqual(nowMs + shortMs - 1e-6);
              expect(readyMs).toBeLessThanOrEqual(nowMs + shortMs + 1e-6);
            }
          }
        },
      ),
    );
  });
});
