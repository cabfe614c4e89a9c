/**
 * The fleet's rate over a long run: 4 worker processes share one scheduler
 * (`new Scheduler({ store, key })`, 200/s, burst 10) through a redis-server
 * this file starts, for 60 s. Together they start at the rate within 2 %, and
 * no window of T holds more than burst + rate * (T + ALLOWANCE_MS) starts.
 *
 * Tagged `long` (vitest.config.ts): it runs with the rest (CI included) and
 * alone with `npx vitest run --tags-filter=long`.
 */

import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { Workers, worstWindows } from './workers.js';

/**
 * The allowance for network and timer lateness in the window bound, ms: how unevenly the workers
 * act on the bucket, which is exact in Redis's time (docs/fleets.md). It leaves
 * room for a loaded machine running other suites at the same time.
 */
const ALLOWANCE_MS = 50;
const RATE = 200;
const BURST = 10;
const DURATION_MS = 60_000;

const workers = new Workers('fleet-child-long');
let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
  await workers.build();
});
afterAll(async () => {
  workers.killAll();
  await server?.stop();
});

it(`4 processes at ${RATE}/s, burst ${BURST}, for 60 s: the rate within 2 %, no window above burst + rate·(T + ${ALLOWANCE_MS} ms)`, {
  tags: ['long'],
  timeout: DURATION_MS + 30_000,
}, async () => {
  const results = await workers.runAll(server.port, 'rate', { rate: RATE, burst: BURST, durationMs: DURATION_MS });
  const perWorker = results.map((r) => r.starts.length as number);
  const starts = results.flatMap((r) => r.starts as number[]).sort((a, b) => a - b);
  // steady state: the middle of the run (the workers got "go" and stop at slightly different times)
  const from = (starts[0] as number) + 1000;
  const to = (starts.at(-1) as number) - 1000;
  const measured = (starts.filter((t) => t >= from && t < to).length * 1000) / (to - from);
  const windows = worstWindows(starts, [10, 50, 100, 1000, 10_000]);
  console.log(
    `fleet 60 s: ${starts.length} starts ${JSON.stringify(perWorker)}, steady ${measured.toFixed(2)}/s, worst windows ${JSON.stringify(windows)}`,
  );
  expect(Math.abs(measured - RATE) / RATE).toBeLessThan(0.02);
  for (const [T, worst] of Object.entries(windows)) {
    expect(worst).toBeLessThanOrEqual(BURST + (RATE * (Number(T) + ALLOWANCE_MS)) / 1000);
  }
  // every worker got a real share (shared evenly, not one worker taking all)
  for (const n of perWorker) expect(n).toBeGreaterThan(starts.length / 8);
});
