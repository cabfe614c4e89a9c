/**
 * LeakyBucket (shaping): constant drain, bounded queue. Worked sequences and
 * properties: admitted requests leave at least 1 / rate apart, the bucket
 * never holds more than maxQueue, and a request is refused only when it
 * would overflow.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LeakyBucket } from '../../src/index.js';
import { manualClock } from '../helpers/fake-clock.js';

describe('LeakyBucket', () => {
  it('the worked example: rate 100/s, maxQueue 5, ten requests at once', () => {
    const clock = manualClock();
    const b = new LeakyBucket({ rate: '100/s', maxQueue: 5, clock });
    const ds = Array.from({ length: 10 }, () => b.tryTake());
    expect(ds.map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false, false, false, false]);
    expect(ds.slice(0, 5).map((d) => d.delayMs)).toEqual([0, 10, 20, 30, 40]);
    expect(ds[4]).toEqual({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 50, limit: 5, delayMs: 40 });
    expect(ds[5]).toEqual({ allowed: false, remaining: 0, retryAfterMs: 10, resetAfterMs: 50, limit: 5, delayMs: 0 });
    clock.set(25);
    expect(b.backlog).toBe(2.5);
    expect(b.tryTake()).toMatchObject({ allowed: true, delayMs: 25 }); // leaves at 50
    expect(b.tryTake()).toMatchObject({ allowed: true, delayMs: 35 }); // leaves at 60
    expect(b.tryTake()).toMatchObject({ allowed: false, retryAfterMs: 5 });
  });

  it('an idle bucket passes at once and drains to empty', () => {
    const clock = manualClock(1000);
    const b = new LeakyBucket({ rate: 10, maxQueue: 3, clock });
    expect(b.tryTake()).toMatchObject({ allowed: true, delayMs: 0, remaining: 2, resetAfterMs: 100 });
    clock.advance(100);
    expect(b.backlog).toBe(0);
    expect(b.peek(3)).toMatchObject({ allowed: true, delayMs: 0 });
  });

  it('cost counts in the bucket and in the drain time; cost above maxQueue is a coded error', () => {
    const clock = manualClock();
    const b = new LeakyBucket({ rate: 1000, maxQueue: 100, clock });
    expect(b.tryTake(60)).toMatchObject({ allowed: true, delayMs: 0, resetAfterMs: 60 });
    expect(b.tryTake(40)).toMatchObject({ allowed: true, delayMs: 60, remaining: 0 });
    expect(b.tryTake(1)).toMatchObject({ allowed: false, retryAfterMs: 1 });
    expect(() => b.tryTake(101)).toThrow(expect.objectContaining({ code: 'ERR_COST_EXCEEDS_CAPACITY', capacity: 100 }));
  });

  it('validates its options; the queue is bounded on purpose', () => {
    expect(() => new LeakyBucket({ rate: '100/s', maxQueue: Number.POSITIVE_INFINITY })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'maxQueue' }),
    );
    expect(() => new LeakyBucket({ rate: 0, maxQueue: 1 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_RATE' }),
    );
  });

  it('time going backwards drains nothing and admits nothing extra', () => {
    const clock = manualClock(1000);
    const b = new LeakyBucket({ rate: 100, maxQueue: 2, clock });
    b.tryTake();
    b.tryTake();
    clock.set(0);
    expect(b.tryTake().allowed).toBe(false);
    expect(b.tryTakeAt(1010).allowed).toBe(true);
  });

  it('property: departures are at least 1/rate apart, in order, the bucket never overflows, and a refusal means it would have', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 500 }),
        fc.array(fc.integer({ min: 0, max: 3000 }), { maxLength: 300 }),
        (maxQueue, rate, times) => {
          times.sort((a, b) => a - b);
          const b = new LeakyBucket({ rate, maxQueue, clock: manualClock() });
          let lastDepart = Number.NEGATIVE_INFINITY;
          const departures: number[] = [];
          for (const t of times) {
            const queued = departures.filter((d) => d + 1000 / rate > t).length; // still leaking or waiting
            const d = b.tryTakeAt(t);
            if (d.allowed) {
              const depart = t + d.delayMs;
              expect(depart).toBeGreaterThanOrEqual(t);
              expect(depart - lastDepart).toBeGreaterThanOrEqual(1000 / rate - 1e-9);
              lastDepart = depart;
              departures.push(depart);
              expect(d.delayMs).toBeLessThanOrEqual(((maxQueue - 1) * 1000) / rate + 1e-9);
            } else {
              expect(queued).toBeGreaterThanOrEqual(maxQueue); // a whole request would not fit
            }
          }
        },
      ),
    );
  });
});
