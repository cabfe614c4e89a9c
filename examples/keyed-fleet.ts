/**
 * A fleet sharing one limit through Redis, and what happens when Redis stops.
 *
 *   npx tsx examples/keyed-fleet.ts
 *
 * Starts its own redis-server on a free port, then three worker processes
 * (plain `node` processes, each with its own ioredis connection and its own
 * KeyedLimiter + RedisStore) that share one per-client limit: 5 requests/s
 * with a burst of 10 for the key `client-42`.
 *
 * 1. Shared limit: each worker offers 20 requests/s for 2 s (120 in all). The
 *    fleet admits at most burst + rate * T = 10 + 5 * 2 = 20, whichever
 *    worker asks: three separate in-memory limiters would admit 60.
 * 2. Failure policy: for each of 'allow', 'deny' and 'local', the workers run
 *    for 3 s while Redis is killed after 1 s and started again after 2 s. Each
 *    worker prints what it admitted in each second and the events it saw
 *    (`degraded`, `recovered`): fail-open admits everything while Redis is
 *    down, fail-closed nothing, 'local' falls back to an in-memory bucket per
 *    worker (so the fleet admits up to 3x the limit) and recovers by itself.
 *
 * Requires redis-server (`apt-get install redis-server`).
 */

import { type ChildProcess, fork, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { type FailurePolicy, KeyedLimiter, RedisStore } from '../src/index.js';

const RATE = 5;
const BURST = 10;
const WORKERS = 3;
const KEY = 'client-42';

interface RunCommand {
  label: string;
  policy: FailurePolicy;
  seconds: number;
  offeredPerSecond: number;
}

/** What one worker did in one run. */
export interface WorkerReport {
  worker: number;
  label: string;
  /** Admitted per second of the run. */
  admitted: number[];
  offered: number[];
  events: string[];
}

// ---------------------------------------------------------------- worker

async function worker(port: number, id: number): Promise<void> {
  // Reconnect within 200 ms rather than ioredis's default back-off of up to 2 s, so that
  // the fleet is back on the shared limit soon after Redis is.
  const client = new Redis({ port, host: '127.0.0.1', retryStrategy: (times) => Math.min(times * 50, 200) });
  client.on('error', () => {}); // the store reports failures through its own events
  const send = (message: unknown) => process.send?.(message);
  process.on('message', async (command: RunCommand) => {
    const store = new RedisStore({ client, prefix: command.label, onError: command.policy, timeout: 100 });
    const startMs = performance.now();
    const events: string[] = [];
    const at = () => `${((performance.now() - startMs) / 1000).toFixed(2)} s`;
    store.on('degraded', ({ error }) => events.push(`degraded at ${at()}: ${error.message}`));
    store.on('recovered', ({ downMs }) => events.push(`recovered at ${at()} after ${Math.round(downMs)} ms`));
    const limiter = new KeyedLimiter({ rate: RATE, burst: BURST, store });
    const admitted: number[] = [];
    const offered: number[] = [];
    const intervalMs = 1000 / command.offeredPerSecond;
    for (let second = 0; second < command.seconds; second++) {
      admitted.push(0);
      offered.push(0);
      for (let i = 0; i < command.offeredPerSecond; i++) {
        const due = startMs + second * 1000 + i * intervalMs;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        offered[second] = (offered[second] ?? 0) + 1;
        if ((await limiter.tryTake(KEY)).allowed) admitted[second] = (admitted[second] ?? 0) + 1;
      }
    }
    store.close();
    send({ worker: id, label: command.label, admitted, offered, events } satisfies WorkerReport);
  });
  send('ready');
}

// ---------------------------------------------------------------- main

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  child.on('error', (error) => {
    console.error(`could not start redis-server (${error.message}): install it with apt-get install redis-server`);
    process.exit(1);
  });
  const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 20 });
  probe.on('error', () => {});
  await probe.connect().catch(() => {});
  await probe.ping();
  probe.disconnect();
  return child;
}

function stopRedis(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

async function run(
  workers: ChildProcess[],
  command: RunCommand,
  during?: (elapsedMs: number) => Promise<void>,
): Promise<WorkerReport[]> {
  const reports = workers.map(
    (w) =>
      new Promise<WorkerReport>((resolve) => {
        const onMessage = (m: WorkerReport) => {
          if (m.label !== command.label) return;
          w.off('message', onMessage);
          resolve(m);
        };
        w.on('message', onMessage);
      }),
  );
  for (const w of workers) w.send(command);
  await during?.(0);
  return Promise.all(reports);
}

function print(log: (line: string) => void, reports: WorkerReport[], seconds: number): void {
  const header = Array.from({ length: seconds }, (_, s) => `  s${s + 1}`).join('');
  log(`  worker |${header} | admitted / offered`);
  const totals = new Array<number>(seconds).fill(0);
  for (const r of reports.sort((a, b) => a.worker - b.worker)) {
    const cells = r.admitted.map((a, s) => {
      totals[s] = (totals[s] ?? 0) + a;
      return String(a).padStart(4);
    });
    const sum = r.admitted.reduce((x, y) => x + y, 0);
    const offered = r.offered.reduce((x, y) => x + y, 0);
    log(`       ${r.worker} |${cells.join('')} | ${sum} / ${offered}`);
  }
  const all = totals.reduce((x, y) => x + y, 0);
  log(`   fleet |${totals.map((t) => String(t).padStart(4)).join('')} | ${all}`);
  for (const r of reports) for (const e of r.events) log(`  worker ${r.worker}: ${e}`);
}

/** Options for {@link main}. */
export interface KeyedFleetExampleOptions {
  /** Where to print. @default console.log */
  log?: (line: string) => void;
}

/** What the example measured: the shared run, and the run of each failure policy. */
export interface KeyedFleetExampleResult {
  shared: WorkerReport[];
  failures: Record<FailurePolicy, WorkerReport[]>;
}

/** The limits the workers share. */
export const fleetLimits = { rate: RATE, burst: BURST, workers: WORKERS } as const;

export async function main(options: KeyedFleetExampleOptions = {}): Promise<KeyedFleetExampleResult> {
  const log = options.log ?? console.log;
  const port = await freePort();
  let redis = await startRedis(port);
  const self = fileURLToPath(import.meta.url);
  const workers = Array.from({ length: WORKERS }, (_, i) =>
    fork(self, ['worker', String(port), String(i + 1)], { execArgv: ['--import', 'tsx'] }),
  );
  await Promise.all(workers.map((w) => new Promise<void>((resolve) => w.once('message', () => resolve()))));
  try {
    log(
      `${WORKERS} worker processes share the limit of ${KEY}: ${RATE}/s with a burst of ${BURST}, state in Redis (port ${port})\n`,
    );
    log('1. Shared limit: each worker offers 20 requests/s for 2 s');
    const shared = await run(workers, { label: 'shared', policy: 'deny', seconds: 2, offeredPerSecond: 20 });
    print(log, shared, 2);
    const total = shared.reduce((sum, r) => sum + r.admitted.reduce((x, y) => x + y, 0), 0);
    log(
      `  the fleet admitted ${total}: at most burst + rate * T = ${BURST} + ${RATE} * 2 = ${BURST + RATE * 2}` +
        ` (three separate limiters would admit ${WORKERS * (BURST + RATE * 2)})\n`,
    );

    log('2. Redis is killed after 1 s and started again (empty) after 2 s; each worker offers 10 requests/s');
    const failures: Partial<Record<FailurePolicy, WorkerReport[]>> = {};
    for (const policy of ['allow', 'deny', 'local'] as const) {
      log(`\n  onError: '${policy}'`);
      const reports = await run(
        workers,
        { label: `fail-${policy}`, policy, seconds: 3, offeredPerSecond: 10 },
        async () => {
          await new Promise((r) => setTimeout(r, 1000));
          await stopRedis(redis);
          await new Promise((r) => setTimeout(r, 1000));
          redis = await startRedis(port);
        },
      );
      print(log, reports, 3);
      failures[policy] = reports;
    }
    return { shared, failures: failures as Record<FailurePolicy, WorkerReport[]> };
  } finally {
    for (const w of workers) w.kill();
    await stopRedis(redis);
  }
}

if (process.argv[2] === 'worker') {
  await worker(Number(process.argv[3]), Number(process.argv[4]));
} else if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main();
}
