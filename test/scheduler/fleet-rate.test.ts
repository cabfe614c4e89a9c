/**
 * The rate a fleet delivers when its concurrency has room for it: three workers on one
 * MemoryFleetStore whose every call takes a round trip (a fake clock, so the figures are exact),
 * each with a long queue, at rate 100/s, burst 1, concurrency 4, pollInterval 5 ms: the limits of
 * test/postgres/fleet-processes.test.ts, with jobs between its two runs' (5 and 60 ms). The rate is measured over the store's own grant times
 * (`readyAtMs`), in the steady part of the run; the shares are the jobs each worker started.
 */

import { describe, expect, it } from 'vitest';
import type { FleetStore } from '../../src/fleet/store.js';
import { MemoryFleetStore } from '../../src/fleet/store.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { fakeClock } from '../helpers/fake-clock.js';

const RATE = 100;
const DURATION_MS = 5000;

interface Run {
  /** Starts per second granted by the store, between 1 s and 4 s into the run. */
  rate: number;
  /** Jobs each worker started. */
  shares: number[];
  /** The most jobs running at once. */
  most: number;
}

/** Three workers, `jobMs` jobs, every call to the store `oneWayMs` each way. */
async function run(oneWayMs: number, jobMs: number, concurrency = 4): Promise<Run> {
  const { clock, timers } = fakeClock(0);
  const inner = new MemoryFleetStore({ clock });
  const granted: number[] = [];
  const hop = () => new Promise<void>((resolve) => clock.setTimeout(resolve, oneWayMs));
  const far =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      await hop();
      const result = await call(...args);
      await hop();
      return result;
    };
  const store: FleetStore = {
    exchange: far(async (op) => {
      const result = await inner.exchange(op);
      for (const grant of result.grants) if (grant.status === 'ok') granted.push(grant.readyAtMs);
      return result;
    }),
    acquire: far((op) => inner.acquire(op)),
    cancel: far((...args) => inner.cancel(...args)),
    renew: far((...args) => inner.renew(...args)),
    release: far((...args) => inner.release(...args)),
    adjust: far((...args) => inner.adjust(...args)),
    configure: far((...args) => inner.configure(...args)),
    inspect: (...args) => inner.inspect(...args),
  };
  const options = { rate: RATE, burst: 1, concurrency, lease: 3000, pollInterval: 5, maxQueue: 1000 };
  const workers = [0, 1, 2].map(() => new Scheduler({ store, key: 'api', clock, autoStart: false, ...options }));
  const shares = [0, 0, 0];
  let running = 0;
  let most = 0;
  const jobs = workers.flatMap((worker, w) =>
    Array.from({ length: (RATE * DURATION_MS) / 1000 }, () =>
      worker
        .schedule(async () => {
          shares[w] = (shares[w] as number) + 1;
          most = Math.max(most, ++running);
          await new Promise<void>((resolve) => clock.setTimeout(resolve, jobMs));
          running--;
        })
        .catch(() => {}),
    ),
  );
  for (const worker of workers) worker.resume();
  await timers.tickAsync(DURATION_MS);
  for (const worker of workers) worker.clear();
  await timers.runAllAsync();
  await Promise.all(jobs);
  const steady = granted.sort((a, b) => a - b).filter((t) => t >= 1000 && t < DURATION_MS - 1000);
  const rate = ((steady.length - 1) * 1000) / ((steady.at(-1) as number) - (steady[0] as number));
  return { rate, shares, most };
}

describe('a fleet of three workers at 100/s and concurrency 4, calls of a 4 ms round trip', () => {
  it('jobs of 20 ms: the rate within 1 %, even shares, at most 4 running', async () => {
    const { rate, shares, most } = await run(2, 20);
    expect(Math.abs(rate - RATE) / RATE).toBeLessThan(0.01);
    for (const share of shares) expect(share).toBeGreaterThan((0.9 * (RATE * DURATION_MS)) / 1000 / 3);
    expect(most).toBeLessThanOrEqual(4);
  });

  // KNOWN LOSS: jobs of 30 ms need 3 of the 4 units at the rate, and a lease holds its unit from the
  // reservation to the call that gives it back, a round trip and the reservation's wait longer than the
  // job, so the budget is often full and the bucket's time passes unused: 88.5/s, in even shares, with
  // any pollInterval from 1 to 50 ms. Without claims it keeps 100/s but splits it 300/150/150.
  it.fails('jobs of 30 ms: the rate within 1 %', async () => {
    const { rate } = await run(2, 30);
    expect(Math.abs(rate - RATE) / RATE).toBeLessThan(0.01);
  });
});

// The sizing rule of docs/fleets.md: a budget of rate x (job + round trip) + 1 units keeps the rate.
describe('the same fleet with a budget of rate x (job + round trip) + 1 units or more', () => {
  for (const [jobMs, concurrency] of [
    [30, 5],
    [40, 6],
    [70, 9],
  ] as const) {
    it(`jobs of ${jobMs} ms, concurrency ${concurrency}: the rate within 1 %, even shares, never above the budget`, async () => {
      const { rate, shares, most } = await run(2, jobMs, concurrency);
      expect(Math.abs(rate - RATE) / RATE).toBeLessThan(0.01);
      for (const share of shares) expect(share).toBeGreaterThan((0.9 * (RATE * DURATION_MS)) / 1000 / 3);
      expect(most).toBeLessThanOrEqual(concurrency);
    });
  }
});
