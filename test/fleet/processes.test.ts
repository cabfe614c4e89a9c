/**
 * Real worker processes sharing one Scheduler (fleet form) through one real Redis:
 * the shared rate (evenly, within 2 %), the weighted concurrency budget
 * (never exceeded), and a worker killed with SIGKILL mid-job.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';

const source = fileURLToPath(new URL('./fixtures/fleet-child.ts', import.meta.url));
const child = fileURLToPath(new URL('../../.tmp/fleet-child.mjs', import.meta.url));
const spawned: ChildProcess[] = [];

// One bundle (as test/keyed/race.test.ts): starts far faster than a TypeScript loader per process.
beforeAll(async () => {
  await build({
    entryPoints: [source],
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile: child,
    logLevel: 'warning',
  });
});
afterAll(() => {
  for (const p of spawned) p.kill('SIGKILL');
});

function start(key: string, mode: string, options: object) {
  const p = spawn(process.execPath, [child, String(inject('redisPort')), key, mode, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  spawned.push(p);
  const lines = createInterface({ input: p.stdout })[Symbol.asyncIterator]();
  return { process: p, next: async () => (await lines.next()).value as string };
}

async function runAll(mode: string, options: object, count = 4) {
  const key = `${mode}-${process.pid}-${Date.now()}`;
  const workers = Array.from({ length: count }, () => start(key, mode, options));
  for (const w of workers) expect(await w.next()).toBe('ready');
  for (const w of workers) w.process.stdin.write('go\n');
  const results = [];
  for (const w of workers) results.push(JSON.parse(await w.next()));
  for (const w of workers) w.process.stdin.end();
  return results;
}

/** The allowance for network and timer lateness in the window bound, ms (see the README's "Fleets"). */
const ALLOWANCE_MS = 25;

it('4 processes at 200/s, burst 10: together at the rate within 2 %, and no window above burst + rate·(T + allowance)', async () => {
  const rate = 200;
  const burst = 10;
  const results = await runAll('rate', { rate, burst, durationMs: 6000 });
  const perWorker = results.map((r) => r.starts.length as number);
  const starts = results.flatMap((r) => r.starts as number[]).sort((a, b) => a - b);
  // steady state: the middle of the run (the workers got "go" and stop at slightly different times)
  const from = (starts[0] as number) + 1000;
  const to = (starts.at(-1) as number) - 1000;
  const measured = (starts.filter((t) => t >= from && t < to).length * 1000) / (to - from);
  const windows: Record<number, number> = {};
  for (const T of [10, 50, 100, 1000]) {
    let worst = 0;
    for (let i = 0, j = 0; i < starts.length; i++) {
      while (j < starts.length && (starts[j] as number) < (starts[i] as number) + T) j++;
      worst = Math.max(worst, j - i);
    }
    windows[T] = worst;
  }
  console.log(
    `fleet rate: ${starts.length} starts ${JSON.stringify(perWorker)}, steady ${measured.toFixed(2)}/s, worst windows ${JSON.stringify(windows)}`,
  );
  expect(Math.abs(measured - rate) / rate).toBeLessThan(0.02);
  for (const [T, worst] of Object.entries(windows)) {
    expect(worst).toBeLessThanOrEqual(burst + (rate * (Number(T) + ALLOWANCE_MS)) / 1000);
  }
  // every worker got a real share (shared evenly, not one worker taking all)
  for (const n of perWorker) expect(n).toBeGreaterThan(starts.length / 8);
}, 40_000);

it('weighted concurrency: 4 processes, budget 5, costs 1..3: the in-flight weight in Redis never exceeds 5', async () => {
  const counter = `weight-counter-${process.pid}-${Date.now()}`;
  const results = await runAll('weight', { concurrency: 5, durationMs: 2500, counter, leaseMs: 2000 });
  const highest = Math.max(...results.map((r) => r.highest as number));
  const jobs = results.reduce((s, r) => s + (r.jobs as number), 0);
  console.log(`fleet weight: highest ${highest}, ${jobs} jobs, per worker ${results.map((r) => r.jobs).join(' ')}`);
  expect(highest).toBeLessThanOrEqual(5);
  expect(highest).toBeGreaterThanOrEqual(4); // it was really contended
  expect(jobs).toBeGreaterThan(200);
}, 30_000);

it('a worker killed with SIGKILL mid-job: its units come back when its lease expires', async () => {
  const key = `kill-${process.pid}-${Date.now()}`;
  const leaseMs = 600;
  const victim = start(key, 'hold', { concurrency: 4, cost: 4, leaseMs });
  expect(await victim.next()).toBe('ready');
  victim.process.stdin.write('go\n');
  expect(await victim.next()).toBe('holding');
  const client = new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
  const store = new RedisFleetStore({ client, onError: 'deny', timeoutMs: 2000 });
  const survivor = new Scheduler({ store, key, concurrency: 4, leaseMs, pollMs: 10 });
  let startedAt = 0;
  const job = survivor.schedule(() => {
    startedAt = performance.now();
  });
  // renewed while the victim lives: nothing starts for longer than a lease
  await new Promise((r) => setTimeout(r, leaseMs * 1.5));
  expect(startedAt).toBe(0);
  const exited = new Promise((r) => victim.process.once('exit', r));
  victim.process.kill('SIGKILL');
  const killedAt = performance.now();
  await exited;
  await job;
  const backAfterMs = startedAt - killedAt;
  console.log(`fleet kill: units back ${backAfterMs.toFixed(0)} ms after SIGKILL (leaseMs ${leaseMs})`);
  expect(backAfterMs).toBeGreaterThan(0);
  expect(backAfterMs).toBeLessThanOrEqual(leaseMs + 200);
  client.disconnect();
}, 20_000);
