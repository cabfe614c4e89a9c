/**
 * Streams: Throttle and ThrottleGroup against PassThrough and the npm peers
 * `stream-throttle` (a shared `limiter` bucket, slices of rate / 10) and
 * `throttle` (bytes since creation, slices of bps / 10), side by side.
 *
 * 1. Throughput with an effectively unlimited cap: 1 GiB of 64 KiB chunks;
 *    and the web form, WebThrottle, against a bare TransformStream moving the same chunks.
 * 2. The whole rate from every kind of source: a lone Throttle and the
 *    aggregate of a 4-member ThrottleGroup at 1 KiB/s .. 1 GiB/s, with 1, 16
 *    and 64 KiB chunks, from a synchronous source, a socket-like source (chunks
 *    on a 1 ms timer, 1.5x the cap) and a slower one (0.5x the cap); the most
 *    bytes in any 100 ms against burst + rate * 0.1 s; wake-ups (timers fired)
 *    and CPU per second.
 * 3. Side by side with the peers: socket-like sources and real HTTP bodies
 *    (node:http on 127.0.0.1, undici): achieved rate, wake-ups and CPU.
 * 4. Fairness: streams with 1, 4, 16 and 64 KiB chunks sharing one cap: Jain's
 *    index, the aggregate, and each chunk size's rate.
 * 5. A blocked event loop: what blocking 25 or 60 ms every 200 ms costs.
 * 6. Memory: a 1 GiB source into a 1 MiB/s cap.
 * 7. Short-term fairness of 10, 100 and 1,000 busy members: first bytes, the
 *    longest gaps between deliveries, Jain over every 1 s window.
 * 8. Bandwidth classes, side by side with a flat group and stream-throttle:
 *    nested caps and borrowing, ceilings and guarantees, 1,000 streams in 100
 *    tenants.
 *
 * Tuned to run in about 2.5 minutes on 2 cores: runs of 0.6 to 2 s, the low
 * rates (which need little CPU) all at once.
 */

import { PassThrough, Readable, type Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import streamThrottle from 'stream-throttle';
import ThrottlePeer from 'throttle';
import { type Clock, systemClock, Throttle, ThrottleGroup, WebThrottle } from '../src/index.js';
import { median, ratioSpread, roundRatios, type Section, table } from './harness.js';
import {
  endlessServer,
  GiB,
  gc,
  httpBody,
  jain,
  KiB,
  MiB,
  makeSource,
  Recorder,
  type RunResult,
  run,
  Session,
  type SourceKind,
  shortTermRun,
  sleep,
} from './stream-support.js';

const MEMORY_MS = 3000;
/** Interleaved rounds of each HTTP contender at each rate (`BENCH_HTTP_ROUNDS`). */
const HTTP_ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS ?? 5);

/** `totalBytes` in `chunkBytes` chunks, produced only when read; one shared buffer unless `fresh`. */
function source(totalBytes: number, chunkBytes: number, fresh = false): Readable & { produced: number } {
  const shared = Buffer.alloc(chunkBytes, 0x61);
  let produced = 0;
  const readable = new Readable({
    read() {
      if (produced >= totalBytes) {
        this.push(null);
        return;
      }
      const size = Math.min(chunkBytes, totalBytes - produced);
      produced += size;
      readable.produced = produced;
      this.push(fresh ? Buffer.allocUnsafe(size).fill(0x62) : size === chunkBytes ? shared : shared.subarray(0, size));
    },
  }) as Readable & { produced: number };
  readable.produced = 0;
  return readable;
}

/** A sink that counts bytes. */
function sink(): Writable & { bytes: number } {
  const writable = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      writable.bytes += chunk.length;
      callback();
    },
  }) as Writable & { bytes: number };
  writable.bytes = 0;
  return writable;
}

interface SimpleContender {
  name: string;
  make(ratePerSecond: number): Transform;
}

const ours: SimpleContender = { name: 'tokenpace Throttle', make: (rate) => new Throttle({ rate }) };
const peerStreams: SimpleContender[] = [
  { name: 'stream-throttle', make: (rate) => new streamThrottle.Throttle({ rate }) },
  { name: 'throttle', make: (bps) => new ThrottlePeer({ bps, chunkSize: Math.max(1, Math.floor(bps / 10)) }) },
];

/** Ends a run: destroys the streams and waits for the pipeline to settle (peers may keep a timer for a while). */
async function stop(streams: readonly (Readable | Writable | Transform)[], done: Promise<unknown>): Promise<void> {
  for (const stream of streams) stream.destroy();
  await done.catch(() => {});
}

// 1. Throughput with an effectively unlimited cap.
export async function throughput(): Promise<string> {
  const totalBytes = GiB;
  const unlimited = 1024 ** 4; // 1 TiB/s
  const contenders: { name: string; make(): Transform }[] = [
    { name: 'PassThrough', make: () => new PassThrough() },
    { name: 'tokenpace Throttle (1 TiB/s)', make: () => new Throttle({ rate: unlimited }) },
    { name: 'stream-throttle (1 TiB/s)', make: () => new streamThrottle.Throttle({ rate: unlimited }) },
    {
      name: 'throttle (1 TiB/s, 64 KiB checks)',
      make: () => new ThrottlePeer({ bps: unlimited, chunkSize: 64 * KiB }),
    },
  ];
  // A 1 GiB pipeline of a fast contender takes ~10 ms, too short to time alone: a sample is
  // TRANSFERS of them back to back (~0.1 s). The first WARMUP rounds only warm the JIT up, and each
  // round starts with a different contender, so none always runs first (or right after GC). Each
  // round's ratio to PassThrough is taken within the round, in wall time and in CPU time (the
  // process's user + system: on a shared machine it does not count the time spent waiting for a core).
  const rounds = 15;
  const warmup = 2;
  const transfers = 8;
  const seconds: number[][] = contenders.map(() => []);
  const cpuSeconds: number[][] = contenders.map(() => []);
  for (let round = 0; round < warmup + rounds; round++) {
    for (let k = 0; k < contenders.length; k++) {
      const i = (round + k) % contenders.length;
      const contender = contenders[i] as (typeof contenders)[number];
      const cpu = process.cpuUsage();
      const start = performance.now();
      for (let t = 0; t < transfers; t++) {
        const out = sink();
        await pipeline(source(totalBytes, 64 * KiB), contender.make(), out);
        if (out.bytes !== totalBytes) throw new Error(`${contender.name} passed ${out.bytes} of ${totalBytes} bytes`);
      }
      const elapsed = (performance.now() - start) / 1000 / transfers;
      const used = process.cpuUsage(cpu);
      if (round >= warmup) {
        seconds[i]?.push(elapsed);
        cpuSeconds[i]?.push((used.user + used.system) / 1e6 / transfers);
      }
    }
  }
  const base = median(seconds[0] as number[]);
  return table(
    [
      'contender',
      'GiB/s',
      'vs PassThrough (wall: median, range)',
      'vs PassThrough (CPU time)',
      'ns per 64 KiB chunk over PassThrough',
    ],
    contenders.map((c, i) => {
      const s = median(seconds[i] as number[]);
      const extraNs = ((s - base) * 1e9) / (totalBytes / (64 * KiB));
      return [
        c.name,
        (totalBytes / GiB / s).toFixed(2),
        i === 0 ? '1.00x' : ratioSpread(roundRatios(seconds, i)),
        i === 0 ? '1.00x' : ratioSpread(roundRatios(cpuSeconds, i)),
        i === 0 ? '' : extraNs.toFixed(0),
      ];
    }),
  );
}

// 1b. The web form: WebThrottle with a cap it never reaches against a bare TransformStream.
export async function webThroughput(): Promise<string> {
  const unlimited = 1024 ** 4; // 1 TiB/s: never waits
  const contenders: { name: string; make(): TransformStream<Uint8Array, Uint8Array> }[] = [
    { name: 'new TransformStream()', make: () => new TransformStream<Uint8Array, Uint8Array>() },
    { name: 'tokenpace WebThrottle (1 TiB/s)', make: () => new WebThrottle({ rate: unlimited }) },
  ];
  const cases = [
    { chunkBytes: 64 * KiB, totalBytes: 256 * MiB },
    { chunkBytes: 16 * KiB, totalBytes: 64 * MiB },
    { chunkBytes: KiB, totalBytes: 4 * MiB },
  ];
  const rows: string[][] = [];
  for (const { chunkBytes, totalBytes } of cases) {
    // As in (1): interleaved rounds, each starting with the other contender, the ratio taken within a round.
    const rounds = 15;
    const warmup = 2;
    const transfers = 4;
    const seconds: number[][] = contenders.map(() => []);
    const cpuSeconds: number[][] = contenders.map(() => []);
    const chunk = new Uint8Array(chunkBytes).fill(0x61);
    for (let round = 0; round < warmup + rounds; round++) {
      for (let k = 0; k < contenders.length; k++) {
        const i = (round + k) % contenders.length;
        const contender = contenders[i] as (typeof contenders)[number];
        const cpu = process.cpuUsage();
        const start = performance.now();
        for (let t = 0; t < transfers; t++) {
          let produced = 0;
          let received = 0;
          await new ReadableStream<Uint8Array>({
            pull(controller) {
              if (produced >= totalBytes) controller.close();
              else {
                produced += chunkBytes;
                controller.enqueue(chunk);
              }
            },
          })
            .pipeThrough(contender.make())
            .pipeTo(
              new WritableStream<Uint8Array>({
                write(piece) {
                  received += piece.length;
                },
              }),
            );
          if (received !== totalBytes) throw new Error(`${contender.name} passed ${received} of ${totalBytes} bytes`);
        }
        const elapsed = (performance.now() - start) / 1000 / transfers;
        const used = process.cpuUsage(cpu);
        if (round >= warmup) {
          seconds[i]?.push(elapsed);
          cpuSeconds[i]?.push((used.user + used.system) / 1e6 / transfers);
        }
      }
    }
    const base = median(seconds[0] as number[]);
    contenders.forEach((c, i) => {
      const s = median(seconds[i] as number[]);
      rows.push([
        `${formatBytes(chunkBytes)} chunks`,
        c.name,
        (totalBytes / MiB / s).toFixed(0),
        i === 0 ? '1.00x' : ratioSpread(roundRatios(seconds, i)),
        i === 0 ? '1.00x' : ratioSpread(roundRatios(cpuSeconds, i)),
        i === 0 ? '' : (((s - base) * 1e9) / (totalBytes / chunkBytes)).toFixed(0),
      ]);
    });
  }
  return table(
    [
      'chunks',
      'contender',
      'MiB/s',
      'vs TransformStream (wall: median, range)',
      'vs TransformStream (CPU time)',
      'ns per chunk over TransformStream',
    ],
    rows,
  );
}

/** The system clock, counting the timers of one stream or group that fire (its wake-ups). */
function countingClock(): Clock & { fired: number } {
  const clock = {
    fired: 0,
    now: systemClock.now,
    setTimeout: (fn: () => void, ms: number) =>
      systemClock.setTimeout(() => {
        clock.fired++;
        fn();
      }, ms),
    clearTimeout: systemClock.clearTimeout,
  };
  return clock;
}

function formatBytes(bytes: number): string {
  if (bytes >= GiB) return `${(bytes / GiB).toFixed(2)} GiB`;
  if (bytes >= MiB) return `${(bytes / MiB).toFixed(2)} MiB`;
  return `${(bytes / KiB).toFixed(1)} KiB`;
}

function formatRate(bytesPerSecond: number): string {
  return `${formatBytes(bytesPerSecond)}/s`;
}

const GROUP_MEMBERS = 4;

/** One case of the matrix: a lone Throttle or a 4-member group, fed by sources of one kind. */
interface Case {
  rate: number;
  chunk: number;
  kind: SourceKind;
  group: boolean;
  clock: Clock & { fired: number };
  burst: number;
  pairs: { source: Readable & { produced: number }; transform: Transform }[];
}

function makeCase(rate: number, chunk: number, kind: SourceKind, group: boolean): Case {
  const clock = countingClock();
  const members = group ? GROUP_MEMBERS : 1;
  const speed = kind === 'slow' ? 0.5 : 1.5;
  let burst: number;
  let make: () => Transform;
  if (group) {
    const g = new ThrottleGroup({ rate, clock });
    burst = g.burst;
    make = () => g.throttle();
  } else {
    const t = new Throttle({ rate, clock });
    burst = t.burst as number;
    make = () => t;
  }
  const pairs = Array.from({ length: members }, () => ({
    source: makeSource(kind, chunk, (speed * rate) / members),
    transform: make(),
  }));
  return { rate, chunk, kind, group, clock, burst, pairs };
}

interface CaseFigures {
  /** Achieved over what the case can pass: the rate, or the source's rate for a slower source. */
  achieved: number;
  jain: number;
  max100ms: number;
  bound: number;
  wakeupsPerSecond: number;
}

function figures(c: Case, result: RunResult, warmupMs: number): CaseFigures {
  const { recorder, startMs, endMs } = result;
  const seconds = (endMs - startMs) / 1000;
  let achieved: number;
  if (c.kind === 'slow') {
    // All the source sent (less what is still in the streams' buffers) should have passed.
    achieved = recorder.total / c.pairs.reduce((sum, p) => sum + p.source.produced, 0);
  } else {
    achieved = recorder.steadyRate(startMs + warmupMs) / c.rate;
  }
  const shares = recorder.shares(c.pairs.length, startMs + warmupMs, endMs);
  return {
    achieved,
    jain: jain(shares),
    max100ms: recorder.maxInWindow(100),
    bound: c.burst + c.rate * 0.1,
    wakeupsPerSecond: c.clock.fired / seconds,
  };
}

const KINDS: { kind: SourceKind; label: string }[] = [
  { kind: 'sync', label: 'synchronous' },
  { kind: 'socket', label: 'socket-like 1.5x' },
  { kind: 'slow', label: 'slower 0.5x' },
];
const CHUNKS = [KiB, 16 * KiB, 64 * KiB];

function rateLabel(rate: number): string {
  return rate >= GiB ? `${rate / GiB} GiB/s` : rate >= MiB ? `${rate / MiB} MiB/s` : `${rate / KiB} KiB/s`;
}

/** Runs several cases at once (low rates: little CPU each) or one after another; returns a row per (rate, chunk, kind). */
async function matrix(): Promise<string> {
  const rows: string[][] = [];
  const row = (lone: Case, loneF: CaseFigures, group: Case, groupF: CaseFigures, cpu: string[]) => {
    const boundRatio = Math.max(loneF.max100ms / loneF.bound, groupF.max100ms / groupF.bound);
    rows.push([
      rateLabel(lone.rate),
      `${lone.chunk / KiB} KiB`,
      KINDS.find((k) => k.kind === lone.kind)?.label ?? lone.kind,
      loneF.achieved.toFixed(4),
      groupF.achieved.toFixed(4),
      groupF.jain.toFixed(4),
      boundRatio.toFixed(3),
      `${loneF.wakeupsPerSecond.toFixed(0)} / ${groupF.wakeupsPerSecond.toFixed(0)}`,
      cpu.join(' / '),
    ]);
    void group;
  };
  // Low rates, all at once: 1 KiB/s and 1 MiB/s (wake-ups are counted per stream; CPU is shared).
  {
    const cases: [Case, Case][] = [];
    for (const rate of [KiB, MiB])
      for (const chunk of CHUNKS)
        for (const { kind } of KINDS)
          cases.push([makeCase(rate, chunk, kind, false), makeCase(rate, chunk, kind, true)]);
    const durationMs = 6000;
    const all = cases.flatMap(([a, b]) => [...a.pairs, ...b.pairs]);
    const result = await run(all, durationMs);
    // Split the shared recording back into cases.
    let offset = 0;
    for (const [lone, group] of cases) {
      const pieces = (c: Case) => {
        const sub = new (result.recorder.constructor as new () => typeof result.recorder)();
        const first = offset;
        offset += c.pairs.length;
        for (let k = 0; k < result.recorder.times.length; k++) {
          const member = result.recorder.members[k] as number;
          if (member >= first && member < offset) {
            sub.times.push(result.recorder.times[k] as number);
            sub.sizes.push(result.recorder.sizes[k] as number);
            sub.members.push(member - first);
          }
        }
        return { ...result, recorder: sub };
      };
      // From 3 s on: a 1.5x socket-like source at 1 KiB/s only outruns the 1 KiB bucket after ~2 s.
      const loneF = figures(lone, pieces(lone), 3000);
      const groupF = figures(group, pieces(group), 3000);
      row(lone, loneF, group, groupF, ['(shared)']);
    }
  }
  // 10 MiB/s and up, one case at a time.
  for (const rate of [10 * MiB, 100 * MiB, GiB]) {
    for (const chunk of CHUNKS) {
      for (const { kind } of KINDS) {
        if (kind === 'slow' && chunk !== 16 * KiB) continue; // one chunk size is enough to show a slower source passes whole
        // The output comes in steps up to ~250 ms apart (a 100 ms bucket and a source at 1.5x the
        // rate); achieved is measured between pauses (Recorder.steadyRate), which needs a few of them.
        const [runMs, warmupMs] = [1500, 300];
        const lone = makeCase(rate, chunk, kind, false);
        const loneResult = await run(lone.pairs, runMs);
        const group = makeCase(rate, chunk, kind, true);
        const groupResult = await run(group.pairs, runMs);
        row(lone, figures(lone, loneResult, warmupMs), group, figures(group, groupResult, warmupMs), [
          loneResult.cpuMsPerSecond.toFixed(0),
          groupResult.cpuMsPerSecond.toFixed(0),
        ]);
      }
    }
  }
  return table(
    [
      'rate',
      'chunks',
      'source',
      'Throttle achieved',
      'group aggregate',
      'group Jain',
      'most in 100 ms / (burst + rate*0.1s)',
      'wake-ups/s (alone / group)',
      'CPU ms/s (alone / group)',
    ],
    rows,
  );
}

/** The most a source of this kind and chunk size delivers through a bare PassThrough (the ceiling). */
async function ceiling(kind: SourceKind, chunk: number, bytesPerSecond: number): Promise<number> {
  if (kind === 'sync') {
    // A synchronous source into a PassThrough never yields to the timers: time a fixed amount instead.
    const totalBytes = 256 * chunk * 16;
    const start = performance.now();
    await pipeline(source(totalBytes, chunk), new PassThrough(), sink());
    return (totalBytes * 1000) / (performance.now() - start);
  }
  const result = await run([{ source: makeSource(kind, chunk, bytesPerSecond), transform: new PassThrough() }], 700);
  return result.recorder.steadyRate(result.startMs + 250);
}

async function ceilings(): Promise<string> {
  const rows: string[][] = [];
  for (const kind of ['sync', 'socket'] as const) {
    const cells = [];
    for (const chunk of CHUNKS) cells.push(formatRate(await ceiling(kind, chunk, 1.5 * GiB)));
    rows.push([kind === 'sync' ? 'synchronous' : 'socket-like (1.5 GiB/s offered)', ...cells]);
  }
  return table(['source into a bare PassThrough', '1 KiB chunks', '16 KiB chunks', '64 KiB chunks'], rows);
}

interface Contender {
  name: string;
  /** Transforms for `members` streams sharing (or each with) the cap. */
  make(rate: number, members: number): Transform[];
  clock?: Clock & { fired: number };
}

function contenders(): Contender[] {
  return [
    {
      name: 'tokenpace Throttle',
      make: (rate, n) => Array.from({ length: n }, () => new Throttle({ rate })),
    },
    {
      name: 'throttle',
      make: (bps, n) =>
        Array.from({ length: n }, () => new ThrottlePeer({ bps, chunkSize: Math.max(1, Math.floor(bps / 10)) })),
    },
    {
      name: 'stream-throttle',
      make: (rate, n) => Array.from({ length: n }, () => new streamThrottle.Throttle({ rate })),
    },
  ];
}

interface Measured {
  achieved: number;
  wakeupsPerSecond: number;
  cpuMsPerSecond: number;
}

/** One run: `sources()` through `transforms(n)` (or bare) for `durationMs`. */
async function measure(
  rate: number,
  sources: () => Promise<Readable[]>,
  transforms: (n: number) => Transform[] | undefined,
  durationMs: number,
): Promise<Measured> {
  const readables = await sources();
  const ts = transforms(readables.length);
  const result = await run(
    readables.map((r, i) => ({ source: r, transform: ts?.[i] })),
    durationMs,
  );
  return {
    achieved: result.recorder.steadyRate(result.startMs + 400) / rate,
    wakeupsPerSecond: result.wakeupsPerSecond,
    cpuMsPerSecond: result.cpuMsPerSecond,
  };
}

const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;

/** Side by side: one stream per contender (and a 4-member group for ours and stream-throttle). */
export async function peers(): Promise<string> {
  const rows: string[][] = [];
  const server = await endlessServer();
  const body = () => httpBody(server.url);
  const bodies = () => Promise.all(Array.from({ length: GROUP_MEMBERS }, body));
  const entries: { name: string; sources: () => Promise<Readable[]>; make(rate: number, n: number): Transform[] }[] = [
    ...contenders().map((c) => ({ name: c.name, sources: async () => [await body()], make: c.make })),
    {
      name: 'tokenpace ThrottleGroup (4 bodies)',
      sources: bodies,
      make: (rate: number, n: number) => {
        const group = new ThrottleGroup({ rate });
        return Array.from({ length: n }, () => group.throttle());
      },
    },
    {
      name: 'stream-throttle ThrottleGroup (4 bodies)',
      sources: bodies,
      make: (rate: number, n: number) => {
        const group = new streamThrottle.ThrottleGroup({ rate });
        return Array.from({ length: n }, () => group.throttle());
      },
    },
  ];
  const push = (rate: string, source: string, name: string, runs: readonly Measured[]) =>
    rows.push([
      rate,
      source,
      name,
      mean(runs.map((r) => r.achieved)).toFixed(4),
      mean(runs.map((r) => r.wakeupsPerSecond)).toFixed(0),
      median(runs.map((r) => r.cpuMsPerSecond)).toFixed(1),
    ]);
  // Socket-like sources: the shapes where a lone Throttle fell short before (16 KiB every ms into 10 MiB/s).
  for (const [rate, chunk] of [
    [10 * MiB, 16 * KiB],
    [100 * MiB, 64 * KiB],
  ] as const) {
    for (const c of contenders()) {
      const m = await measure(
        rate,
        async () => [makeSource('socket', chunk, 1.5 * rate)],
        (n) => c.make(rate, n),
        1000,
      );
      push(rateLabel(rate), `socket-like, ${chunk / KiB} KiB chunks`, c.name, [m]);
    }
  }
  // Real HTTP bodies. First a warm-up of every contender (undici, the server, the JIT: a cold first
  // run costs several times the CPU of the next), then HTTP_ROUNDS interleaved rounds at each rate:
  // CPU per second of one 2 s run moves by +-20 % between runs of the same code here, so the median
  // of five is the figure (two runs could not tell tokenpace from `throttle` at 1 and 10 MiB/s).
  for (const e of entries) await measure(10 * MiB, e.sources, (n) => e.make(10 * MiB, n), 500);
  const bare = await measure(
    100 * MiB,
    async () => [await body()],
    () => undefined,
    1200,
  );
  push('none', 'HTTP body', 'bare transport (no cap; achieved vs 100 MiB/s)', [bare]);
  for (const rate of [MiB, 10 * MiB, 100 * MiB]) {
    const runs: Measured[][] = entries.map(() => []);
    for (let round = 0; round < HTTP_ROUNDS; round++) {
      // Each round starts with the next contender, so none always follows the same one.
      for (let j = 0; j < entries.length; j++) {
        const i = (round + j) % entries.length;
        const e = entries[i] as (typeof entries)[number];
        runs[i]?.push(await measure(rate, e.sources, (n) => e.make(rate, n), 2000));
      }
    }
    entries.forEach((e, i) => {
      push(rateLabel(rate), e.name.includes('Group') ? 'HTTP bodies' : 'HTTP body', e.name, runs[i] as Measured[]);
    });
  }
  await server.close();
  return table(['rate', 'source', 'contender', 'achieved/target', 'wake-ups/s', 'CPU ms per s'], rows);
}

// Fairness of N streams with different chunk sizes sharing one cap.
async function fairness(): Promise<string> {
  const rate = 32 * MiB;
  const durationMs = 2000;
  const warmupMs = 700;
  const chunkSizes = [KiB, 4 * KiB, 16 * KiB, 64 * KiB];
  const groups: { name: string; kind: SourceKind; member(): () => Transform }[] = [
    {
      name: 'tokenpace ThrottleGroup',
      kind: 'sync',
      member() {
        const group = new ThrottleGroup({ rate });
        return () => group.throttle();
      },
    },
    {
      name: 'stream-throttle ThrottleGroup',
      kind: 'sync',
      member() {
        const group = new streamThrottle.ThrottleGroup({ rate });
        return () => group.throttle();
      },
    },
    {
      name: 'tokenpace ThrottleGroup',
      kind: 'socket',
      member() {
        const group = new ThrottleGroup({ rate });
        return () => group.throttle();
      },
    },
  ];
  const rows: string[][] = [];
  for (const streams of [4, 16]) {
    for (const contender of groups) {
      const makeMember = contender.member();
      const pairs = Array.from({ length: streams }, (_, i) => ({
        source: makeSource(contender.kind, chunkSizes[i % chunkSizes.length] as number, (1.5 * rate) / streams),
        transform: makeMember(),
      }));
      const result = await run(pairs, durationMs);
      const seconds = (result.endMs - result.startMs - warmupMs) / 1000;
      const shares = result.recorder.shares(streams, result.startMs + warmupMs, result.endMs);
      const aggregate = shares.reduce((a, b) => a + b, 0) / seconds;
      const perChunk = chunkSizes.map((size, c) => {
        const mine = shares.filter((_, i) => i % chunkSizes.length === c);
        return `${size / KiB} KiB: ${formatRate(mine.reduce((a, b) => a + b, 0) / mine.length / seconds)}`;
      });
      rows.push([
        String(streams),
        contender.kind === 'sync' ? 'synchronous' : 'socket-like 1.5x',
        contender.name,
        jain(shares).toFixed(4),
        `${formatRate(aggregate)} (${(aggregate / rate).toFixed(3)})`,
        perChunk.join(', '),
      ]);
    }
  }
  return table(
    ['streams', 'sources', 'contender', 'Jain index', 'aggregate (of 32 MiB/s)', 'mean rate per stream, by chunk size'],
    rows,
  );
}

/** How long each blocked-loop run lasts, ms: the slope of a staircase of 200 ms steps needs a few seconds. */
const BLOCKED_MS = 4000;

// A blocked event loop: the process blocks for 25 or 60 ms every 200 ms.
async function blocked(): Promise<string> {
  const rate = 10 * MiB;
  const rows: string[][] = [];
  const plan: { name: string; make(): Transform; blockMs: number }[] = [
    { name: 'tokenpace Throttle (default burst, 1 MiB)', make: () => new Throttle({ rate }), blockMs: 25 },
    { name: 'tokenpace Throttle (default burst, 1 MiB)', make: () => new Throttle({ rate }), blockMs: 60 },
    { name: "tokenpace Throttle (burst: '2MiB')", make: () => new Throttle({ rate, burst: '2MiB' }), blockMs: 60 },
    { name: 'throttle', make: () => new ThrottlePeer({ bps: rate, chunkSize: rate / 10 }), blockMs: 60 },
  ];
  for (const { name, make, blockMs } of plan) {
    const blocker = setInterval(() => {
      const until = performance.now() + blockMs;
      while (performance.now() < until) {}
    }, 200);
    const result = await run([{ source: makeSource('sync', 64 * KiB, 0), transform: make() }], BLOCKED_MS);
    clearInterval(blocker);
    rows.push([
      `${blockMs} ms every 200 ms`,
      name,
      (result.recorder.steadySlope(result.startMs + 400) / rate).toFixed(4),
    ]);
  }
  return table(['event loop blocked', 'contender', 'achieved/target (10 MiB/s)'], rows);
}

// Peak memory: a 1 GiB source into a 1 MiB/s cap.
async function memory(): Promise<string> {
  const rows: string[][] = [];
  for (const contender of [ours, ...peerStreams]) {
    gc();
    await sleep(100);
    const baseline = process.memoryUsage();
    const input = source(GiB, 64 * KiB, true);
    const throttle = contender.make(MiB);
    const out = sink();
    let maxInFlight = 0;
    let peakRss = baseline.rss;
    let peakLive = baseline.heapUsed + baseline.external;
    let samples = 0;
    const sampler = setInterval(() => {
      maxInFlight = Math.max(maxInFlight, input.produced - out.bytes);
      // Every 250 ms, collect first: what is still referenced, not garbage not yet collected.
      if (++samples % 12 === 0) gc();
      const usage = process.memoryUsage();
      peakRss = Math.max(peakRss, usage.rss);
      if (samples % 12 === 0) peakLive = Math.max(peakLive, usage.heapUsed + usage.external);
    }, 20);
    const done = pipeline(input, throttle, out);
    await sleep(MEMORY_MS);
    clearInterval(sampler);
    const delivered = out.bytes;
    await stop([input, throttle, out], done);
    rows.push([
      contender.name,
      formatBytes(delivered),
      formatBytes(maxInFlight),
      formatBytes(Math.max(0, peakRss - baseline.rss)),
      formatBytes(Math.max(0, peakLive - baseline.heapUsed - baseline.external)),
    ]);
  }
  return table(
    [
      'contender',
      `delivered in ${MEMORY_MS / 1000} s`,
      'most bytes in flight',
      'peak RSS growth',
      'peak live heap + external growth',
    ],
    rows,
  );
}

// Short-term fairness: N busy members sharing 100 MiB/s.
async function shortTerm(): Promise<string> {
  const rate = 100 * MiB;
  const rows: string[][] = [];
  const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : 'never');
  for (const members of [10, 100, 1000]) {
    const durationMs = members >= 1000 ? 5000 : 3000;
    const clock = countingClock();
    const contenders: { name: string; make(): Transform[]; fired?: () => number }[] = [
      {
        name: 'tokenpace ThrottleGroup',
        make: () => {
          const group = new ThrottleGroup({ rate, clock });
          return Array.from({ length: members }, () => group.throttle());
        },
        fired: () => clock.fired,
      },
      {
        name: 'stream-throttle ThrottleGroup',
        make: () => {
          const group = new streamThrottle.ThrottleGroup({ rate });
          return Array.from({ length: members }, () => group.throttle());
        },
      },
    ];
    for (const c of contenders) {
      const f = await shortTermRun(c.make(), rate, durationMs, { fired: c.fired });
      rows.push([
        String(members),
        c.name,
        f.aggregate.toFixed(4),
        `${ms(f.firstP50Ms)} / ${ms(f.firstMaxMs)}`,
        `${ms(f.gapP50Ms)} / ${ms(f.gapP99Ms)} / ${ms(f.gapMaxMs)}`,
        f.minJain1s.toFixed(4),
        f.cpuMsPerSecond.toFixed(0),
        f.wakeupsPerSecond.toFixed(0),
      ]);
    }
  }
  return table(
    [
      'members',
      'contender',
      'aggregate',
      'first bytes ms (median / last)',
      'longest gap ms (median / p99 / worst)',
      'lowest Jain over 1 s',
      'CPU ms/s',
      'wake-ups/s',
    ],
    rows,
  );
}

/** How a contender shapes tenants: a class tree, one flat group, or one stream-throttle group per tenant at a fixed rate. */
interface TenantShaper {
  name: string;
  /**
   * A stream for a download of `tenant`, given the tree's options for each tenant and the static
   * rate of each; and the contender's own count of timers fired, if it takes a clock.
   */
  make(rate: number, tenants: readonly TenantSpec[]): { member(tenant: number): Transform; fired?: () => number };
}

interface TenantSpec {
  weight?: number;
  rate?: number;
  guaranteed?: number;
  /** What a fixed partition (stream-throttle, one group per tenant) gives it. */
  fixed: number;
}

const SHAPERS: TenantShaper[] = [
  {
    name: 'tokenpace classes',
    make(rate, tenants) {
      const clock = countingClock();
      const root = new ThrottleGroup({ rate, clock });
      const groups = tenants.map((t) => root.group({ weight: t.weight, rate: t.rate, guaranteed: t.guaranteed }));
      return { member: (tenant) => (groups[tenant] as ThrottleGroup).throttle(), fired: () => clock.fired };
    },
  },
  {
    name: 'tokenpace flat group',
    make(rate) {
      const clock = countingClock();
      const group = new ThrottleGroup({ rate, clock });
      return { member: () => group.throttle(), fired: () => clock.fired };
    },
  },
  {
    name: 'stream-throttle, a group per tenant',
    make(_rate, tenants) {
      const groups = tenants.map((t) => new streamThrottle.ThrottleGroup({ rate: t.fixed }));
      return { member: (tenant) => (groups[tenant] as InstanceType<typeof streamThrottle.ThrottleGroup>).throttle() };
    },
  },
];

const mibps = (bytesPerSecond: number) => (bytesPerSecond / MiB).toFixed(2);

// Nested caps and borrowing: root 30 MiB/s; tenant A (weight 2) five streams, B (weight 1) one.
async function nestedCaps(): Promise<string> {
  const rate = 30 * MiB;
  const tenants: TenantSpec[] = [
    { weight: 2, fixed: 20 * MiB },
    { weight: 1, fixed: 10 * MiB },
  ];
  const rows: string[][] = [];
  for (const shaper of SHAPERS) {
    const shaped = shaper.make(rate, tenants);
    const make = shaped.member;
    const session = new Session();
    const firedBefore = shaped.fired?.() ?? 0;
    const source = () => makeSource('socket', 64 * KiB, 1.5 * rate);
    const a = Array.from({ length: 5 }, () => session.add(source(), make(0)));
    let b = [session.add(source(), make(1))];
    await sleep(1500);
    const t0 = session.startMs;
    const aShares = a.map((m) => session.rate([m], t0 + 500, t0 + 1500));
    const aRate = aShares.reduce((x, y) => x + y, 0);
    const bRate = session.rate(b, t0 + 500, t0 + 1500);
    // B goes idle: A takes its share.
    const idleAt = performance.now();
    for (const m of b) session.stop(m);
    await sleep(1200);
    const aAlone = session.rate(a, idleAt + 200, idleAt + 1200);
    const aReached = session.reachedAfter(a, idleAt, rate);
    // B is back.
    const backAt = performance.now();
    b = [session.add(source(), make(1))];
    await sleep(1200);
    const bBack = session.rate(b, backAt + 200, backAt + 1200);
    const bReached = session.reachedAfter(b, backAt, 10 * MiB);
    const end = await session.end();
    const wakeupsPerSecond =
      shaped.fired === undefined
        ? end.wakeupsPerSecond
        : ((shaped.fired() - firedBefore) * 1000) / (end.endMs - session.startMs);
    const ms = (x: number) => (Number.isNaN(x) ? 'not within 2 s' : `${x.toFixed(0)} ms`);
    rows.push([
      shaper.name,
      `${mibps(aRate)} (${aShares.map(mibps).join(', ')}; Jain ${jain(aShares).toFixed(4)})`,
      mibps(bRate),
      ((aRate + bRate) / rate).toFixed(4),
      `${mibps(aAlone)}, 30 after ${ms(aReached)}`,
      `${mibps(bBack)}, 10 after ${ms(bReached)}`,
      wakeupsPerSecond.toFixed(0),
    ]);
  }
  return table(
    [
      'contender',
      'A (weight 2, 5 streams) MiB/s',
      'B (weight 1) MiB/s',
      'aggregate / 30',
      'A once B is idle',
      'B once back',
      'wake-ups/s',
    ],
    rows,
  );
}

// Ceilings and guarantees.
async function ceilingsAndGuarantees(): Promise<string> {
  const rate = 30 * MiB;
  const rows: string[][] = [];
  const source = () => makeSource('socket', 64 * KiB, 1.5 * rate);
  // A 5 MiB/s ceiling, with a busy sibling that then goes idle.
  {
    const root = new ThrottleGroup({ rate });
    const capped = root.group({ rate: 5 * MiB });
    const other = root.group();
    const session = new Session();
    const c = [0, 1].map(() => session.add(source(), capped.throttle()));
    const o = [0, 1].map(() => session.add(source(), other.throttle()));
    await sleep(1500);
    for (const m of o) session.stop(m);
    const idleAt = performance.now();
    await sleep(1500);
    await session.end();
    const recorder = session.recorder;
    const pieces = new Recorder();
    for (let k = 0; k < recorder.times.length; k++) {
      if (!c.includes(recorder.members[k] as number)) continue;
      pieces.times.push(recorder.times[k] as number);
      pieces.sizes.push(recorder.sizes[k] as number);
      pieces.members.push(0);
    }
    const bound = (windowMs: number) => capped.burst + (5 * MiB * windowMs) / 1000;
    rows.push([
      'a tenant with a 5 MiB/s ceiling (two streams), its sibling busy then idle',
      `busy sibling: ${mibps(session.rate(c, session.startMs + 500, idleAt))}; idle sibling: ${mibps(session.rate(c, idleAt + 200, idleAt + 1500))}`,
      [100, 1000].map((w) => `${w} ms: ${(pieces.maxInWindow(w) / bound(w)).toFixed(3)}`).join(', '),
    ]);
  }
  // 8 MiB/s guaranteed against a weight-10 sibling (three streams).
  for (const shaper of [SHAPERS[0], SHAPERS[1]] as TenantShaper[]) {
    const tenants: TenantSpec[] = [
      { guaranteed: 8 * MiB, fixed: 10 * MiB },
      { weight: 10, fixed: 20 * MiB },
    ];
    const make = shaper.make(rate, tenants).member;
    const session = new Session();
    const x = [session.add(source(), make(0))];
    const y = [0, 1, 2].map(() => session.add(source(), make(1)));
    await sleep(2000);
    await session.end();
    const from = session.startMs + 500;
    const to = session.startMs + 2000;
    rows.push([
      `a tenant guaranteed 8 MiB/s (one stream) against a weight-10 sibling (three): ${shaper.name}`,
      `${mibps(session.rate(x, from, to))} against ${mibps(session.rate(y, from, to))}`,
      '',
    ]);
  }
  return table(['case', 'MiB/s', 'most in a window / (burst + 5 MiB/s x T)'], rows);
}

// Scale: 1,000 busy streams in 100 tenants, against a flat group of 1,000.
async function classesAtScale(): Promise<string> {
  const rate = 100 * MiB;
  const streams = 1000;
  const tenants = 100;
  const durationMs = 5000;
  const rows: string[][] = [];
  const ms = (x: number) => x.toFixed(0);
  const clock = countingClock();
  const contenders: { name: string; make(): Transform[]; fired?: () => number }[] = [
    {
      name: 'tokenpace: 100 tenants of 10',
      make: () => {
        const root = new ThrottleGroup({ rate, clock });
        const groups = Array.from({ length: tenants }, () => root.group());
        return Array.from({ length: streams }, (_, i) => (groups[i % tenants] as ThrottleGroup).throttle());
      },
      fired: () => clock.fired,
    },
    {
      name: 'tokenpace: one flat group',
      make: () => {
        const group = new ThrottleGroup({ rate, clock });
        return Array.from({ length: streams }, () => group.throttle());
      },
      fired: () => clock.fired,
    },
    {
      name: 'stream-throttle: one group',
      make: () => {
        const group = new streamThrottle.ThrottleGroup({ rate });
        return Array.from({ length: streams }, () => group.throttle());
      },
    },
  ];
  for (const c of contenders) {
    const f = await shortTermRun(c.make(), rate, durationMs, { fired: c.fired });
    const { recorder, readyMs, endMs } = f.result;
    let worst = 0;
    for (let t = readyMs + 500; t + 1000 <= endMs; t += 100) {
      const shares = recorder.shares(streams, t, t + 1000);
      const got = new Array<number>(tenants).fill(0);
      shares.forEach((bytes, i) => {
        got[i % tenants] = (got[i % tenants] as number) + bytes;
      });
      const share = got.reduce((a, b) => a + b, 0) / tenants;
      for (const g of got) worst = Math.max(worst, Math.abs(g / share - 1));
    }
    const deliveredMiBps = (f.aggregate * rate) / MiB;
    rows.push([
      c.name,
      f.aggregate.toFixed(4),
      `${(worst * 100).toFixed(1)} %`,
      `${ms(f.gapP50Ms)} / ${ms(f.gapP99Ms)}`,
      (f.cpuMsPerSecond / deliveredMiBps).toFixed(3),
      f.wakeupsPerSecond.toFixed(0),
    ]);
  }
  return table(
    [
      'contender (1,000 busy streams, 100 MiB/s)',
      'aggregate',
      'worst tenant off its share over a 1 s window',
      'longest gap ms (median / p99)',
      'CPU ms per delivered MiB',
      'wake-ups/s',
    ],
    rows,
  );
}

export const streamSection: Section = {
  id: 'stream',
  title: 'Streams: Throttle and ThrottleGroup against PassThrough, stream-throttle and throttle',
  async run() {
    const started = performance.now();
    /** Progress on stderr, so a long run shows where it is (the tables go to stdout). */
    // BENCH_STREAM_ONLY="short-term,nested caps" runs only the parts named (the others print as skipped).
    const only = process.env.BENCH_STREAM_ONLY?.split(',').map((name) => name.trim());
    const step = async (name: string, part: () => Promise<string>) => {
      if (only !== undefined && !only.includes(name)) return '(skipped: BENCH_STREAM_ONLY)';
      const t0 = performance.now();
      const out = await part();
      process.stderr.write(`  stream bench: ${name} in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`);
      return out;
    };
    const parts = [
      '### Throughput with an effectively unlimited cap (1 GiB of 64 KiB chunks, 8 in a row per sample, 15 rounds: median and range of the per-round ratios)',
      '',
      await step('throughput', throughput),
      '',
      '### The web form: WebThrottle with a cap it never reaches against a bare `new TransformStream()` (the same chunks, 4 transfers per sample, 15 rounds)',
      '',
      await step('web', webThroughput),
      '',
      '### The whole rate from every kind of source: a lone Throttle, and the aggregate of a 4-member group',
      '',
      await step('matrix', matrix),
      '',
      'Achieved: after a warm-up, the bytes delivered from the first pause in the output to the last (at the start',
      'of a pause the stream has just used up its bucket, so in between it passed exactly its rate; without such',
      'pauses, the least-squares slope) over the time between them, over the rate (runs of 1.5 s from 0.3 s; the',
      '1 KiB/s and 1 MiB/s cases all run at once, for 6 s from 3 s). For a slower source:',
      'the bytes delivered over the bytes it sent. Group: 4 members, each fed at 1.5x (0.5x) a quarter of the',
      'rate; Jain over the members (at 1 KiB/s a member gets one 250-byte piece a second, so over 3 s shares',
      'differ by a piece). Wake-ups:',
      "timers fired per second (the stream's or the group's). The 100 ms column is the larger of the two, as the",
      'sink saw it: a loaded event loop hands pieces to the sink up to a few ms after the cap passed them.',
      'CPU includes the sources and the sink. Where the',
      "source itself cannot deliver the rate (the ceiling below), the figure is the source's, not the cap's.",
      '',
      await step('ceilings', ceilings),
      '',
      '### Side by side with the peers: socket-like sources and real HTTP bodies',
      '',
      await step('peers', peers),
      '',
      'Socket-like: one run of 1 s. HTTP: node:http on 127.0.0.1 answering with an endless body, read with undici',
      `(one connection per body); after a warm-up run of each contender, ${HTTP_ROUNDS} interleaved runs of 2 s at each`,
      'rate, each round starting with the next contender: mean achieved and wake-ups, median CPU (source,',
      'transport and sink included).',
      '',
      '### Fairness: streams with 1, 4, 16 and 64 KiB chunks sharing 32 MiB/s (2 s, shares after 0.7 s)',
      '',
      await step('fairness', fairness),
      '',
      '### A blocked event loop (10 MiB/s, a synchronous source of 64 KiB chunks, 4 s, the slope from 0.4 s)',
      '',
      await step('blocked', blocked),
      '',
      `### Memory: a 1 GiB source of fresh 64 KiB buffers into 1 MiB/s for ${MEMORY_MS / 1000} s`,
      '',
      await step('memory', memory),
      '',
      '### Short-term fairness: N busy members sharing 100 MiB/s (synchronous sources of 64 KiB chunks)',
      '',
      await step('short-term', shortTerm),
      '',
      "First bytes: from when every pipeline was made (nothing flows before). Longest gap: each member's longest",
      'wait between two deliveries (or from its last to the end), over the members. Jain: the lowest over every',
      '1 s window from 0.5 s on (windows every 100 ms). Runs of 3 s (5 s for 1,000).',
      '',
      '### Bandwidth classes: nested caps and borrowing (root 30 MiB/s, socket-like sources of 64 KiB chunks)',
      '',
      await step('nested caps', nestedCaps),
      '',
      'A and B over 0.5-1.5 s; then B stops (A over the 0.2-1.2 s after), then a new stream of B starts. "After":',
      'the first 100 ms window after the change at 97 % of the target (100 ms is the least it can say).',
      '',
      '### Bandwidth classes: ceilings and guarantees (root 30 MiB/s)',
      '',
      await step('ceilings and guarantees', ceilingsAndGuarantees),
      '',
      '### Bandwidth classes at scale: 1,000 streams in 100 tenants under one root (synchronous sources, 5 s)',
      '',
      await step('classes at scale', classesAtScale),
      '',
      `(section ran in ${((performance.now() - started) / 1000).toFixed(0)} s)`,
    ];
    return parts.join('\n');
  },
};
