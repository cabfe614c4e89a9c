/**
 * Properties of the bucket arithmetic, checked with fast-check over random
 * rates, bursts, costs and arrival times.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../src/meters/token-bucket.js';
import { ExactBucket, Q } from '../helpers/exact-bucket.js';
import { fakeClock, manualClock } from '../helpers/fake-clock.js';

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

/** One step of a random script against a TokenBucket and the exact model. */
type Step =
  | { op: 'wait'; ms: number }
  | { op: 'reserve' | 'take' | 'tryTake'; costFraction: number; maxWaitMs: number | undefined }
  | { op: 'cancel' | 'abort'; pick: number }
  | { op: 'setRate'; rate: number }
  | { op: 'setBurst'; burst: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 400 }) }) },
  ...(['reserve', 'take', 'tryTake'] as const).map((op) => ({
    weight: op === 'tryTake' ? 2 : 4,
    arbitrary: fc.record({
      op: fc.constant(op),
      costFraction: fc.oneof(fc.constant(1), fc.constant(0.5), fc.double({ min: 0, max: 1, noNaN: true })),
      maxWaitMs: fc.option(fc.integer({ min: 0, max: 2000 }), { nil: undefined }),
    }),
  })),
  ...(['cancel', 'abort'] as const).map((op) => ({
    weight: 2,
    arbitrary: fc.record({ op: fc.constant(op), pick: fc.double({ min: 0, max: 0.999, noNaN: true }) }),
  })),
  { weight: 1, arbitrary: fc.record({ op: fc.constant('setRate' as const), rate: fc.integer({ min: 1, max: 200 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('setBurst' as const), burst: fc.integer({ min: 1, max: 20 }) }) },
);

interface Held {
  /** The number of live changes made before it was charged. */
  epoch: number;
  cost: number;
  readyAtMs: Q;
  done: boolean;
  cancel: () => void;
  /** For takes: when the promise settled, and how. */
  settled?: { atMs: number; ok: boolean };
  controller?: AbortController;
}

describe('reservations against an exact model', () => {
  it('random reserve / cancel / take / abort / tryTake / setRate / setBurst: same state as the exact model, no window above burst + rate * T, every promise settles', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 20 }),
        fc.array(step, { minLength: 1, maxLength: 40 }),
        fc.boolean(),
        async (ratePerSecond, burst, allSteps, live) => {
          // Half the runs without live changes, where the bound covers every window.
          const steps = live ? allSteps : allSteps.filter((s) => s.op !== 'setRate' && s.op !== 'setBurst');
          const { clock, timers, pending } = fakeClock(1000);
          const bucket = new TokenBucket({ rate: ratePerSecond, burst, clock });
          const model = new ExactBucket(ratePerSecond, burst, 1000);
          const held: Held[] = [];
          const acted: [atMs: Q, cost: number, epoch: number][] = [];
          let maxBurst = burst;
          /** Live changes so far; whether a reservation from before the last one was cancelled after it. */
          let epoch = 0;
          let epochClean = true;
          const noteChange = () => {
            epoch++;
            epochClean = true;
          };
          const now = () => Q.of(clock.now());

          for (const s of steps) {
            switch (s.op) {
              case 'wait':
                await timers.tickAsync(s.ms);
                break;
              case 'tryTake': {
                const cost = Math.round(s.costFraction * bucket.burst);
                const ok = bucket.tryTake(cost);
                expect(ok).toBe(model.tryTake(now(), Q.of(cost)));
                if (ok) acted.push([now(), cost, epoch]);
                break;
              }
              case 'reserve': {
                const cost = Math.round(s.costFraction * bucket.burst);
                const r = bucket.reserve(cost, { maxWait: s.maxWaitMs });
                const expected = model.reserve(
                  now(),
                  Q.of(cost),
                  s.maxWaitMs === undefined ? undefined : Q.of(s.maxWaitMs),
                );
                expect(r.ok).toBe(expected !== undefined);
                if (expected === undefined) break;
                expect(r.readyAtMs).toBeCloseTo(expected.toNumber(), 6);
                held.push({ epoch, cost, readyAtMs: expected, done: false, cancel: () => r.cancel() });
                break;
              }
              case 'take': {
                const cost = Math.round(s.costFraction * bucket.burst);
                const controller = new AbortController();
                const promise = bucket.take(cost, { signal: controller.signal, maxWait: s.maxWaitMs });
                const expected = model.reserve(
                  now(),
                  Q.of(cost),
                  s.maxWaitMs === undefined ? undefined : Q.of(s.maxWaitMs),
                );
                const h: Held = {
                  epoch,
                  cost,
                  readyAtMs: expected ?? now(),
                  done: expected === undefined,
                  cancel: () => {},
                  controller,
                };
                promise.then(
                  () => {
                    h.settled = { atMs: clock.now(), ok: true };
                  },
                  () => {
                    h.settled = { atMs: clock.now(), ok: false };
                  },
                );
                await timers.tickAsync(0); // settle what settles at once
                if (expected === undefined) {
                  expect(h.settled).toMatchObject({ ok: false }); // refused at once
                } else {
                  held.push(h);
                }
                break;
              }
              case 'cancel':
              case 'abort': {
                const open = held.filter((h) => !h.done && (s.op === 'abort') === (h.controller !== undefined));
                const h = open[Math.floor(s.pick * open.length)];
                if (h === undefined) break;
                h.done = true;
                if (h.controller !== undefined) {
                  if (h.settled?.ok) {
                    acted.push([h.readyAtMs, h.cost, h.epoch]); // it resolved: it acted
                    break;
                  }
                  h.controller.abort(new Error('abort'));
                } else {
                  h.cancel();
                }
                model.refund(now(), Q.of(h.cost), h.readyAtMs);
                if (h.epoch < epoch) epochClean = false;
                // Cancelled before it came due, it never acts (whatever came back); cancelled after, it did.
                if (h.readyAtMs.lt(now())) acted.push([h.readyAtMs, h.cost, h.epoch]);
                break;
              }
              case 'setRate':
                noteChange();
                bucket.setRate(s.rate);
                model.reconfigure(now(), s.rate, bucket.burst);
                break;
              case 'setBurst':
                noteChange();
                bucket.setBurst(s.burst);
                model.reconfigure(now(), bucket.rate, s.burst);
                maxBurst = Math.max(maxBurst, s.burst);
                break;
            }
            const exact = model.tokensAt(now()).toNumber();
            expect(Math.abs(bucket.tokens - exact)).toBeLessThanOrEqual(1e-9 * (maxBurst + Math.abs(exact)));
          }

          // Let every waiter come due: every promise settles, none early, and within the timer's whole
          // millisecond (the watchdog rounds up; float noise in a due time can cost that millisecond).
          const last = Math.max(clock.now(), ...held.map((h) => h.readyAtMs.toNumber()));
          await timers.tickAsync(Math.ceil(last - clock.now()) + 1);
          for (const h of held) {
            if (h.controller !== undefined) {
              expect(h.settled).toBeDefined();
              if (h.settled?.ok) {
                expect(h.settled.atMs).toBeGreaterThanOrEqual(h.readyAtMs.toNumber() - 1e-6);
                expect(h.settled.atMs).toBeLessThanOrEqual(h.readyAtMs.toNumber() + 1);
              }
            }
            if (!h.done) acted.push([h.readyAtMs, h.cost, h.epoch]);
          }
          expect(pending()).toBe(0);

          // No window [a, b] of due times carries more than burst + rate * (b - a), exactly. With live
          // changes, the same for what was charged after the last change (as x/time documents, a
          // reservation made before a change keeps its time, so it may break the new bound), unless a
          // reservation from before the change was cancelled after it.
          const checked = epoch === 0 ? acted : epochClean ? acted.filter((a) => a[2] === epoch) : [];
          checked.sort((x, y) => x[0].cmp(y[0]));
          const B = Q.of(bucket.burst);
          const R = Q.of(bucket.rate).div(Q.of(1000));
          for (let i = 0; i < checked.length; i++) {
            const atI = (checked[i] as (typeof checked)[number])[0];
            let sum = new Q(0n);
            for (let j = i; j < checked.length; j++) {
              const [atJ, costJ] = checked[j] as (typeof checked)[number];
              sum = sum.add(Q.of(costJ));
              const bound = B.add(R.mul(atJ.sub(atI)));
              if (bound.lt(sum)) {
                throw new Error(
                  `window ${atI.toNumber()}..${atJ.toNumber()} ms carries ${sum.toNumber()} > ${bound.toNumber()} (${epoch} live changes)`,
                );
              }
            }
          }
        },
      ),
      {
        numRuns: 500,
        examples: [
          // The reproduction: B (10, due 10 s) and C (10, due 20 s) on an empty bucket; B cancelled at 1 s; D.
          [
            1,
            10,
            [
              { op: 'tryTake', costFraction: 1, maxWaitMs: undefined },
              { op: 'reserve', costFraction: 1, maxWaitMs: undefined },
              { op: 'reserve', costFraction: 1, maxWaitMs: undefined },
              { op: 'wait', ms: 1000 },
              { op: 'cancel', pick: 0 },
              { op: 'reserve', costFraction: 1, maxWaitMs: undefined },
            ],
            false,
          ],
        ],
      },
    );
  });
});
