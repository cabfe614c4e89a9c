/**
 * KeyedLimiter against its peers, side by side in one process per section.
 *
 * Memory (`keyed`):
 * 1. Hot keys, about half refused: 1000 keys in turn against tokenpace's
 *    KeyedLimiter (MemoryStore), rate-limiter-flexible's RateLimiterMemory in
 *    its usual configuration (points per duration: a timer per key; a refusal
 *    is a rejected promise), limiter's TokenBucket kept in a Map, and a plain
 *    Map baseline (a counter per key: no limit at all). The per-key rate is
 *    set from a first measurement of ours so that about half of our calls are
 *    refused; the same rate is given to every peer, and the table says what
 *    share each admitted.
 * 2. 1,000,000 new keys, one decision each: decisions per second (the
 *    median of three fresh runs per contender, interleaved, and its ratio to
 *    the plain Map's) and heap per live key (heap and array buffers, after a
 *    forced GC, with the structure still alive, so the key strings count).
 *
 * Redis (`keyed-redis`), on one redis-server started for the run: KeyedLimiter
 * with RedisStore against RateLimiterRedis, each with ioredis and with
 * node-redis (ours compared with the peer on the same client, round by round),
 * one call at a time and 64 in flight, over 1000 hot keys, with the CPU per
 * decision of the client, of redis-server and of the command in Redis; exact
 * admission under 64 in flight on one key; and redis-benchmark's raw ceiling
 * (64 connections, one decision per call) for the keyed program as a Function
 * and as a script.
 */

import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Redis } from 'ioredis';
import { TokenBucket as LimiterBucket } from 'limiter';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import { createClient } from 'redis';
import { KeyedLimiter, type MemoryStore, RedisStore } from '../src/index.js';
import { KEYED_LUA } from '../src/keyed/redis-script.js';
import { LUA_PRELUDE } from '../src/redis/lua-script.js';
import { freePort, startRedis, waitForPing } from '../test/helpers/redis-server.js';
import {
  bundledProbe,
  compare,
  formatOps,
  keep,
  type Measured,
  median,
  missingTool,
  ratioCells,
  runProbe,
  type Section,
  table,
} from './harness.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function settledMemory(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    await tick();
    gc();
  }
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

const HOT_KEYS = 1000;
const hotKeys = Array.from({ length: HOT_KEYS }, (_, i) => `client:${i}`);

interface Counted {
  admitted: number;
  total: number;
}
const share = (c: Counted) => `${((100 * c.admitted) / Math.max(1, c.total)).toFixed(0)} %`;

function rowsWithShare(measured: Measured[], counts: Counted[], baseline: string): string[][] {
  const base = measured.find((m) => m.name === baseline)?.opsPerSecond ?? Number.NaN;
  return measured.map((m, i) => [
    m.name,
    formatOps(m.opsPerSecond),
    `${(m.opsPerSecond / base).toFixed(2)}x`,
    share(counts[i] as Counted),
  ]);
}

// ---------------------------------------------------------------- memory

/**
 * Half of the calls go to keys that are drained (a burst of 1e9 spent at once, a refill of
 * 1 per 1000 s) and half to keys that hold enough for the whole run: exactly half refused for
 * every contender, however fast it is.
 */
async function memoryHot(): Promise<string> {
  const burst = 1e9;
  const rate = 0.001;
  const open = Array.from({ length: HOT_KEYS / 2 }, (_, i) => `open:${i}`);
  const drained = Array.from({ length: HOT_KEYS / 2 }, (_, i) => `drained:${i}`);
  const keys = open.flatMap((key, i) => [key, drained[i] as string]);

  const ours = new KeyedLimiter({ rate, burst, maxKeys: HOT_KEYS });
  const rlf = new RateLimiterMemory({ points: burst, duration: 3600 });
  const buckets = new Map<string, LimiterBucket>();
  const plain = new Map<string, number>();
  const bucketFor = (key: string) => {
    let bucket = buckets.get(key);
    if (bucket === undefined) {
      bucket = new LimiterBucket({ bucketSize: burst, tokensPerInterval: rate * 3600, interval: 'hour' });
      bucket.content = burst; // limiter's buckets start empty; ours and the others start full
      buckets.set(key, bucket);
    }
    return bucket;
  };
  for (const key of drained) {
    await ours.tryTake(key, burst);
    await rlf.consume(key, burst);
    bucketFor(key).tryRemoveTokens(burst);
  }
  const counts: Counted[] = [0, 1, 2, 3].map(() => ({ admitted: 0, total: 0 }));
  let cursor = 0;
  const next = () => keys[cursor++ % HOT_KEYS] as string;
  const measured = await compare(
    [
      {
        name: 'plain Map (a counter, no limit)',
        run(n) {
          const c = counts[0] as Counted;
          for (let i = 0; i < n; i++) {
            const key = next();
            plain.set(key, (plain.get(key) ?? 0) + 1);
          }
          c.admitted += n;
          c.total += n;
        },
      },
      {
        name: 'tokenpace KeyedLimiter (memory)',
        async run(n) {
          const c = counts[1] as Counted;
          for (let i = 0; i < n; i++) if ((await ours.tryTake(next())).allowed) c.admitted++;
          c.total += n;
        },
      },
      {
        name: 'rate-limiter-flexible RateLimiterMemory',
        async run(n) {
          const c = counts[2] as Counted;
          for (let i = 0; i < n; i++) {
            try {
              await rlf.consume(next());
              c.admitted++;
            } catch {
              // refused: a rejected promise
            }
          }
          c.total += n;
        },
      },
      {
        name: 'limiter TokenBucket in a Map',
        run(n) {
          const c = counts[3] as Counted;
          for (let i = 0; i < n; i++) if (bucketFor(next()).tryRemoveTokens(1)) c.admitted++;
          c.total += n;
        },
      },
    ],
    { rounds: 5, sampleMs: 200 },
  );
  const ourOps = measured[1]?.opsPerSecond ?? Number.NaN;
  const rlfOps = measured[2]?.opsPerSecond ?? Number.NaN;
  return [
    `#### Hot keys: ${HOT_KEYS} keys in turn, half of them drained (half the calls refused)`,
    '',
    table(
      ['contender', 'decisions', 'vs plain Map', 'admitted'],
      rowsWithShare(measured, counts, measured[0]?.name ?? ''),
    ),
    '',
    `KeyedLimiter / RateLimiterMemory: ${(ourOps / rlfOps).toFixed(2)}x (goal: 3x). ` +
      "limiter's TokenBucket is synchronous (no promise per decision) and keeps no bound on its Map.",
  ].join('\n');
}

async function memoryNewKeys(): Promise<string> {
  const N = 1_000_000;
  // `once`: measured in one run only, after every other run (RateLimiterMemory keeps a timer, and so
  // its keys, for an hour: later runs would pay for its leftover heap).
  const contenders: { name: string; once?: boolean; run(): Promise<unknown> | unknown }[] = [
    {
      name: 'plain Map (a number per key)',
      run() {
        const map = new Map<string, number>();
        for (let i = 0; i < N; i++) map.set(`user:${i}`, 1);
        return map;
      },
    },
    {
      name: 'tokenpace KeyedLimiter (memory)',
      async run() {
        const limiter = new KeyedLimiter({ rate: 10, burst: 20, maxKeys: N });
        for (let i = 0; i < N; i++) await limiter.tryTake(`user:${i}`);
        if ((limiter.store as MemoryStore).size !== N) throw new Error('keys were evicted');
        return limiter;
      },
    },
    {
      name: 'rate-limiter-flexible RateLimiterMemory',
      once: true,
      async run() {
        const rlf = new RateLimiterMemory({ points: 20, duration: 3600 }); // keys stay while measured
        for (let i = 0; i < N; i++) await rlf.consume(`user:${i}`);
        return rlf;
      },
    },
    {
      name: 'limiter TokenBucket in a Map',
      run() {
        const map = new Map<string, LimiterBucket>();
        for (let i = 0; i < N; i++) {
          const bucket = new LimiterBucket({ bucketSize: 20, tokensPerInterval: 10, interval: 'second' });
          bucket.tryRemoveTokens(1);
          map.set(`user:${i}`, bucket);
        }
        return map;
      },
    },
  ];
  // Interleaved rounds (every contender once per round, the order alternating), each a fresh
  // structure: a slow phase of the shared machine falls on every contender, not on one.
  const ROUNDS = 3;
  const rates: number[][] = contenders.map(() => []);
  const bytes: number[][] = contenders.map(() => []);
  const repeated = contenders.flatMap((c, i) => (c.once ? [] : [i]));
  const schedule: number[][] = [];
  for (let round = 0; round < ROUNDS; round++) schedule.push(round % 2 === 1 ? [...repeated].reverse() : repeated);
  schedule.push(contenders.flatMap((c, i) => (c.once ? [i] : [])));
  for (const order of schedule) {
    for (const i of order) {
      const contender = contenders[i] as (typeof contenders)[number];
      const before = await settledMemory();
      const startMs = performance.now();
      let kept: unknown = await contender.run();
      const ms = performance.now() - startMs;
      const after = await settledMemory();
      rates[i]?.push((N * 1000) / ms);
      bytes[i]?.push((after - before) / N);
      kept = undefined;
      void kept;
    }
  }
  const plainOps = median(rates[0] as number[]);
  const rows = contenders.map((contender, i) => {
    const ops = median(rates[i] as number[]);
    return [
      contender.name,
      formatOps(ops),
      `${(ops / plainOps).toFixed(2)}x`,
      (rates[i] as number[]).map((r) => formatOps(r)).join(', '),
      `${median(bytes[i] as number[]).toFixed(0)} B`,
    ];
  });
  return [
    `#### ${N.toLocaleString('en')} new keys, one decision each (median of ${ROUNDS} interleaved fresh runs; RateLimiterMemory: one, last)`,
    '',
    table(['contender', 'new keys', 'vs plain Map', 'runs', 'heap per live key'], rows),
    '',
    'Heap is `heapUsed + arrayBuffers` after a forced GC with the structure alive, so key strings count. ' +
      'Goal for tokenpace: above 600k/s and under 150 B per key.',
  ].join('\n');
}

/**
 * Limits by plan against one pair for every key, in one run: the same 1000 hot keys (half drained),
 * the same store, each key's limits from a table of plans (a plan name per key, read from a Map) or
 * from a function returning one of two constant objects. Goal: within 10 % of the single plan.
 */
async function memoryPlans(): Promise<string> {
  const burst = 1e9;
  const rate = 0.001;
  const open = Array.from({ length: HOT_KEYS / 2 }, (_, i) => `open:${i}`);
  const drained = Array.from({ length: HOT_KEYS / 2 }, (_, i) => `drained:${i}`);
  const keys = open.flatMap((key, i) => [key, drained[i] as string]);
  const planOf = new Map(keys.map((key, i) => [key, i % 4 === 0 ? 'paid' : 'free'] as const));
  const plans = { free: { rate, burst }, paid: { rate: 2 * rate, burst } };
  const single = new KeyedLimiter({ rate, burst, maxKeys: HOT_KEYS });
  const singleLooked = new KeyedLimiter({ rate, burst, maxKeys: HOT_KEYS });
  const byTable = new KeyedLimiter({ plans, plan: (key) => planOf.get(key) ?? 'free', maxKeys: HOT_KEYS });
  const byFunction = new KeyedLimiter({
    limits: (key) => (planOf.get(key) === 'paid' ? plans.paid : plans.free),
    maxKeys: HOT_KEYS,
  });
  const limiters = [single, singleLooked, byTable, byFunction];
  for (const limiter of limiters) for (const key of drained) await limiter.tryTake(key, burst);
  const counts: Counted[] = limiters.map(() => ({ admitted: 0, total: 0 }));
  const cursors = limiters.map(() => 0);
  let looked = 0;
  const contender = (name: string, i: number, lookUp = false) => ({
    name,
    async run(n: number) {
      const limiter = limiters[i] as KeyedLimiter;
      const c = counts[i] as Counted;
      let cursor = cursors[i] as number;
      for (let j = 0; j < n; j++) {
        const key = keys[cursor++ % HOT_KEYS] as string;
        // The plan functions' own work (a Map lookup of the key's plan), done by the caller here.
        if (lookUp && planOf.get(key) === 'paid') looked++;
        if ((await limiter.tryTake(key)).allowed) c.admitted++;
      }
      cursors[i] = cursor;
      c.total += n;
    },
  });
  const measured = await compare(
    [
      contender('KeyedLimiter, one rate and burst', 0),
      contender("KeyedLimiter, one rate and burst, and the plan functions' Map lookup", 1, true),
      contender('KeyedLimiter, plans + plan(key)', 2),
      contender('KeyedLimiter, limits(key)', 3),
    ],
    { rounds: 7, sampleMs: 200 },
  );
  keep(looked);
  const [, looking, byPlan, byLimits] = measured;
  const vsLooking = (m: Measured | undefined) =>
    `${((m?.opsPerSecond ?? Number.NaN) / (looking?.opsPerSecond ?? Number.NaN)).toFixed(2)}x`;
  return [
    `#### Limits by plan: ${HOT_KEYS} hot keys, half drained, two plans`,
    '',
    table(
      ['contender', 'decisions', 'vs one plan', 'admitted'],
      rowsWithShare(measured, counts, measured[0]?.name ?? ''),
    ),
    '',
    `Against one plan doing the plan functions' own Map lookup: plans + plan(key) ${vsLooking(byPlan)}, ` +
      `limits(key) ${vsLooking(byLimits)}.`,
    '',
    "Goal: limits by plan within 10 % of one rate and burst, the plan function's own work apart.",
  ].join('\n');
}

export const keyedPlansSection: Section = {
  id: 'keyed-plans',
  title: 'Keyed limits by plan in memory',
  async run() {
    return memoryPlans();
  },
};

export const keyedSection: Section = {
  id: 'keyed',
  title: 'Keyed limits in memory',
  async run() {
    return [await memoryHot(), '', await memoryNewKeys()].join('\n');
  },
};

// ---------------------------------------------------------------- redis

function redisBenchmark(port: number, command: string[]): Promise<string> {
  return new Promise((resolve) => {
    // One decision per call: key client:<rand>, try, cost 1, 100/s, burst 200, no global.
    const args = ['-p', String(port), '-c', '64', '-n', '50000', '-r', '1000', '-q'];
    execFile('redis-benchmark', [...args, ...command], { encoding: 'utf8', timeout: 60_000 }, (error, stdout) => {
      if (error) resolve(`(redis-benchmark failed: ${error.message})`);
      const match = /([\d.]+) requests per second/.exec(stdout);
      resolve(match ? formatOps(Number(match[1])) : `(no figure in: ${stdout.trim().slice(-200)})`);
    });
  });
}

async function concurrently(n: number, inFlight: number, decide: () => Promise<boolean>, c: Counted): Promise<void> {
  let started = 0;
  const worker = async () => {
    while (started < n) {
      started++;
      if (await decide()) c.admitted++;
      c.total++;
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, n) }, worker));
}

/** CPU per decision, summed over a contender's samples: the client's (this process), redis-server's, and the command's own time in Redis. */
interface CpuCount {
  calls: number;
  clientUs: number;
  serverUs: number;
  commandUs: number;
  commandCalls: number;
  command: string;
}

/** redis-server's CPU time so far (user + system), us, from /proc (Linux). */
function serverCpuUs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100; // USER_HZ
  } catch {
    return Number.NaN;
  }
}

/** INFO commandstats: calls and usec of the commands that carry decisions. */
async function commandStats(admin: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const text = String(await admin.info('commandstats'));
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const m of text.matchAll(/cmdstat_(evalsha|eval):calls=(\d+),usec=(\d+)/g)) {
    stats.set(m[1] as string, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return stats;
}

/** `run` with its CPU counted into `count`. */
function counted(
  count: CpuCount,
  pid: number,
  admin: Redis,
  run: (n: number) => Promise<void>,
): (n: number) => Promise<void> {
  return async (n) => {
    const before = await commandStats(admin);
    const server = serverCpuUs(pid);
    const client = process.cpuUsage();
    await run(n);
    const used = process.cpuUsage(client);
    count.serverUs += serverCpuUs(pid) - server;
    count.clientUs += used.user + used.system;
    count.calls += n;
    for (const [command, after] of await commandStats(admin)) {
      const calls = after.calls - (before.get(command)?.calls ?? 0);
      if (calls < n / 2) continue; // another contender's, or a reload
      count.command = command;
      count.commandCalls += calls;
      count.commandUs += after.usec - (before.get(command)?.usec ?? 0);
    }
  };
}

const us = (x: number) => (Number.isFinite(x) ? `${x.toFixed(1)} us` : 'n/a');

/**
 * One call at a time, each contender alone in a process (bench/redis-client-probe.ts, plain
 * JavaScript), on the same redis-server: no other contender's compiled code or garbage in the
 * process. Interleaved rounds; each ratio is the peer's wall time over ours within a round.
 */
async function alonePerProcess(port: number, rounds = 5, calls = 20_000): Promise<string> {
  const bundle = await bundledProbe(new URL('./redis-client-probe.ts', import.meta.url));
  const clients = ['ioredis', 'node-redis'];
  const wall = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    for (const client of clients) {
      for (const who of round % 2 === 0 ? ['ours', 'rlf'] : ['rlf', 'ours']) {
        const name = `${who}-${client}`;
        const line = await runProbe(bundle, [name, String(port), String(calls)]);
        const { wallNs, cpuNs } = JSON.parse(line) as { wallNs: number; cpuNs: number };
        wall.set(name, [...(wall.get(name) ?? []), wallNs]);
        cpu.set(name, [...(cpu.get(name) ?? []), cpuNs]);
      }
    }
  }
  const rows = clients.map((client) => {
    const ours = wall.get(`ours-${client}`) as number[];
    const peer = wall.get(`rlf-${client}`) as number[];
    const ratios = ours.map((t, r) => (peer[r] as number) / t);
    return [
      client,
      us(median(ours) / 1000),
      us(median(peer) / 1000),
      ...ratioCells(ratios),
      `${us(median(cpu.get(`ours-${client}`) as number[]) / 1000)} / ${us(median(cpu.get(`rlf-${client}`) as number[]) / 1000)}`,
    ];
  });
  return table(
    [
      'client',
      'RedisStore, wall per decision',
      'RateLimiterRedis',
      'ours vs the peer (median)',
      'ratio range',
      'client CPU, ours / peer',
    ],
    rows,
  );
}

/**
 * Instructions redis-server runs per decision, one call at a time from the probe of
 * {@link alonePerProcess}: the script, the commands it calls, the parsing and the socket work, on a
 * redis-server under callgrind. Counters are zeroed before a probe run and dumped after it; the
 * difference of two runs (n and a larger n) over the difference of n cancels connecting, loading
 * and warming up (a first run makes the keys). A measure that does not move with the machine's load.
 */
async function serverInstructions(): Promise<string> {
  const missing = missingTool(['valgrind', 'callgrind_control'], "redis-server's instruction counts");
  if (missing !== undefined) return missing;
  const bundle = await bundledProbe(new URL('./redis-client-probe.ts', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'tokenpace-callgrind-'));
  const port = await freePort();
  const redis = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${join(dir, 'cg.%p')}`,
      ...['redis-server', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir],
    ],
    { stdio: 'ignore' },
  );
  const control = (flag: string) => spawnSync('callgrind_control', [flag, String(redis.pid)], { encoding: 'utf8' });
  /** Instructions of one probe run of `n` decisions by `who`. */
  const counted = async (who: string, n: number): Promise<number> => {
    control('-z');
    await runProbe(bundle, [who, String(port), String(n)]);
    control('-d');
    let total = 0;
    for (const file of readdirSync(dir).filter((f) => f.startsWith('cg.'))) {
      const match = /^(?:summary|totals): (\d+)/m.exec(readFileSync(join(dir, file), 'utf8'));
      if (match !== null) total = Math.max(total, Number(match[1]));
      rmSync(join(dir, file));
    }
    return total;
  };
  try {
    await waitForPing(port, 60_000); // valgrind starts slowly
    const [short, long] = [1000, 3000];
    const rows = [];
    for (const client of ['ioredis', 'node-redis']) {
      const per: number[] = [];
      for (const who of [`ours-${client}`, `rlf-${client}`]) {
        await runProbe(bundle, [who, String(port), '0']); // the keys, made once
        per.push(((await counted(who, long)) - (await counted(who, short))) / (long - short));
      }
      const [ours, peer] = per as [number, number];
      rows.push([
        client,
        `${(ours / 1000).toFixed(1)}k`,
        `${(peer / 1000).toFixed(1)}k`,
        `${(peer / ours).toFixed(2)}x`,
      ]);
    }
    return table(['client', 'RedisStore', 'RateLimiterRedis', 'ours vs the peer (its count over ours)'], rows);
  } finally {
    redis.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

export const keyedRedisSection: Section = {
  id: 'keyed-redis',
  title: 'Keyed limits in Redis',
  async run() {
    const server = await startRedis();
    const pid = server.process.pid as number;
    const io = new Redis({ port: server.port, host: '127.0.0.1' });
    const admin = new Redis({ port: server.port, host: '127.0.0.1' });
    const nr = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
    await nr.connect();
    const out: string[] = [
      `Load average at the start: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(', ')}.`,
      '',
    ];
    try {
      // Half the keys drained, as in the memory section: exactly half of every contender's calls refused.
      const burst = 1e9;
      const keys = hotKeys.map((key, i) => (i % 2 === 0 ? `open:${key}` : `drained:${key}`));
      for (const inFlight of [1, 64]) {
        const make = (client: Redis | typeof nr, prefix: string) =>
          new KeyedLimiter({
            rate: 0.001,
            burst,
            store: new RedisStore({ client, prefix, onError: 'deny', timeout: 5000 }),
          });
        const ours = make(io, `b${inFlight}`);
        const oursNr = make(nr, `bn${inFlight}`);
        const rlf = new RateLimiterRedis({
          storeClient: io,
          points: burst,
          duration: 3600,
          keyPrefix: `rlf${inFlight}`,
        });
        const rlfNr = new RateLimiterRedis({
          storeClient: nr,
          useRedisPackage: true,
          points: burst,
          duration: 3600,
          keyPrefix: `rlfn${inFlight}`,
        });
        for (const key of keys.filter((k) => k.startsWith('drained:'))) {
          await ours.tryTake(key, burst);
          await oursNr.tryTake(key, burst);
          await rlf.consume(key, burst);
          await rlfNr.consume(key, burst);
        }
        let cursor = 0;
        const next = () => keys[cursor++ % HOT_KEYS] as string;
        const byUs = (limiter: KeyedLimiter) => async () => (await limiter.tryTake(next())).allowed;
        const byPeer = (peer: RateLimiterRedis) => () =>
          peer.consume(next()).then(
            () => true,
            () => false,
          );
        const entries: [string, () => Promise<boolean>][] = [
          ['tokenpace RedisStore (ioredis)', byUs(ours)],
          ['rate-limiter-flexible RateLimiterRedis (ioredis)', byPeer(rlf)],
          ['tokenpace RedisStore (node-redis)', byUs(oursNr)],
          ['rate-limiter-flexible RateLimiterRedis (node-redis)', byPeer(rlfNr)],
        ];
        const counts: Counted[] = entries.map(() => ({ admitted: 0, total: 0 }));
        const cpu: CpuCount[] = entries.map(() => ({
          calls: 0,
          clientUs: 0,
          serverUs: 0,
          commandUs: 0,
          commandCalls: 0,
          command: '',
        }));
        const rounds = inFlight === 1 ? 9 : 5;
        const measured = await compare(
          entries.map(([name, decide], i) => ({
            name,
            run: counted(cpu[i] as CpuCount, pid, admin, (n) =>
              concurrently(n, inFlight, decide, counts[i] as Counted),
            ),
          })),
          { rounds, sampleMs: 300, warmupMs: 600 },
        );
        // Each of ours against the peer on the same client, round by round (the same phase of the machine).
        const rows = measured.map((m, i) => {
          const peer = measured[i % 2 === 0 ? i + 1 : i] as (typeof measured)[number];
          const ratios = m.samples.map((x, r) => x / (peer.samples[r] as number));
          return [
            m.name,
            formatOps(m.opsPerSecond),
            `${formatOps(Math.min(...m.samples))} to ${formatOps(Math.max(...m.samples))}`,
            ...ratioCells(ratios),
            share(counts[i] as Counted),
          ];
        });
        out.push(
          `#### ${inFlight === 1 ? 'One call at a time' : `${inFlight} calls in flight`}: ${HOT_KEYS} hot keys, half of them drained (${rounds} interleaved rounds)`,
          '',
          table(
            [
              'contender',
              'decisions (median)',
              'range',
              'vs the peer, same client (median)',
              'ratio range',
              'admitted',
            ],
            rows,
          ),
          '',
        );
        if (inFlight === 1) {
          out.push(
            'Per decision, one call at a time, over every round: CPU of this process (`process.cpuUsage`), of redis-server (`/proc/<pid>/stat`, 10 ms ticks), and the command itself in Redis (`INFO commandstats`).',
            '',
            table(
              ['contender', 'wall', 'client CPU', 'redis-server CPU', 'command in Redis'],
              measured.map((m, i) => {
                const c = cpu[i] as CpuCount;
                return [
                  m.name,
                  us(1e6 / m.opsPerSecond),
                  us(c.clientUs / c.calls),
                  us(c.serverUs / c.calls),
                  `${us(c.commandUs / Math.max(1, c.commandCalls))} (${c.command.toUpperCase()})`,
                ];
              }),
            ),
            '',
          );
        }
      }

      const rounds = 5;
      const calls = 20_000;
      out.push(
        `#### One call at a time, each contender alone in a process: ${calls.toLocaleString('en-US')} decisions after 3,000 to warm up, ${rounds} interleaved rounds`,
        '',
        await alonePerProcess(server.port, rounds, calls),
        '',
        'The same 1000 keys, half of them drained. In one process, as in the tables above, the contenders share the JIT and the collector, and the ratio moves more from round to round.',
        '',
        '#### Instructions per decision in redis-server, one call at a time (callgrind)',
        '',
        await serverInstructions(),
        '',
        'The same probe and keys as the table above, against a redis-server under callgrind: the script, the commands it calls, the parsing and the socket work. The difference of a run of 3,000 decisions and one of 1,000, over 2,000; it does not move with the load on the machine.',
        '',
      );

      // Exactness: 64 in flight, 3000 calls, one key with a burst of 1000 and no refill to speak of.
      const exact: string[][] = [];
      const oneKey = new KeyedLimiter({
        rate: 0.001,
        burst: 1000,
        store: new RedisStore({ client: io, prefix: 'exact', onError: 'deny', timeout: 5000 }),
      });
      const rlfOne = new RateLimiterRedis({ storeClient: io, points: 1000, duration: 3600, keyPrefix: 'rlfexact' });
      for (const [name, decide] of [
        ['tokenpace RedisStore', async () => (await oneKey.tryTake('one')).allowed],
        [
          'rate-limiter-flexible RateLimiterRedis',
          () =>
            rlfOne.consume('one').then(
              () => true,
              () => false,
            ),
        ],
      ] as const) {
        const c = { admitted: 0, total: 0 };
        await concurrently(3000, 64, decide, c);
        exact.push([name, String(c.total), String(c.admitted), c.admitted === 1000 ? 'exact' : 'WRONG']);
      }
      // The raw ceiling of one decision per call: the keyed script through EVALSHA.
      const sha = String(await io.script('LOAD', `${LUA_PRELUDE}\n${KEYED_LUA}`));
      // Redis's time, rate 100/s, burst 200, no global bucket, try, cost 1.
      const call = ['1', 'rb:k:client:__rand_int__', '', '100:200', '', 't1'];
      out.push(
        '#### Exact admission: 3000 calls, 64 in flight, one key with a burst of 1000',
        '',
        table(['contender', 'calls', 'admitted', ''], exact),
        '',
        `#### redis-benchmark, one decision per call (64 connections): EVALSHA ${await redisBenchmark(server.port, ['EVALSHA', sha, ...call])}`,
        '',
        'Our client batches the decisions in flight into calls of up to 32, over one connection. ' +
          'RateLimiterRedis sends EVALSHA with ioredis and EVAL (the script text every time) with node-redis.',
      );
    } finally {
      io.disconnect();
      admin.disconnect();
      await nr.close();
      await server.stop();
    }
    return out.join('\n');
  },
};
