/**
 * AdaptiveRate: a Scheduler's rate learned from pushback, against a simulated downstream with a
 * hidden limit in any 1 s (a sliding log; a refused call pushes back with a retry-after of 1 s),
 * 16 callers as fast as they can, in fake time: the goals of the interceptor's `adaptive` at their
 * full durations (20 s per phase), and a limit that moves 40 -> 20 -> 60 followed within 10 s.
 */

import { describe, expect, it } from 'vitest';
import { AdaptiveRate, type AdaptiveRateChange, isTokenpaceError, Scheduler } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';

function simulate(phases: Array<{ limit: number; ms: number }>) {
  const { clock, timers } = fakeClock(0);
  const scheduler = new Scheduler({ rate: 10, clock, maxQueue: 100 });
  const adaptive = new AdaptiveRate(scheduler, { clock });
  const accepted: number[] = [];
  const answers: Array<{ atMs: number; ok: boolean }> = [];
  let limit = phases[0]?.limit ?? 1;
  const endMs = phases.reduce((t, p) => t + p.ms, 0);
  let at = 0;
  for (const phase of phases) {
    timers.setTimeout(() => {
      limit = phase.limit;
    }, at);
    at += phase.ms;
  }
  const call = () =>
    scheduler.schedule(async () => {
      await new Promise<void>((resolve) => clock.setTimeout(resolve, 1)); // one-way delay
      const now = clock.now();
      let live = 0;
      for (let i = accepted.length - 1; i >= 0 && (accepted[i] as number) > now - 1000; i--) live++;
      const ok = live < limit;
      if (ok) accepted.push(now);
      answers.push({ atMs: now, ok });
      await new Promise<void>((resolve) => clock.setTimeout(resolve, 1));
      if (!ok) adaptive.pushback({ retryAfter: 1000 });
    });
  const loop = async (): Promise<void> => {
    while (clock.now() < endMs) await call();
  };
  const callers = Promise.all(Array.from({ length: 16 }, loop));
  return {
    adaptive,
    now: () => clock.now(),
    async run() {
      await timers.tickAsync(endMs + 2000);
      await callers;
    },
    tally(fromMs: number, toMs: number) {
      const inside = answers.filter((a) => a.atMs >= fromMs && a.atMs < toMs);
      const ok = inside.filter((a) => a.ok).length;
      return { refused: (inside.length - ok) / inside.length, okPerSecond: (ok * 1000) / (toMs - fromMs) };
    },
  };
}

describe('AdaptiveRate', () => {
  it('unknown limit of 40 in any 1 s, 20 s: <= 2 % refused, >= 85 % used in the last 10 s', async () => {
    const sim = simulate([{ limit: 40, ms: 20_000 }]);
    const changes: AdaptiveRateChange[] = [];
    sim.adaptive.on('change', (c) => changes.push(c));
    await sim.run();
    const all = sim.tally(0, 20_000);
    const last = sim.tally(10_000, 20_000);
    expect(all.refused).toBeLessThanOrEqual(0.02);
    expect(last.okPerSecond / 40).toBeGreaterThanOrEqual(0.85);
    expect(changes.some((c) => c.reason === 'pushback')).toBe(true);
    expect(changes.some((c) => c.reason === 'increase')).toBe(true);
  });

  it('follows a limit that moves 40 -> 20 -> 60: within 10 s the learned rate is near the new limit', async () => {
    const sim = simulate([
      { limit: 40, ms: 20_000 },
      { limit: 20, ms: 20_000 },
      { limit: 60, ms: 20_000 },
    ]);
    const rates: Array<{ atMs: number; rate: number }> = [];
    sim.adaptive.on('change', (c) => rates.push({ atMs: sim.now(), rate: c.rate }));
    await sim.run();
    const rateAt = (ms: number) => rates.filter((r) => r.atMs <= ms).at(-1)?.rate ?? Number.NaN;
    for (const [startMs, limit] of [
      [20_000, 20],
      [40_000, 60],
    ] as const) {
      // Within 10 s of the change the rate is near the new limit, and it stays there with few refusals.
      for (const ms of [10_000, 15_000, 20_000]) {
        const rate = rateAt(startMs + ms - 1);
        expect(rate / limit).toBeGreaterThanOrEqual(0.8);
        expect(rate / limit).toBeLessThanOrEqual(1.15);
      }
      const settled = sim.tally(startMs + 10_000, startMs + 20_000);
      expect(settled.refused).toBeLessThanOrEqual(0.02);
      expect(settled.okPerSecond / limit).toBeGreaterThanOrEqual(0.75);
    }
  });

  it('pushback pauses the scheduler for the retry-after and cuts the rate; close lets go', async () => {
    const { clock, timers } = fakeClock(0);
    const scheduler = new Scheduler({ rate: 10, clock });
    const adaptive = new AdaptiveRate(scheduler, { clock, min: 2 });
    adaptive.pushback({ retryAfter: '2s' });
    expect(scheduler.isPaused).toBe(true);
    expect(adaptive.rate).toBe(9);
    for (let i = 0; i < 30; i++) adaptive.pushback();
    expect(adaptive.rate).toBe(2);
    await timers.tickAsync(2000);
    expect(scheduler.isPaused).toBe(false);
    adaptive.close();
    expect(scheduler.rate).toBe(2);
  });

  it('refuses a scheduler without a rate and bad bounds with coded errors', () => {
    const code = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return isTokenpaceError(error) ? error.code : String(error);
      }
      return 'no error';
    };
    expect(code(() => new AdaptiveRate(new Scheduler({ concurrency: 1 })))).toBe('ERR_INVALID_OPTION');
    expect(code(() => new AdaptiveRate(new Scheduler({ rate: 10 }), { min: 20 }))).toBe('ERR_INVALID_OPTION');
  });
});
