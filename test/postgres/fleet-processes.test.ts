/**
 * A fleet of real worker processes sharing one Scheduler through the machine's PostgreSQL:
 * three processes at concurrency 4 and 100/s start short jobs at the rate within 1 %, run long
 * ones 4 at a time and never more, and a worker killed with SIGKILL mid-job gives its units back
 * within one lease.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PostgresFleetStore } from '../../src/postgres/postgres-fleet-store.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { dropSchema, PG_URL, schemaName, testPool } from '../helpers/postgres.js';
import { slope } from '../stream/support.js';

const source = fileURLToPath(new URL('./fixtures/fleet-child.ts', import.meta.url));
const bundle = fileURLToPath(new URL('../../.tmp/postgres-fleet-child.mjs', import.meta.url));
const schema = schemaName();
const spawned: ChildProcess[] = [];

beforeAll(async () => {
  await build({
    entryPoints: [source],
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile: bundle,
    logLevel: 'warning',
  });
  const pool = testPool({ max: 1 });
  // Logged tables, as by default; a call's commit does not wait for the disk (synchronousCommit off).
  await new PostgresFleetStore({ client: pool, schema, onError: 'deny' }).migrate();
  await pool.end();
}, 60_000);
afterAll(async () => {
  for (const p of spawned) p.kill('SIGKILL');
  await dropSchema(schema);
});

function start(key: string, mode: string, options: object) {
  const p = spawn(process.execPath, [bundle, PG_URL, schema, key, mode, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  spawned.push(p);
  const lines = createInterface({ input: p.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  return { process: p, next: async () => (await lines.next()).value as string };
}

/** What a run of the three workers did, between 1 s in and 1 s before its end (start-up and the final clear). */
interface Run {
  /** Starts per second: the least-squares slope of the starts counted against time, so that a few late timers at its ends do not weigh. */
  rate: number;
  /** The most jobs running at one instant, across the fleet (over the whole run). */
  most: number;
  /** The mean number of jobs running. */
  meanRunning: number;
  /** Jobs each process started. */
  shares: number[];
}

/** Three processes sharing rate 100/s, burst 1 and concurrency 4, each with a queue of `jobMs` jobs longer than the run. */
async function runFleet(jobMs: number): Promise<Run> {
  const key = `run-${jobMs}-${Date.now()}`;
  const durationMs = 6000;
  const workers = [0, 1, 2].map(() =>
    start(key, 'run', { rate: 100, burst: 1, concurrency: 4, leaseMs: 3000, durationMs, jobMs }),
  );
  for (const w of workers) expect(await w.next()).toBe('ready');
  for (const w of workers) w.process.stdin?.write('go\n');
  const perWorker: [number, number][][] = [];
  for (const w of workers) perWorker.push((JSON.parse(await w.next()) as { spans: [number, number][] }).spans);
  const spans = perWorker.flat();
  const edges = spans
    .flatMap(([s, e]) => [[s, 1] as const, [e, -1] as const])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const first = Math.min(...spans.map(([s]) => s));
  const from = first + 1000;
  const to = first + durationMs - 1000;
  let running = 0;
  let most = 0;
  let busyMs = 0; // the integral of the jobs running, over [from, to)
  let at = from;
  for (const [t, d] of edges) {
    if (t > from && at < to) busyMs += running * (Math.min(t, to) - Math.max(at, from));
    at = Math.max(at, t);
    running += d;
    most = Math.max(most, running);
  }
  // each start a piece of 1: the slope of the starts counted so far against time
  const starts = spans.map(([s]) => ({ atMs: s, bytes: 1 })).sort((a, b) => a.atMs - b.atMs);
  return {
    rate: slope(starts, from, to),
    most,
    meanRunning: busyMs / (to - from),
    shares: perWorker.map((w) => w.length),
  };
}

const show = (what: string, r: Run) =>
  console.log(
    `postgres fleet, ${what}: ${r.rate.toFixed(2)}/s, at most ${r.most} running, ${r.meanRunning.toFixed(2)} on average, shares ${r.shares.join(' ')}`,
  );

it('3 processes at 100/s and concurrency 4, jobs of 5 ms (the rate binds): the rate within 1 %, at most 4 running', async () => {
  const r = await runFleet(5);
  show('jobs of 5 ms', r);
  expect(Math.abs(r.rate - 100) / 100).toBeLessThan(0.01);
  expect(r.most).toBeLessThanOrEqual(4);
  for (const share of r.shares) expect(share).toBeGreaterThan(0.8 * (600 / 3));
}, 60_000);

// 100/s of 60 ms jobs would need 6 running: the budget binds, and the fleet keeps it full but never over.
// Between the two, the rate is lost while the budget is full: docs/fleets.md, "The rate while the budget
// is full" (test/scheduler/fleet-rate.test.ts models it on a fake clock).
it('... jobs of 60 ms (the concurrency binds): never more than 4 running, and 4 reached', async () => {
  const r = await runFleet(60);
  show('jobs of 60 ms', r);
  expect(r.most).toBe(4);
  expect(r.meanRunning).toBeGreaterThan(3);
}, 60_000);

it('a worker killed with SIGKILL mid-job: its units come back within one lease', async () => {
  const key = `kill-${Date.now()}`;
  const leaseMs = 600;
  const victim = start(key, 'hold', { concurrency: 4, cost: 4, leaseMs });
  expect(await victim.next()).toBe('ready');
  victim.process.stdin?.write('go\n');
  expect(await victim.next()).toBe('holding');
  const pool = testPool({ max: 2 });
  const store = new PostgresFleetStore({ client: pool, schema, onError: 'deny', timeout: 2000 });
  const survivor = new Scheduler({ store, key, concurrency: 4, lease: leaseMs, pollInterval: 10 });
  let startedAt = 0;
  const job = survivor.schedule(() => {
    startedAt = performance.now();
  });
  await new Promise((r) => setTimeout(r, leaseMs * 1.5)); // renewed while the victim lives
  expect(startedAt).toBe(0);
  const exited = new Promise((r) => victim.process.once('exit', r));
  victim.process.kill('SIGKILL');
  const killedAt = performance.now();
  await exited;
  await job;
  const backAfterMs = startedAt - killedAt;
  console.log(`postgres fleet kill: units back ${backAfterMs.toFixed(0)} ms after SIGKILL (leaseMs ${leaseMs})`);
  expect(backAfterMs).toBeGreaterThan(0);
  expect(backAfterMs).toBeLessThanOrEqual(leaseMs + 200);
  await survivor.close();
  store.close();
  await pool.end();
}, 30_000);
