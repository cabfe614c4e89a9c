/**
 * The Scheduler against its peers, side by side in one process run:
 *
 * 1. Throughput of no-op jobs at concurrency 1 and 16, against p-queue,
 *    p-limit and bottleneck, with an unbounded `Promise.all` of the same jobs
 *    as the ceiling, and a hand-written bare pool (workers over an array, one
 *    promise per job: no queue, no options, no events) as the floor a
 *    general scheduler is measured against (interleaved rounds, medians: see
 *    harness.ts).
 * 2. Rate accuracy at 1000 jobs/s with burst 10 and burst 1, against p-queue
 *    (`interval`/`intervalCap`, and with `strict: true`, its sliding window), bottleneck, p-throttle and limiter's
 *    RateLimiter: achieved/target over the run, and the most jobs started in
 *    any 100 ms and any 1 s next to the token bucket's bound, burst + rate * T.
 * 3. 40,000 jobs with distinct priorities (with and without maxWait),
 *    drained at concurrency 1, against p-queue.
 * 4. A flood of submissions against a full queue: heap retained after the
 *    flood (after a forced GC) and submissions turned away per second. Peers
 *    without a bounded queue hold every job; they get fewer submissions, and
 *    the table shows what each job costs them. p-queue is also shown bounded
 *    the way its docs suggest: the caller checks `size` before `add`.
 *
 * Timers fire about 1.15 ms late on this machine; every contender lives with
 * the same timers. `BENCH_RATE_SECONDS` (default 10) sets the length of each
 * rate run.
 */

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Bottleneck from 'bottleneck';
import { RateLimiter } from 'limiter';
import pLimit from 'p-limit';
import PQueue from 'p-queue';
import pThrottle from 'p-throttle';
import { Scheduler } from '../src/index.js';
import {
  bundledProbe,
  callgrindCount,
  compare,
  formatOps,
  type Measured,
  median,
  missingTool,
  ratioSpread,
  roundRatios,
  runProbe,
  type Section,
  table,
} from './harness.js';

const noop = (): void => {};
const asyncNoop = async (): Promise<void> => {};
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

async function settleHeap(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    await tick();
    gc();
  }
  return process.memoryUsage().heapUsed;
}

// ------------------------------------------------------------------ throughput

/**
 * The floor: a hand-written pool with the scheduler's shape and nothing else:
 * `add(fn)` returns one promise per job, at most `concurrency` run, the rest
 * wait in an array. No priorities, no bound, no options, no events.
 */
export function barePool(concurrency: number): (fn: () => Promise<unknown>) => Promise<unknown> {
  const waiting: (() => void)[] = [];
  let head = 0;
  let running = 0;
  const next = (): void => {
    running--;
    if (head < waiting.length) {
      const start = waiting[head] as () => void;
      waiting[head++] = undefined as unknown as () => void;
      start();
    } else if (head > 0) {
      waiting.length = 0;
      head = 0;
    }
  };
  const run = (fn: () => Promise<unknown>, resolve: (v: unknown) => void, reject: (e: unknown) => void): void => {
    running++;
    fn().then(
      (value) => {
        resolve(value);
        next();
      },
      (error: unknown) => {
        reject(error);
        next();
      },
    );
  };
  return (fn) =>
    new Promise((resolve, reject) => {
      if (running < concurrency) run(fn, resolve, reject);
      else waiting.push(() => run(fn, resolve, reject));
    });
}

const BARE_POOL = 'bare pool (add() over an array: the floor)';

/** Each run(n) submits n no-op jobs and awaits them all. */
function throughputContenders(concurrency: number) {
  const big = 2 ** 30;
  const ours = new Scheduler({ concurrency, maxQueue: big });
  const pq = new PQueue({ concurrency });
  const limit = pLimit(concurrency);
  const bottleneck = new Bottleneck({ maxConcurrent: concurrency });
  const pool = barePool(concurrency);
  const all = (n: number, submit: () => Promise<unknown>) => {
    const promises = new Array<Promise<unknown>>(n);
    for (let i = 0; i < n; i++) promises[i] = submit();
    return Promise.all(promises);
  };
  return [
    { name: 'Promise.all (no limit: the ceiling)', run: (n: number) => all(n, asyncNoop) },
    { name: BARE_POOL, run: (n: number) => all(n, () => pool(asyncNoop)) },
    { name: 'tokenpace Scheduler', run: (n: number) => all(n, () => ours.schedule(asyncNoop)) },
    { name: 'p-queue', run: (n: number) => all(n, () => pq.add(asyncNoop)) },
    { name: 'p-limit', run: (n: number) => all(n, () => limit(asyncNoop)) },
    { name: 'bottleneck', run: (n: number) => all(n, () => bottleneck.schedule(asyncNoop)) },
  ];
}

/**
 * Each contender's sample is calibrated to take `sampleMs`, so a faster contender queues more jobs
 * at once; with long samples the garbage collector's work on that backlog dominates every figure.
 * Both sample lengths are shown.
 */
async function throughput(sampleMs: number): Promise<string> {
  const results: Measured[][] = [];
  for (const concurrency of [1, 16]) {
    const options = { rounds: 11, sampleMs, warmupMs: 500, sameSizeAs: BARE_POOL };
    results.push(await compare(throughputContenders(concurrency), options));
  }
  const [c1, c16] = results as [Measured[], Measured[]];
  const sizeOf = (ms: Measured[]) => (ms.find((m) => m.name === BARE_POOL)?.size ?? 0).toLocaleString('en-US');
  const opsOf = (ms: Measured[], name: string) => ms.find((m) => m.name === name)?.opsPerSecond ?? Number.NaN;
  const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
  const jobs = `Jobs per sample: ${sizeOf(c1)} at concurrency 1, ${sizeOf(c16)} at concurrency 16 (bottleneck: its own, to keep its samples short).`;
  return `${jobs}\n\n${table(
    ['contender', 'concurrency 1', 'vs bare pool', 'vs p-queue', 'concurrency 16', 'vs bare pool', 'vs p-queue'],
    c1.map((m, i) => {
      const m16 = c16[i] as Measured;
      return [
        m.name,
        formatOps(m.opsPerSecond),
        ratio(m.opsPerSecond, opsOf(c1, BARE_POOL)),
        ratio(m.opsPerSecond, opsOf(c1, 'p-queue')),
        formatOps(m16.opsPerSecond),
        ratio(m16.opsPerSecond, opsOf(c16, BARE_POOL)),
        ratio(m16.opsPerSecond, opsOf(c16, 'p-queue')),
      ];
    }),
  )}`;
}

// ------------------------------------------------------------------ a queued burst

const BURST_JOBS = 200_000;

/** One burst: `n` no-op jobs submitted at once, all awaited; its wall time and its CPU time (ms). */
async function burstOnce(submit: () => Promise<unknown>): Promise<{ wallMs: number; cpuMs: number }> {
  await settleHeap();
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const promises = new Array<Promise<unknown>>(BURST_JOBS);
  for (let i = 0; i < BURST_JOBS; i++) promises[i] = submit();
  await Promise.all(promises);
  const wallMs = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

/**
 * 200,000 no-op jobs all queued at once (a batch import, a fan-out) to Scheduler({ concurrency: 16,
 * maxQueue: 200000 }) against the same bare pool of 16: interleaved rounds, each ratio taken within
 * its round, the median and the range. CPU time (the process's user + system) is shown next to wall
 * time: on a shared machine it does not count the time the process waited for a core.
 */
export async function queuedBurst(rounds = 15): Promise<string> {
  const pq = (): (() => Promise<unknown>) => {
    const q = new PQueue({ concurrency: 16 });
    return () => q.add(asyncNoop);
  };
  const contenders: [string, () => () => Promise<unknown>][] = [
    [
      BARE_POOL,
      () => {
        const pool = barePool(16);
        return () => pool(asyncNoop);
      },
    ],
    [
      'tokenpace Scheduler',
      () => {
        const s = new Scheduler({ concurrency: 16, maxQueue: BURST_JOBS });
        return () => s.schedule(asyncNoop);
      },
    ],
    ['p-queue', pq],
  ];
  const wall = contenders.map(() => [] as number[]);
  const cpu = contenders.map(() => [] as number[]);
  await burstOnce(contenders[1]?.[1]() as () => Promise<unknown>); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const [i, [, make]] of contenders.entries()) {
      const { wallMs, cpuMs } = await burstOnce(make());
      wall[i]?.push(wallMs);
      cpu[i]?.push(cpuMs);
    }
  }
  return table(
    ['contender', 'jobs/s (wall, median)', 'vs bare pool (wall)', 'vs bare pool (CPU time)'],
    contenders.map(([name], i) => [
      name,
      formatOps(BURST_JOBS / (median(wall[i] as number[]) / 1000)),
      ratioSpread(roundRatios(wall, i)),
      ratioSpread(roundRatios(cpu, i)),
    ]),
  );
}

/**
 * The same burst, each contender alone in a process (bench/scheduler-probe.ts, plain JavaScript):
 * its wall time with Node's default collector (parallel and concurrent, as a user's process runs),
 * and its CPU time under `--single-threaded` (the collector's work counted in the process, on one
 * thread: a measure the other core's load moves less). Per run, the median of its bursts after one
 * to warm up; interleaved rounds; each ratio is the bare pool's time over the contender's within a round.
 */
export async function queuedBurstPerProcess(rounds = 3, bursts = 6): Promise<string> {
  const bundle = await bundledProbe(new URL('./scheduler-probe.ts', import.meta.url));
  const who = [
    ['pool', BARE_POOL],
    ['ours', 'tokenpace Scheduler'],
    ['pqueue', 'p-queue'],
  ] as const;
  const wall = who.map(() => [] as number[]);
  const cpu = who.map(() => [] as number[]);
  const read = (line: string, what: string) =>
    median((new RegExp(`${what} ms ([0-9 ]+)`).exec(line)?.[1] ?? '').trim().split(' ').map(Number));
  for (let round = 0; round < rounds; round++) {
    for (const [i, [id]] of who.entries()) {
      const args = [id, String(bursts), String(BURST_JOBS)];
      wall[i]?.push(read(await runProbe(bundle, args, ['--expose-gc']), 'wall'));
      cpu[i]?.push(read(await runProbe(bundle, args, ['--single-threaded', '--expose-gc']), 'CPU'));
    }
  }
  const counts = await burstInstructions(bundle);
  const pool = typeof counts === 'string' ? undefined : counts.get('pool');
  return [
    table(
      [
        'contender',
        'jobs/s (wall, median)',
        'vs bare pool (wall)',
        'vs bare pool (CPU time, one thread)',
        'instructions per job',
        'vs bare pool (instructions)',
      ],
      who.map(([id, name], i) => {
        const ir = typeof counts === 'string' ? undefined : counts.get(id);
        return [
          name,
          formatOps(BURST_JOBS / (median(wall[i] as number[]) / 1000)),
          ratioSpread(roundRatios(wall, i)),
          ratioSpread(roundRatios(cpu, i)),
          ir === undefined ? 'not counted' : ir.toFixed(0),
          ir === undefined || pool === undefined ? 'not counted' : `${(pool / ir).toFixed(2)}x`,
        ];
      }),
    ),
    '',
    `Instructions: callgrind's count (valgrind) for the probe with ${COUNT_BURSTS[1]} bursts of ${COUNT_JOBS.toLocaleString('en-US')} jobs minus its count with ${COUNT_BURSTS[0]}, over the jobs between, each in a fresh process (\`node --single-threaded\`, fixed hash and random seeds, so the collector's work is counted too, on one thread): a count repeats to within an instruction per job. The ratio is the pool's count over the contender's (higher is faster). p-queue is not counted: at about 25,000 instructions a job its runs would take minutes.`,
    ...(typeof counts === 'string' ? ['', counts] : []),
  ].join('\n');
}

/** The bursts (fewer, more) and the jobs per burst of the instruction counts: 200,000 jobs between them. */
const COUNT_BURSTS = [3, 13] as const;
const COUNT_JOBS = 20_000;

/**
 * Instructions per job of the bare pool and of ours in the queued burst, under callgrind (two runs at a
 * time: a count does not depend on the load), or why there are none.
 */
async function burstInstructions(bundle: string): Promise<Map<string, number> | string> {
  const missing = missingTool(['valgrind'], 'the instruction counts');
  if (missing !== undefined) return missing;
  const count = async (id: string): Promise<[string, number]> => {
    const run = (bursts: number) => callgrindCount(bundle, [id, String(bursts), String(COUNT_JOBS)]);
    const [fewer, more] = [await run(COUNT_BURSTS[0]), await run(COUNT_BURSTS[1])];
    return [id, (more - fewer) / ((COUNT_BURSTS[1] - COUNT_BURSTS[0]) * COUNT_JOBS)];
  };
  return new Map(await Promise.all([count('pool'), count('ours')]));
}

// ------------------------------------------------------------------ rate accuracy

interface RateContender {
  name: string;
  /** Extra time in the window bound burst + rate * (T + extraMs): tokenpace's catch-up lag (0 for the strict bound). */
  lagMs?: number;
  /** Starts `total` jobs' worth of backlog; each job calls `record`. Returns a cleanup. */
  start(record: () => void, total: number): () => void;
}

function rateContenders(ratePerSecond: number, burst: number): RateContender[] {
  const intervalMs = (burst * 1000) / ratePerSecond; // `burst` jobs per window: the same average rate
  return [
    {
      name: 'tokenpace Scheduler',
      // At most catchUp (5 ms) of lateness is made up; the bucket absorbs (burst - 1) / rate of it.
      lagMs: Math.max(0, 5 - ((burst - 1) * 1000) / ratePerSecond),
      start(record, total) {
        const s = new Scheduler({ rate: ratePerSecond, burst, maxQueue: total });
        for (let i = 0; i < total; i++) s.schedule(record).catch(noop);
        return () => s.clear();
      },
    },
    {
      name: `p-queue (intervalCap ${burst}, interval ${intervalMs} ms)`,
      start(record, total) {
        const q = new PQueue({ intervalCap: burst, interval: intervalMs });
        for (let i = 0; i < total; i++) q.add(record).catch(noop);
        return () => {
          q.clear();
          q.pause();
        };
      },
    },
    {
      name: `p-queue strict (intervalCap ${burst}, interval ${intervalMs} ms, sliding window)`,
      start(record, total) {
        const q = new PQueue({ intervalCap: burst, interval: intervalMs, strict: true });
        for (let i = 0; i < total; i++) q.add(record).catch(noop);
        return () => {
          q.clear();
          q.pause();
        };
      },
    },
    {
      name:
        burst === 1 ? 'bottleneck (minTime 1 ms)' : `bottleneck (reservoir ${burst} + ${burst} per ${intervalMs} ms)`,
      start(record, total) {
        const b =
          burst === 1
            ? new Bottleneck({ minTime: 1000 / ratePerSecond })
            : new Bottleneck({
                reservoir: burst,
                reservoirIncreaseAmount: burst,
                reservoirIncreaseInterval: intervalMs,
                reservoirIncreaseMaximum: burst,
                heartbeatInterval: intervalMs,
              } as Bottleneck.ConstructorOptions);
        // bottleneck registers jobs about 1,000 a second: keep a backlog of 1,000 to 2,000 instead of
        // submitting them all (dropping thousands on stop would go on in the background for seconds).
        let submitted = 0;
        const feed = () => {
          const counts = b.counts();
          if ((counts.RECEIVED ?? 0) + (counts.QUEUED ?? 0) >= 1000) return;
          for (let i = 0; i < 1000 && submitted < total; i++, submitted++) b.schedule(async () => record()).catch(noop);
        };
        feed();
        const feeder = setInterval(feed, 50);
        return () => {
          clearInterval(feeder);
          void b.stop({ dropWaitingJobs: true });
        };
      },
    },
    {
      name: `p-throttle (limit ${burst}, interval ${intervalMs} ms)`,
      start(record, total) {
        const controller = new AbortController();
        const throttled = pThrottle({ limit: burst, interval: intervalMs, signal: controller.signal })(record);
        for (let i = 0; i < total; i++) (throttled() as unknown as Promise<void>).catch(noop);
        return () => controller.abort();
      },
    },
    {
      name: `limiter RateLimiter (${burst} per ${intervalMs} ms)`,
      start(record, total) {
        const limiter = new RateLimiter({ tokensPerInterval: burst, interval: intervalMs });
        let stopped = false;
        void (async () => {
          for (let i = 0; i < total && !stopped; i++) {
            await limiter.removeTokens(1);
            if (!stopped) record();
          }
        })();
        return () => {
          stopped = true;
        };
      },
    },
  ];
}

/** The most entries of sorted `times` within any window of `windowMs`. */
function mostInWindow(times: readonly number[], windowMs: number): number {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while ((times[i] as number) - (times[j] as number) >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

async function rateAccuracy(seconds: number): Promise<string> {
  const ratePerSecond = 1000;
  const rows: string[][] = [];
  for (const burst of [10, 1]) {
    for (const contender of rateContenders(ratePerSecond, burst)) {
      const starts: number[] = [];
      const total = ratePerSecond * seconds + 2000;
      const stop = contender.start(() => starts.push(performance.now()), total);
      await sleep(seconds * 1000 + 100);
      stop();
      await sleep(50);
      const t0 = starts[0] ?? 0;
      const inRun = starts.filter((t) => t < t0 + seconds * 1000);
      const lagMs = contender.lagMs ?? 0;
      const bound = (windowMs: number) => burst + (ratePerSecond * (windowMs + lagMs)) / 1000;
      rows.push([
        String(burst),
        contender.name,
        (inRun.length / (ratePerSecond * seconds)).toFixed(3),
        `${mostInWindow(inRun, 100)} / ${bound(100)}`,
        `${mostInWindow(inRun, 1000)} / ${bound(1000)}`,
        lagMs === 0 ? 'burst + rate * T' : `burst + rate * (T + ${lagMs} ms)`,
      ]);
    }
  }
  return table(
    ['burst', 'contender', 'achieved / target', 'most in 100 ms / bound', 'most in 1 s / bound', 'bound checked'],
    rows,
  );
}

// ------------------------------------------------------------------ flood

interface FloodRun {
  /** Submits n jobs, each rejection caught. */
  submit(n: number): void;
  /** Jobs turned away so far. */
  rejected(): number;
  stop(): void;
}

interface FloodContender {
  name: string;
  submissions: number;
  /** Submissions per event-loop turn (requests arrive over many turns); Infinity for one synchronous loop. */
  perTurn: number;
  /** Blocks the runner with a job that never ends, then floods it. */
  flood(): FloodRun;
}

const PER_TURN = 10_000;

function floodContenders(): FloodContender[] {
  const never = () => new Promise<void>(noop);
  const counter = () => {
    let count = 0;
    return {
      onReject: () => {
        count++;
      },
      count: () => count,
    };
  };
  const ours = (perTurn: number): FloodContender => ({
    name: `tokenpace Scheduler (maxQueue 1000${perTurn === PER_TURN ? '' : ', one synchronous loop'})`,
    submissions: 1_000_000,
    perTurn,
    flood() {
      const s = new Scheduler({ concurrency: 1, maxQueue: 1000 });
      const c = counter();
      s.schedule(never).catch(noop);
      return {
        submit(n) {
          for (let i = 0; i < n; i++) s.schedule(asyncNoop).catch(c.onReject);
        },
        rejected: c.count,
        stop: () => s.clear(),
      };
    },
  });
  return [
    ours(PER_TURN),
    ours(Number.POSITIVE_INFINITY),
    {
      name: 'p-queue (unbounded)',
      submissions: 100_000,
      perTurn: PER_TURN,
      flood() {
        const q = new PQueue({ concurrency: 1 });
        q.add(never).catch(noop);
        return {
          submit(n) {
            for (let i = 0; i < n; i++) q.add(asyncNoop).catch(noop);
          },
          rejected: () => 0,
          stop: () => q.clear(),
        };
      },
    },
    {
      name: 'p-queue (bounded: checks size before add)',
      submissions: 1_000_000,
      perTurn: PER_TURN,
      flood() {
        const q = new PQueue({ concurrency: 1 });
        const c = counter();
        q.add(never).catch(noop);
        return {
          submit(n) {
            // As p-queue's docs suggest for a bounded queue: look at `size` (or await `onSizeLessThan`) first.
            for (let i = 0; i < n; i++) {
              if (q.size >= 1000) c.onReject();
              else q.add(asyncNoop).catch(noop);
            }
          },
          rejected: c.count,
          stop: () => q.clear(),
        };
      },
    },
    {
      name: 'p-limit (unbounded)',
      submissions: 100_000,
      perTurn: PER_TURN,
      flood() {
        const limit = pLimit(1);
        limit(never).catch(noop);
        return {
          submit(n) {
            for (let i = 0; i < n; i++) limit(asyncNoop).catch(noop);
          },
          rejected: () => 0,
          stop: () => limit.clearQueue(),
        };
      },
    },
    {
      name: 'p-throttle (unbounded)',
      submissions: 100_000,
      perTurn: PER_TURN,
      flood() {
        const controller = new AbortController();
        const throttled = pThrottle({ limit: 1, interval: 1000, signal: controller.signal })(noop);
        return {
          submit(n) {
            for (let i = 0; i < n; i++) (throttled() as unknown as Promise<void>).catch(noop);
          },
          rejected: () => 0,
          stop: () => controller.abort(),
        };
      },
    },
    {
      name: 'limiter RateLimiter (unbounded)',
      submissions: 100_000,
      perTurn: PER_TURN,
      flood() {
        const limiter = new RateLimiter({ tokensPerInterval: 1, interval: 1000 });
        return {
          submit(n) {
            for (let i = 0; i < n; i++) limiter.removeTokens(1).catch(noop);
          },
          rejected: () => 0,
          stop() {
            // No way to cancel: open the bucket wide so the waiters drain at the head's next wake.
            limiter.tokenBucket.bucketSize = Number.POSITIVE_INFINITY;
            limiter.tokenBucket.tokensPerInterval = Number.POSITIVE_INFINITY;
            limiter.tokenBucket.content = Number.POSITIVE_INFINITY;
          },
        };
      },
    },
    {
      name: 'bottleneck (highWater 1000, OVERFLOW)',
      submissions: 10_000,
      perTurn: PER_TURN,
      flood() {
        const b = new Bottleneck({ maxConcurrent: 1, highWater: 1000, strategy: Bottleneck.strategy.OVERFLOW });
        const c = counter();
        b.schedule(never).catch(noop);
        return {
          submit(n) {
            for (let i = 0; i < n; i++) b.schedule(asyncNoop).catch(c.onReject);
          },
          rejected: c.count,
          // stop() would drop the waiting jobs one by one, a millisecond each: let it drain in the background.
          stop: noop,
        };
      },
    },
  ];
}

async function flood(): Promise<string> {
  const rows: string[][] = [];
  for (const contender of floodContenders()) {
    const n = contender.submissions;
    const before = await settleHeap();
    const run = contender.flood();
    const start = performance.now();
    for (let done = 0; done < n; done += contender.perTurn) {
      run.submit(Math.min(contender.perTurn, n - done));
      await tick(); // the rejections' handlers run; the next requests arrive
    }
    const elapsedMs = performance.now() - start;
    const retained = (await settleHeap()) - before;
    const rejected = run.rejected();
    rows.push([
      contender.name,
      n.toLocaleString('en-US'),
      `${(retained / 2 ** 20).toFixed(1)} MiB`,
      `${Math.max(0, Math.round(retained / n))} B`,
      `${(elapsedMs / 1000).toFixed(2)} s`,
      rejected ? formatOps((rejected * 1000) / elapsedMs) : 'none (holds every job)',
    ]);
    run.stop();
    await sleep(1100); // limiter's head wakes within its 1 s interval and drains
    await settleHeap();
  }
  return table(['contender', 'submissions', 'heap retained', 'per submission', 'time', 'turned away per second'], rows);
}

// ------------------------------------------------------------------ many priorities

/** Drains `n` jobs queued behind a blocker: time from the blocker's end to the last job's end. */
async function drainMs(
  n: number,
  add: (fn: () => Promise<void>, priority: number) => Promise<unknown>,
  priorityOf: (i: number) => number,
): Promise<number> {
  let release!: () => void;
  const blocker = add(() => new Promise<void>((resolve) => (release = resolve)), Number.MAX_SAFE_INTEGER);
  const jobs: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) jobs.push(add(asyncNoop, priorityOf(i)));
  const start = performance.now();
  release();
  await blocker;
  await Promise.all(jobs);
  return performance.now() - start;
}

/** 40,000 jobs at concurrency 1 with one priority, with distinct priorities, and with distinct priorities and maxWait. */
export async function priorities(): Promise<string> {
  const n = 40_000;
  const rows: string[][] = [];
  const distinct = (i: number) => i; // a deadline or a timestamp as the priority: every job its own level
  const ours = (maxWait?: number) => {
    const s = new Scheduler({ concurrency: 1, maxQueue: n + 1, maxWait });
    return (fn: () => Promise<void>, priority: number) => s.schedule(fn, { priority });
  };
  const pq = () => {
    const q = new PQueue({ concurrency: 1 });
    return (fn: () => Promise<void>, priority: number) => q.add(fn, { priority });
  };
  const cases: [string, () => (fn: () => Promise<void>, p: number) => Promise<unknown>, (i: number) => number][] = [
    ['tokenpace, one priority', () => ours(), () => 0],
    ['tokenpace, distinct priorities', () => ours(), distinct],
    ['tokenpace, distinct priorities + maxWait 1 h', () => ours(3_600_000), distinct],
    ['p-queue, distinct priorities', pq, distinct],
  ];
  for (const [name, make, priorityOf] of cases) {
    const times: number[] = [];
    for (let round = 0; round < 3; round++) {
      times.push(await drainMs(n, make(), priorityOf));
      await settleHeap();
    }
    times.sort((a, b) => a - b);
    rows.push([name, n.toLocaleString('en-US'), `${Math.round(times[1] as number)} ms`]);
  }
  return table(['contender', 'jobs', 'drain time (median of 3)'], rows);
}

// ------------------------------------------------------------------ section

export const schedulerSection: Section = {
  id: 'scheduler',
  title: 'Scheduler: throughput, rate accuracy, and a flood against a full queue',
  async run() {
    const seconds = Number(process.env.BENCH_RATE_SECONDS ?? 10);
    const parts = [
      '### No-op jobs per second',
      '',
      "Each sample submits n jobs at once and awaits them all. Every contender is first run for 500 ms (interleaved), so that n is sized for optimised code; then n is set so that the bare pool's sample takes about 50 ms (first table) or 200 ms (second), and every contender runs that same n (the same work, and the same number of jobs held at once); 11 interleaved rounds, medians. With more jobs at once the garbage collector's share grows, so the two tables differ.",
      '',
      'Samples of 50 ms:',
      '',
      await throughput(50),
      '',
      'Samples of 200 ms:',
      '',
      await throughput(200),
      '',
      `### A queued burst: ${BURST_JOBS.toLocaleString('en-US')} jobs at once, concurrency 16`,
      '',
      await queuedBurst(),
      '',
      `Every job is queued before the first one ends (\`maxQueue: ${BURST_JOBS}\`), so the queue, its bound and its events are all in the path; the steady-state samples above queue a few hundred at a time. Ratios are taken within each round (bare pool's time / the contender's), ${15} interleaved rounds: the median and the range.`,
      '',
      "Each contender alone in a process (6 bursts after one to warm up, 3 interleaved rounds; no other contender's garbage or compiled code in the process):",
      '',
      await queuedBurstPerProcess(),
      '',
      `### Rate accuracy: 1000 jobs/s for ${seconds} s`,
      '',
      await rateAccuracy(seconds),
      '',
      "Times are taken when each job's function is called. The bound is the token bucket's, burst + rate * T, for every peer. tokenpace is checked against its own documented bound: it charges a job at its theoretical start when a late timer made the bucket overflow, making up at most catchUp (5 ms) of lateness, the first (burst - 1) / rate of which the bucket itself absorbs: with burst 10 nothing is charged in the past and the strict bound applies; with burst 1 a window may see up to rate * 5 ms = 5 more.",
      '',
      '### Many distinct priorities',
      '',
      await priorities(),
      '',
      'Each job has its own priority (as when a deadline or a timestamp is the priority). The wait queue keeps its levels in a balanced tree with cost sums and the waiters in arrival order, so every operation is O(log levels) or better.',
      '',
      '### A flood against a full queue',
      '',
      await flood(),
      '',
      `Submissions arrive ${PER_TURN.toLocaleString('en-US')} per event-loop turn, as requests do (one row: all in one synchronous loop, where every caller's rejection handler waits for the loop to end). Heap retained is measured after a forced GC with the queue still full (tokenpace: 1000 waiting jobs); unbounded peers hold every submission, so they get 100,000. bottleneck registers each submission through a 1 ms timer, about 1,000 a second, so even with \`highWater\` it holds a flood it cannot turn away in time: it gets 10,000.`,
    ];
    return parts.join('\n');
  },
};
