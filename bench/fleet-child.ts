/**
 * One worker process of the fleet bench (bench/fleet.ts), bundled with esbuild.
 * argv: port, library ('fleet' | 'bottleneck'), mode, key, JSON options.
 * Prints "ready", waits for "go", runs, prints one JSON line.
 *
 * - `noop`: `n` no-op jobs, no limit that binds (throughput of the store round trips).
 * - `rate`: jobs of `jobMs` for `durationMs` at the shared rate and concurrency; reports the start
 *   times and the highest in-flight count seen in a Redis counter.
 * - `hold`: one job that never ends (the parent kills the process).
 */

import Bottleneck from 'bottleneck';
import { Redis } from 'ioredis';
import { RedisFleetStore, Scheduler } from '../src/index.js';

const [portArg, library, mode, key, json] = process.argv.slice(2);
const port = Number(portArg);
const o = JSON.parse(json as string) as {
  n?: number;
  rate?: number;
  burst?: number;
  concurrency?: number;
  durationMs?: number;
  jobMs?: number;
  leaseMs?: number;
  counter?: string;
};
const client = new Redis({ port, host: '127.0.0.1' });
const wall = () => performance.timeOrigin + performance.now();
type Run = (fn: () => Promise<unknown> | unknown) => Promise<unknown>;
let run: Run;
let stop: () => Promise<void>;

if (library === 'fleet') {
  const store = new RedisFleetStore({ client, onError: 'deny', timeout: 5000 });
  const s = new Scheduler({
    store,
    key: key as string,
    rate: o.rate ?? 1e9,
    burst: o.burst ?? 1e9,
    concurrency: o.concurrency,
    lease: o.leaseMs,
    maxQueue: 1_000_000,
    pollInterval: 5,
  });
  run = (fn) => s.schedule(fn);
  stop = async () => s.clear();
} else {
  const limiter = new Bottleneck({
    id: key as string,
    datastore: 'ioredis',
    clientOptions: { host: '127.0.0.1', port },
    Redis,
    maxConcurrent: o.concurrency ?? null,
    minTime: o.rate === undefined ? 0 : 1000 / o.rate,
  });
  await limiter.ready();
  const expiration = o.leaseMs;
  run = (fn) => limiter.schedule(expiration === undefined ? {} : { expiration }, async () => fn());
  stop = async () => {
    await limiter.stop({ dropWaitingJobs: true }).catch(() => {});
    await limiter.disconnect().catch(() => {});
  };
}
await client.ping();
process.stdout.write('ready\n');
await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));

if (mode === 'noop') {
  const n = o.n ?? 2000;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: n }, () => run(() => {})));
  process.stdout.write(`${JSON.stringify({ jobs: n, ms: performance.now() - t0 })}\n`);
} else if (mode === 'rate') {
  const starts: number[] = [];
  let highest = 0;
  const counter = client.duplicate();
  const until = wall() + (o.durationMs ?? 3000);
  const n = Math.ceil(((o.rate ?? 100) * (o.durationMs ?? 3000)) / 1000);
  const jobs = Array.from({ length: n }, () =>
    run(async () => {
      starts.push(wall());
      const now = await counter.incr(o.counter as string);
      if (now > highest) highest = now;
      await new Promise((r) => setTimeout(r, o.jobMs ?? 10));
      await counter.decr(o.counter as string);
    }).catch(() => {}),
  );
  await new Promise((r) => setTimeout(r, Math.max(0, until - wall())));
  await stop();
  await Promise.race([Promise.all(jobs), new Promise((r) => setTimeout(r, 2000))]);
  process.stdout.write(`${JSON.stringify({ starts: starts.filter((t) => t < until), highest })}\n`);
  counter.disconnect();
} else if (mode === 'hold') {
  void run(() => {
    process.stdout.write('holding\n');
    return new Promise(() => {});
  }).catch(() => {});
  await new Promise(() => {});
}
if (mode !== 'rate') await stop();
client.disconnect();
process.exit(0);
