/**
 * Properties of the bucket arithmetic, checked with fast-check over random
 * rates, bursts, costs and arrival times.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../src/meters/token-bucket.js';
import { manualClock } from '../helpers/fake-clock.js';

const rate = fc.double({ min: 0.01, max: 1e7, noNaN: true });
const burst = fc.double({ min: 1, max: 1e7, noNaN: true });

describe('token bucket properties', () => {
  it('no window of length T admits more than burst + rate * T', () => {
    fc.assert(
      fc.property(
        rate,
        burst,
        fc.array(fc.tuple(fc.double({ min: 0, max: 2000, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true })), {
          minLength: 1,
          maxLength: 150,
        }),
        (ratePerSecond, capacity, arrivals) => {
          const clock = manualClock();
          const bucket = new TokenBucket({ rate: ratePerSecond, burst: capacity, clock });
          const admitted: [number, number][] = [];
          for (const [gapMs, costFraction] of arrivals) {
            clock.advance(gapMs);
            const cost = costFraction * capacity;
            if (bucket.tryTake(cost)) admitted.push([clock.now(), cost]);
          }
          for (let i = 0; i < admitted.length; i++) {
            let sum = 0;
            for (let j = i; j < admitted.length; j++) {
              sum += (admitted[j] as [number, number])[1];
              const windowMs = (admitted[j] as [number, number])[0] - (admitted[i] as [number, number])[0];
              const bound = capacity + (ratePerSecond * windowMs) / 1000;
              expect(sum).toBeLessThanOrEqual(bound * (1 + 1e-9));
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a million tiny takes never drift from the exact count', () => {
    // The exact model counts milli-tokens in integers: at integer ms steps and
    // integer rates, every refill is a whole number of milli-tokens.
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 7 }),
        fc.integer({ min: 0, max: 2 ** 31 }),
        (ratePerSecond, capacity, cost, maxStepMs, seed) => {
          const takeCost = Math.min(cost, capacity);
          const clock = manualClock();
          const bucket = new TokenBucket({ rate: ratePerSecond, burst: capacity, clock });
          let exactMilli = capacity * 1000;
          let exactCount = 0;
          let count = 0;
          let state = seed;
          for (let i = 0; i < 1_000_000; i++) {
            state = (state * 1103515245 + 12345) % 2 ** 31; // deterministic steps of 0..maxStepMs ms
            const stepMs = state % (maxStepMs + 1);
            clock.advance(stepMs);
            exactMilli = Math.min(capacity * 1000, exactMilli + stepMs * ratePerSecond);
            if (exactMilli >= takeCost * 1000) {
              exactMilli -= takeCost * 1000;
              exactCount++;
            }
            if (bucket.tryTake(takeCost)) count++;
          }
          expect(count).toBe(exactCount);
        },
      ),
      { numRuns: 4 },
    );
  });

  it('time going backwards never creates tokens', () => {
    fc.assert(
      fc.property(
        rate,
        burst,
        fc.array(fc.tuple(fc.double({ min: 0, max: 1e6, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true })), {
          minLength: 1,
          maxLength: 100,
        }),
        (ratePerSecond, capacity, events) => {
          const clock = manualClock();
          const bucket = new TokenBucket({ rate: ratePerSecond, burst: capacity, clock });
          let latestMs = 0;
          let admittedCost = 0;
          for (const [atMs, costFraction] of events) {
            clock.set(atMs); // jumps back and forth
            latestMs = Math.max(latestMs, atMs);
            const cost = costFraction * capacity;
            if (bucket.tryTake(cost)) admittedCost += cost;
            const tokens = bucket.tokens;
            expect(tokens).toBeGreaterThanOrEqual(-capacity * 1e-9);
            expect(tokens).toBeLessThanOrEqual(capacity);
          }
          // Whatever the order of the times, no more than the burst plus the refill over the latest time seen.
          expect(admittedCost).toBeLessThanOrEqual((capacity + (ratePerSecond * latestMs) / 1000) * (1 + 1e-9));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a refused call never changes the state', () => {
    fc.assert(
      fc.property(
        rate,
        burst,
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 10_000, noNaN: true }),
        (ratePerSecond, capacity, spentFraction, askFraction, laterMs) => {
          const clock = manualClock();
          const bucket = new TokenBucket({ rate: ratePerSecond, burst: capacity, clock });
          bucket.tryTake(spentFraction * capacity);
          clock.advance(1);
          const before = [bucket.tokens, bucket.tokensAt(clock.now() + laterMs), bucket.delayFor(capacity)];
          if (!bucket.tryTake(askFraction * capacity)) {
            expect([bucket.tokens, bucket.tokensAt(clock.now() + laterMs), bucket.delayFor(capacity)]).toEqual(before);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('waiting delayFor(cost) always makes cost conform (no rounding short-fall)', () => {
    fc.assert(
      fc.property(rate, burst, fc.double({ min: 0, max: 1, noNaN: true }), (ratePerSecond, capacity, costFraction) => {
        const clock = manualClock(12345.678);
        const bucket = new TokenBucket({ rate: ratePerSecond, burst: capacity, clock });
        bucket.tryTake(capacity);
        const cost = costFraction * capacity;
        clock.advance(bucket.delayFor(cost));
        expect(bucket.tryTake(cost)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});
