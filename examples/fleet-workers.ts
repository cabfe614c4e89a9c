/**
 * A fleet of workers sharing one external-API limit and one database budget.
 *
 *   npx tsx examples/fleet-workers.ts
 *
 * Starts its own redis-server on a free port, then 4 worker processes. Each
 * has its own ioredis connection, its own RedisFleetStore and two
 * Schedulers on shared fleet keys:
 *
 * - `api`: the external API allows 50 requests/s (burst 5) to the whole fleet;
 *   every worker wants far more (each keeps 100 calls queued).
 * - `db`: the database takes a weighted load of 8 (a report of cost 1..4 holds
 *   that many units while it runs, 100-300 ms); every worker keeps 4 queued.
 *
 * Every second each worker prints its API calls and reports, and the
 * fleet-wide DB load read from a counter in Redis that every report adds its
 * cost to while it runs. At 3 s worker 4 is killed with SIGKILL in the middle
 * of its reports: its DB units stay taken until their leases expire (`lease`
 * 1.5 s), then the other three use them; the API limit is shared by three.
 *
 * Requires redis-server (`apt-get install redis-server`).
 */

import { type ChildProcess, fork, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { RedisFleetStore, Scheduler } from '../src/index.js';

const WORKERS = 4;
const SECONDS = 8;
const KILL_AT_S = 3;
const LOAD_KEY = 'example:db-load-by-worker';

interface Tick {
  worker: number;
  api: number;
  reports: number;
}

async function worker(port: number, id: number): Promise<void> {
  const client = new Redis({ port, host: '127.0.0.1' });
  const store = new RedisFleetStore({ client, onError: 'local', expectedWorkers: WORKERS, timeout: 200 });
  const api = new Scheduler({ store, key: 'api', rate: '50/s', burst: 5 });
  const db = new Scheduler({ store, key: 'db', concurrency: 8, lease: '1.5s', pollInterval: 10 });
  let apiCalls = 0;
  let reports = 0;
  const callApi = async (): Promise<void> => {
    apiCalls++; // a fetch() to the API would go here
  };
  // The database's load, per worker: a worker's share vanishes with its connections when it dies.
  const report = async (cost: number): Promise<void> => {
    await client.hincrby(LOAD_KEY, `w${id}`, cost);
    await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
    await client.hincrby(LOAD_KEY, `w${id}`, -cost);
    reports++;
  };
  const feed = (): void => {
    while (api.size < 100) void api.schedule(callApi).catch(() => {});
    while (db.size < 4) {
      const cost = 1 + Math.floor(Math.random() * 4);
      void db.schedule(() => report(cost), { cost }).catch(() => {});
    }
  };
  feed();
  const timer = setInterval(feed, 20);
  process.send?.('ready');
  process.on('message', async (message: string) => {
    if (message === 'tick') {
      process.send?.({ worker: id, api: apiCalls, reports } satisfies Tick);
      apiCalls = 0;
      reports = 0;
      return;
    }
    clearInterval(timer);
    api.clear();
    db.clear();
    await db.onIdle();
    client.disconnect();
    process.exit(0);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

async function main(): Promise<void> {
  const port = await freePort();
  const redis = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  redis.on('error', (error) => {
    console.error(`could not start redis-server (${error.message}): install it with apt-get install redis-server`);
    process.exit(1);
  });
  const probe = new Redis({ port, host: '127.0.0.1', retryStrategy: () => 50 });
  probe.on('error', () => {}); // until redis-server listens
  await probe.ping();
  const fleetView = new RedisFleetStore({ client: probe, onError: 'deny' });
  const dbDefaults = { ratePerSecond: Number.POSITIVE_INFINITY, burst: 1, concurrency: 8 };
  console.log(`redis-server on port ${port}; ${WORKERS} workers; API limit 50/s; DB budget 8 (reports of cost 1..4)\n`);
  const self = fileURLToPath(import.meta.url);
  const children = new Map<number, ChildProcess>();
  await Promise.all(
    Array.from({ length: WORKERS }, (_, i) => {
      const child = fork(self, ['worker', String(port), String(i + 1)], { execArgv: ['--import', 'tsx'] });
      children.set(i + 1, child);
      return new Promise((r) => child.once('message', r));
    }),
  );
  // start counting together: what each worker did while the others were still loading is dropped
  await Promise.all(
    [...children.values()].map(
      (child) =>
        new Promise((resolve) => {
          child.once('message', resolve);
          child.send('tick');
        }),
    ),
  );
  for (let second = 1; second <= SECONDS; second++) {
    await new Promise((r) => setTimeout(r, 1000));
    const ticks = await Promise.all(
      [...children.values()].map(
        (child) =>
          new Promise<Tick>((resolve) => {
            child.once('message', (tick: Tick) => resolve(tick));
            child.send('tick');
          }),
      ),
    );
    const load = await probe.hgetall(LOAD_KEY);
    const liveLoad = [...children.keys()].reduce((sum, w) => sum + Number(load[`w${w}`] ?? 0), 0);
    const leased = (await fleetView.inspect('db', dbDefaults)).inFlight;
    const shares = ticks.map(
      (t) => `w${t.worker} ${String(t.api).padStart(2)} api ${String(t.reports).padStart(2)} rep`,
    );
    const api = ticks.reduce((sum, t) => sum + t.api, 0);
    console.log(`s${second}: ${shares.join(' | ')} | fleet ${api} api/s; DB load ${liveLoad}/8, leased ${leased}/8`);
    if (second === KILL_AT_S) {
      const victim = children.get(WORKERS) as ChildProcess;
      children.delete(WORKERS);
      await new Promise((r) => setTimeout(r, 150)); // in the middle of its reports
      victim.kill('SIGKILL');
      console.log(`  -- worker ${WORKERS} killed with SIGKILL; its leases expire within the lease (1.5 s) --`);
    }
  }
  await Promise.all(
    [...children.values()].map((child) => {
      child.send('stop');
      return new Promise((r) => child.once('exit', r));
    }),
  );
  probe.disconnect();
  redis.kill('SIGKILL');
}

if (process.argv[2] === 'worker') await worker(Number(process.argv[3]), Number(process.argv[4]));
else await main();
