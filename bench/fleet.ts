/**
 * Fleet bench: a Scheduler's fleet form (`new Scheduler({ store, key })`) on
 * one Redis against the raw EVALSHA ceiling of its script, and bottleneck's
 * Redis clustering (`datastore: 'ioredis'`) side by side on the same server,
 * with real worker processes:
 *
 * - no-op jobs per second for 1, 2 and 4 processes, and their ratio to the
 *   ceiling (a worker's call gives back the leases of ended jobs and asks for
 *   up to 64 queued ones);
 * - rate accuracy at 200/s shared by 4 processes, start-time jitter (gaps
 *   between consecutive starts against the ideal 5 ms), the worst 100 ms
 *   window, and the highest in-flight count under a budget of 4 (a counter in
 *   Redis);
 * - a worker killed (SIGKILL) while it holds the only unit: how long until
 *   another worker's job starts (fleet: lease 1500 ms; bottleneck: job
 *   `expiration` 1500, which its README recommends for exactly this);
 * - Redis killed (SIGKILL) under load and restarted empty on the same port
 *   after 3 s: how long from its first PONG until the store answers again and
 *   until the fleet (lease 10 s, onError 'deny', the default timeout and
 *   probeInterval) starts its next job, with the client's offline queue on.
 */

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import { RedisFleetStore } from '../src/fleet/redis-fleet-store.js';
import { FLEET_LUA } from '../src/fleet/script.js';
import { LUA_PRELUDE } from '../src/redis/lua-script.js';

const FLEET_SCRIPT = `${LUA_PRELUDE}\n${FLEET_LUA}`;

import { Scheduler } from '../src/scheduler/scheduler.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { bundledProbe, formatOps, type Section, table } from './harness.js';

/** The worker, bundled once per run (bench/harness.ts bundledProbe). */
let childBundle = '';

interface Worker {
  process: ChildProcess;
  next(): Promise<string>;
}

function spawnWorker(port: number, library: string, mode: string, key: string, options: object): Worker {
  const p = spawn(process.execPath, [childBundle, String(port), library, mode, key, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: p.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  return { process: p, next: async () => (await lines.next()).value as string };
}

let keySeq = 0;
async function runWorkers(port: number, library: string, mode: string, count: number, options: object) {
  const key = `bench-${library}-${mode}-${process.pid}-${keySeq++}`;
  const workers = Array.from({ length: count }, () => spawnWorker(port, library, mode, key, options));
  for (const w of workers) await w.next();
  for (const w of workers) w.process.stdin?.write('go\n');
  const results = [];
  for (const w of workers) results.push(JSON.parse(await w.next()));
  for (const w of workers) w.process.kill('SIGKILL');
  return results;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

function redisBenchmark(port: number): Promise<number | string> {
  const sha = createHash('sha1').update(FLEET_SCRIPT).digest('hex');
  return new Promise((resolve) => {
    const keys = ['{rb:k}:s', '{rb:k}:l', '{rb:k}:w', '{rb:k}:q', '{rb:k}:c'];
    const args = ['-p', String(port), '-c', '64', '-n', '50000', '-q', 'EVALSHA', sha, '5', ...keys];
    // an exchange asking for one job of cost 1, no limit that binds, one lease each (the lease set
    // grows, to at most its 1 s lease's worth: an upper bound on a worker's single-job call)
    args.push(
      '',
      'b',
      '86400000',
      '1000000000',
      '1000000000',
      '-1',
      '',
      '1000',
      '100',
      '0',
      '1',
      '-1',
      'lease:__rand_int__',
    );
    execFile('redis-benchmark', args, { encoding: 'utf8', timeout: 60_000 }, (error, stdout) => {
      if (error) resolve(`(redis-benchmark failed: ${error.message})`);
      const match = /([\d.]+) requests per second/.exec(stdout);
      resolve(match ? Number(match[1]) : `(no figure: ${stdout.trim().slice(-200)})`);
    });
  });
}

/** One restart under load: ms from the restarted server's first PONG to `recovered` and to the next job start. */
async function recovery(
  server: Awaited<ReturnType<typeof startRedis>>,
  Redis: typeof import('ioredis').Redis,
  round: number,
): Promise<string[]> {
  const client = new Redis({ port: server.port, host: '127.0.0.1' });
  client.on('error', () => {});
  const store = new RedisFleetStore({ client, onError: 'deny' });
  const key = `bench-recovery-${process.pid}-${keySeq++}`;
  const scheduler = new Scheduler({ store, key, rate: 100, burst: 5, concurrency: 4, lease: 10_000, pollInterval: 10 });
  let lastStart = 0;
  let recoveredAt = 0;
  store.on('recovered', () => {
    recoveredAt = performance.now();
  });
  let running = true;
  const jobs: Promise<unknown>[] = [];
  const feed = (async () => {
    while (running) {
      while (scheduler.size < 20) {
        jobs.push(
          scheduler
            .schedule(async () => {
              lastStart = performance.now();
              await new Promise((r) => setTimeout(r, 20));
            })
            .catch(() => {}),
        );
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  await new Promise((r) => setTimeout(r, 1000));
  await server.stop();
  await new Promise((r) => setTimeout(r, 3000));
  await server.restart();
  const backAt = performance.now();
  while (lastStart < backAt && performance.now() - backAt < 15_000) await new Promise((r) => setTimeout(r, 2));
  const firstMs = lastStart >= backAt ? `${(lastStart - backAt).toFixed(0)} ms` : 'none within 15 s';
  const storeMs = recoveredAt >= backAt ? `${(recoveredAt - backAt).toFixed(0)} ms` : '-';
  running = false;
  await feed;
  scheduler.clear();
  await Promise.all(jobs);
  await scheduler.close();
  store.close();
  client.disconnect();
  return [String(round), storeMs, firstMs];
}

export const fleetSection: Section = {
  id: 'fleet',
  title: 'Fleet: one scheduler shared by worker processes through Redis',
  async run() {
    childBundle = await bundledProbe(new URL('./fleet-child.ts', import.meta.url));
    const server = await startRedis();
    const out: string[] = [];
    try {
      const { Redis } = await import('ioredis');
      const client = new Redis({ port: server.port, host: '127.0.0.1' });
      await client.script('LOAD', FLEET_SCRIPT);
      client.disconnect();
      const ceiling = await redisBenchmark(server.port);

      const rows: string[][] = [];
      for (const processes of [1, 2, 4]) {
        for (const library of ['fleet', 'bottleneck']) {
          const total = library === 'fleet' ? 40_000 : 4000;
          const n = Math.round(total / processes);
          const results = await runWorkers(server.port, library, 'noop', processes, { n });
          const jobs = results.reduce((s, r) => s + r.jobs, 0);
          const ms = Math.max(...results.map((r) => r.ms as number));
          const perSecond = (jobs * 1000) / ms;
          rows.push([
            library === 'fleet' ? 'Scheduler with a RedisFleetStore' : 'bottleneck (ioredis)',
            String(processes),
            String(jobs),
            formatOps(perSecond),
            typeof ceiling === 'number' ? `${(perSecond / ceiling).toFixed(2)}x` : '-',
          ]);
        }
      }
      out.push('#### No-op jobs per second', '');
      out.push(table(['contender', 'processes', 'jobs', 'jobs/s', 'of the ceiling'], rows), '');
      out.push(
        `redis-benchmark, raw EVALSHA of the fleet script (one job each, 64 connections): ${typeof ceiling === 'number' ? formatOps(ceiling) : ceiling}`,
        '',
      );

      const rateRows: string[][] = [];
      for (const library of ['fleet', 'bottleneck']) {
        const counter = `bench-inflight-${library}-${Date.now()}`;
        const durationMs = 4000;
        const results = await runWorkers(server.port, library, 'rate', 4, {
          rate: 200,
          burst: 10,
          concurrency: 4,
          jobMs: 5,
          durationMs,
          counter,
        });
        const starts = results.flatMap((r) => r.starts as number[]).sort((a, b) => a - b);
        const from = (starts[0] as number) + 500;
        const to = (starts.at(-1) as number) - 200;
        const rate = (starts.filter((t) => t >= from && t < to).length * 1000) / (to - from);
        const gaps = starts
          .slice(1)
          .map((t, i) => t - (starts[i] as number))
          .sort((a, b) => a - b);
        let worst = 0;
        for (let i = 0, j = 0; i < starts.length; i++) {
          while (j < starts.length && (starts[j] as number) < (starts[i] as number) + 100) j++;
          worst = Math.max(worst, j - i);
        }
        rateRows.push([
          library === 'fleet' ? 'Scheduler with a RedisFleetStore (burst 10)' : 'bottleneck (minTime 5)',
          `${rate.toFixed(1)}/s`,
          `${percentile(gaps, 0.5).toFixed(2)} / ${percentile(gaps, 0.99).toFixed(2)} ms`,
          String(worst),
          String(Math.max(...results.map((r) => r.highest as number))),
        ]);
      }
      out.push('#### 200 jobs/s shared by 4 processes, budget 4, 5 ms jobs, 4 s', '');
      out.push(
        table(
          [
            'contender',
            'steady rate',
            'gap p50 / p99 (ideal 5 ms)',
            'worst 100 ms window',
            'highest in flight (budget 4)',
          ],
          rateRows,
        ),
        '',
      );

      const killRows: string[][] = [];
      for (const library of ['fleet', 'bottleneck']) {
        const key = `bench-kill-${library}-${Date.now()}`;
        const options = { concurrency: 1, leaseMs: 1500 };
        const victim = spawnWorker(server.port, library, 'hold', key, options);
        await victim.next();
        victim.process.stdin?.write('go\n');
        await victim.next(); // holding
        const survivor = spawnWorker(server.port, library, 'noop', key, { ...options, n: 1 });
        await survivor.next();
        victim.process.kill('SIGKILL');
        survivor.process.stdin?.write('go\n');
        const result = await Promise.race([
          survivor.next().then((line) => JSON.parse(line) as { ms: number }),
          new Promise<{ ms: number }>((r) => setTimeout(() => r({ ms: Number.NaN }), 10_000)),
        ]);
        survivor.process.kill('SIGKILL');
        killRows.push([
          library === 'fleet' ? 'Scheduler with a RedisFleetStore (lease 1500 ms)' : 'bottleneck (expiration 1500)',
          Number.isNaN(result.ms) ? 'not within 10 s' : `${result.ms.toFixed(0)} ms`,
        ]);
      }
      out.push('#### A worker killed (SIGKILL) while holding the only unit: until another worker runs', '');
      out.push(table(['contender', 'unit back after'], killRows), '');
      out.push('#### Redis killed under load and restarted empty after 3 s (lease 10 s, onError deny)', '');
      const recoveryRows: string[][] = [];
      for (let round = 0; round < 3; round++) recoveryRows.push(await recovery(server, Redis, round + 1));
      out.push(table(['round', 'store answers again after', 'first job start after'], recoveryRows), '');
      out.push('Figures from a 2-core machine shared with other work: compare within a run, not across machines.');
    } finally {
      await server.stop();
    }
    return out.join('\n');
  },
};
