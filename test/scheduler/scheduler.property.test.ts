/**
 * The Scheduler's window bound, with fast-check: random arrivals, costs and
 * priorities, timers that fire 0 to 20 ms late. A job is charged at its
 * theoretical start, at most `lagMs = allowance - (burst - cost) / rate` before
 * it really starts, where the allowance is the package's lateness policy
 * (timer.ts) capped at `catchUp`; so no window of T sees more than
 * burst + rate * (T + lagMs) of cost start; when the burst absorbs the
 * lateness (lagMs <= 0 for every cost), the strict burst + rate * T holds.
 * With punctual timers the allowance stays at 2 ms whatever `catchUp` is.
 * And every job starts: the whole rate is delivered, nothing is stranded.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import { Scheduler } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';

interface Arrival {
  gapMs: number;
  costFraction: number;
  priority: number;
}

const arrival: fc.Arbitrary<Arrival> = fc.record({
  gapMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 60 })),
  costFraction: fc.oneof(fc.constant(1), fc.double({ min: 0, max: 1, noNaN: true })),
  priority: fc.integer({ min: 0, max: 2 }),
});

/** The most cost started in any window of `windowMs` less its bound; > 0 means a window broke it. */
function worstExcess(starts: readonly [number, number][], windowMs: number, bound: (spanMs: number) => number): number {
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < starts.length; i++) {
    let sum = 0;
    for (let j = i; j < starts.length; j++) {
      const [atJ, costJ] = starts[j] as [number, number];
      const spanMs = atJ - (starts[i] as [number, number])[0];
      if (spanMs > windowMs) break;
      sum += costJ;
      worst = Math.max(worst, sum - bound(spanMs));
    }
  }
  return worst;
}

describe('Scheduler windows under late timers', () => {
  it('no window above burst + rate * (T + lagMs); strict burst + rate * T when the burst absorbs the lateness; every job starts', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 10, max: 2000 }),
        fc.integer({ min: 1, max: 20 }),
        fc.oneof(fc.constant(undefined), fc.integer({ min: 0, max: 10 })),
        fc.oneof(fc.constant([0]), fc.array(fc.integer({ min: 0, max: 20 }), { minLength: 1, maxLength: 16 })),
        fc.array(arrival, { minLength: 1, maxLength: 60 }),
        async (ratePerSecond, burst, catchUp, latenesses, arrivals) => {
          const fake = fakeClock();
          let wake = 0;
          // Each timer fires late by the next of `latenesses` (0 to 20 ms).
          const clock: Clock = {
            ...fake.clock,
            setTimeout: (fn, ms) => fake.clock.setTimeout(fn, ms + (latenesses[wake++ % latenesses.length] as number)),
          };
          const scheduler = new Scheduler({ rate: ratePerSecond, burst, catchUp, maxQueue: 10_000, clock });
          const starts: [number, number][] = [];
          const jobs: Promise<unknown>[] = [];
          let maxCost = 0;
          for (const a of arrivals) {
            await fake.timers.tickAsync(a.gapMs);
            const cost = a.costFraction * burst;
            maxCost = Math.max(maxCost, cost);
            jobs.push(scheduler.schedule(() => starts.push([clock.now(), cost]), { cost, priority: a.priority }));
          }
          const totalCost = arrivals.reduce((sum, a) => sum + a.costFraction * burst, 0);
          await fake.timers.tickAsync(((totalCost + burst) * 1000) / ratePerSecond + 25 * arrivals.length + 100);
          await Promise.all(jobs);
          expect(starts).toHaveLength(arrivals.length);
          expect(scheduler.size).toBe(0);

          // The allowance is at most catchUp; with punctual timers the lateness policy keeps it at the
          // timer's 1 ms step plus 1 ms (timer.ts's expectedLatenessMs with nothing seen late).
          const catchUpMs = catchUp ?? 5;
          const punctual = latenesses.every((l) => l === 0);
          const allowanceMs = punctual ? Math.min(catchUpMs, 2) : catchUpMs;
          const lagMs = Math.max(0, allowanceMs - ((burst - maxCost) * 1000) / ratePerSecond);
          const tolerance = 1e-9 * (burst + totalCost);
          for (const windowMs of [0, 1, 10, 100, 1000]) {
            const excess = worstExcess(starts, windowMs, (spanMs) => burst + (ratePerSecond * (spanMs + lagMs)) / 1000);
            expect(excess).toBeLessThanOrEqual(tolerance);
          }
          if (lagMs === 0) {
            const strict = worstExcess(starts, 1000, (spanMs) => burst + (ratePerSecond * spanMs) / 1000);
            expect(strict).toBeLessThanOrEqual(tolerance);
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('a pause in the middle of a drain (a GC, the process descheduled) lets no window of calls exceed the strict bound', async () => {
    // Burst 10 at 1000/s: the bucket absorbs 9 ms of lateness, more than catchUp, so the strict bound holds.
    // Now and then the process stalls for 12 ms in the second call of a drain (the clock jumps while the
    // job's function runs; the bucket fills up meanwhile): the jobs after it in the same drain are called
    // after the stall, and must be charged then, not at the instant the drain began.
    const fake = fakeClock();
    let stalledMs = 0;
    // Timers 3 ms late, so that each wake-up starts several jobs in one drain; a timer armed right after a
    // stall was due during it, and fires at once.
    let afterStall = false;
    const clock: Clock = {
      ...fake.clock,
      now: () => fake.timers.now + stalledMs,
      setTimeout: (fn, ms) => {
        const late = afterStall ? -ms : 3;
        afterStall = false;
        return fake.clock.setTimeout(fn, ms + late);
      },
    };
    const scheduler = new Scheduler({ rate: 1000, burst: 10, maxQueue: 5000, clock });
    const calls: [number, number][] = [];
    const jobs = Array.from({ length: 2000 }, (_, i) =>
      scheduler.schedule(() => {
        calls.push([clock.now(), 1]);
        if (i % 50 === 23) {
          stalledMs += 12;
          afterStall = true;
        }
      }),
    );
    await fake.timers.tickAsync(3000);
    await Promise.all(jobs);
    expect(calls).toHaveLength(2000);
    for (const windowMs of [0, 1, 10, 100, 1000]) {
      expect(worstExcess(calls, windowMs, (spanMs) => 10 + spanMs)).toBeLessThanOrEqual(1e-9);
    }
  });

  it('the lag term is needed: with a burst of 1 and late timers, the strict bound is exceeded (by at most lagMs of rate)', async () => {
    const fake = fakeClock();
    const clock: Clock = { ...fake.clock, setTimeout: (fn, ms) => fake.clock.setTimeout(fn, ms + 3) };
    const scheduler = new Scheduler({ rate: 1000, burst: 1, maxQueue: 1000, clock });
    const starts: [number, number][] = [];
    const jobs = Array.from({ length: 100 }, () => scheduler.schedule(() => starts.push([clock.now(), 1])));
    await fake.timers.tickAsync(500);
    await Promise.all(jobs);
    expect(worstExcess(starts, 10, (spanMs) => 1 + spanMs)).toBeGreaterThan(0);
    expect(worstExcess(starts, 10, (spanMs) => 1 + spanMs + 5)).toBeLessThanOrEqual(0);
  });
});
