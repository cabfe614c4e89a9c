/**
 * Sources, sinks and measurements for bench/stream.ts: the kinds of source a
 * stream meets (synchronous, socket-like, slower than the cap, real HTTP
 * bodies), a recorder shared by every sink of a run, wake-up counting, and
 * the figures a run reports.
 */

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, type Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Agent, request } from 'undici';

export const KiB = 1024;
export const MiB = 1024 ** 2;
export const GiB = 1024 ** 3;

setFlagsFromString('--expose-gc');
export const gc = runInNewContext('gc') as () => void;

// The bench's own timers (sleeps, source ticks) use these, so they are not counted as wake-ups.
const realSetTimeout = globalThis.setTimeout;
const realSetInterval = globalThis.setInterval;
const realClearInterval = globalThis.clearInterval;

/** Timer callbacks fired so far by everyone but the bench itself (tokenpace's clock and the peers use the global). */
export let timersFired = 0;
globalThis.setTimeout = ((fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) =>
  realSetTimeout(() => {
    timersFired++;
    fn(...args);
  }, ms)) as typeof setTimeout;

export const sleep = (ms: number) => new Promise<void>((resolve) => realSetTimeout(resolve, ms));

/** How a source delivers. */
export type SourceKind = 'sync' | 'socket' | 'slow';

/**
 * A source of endless `chunkBytes` chunks (one shared buffer).
 * - `sync`: a chunk whenever it is read, synchronously (an in-memory source, a fast file), but
 *   yielding to the event loop every 256 chunks.
 * - `socket` / `slow`: bytes arrive on a 1 ms timer at `bytesPerSecond` (1.5x or 0.5x the cap),
 *   like a socket: what has arrived is pushed in chunks of up to `chunkBytes` (smaller ones at low
 *   rates: at least 10 ms of arrivals), and arrivals stop while the reader is paused (the sender is
 *   blocked), up to a few chunks' worth.
 */
export function makeSource(
  kind: SourceKind,
  chunkBytes: number,
  bytesPerSecond: number,
): Readable & { produced: number } {
  const shared = Buffer.alloc(chunkBytes, 0x61);
  if (kind === 'sync') {
    // Yields to the event loop every 256 chunks: a source that never does (and a cap it cannot
    // reach) would keep the process in one synchronous loop, and no timer would ever fire.
    let count = 0;
    const readable = new Readable({
      read() {
        readable.produced += chunkBytes;
        if (++count % 256 === 0) setImmediate(() => this.push(shared));
        else this.push(shared);
      },
    }) as Readable & { produced: number };
    readable.produced = 0;
    return readable;
  }
  const minPush = Math.max(1, Math.min(chunkBytes, Math.floor(bytesPerSecond / 100)));
  const maxCredit = Math.max(4 * chunkBytes, bytesPerSecond / 100);
  let credit = 0;
  let last = performance.now();
  let paused = false;
  const readable = new Readable({
    read() {
      paused = false;
    },
    destroy(error, callback) {
      realClearInterval(timer);
      callback(error);
    },
  }) as Readable & { produced: number };
  readable.produced = 0;
  const timer = realSetInterval(() => {
    const now = performance.now();
    credit = Math.min(maxCredit, credit + ((now - last) * bytesPerSecond) / 1000);
    last = now;
    while (!paused && credit >= minPush) {
      const size = Math.min(chunkBytes, Math.floor(credit));
      credit -= size;
      readable.produced += size;
      if (!readable.push(size === chunkBytes ? shared : shared.subarray(0, size))) paused = true;
    }
  }, 1);
  return readable;
}

/**
 * Pieces of one member that arrive within this long of the first are recorded as one (at the first
 * one's time). At 1 GiB/s of 1 KiB chunks, one entry per piece grew three arrays by a million
 * entries a second, and their reallocation stalled the whole process for up to 60 ms: stalls the
 * bench itself caused, which a stream under test then paid for in rate. The 100 ms window checks
 * move by at most this long's bytes.
 */
const MERGE_MS = 0.05;

/** The shortest gap in a paced output that {@link Recorder.steadyRate} takes for a pause, ms. */
const PAUSE_MS = 5;

/** Every piece every sink of a run saw: time, bytes, and which member. */
export class Recorder {
  times: number[] = [];
  sizes: number[] = [];
  members: number[] = [];

  sink(member: number): Writable {
    return new Writable({
      highWaterMark: 64 * KiB,
      write: (chunk: Buffer, _encoding, callback) => {
        const now = performance.now();
        const last = this.times.length - 1;
        if (last >= 0 && this.members[last] === member && now - (this.times[last] as number) < MERGE_MS) {
          this.sizes[last] = (this.sizes[last] as number) + chunk.length;
        } else {
          this.times.push(now);
          this.sizes.push(chunk.length);
          this.members.push(member);
        }
        callback();
      },
    });
  }

  /**
   * Bytes per second after `fromMs`. A paced stream's output comes in steps (a wake piece, or a
   * stretch at the source's speed, then nothing until the bucket holds the next piece), so a slope
   * fitted over a few steps is off by up to a step's share: with a 100 ms bucket and a source at
   * 1.5x the rate a step is about 250 ms, and fits over 0.45 s gave 0.98 to 1.06. At the start of
   * each pause the stream has just used up its bucket (its source is busy), so between two such
   * moments it passed exactly the rate: this is the bytes from the first pause after `fromMs` to the
   * last, over the time between them. Pauses are gaps of at least 5 ms and at least half the
   * longest. Without two of them at least a quarter of the span apart (a continuous flow, say) it
   * is {@link steadySlope}. An output paused by something else than an empty bucket (a blocked
   * event loop) needs {@link steadySlope}.
   */
  steadyRate(fromMs: number): number {
    const { times, sizes } = this;
    let first = 0;
    while (first < times.length && (times[first] as number) < fromMs) first++;
    let longest = 0;
    for (let k = first; k + 1 < times.length; k++) {
      longest = Math.max(longest, (times[k + 1] as number) - (times[k] as number));
    }
    const threshold = Math.max(PAUSE_MS, longest / 2);
    let fromK = -1;
    let toK = -1;
    for (let k = first; k + 1 < times.length; k++) {
      if ((times[k + 1] as number) - (times[k] as number) < threshold) continue;
      if (fromK < 0) fromK = k;
      toK = k;
    }
    const span = (times[times.length - 1] ?? 0) - fromMs;
    if (longest < PAUSE_MS || fromK < 0 || (times[toK] as number) - (times[fromK] as number) < span / 4) {
      return this.steadySlope(fromMs);
    }
    let bytes = 0;
    for (let k = fromK + 1; k <= toK; k++) bytes += sizes[k] as number;
    return (bytes * 1000) / ((times[toK] as number) - (times[fromK] as number));
  }

  /** Bytes per second after `fromMs`: the least-squares slope of bytes delivered against time. */
  steadySlope(fromMs: number): number {
    let n = 0;
    let cumulative = 0;
    let sumT = 0;
    let sumB = 0;
    let sumTT = 0;
    let sumTB = 0;
    for (let k = 0; k < this.times.length; k++) {
      cumulative += this.sizes[k] as number;
      const t = this.times[k] as number;
      if (t < fromMs) continue;
      const seconds = (t - fromMs) / 1000;
      n++;
      sumT += seconds;
      sumB += cumulative;
      sumTT += seconds * seconds;
      sumTB += seconds * cumulative;
    }
    if (n < 2) return Number.NaN;
    return (n * sumTB - sumT * sumB) / (n * sumTT - sumT * sumT);
  }

  /** Bytes at times in [fromMs, toMs), per member. */
  shares(memberCount: number, fromMs: number, toMs: number): number[] {
    const out = new Array<number>(memberCount).fill(0);
    for (let k = 0; k < this.times.length; k++) {
      const t = this.times[k] as number;
      const member = this.members[k] as number;
      if (t >= fromMs && t < toMs) out[member] = (out[member] as number) + (this.sizes[k] as number);
    }
    return out;
  }

  /** The most bytes in any window of `windowMs`. */
  maxInWindow(windowMs: number): number {
    let best = 0;
    let sum = 0;
    let start = 0;
    const { times, sizes } = this;
    for (let end = 0; end < times.length; end++) {
      sum += sizes[end] as number;
      while ((times[end] as number) - (times[start] as number) > windowMs) sum -= sizes[start++] as number;
      if (sum > best) best = sum;
    }
    return best;
  }

  get total(): number {
    return this.sizes.reduce((a, b) => a + b, 0);
  }

  /**
   * Per member: when its first bytes arrived (ms after `startMs`; Infinity if none by `toMs`) and the
   * longest it went without a delivery after that, counting the wait from its last delivery to `toMs`.
   */
  deliveryGaps(memberCount: number, startMs: number, toMs: number): { firstMs: number[]; longestGapMs: number[] } {
    const first = new Array<number>(memberCount).fill(Number.POSITIVE_INFINITY);
    const last = new Array<number>(memberCount).fill(Number.NaN);
    const longest = new Array<number>(memberCount).fill(0);
    for (let k = 0; k < this.times.length; k++) {
      const t = this.times[k] as number;
      if (t > toMs) break;
      const m = this.members[k] as number;
      const previous = last[m] as number;
      if (Number.isNaN(previous)) first[m] = t - startMs;
      else if (t - previous > (longest[m] as number)) longest[m] = t - previous;
      last[m] = t;
    }
    for (let m = 0; m < memberCount; m++) {
      const previous = last[m] as number;
      longest[m] = Number.isNaN(previous) ? toMs - startMs : Math.max(longest[m] as number, toMs - previous);
    }
    return { firstMs: first, longestGapMs: longest };
  }

  /**
   * The lowest Jain index over every window of `windowMs` from `fromMs` to `toMs` (windows start
   * every `stepMs`), of each member's bytes over its expected share (`shares[i]`, default equal).
   */
  minWindowJain(
    memberCount: number,
    fromMs: number,
    toMs: number,
    windowMs = 1000,
    stepMs = 100,
    shares?: readonly number[],
  ): number {
    let worst = 1;
    for (let t = fromMs; t + windowMs <= toMs + 1e-9; t += stepMs) {
      const got = this.shares(memberCount, t, t + windowMs).map((bytes, i) => bytes / (shares?.[i] ?? 1));
      worst = Math.min(worst, jain(got));
    }
    return worst;
  }
}

/** The `p`-th percentile (0..100) of `values`, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export function jain(values: readonly number[]): number {
  const sum = values.reduce((a, b) => a + b, 0);
  const squares = values.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 1 : (sum * sum) / (values.length * squares);
}

export interface RunResult {
  recorder: Recorder;
  startMs: number;
  /** When every pipeline had been made (nothing flows before: they start on the next tick). */
  readyMs: number;
  endMs: number;
  wakeupsPerSecond: number;
  cpuMsPerSecond: number;
}

/** Runs source -> transform -> sink pipelines for `durationMs`, then destroys them. */
export async function run(
  pairs: readonly { source: Readable; transform?: Transform }[],
  durationMs: number,
): Promise<RunResult> {
  gc();
  const recorder = new Recorder();
  const streams: (Readable | Writable | Transform)[] = [];
  const firedBefore = timersFired;
  const cpuBefore = process.cpuUsage();
  const startMs = performance.now();
  const done = pairs.map(({ source, transform }, member) => {
    const sink = recorder.sink(member);
    streams.push(source, sink);
    if (transform) streams.push(transform);
    return transform ? pipeline(source, transform, sink) : pipeline(source, sink);
  });
  const readyMs = performance.now();
  await sleep(durationMs);
  const cpu = process.cpuUsage(cpuBefore);
  const endMs = performance.now();
  const fired = timersFired - firedBefore;
  for (const stream of streams) stream.destroy();
  await Promise.allSettled(done);
  const seconds = (endMs - startMs) / 1000;
  return {
    recorder,
    startMs,
    readyMs,
    endMs,
    wakeupsPerSecond: fired / seconds,
    cpuMsPerSecond: (cpu.user + cpu.system) / 1000 / seconds,
  };
}

/** A local HTTP server that answers every GET with an endless body of 64 KiB writes (kept by backpressure). */
export async function endlessServer(): Promise<{ url: string; close(): Promise<void> }> {
  const block = Buffer.alloc(64 * KiB, 0x62);
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const write = () => {
      while (!res.destroyed && res.write(block)) {}
    };
    res.on('drain', write);
    res.on('error', () => {});
    write();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An undici response body from `url` (a fresh connection per body, so bodies do not share a socket). */
export async function httpBody(url: string): Promise<Readable> {
  const dispatcher = new Agent({ connections: 1 });
  const { body } = await request(url, { dispatcher });
  body.once('close', () => {
    dispatcher.close().catch(() => {});
  });
  return body;
}

/** What a run of many busy members sharing one rate shows over short windows. */
export interface ShortTermFigures {
  /** Bytes delivered from `warmupMs` on over the rate's bytes in that time. */
  aggregate: number;
  /** When each member's first bytes arrived, ms after every pipeline was made (nothing flows before): median and last. */
  firstP50Ms: number;
  firstMaxMs: number;
  /** Each member's longest wait between deliveries: median, 99th percentile and worst. */
  gapP50Ms: number;
  gapP99Ms: number;
  gapMaxMs: number;
  /** The lowest Jain index over every 1 s window from `warmupMs` on (windows every 100 ms). */
  minJain1s: number;
  cpuMsPerSecond: number;
  wakeupsPerSecond: number;
}

/**
 * Runs `transforms.length` members, each fed by a busy source (synchronous, `chunkBytes` chunks),
 * for `durationMs`, and measures them over short windows. `shares[i]` is member i's expected
 * share of `ratePerSecond` (default equal), for the Jain index.
 */
export async function shortTermRun(
  transforms: readonly Transform[],
  ratePerSecond: number,
  durationMs: number,
  options: {
    chunkBytes?: number;
    warmupMs?: number;
    kind?: SourceKind;
    shares?: readonly number[];
    /** The contender's own count of timers fired (a counting clock), else every timer in the process. */
    fired?: () => number;
  } = {},
): Promise<ShortTermFigures & { result: RunResult }> {
  const firedBefore = options.fired?.();
  const chunkBytes = options.chunkBytes ?? 64 * KiB;
  const warmupMs = options.warmupMs ?? 500;
  const kind = options.kind ?? 'sync';
  const n = transforms.length;
  const pairs = transforms.map((transform) => ({
    source: makeSource(kind, chunkBytes, (1.5 * ratePerSecond) / n),
    transform,
  }));
  const result = await run(pairs, durationMs);
  const { recorder, startMs, readyMs, endMs } = result;
  const gaps = recorder.deliveryGaps(n, readyMs, endMs);
  const from = startMs + warmupMs;
  const delivered = recorder.shares(n, from, endMs).reduce((a, b) => a + b, 0);
  return {
    result,
    aggregate: delivered / ((ratePerSecond * (endMs - from)) / 1000),
    firstP50Ms: percentile(gaps.firstMs, 50),
    firstMaxMs: Math.max(...gaps.firstMs),
    gapP50Ms: percentile(gaps.longestGapMs, 50),
    gapP99Ms: percentile(gaps.longestGapMs, 99),
    gapMaxMs: Math.max(...gaps.longestGapMs),
    minJain1s: recorder.minWindowJain(n, from, endMs, 1000, 100, options.shares),
    cpuMsPerSecond: result.cpuMsPerSecond,
    wakeupsPerSecond:
      options.fired === undefined || firedBefore === undefined
        ? result.wakeupsPerSecond
        : ((options.fired() - firedBefore) * 1000) / (endMs - startMs),
  };
}

/**
 * Pipelines started and stopped while one recorder watches them (for runs whose members come and
 * go): `add` starts source -> transform -> the recorder's sink for a new member and returns its
 * index, `stop` destroys one, `end` destroys the rest and reports CPU and wake-ups per second.
 */
export class Session {
  readonly recorder = new Recorder();
  readonly startMs = performance.now();
  readonly #streams: (Readable | Transform)[][] = [];
  readonly #done: Promise<unknown>[] = [];
  readonly #cpuBefore = process.cpuUsage();
  readonly #firedBefore = timersFired;

  add(source: Readable, transform: Transform): number {
    const member = this.#streams.length;
    this.#streams.push([source, transform]);
    this.#done.push(pipeline(source, transform, this.recorder.sink(member)).catch(() => {}));
    return member;
  }

  stop(member: number): void {
    for (const stream of this.#streams[member] ?? []) stream.destroy();
  }

  async end(): Promise<{ endMs: number; cpuMsPerSecond: number; wakeupsPerSecond: number }> {
    const cpu = process.cpuUsage(this.#cpuBefore);
    const endMs = performance.now();
    const fired = timersFired - this.#firedBefore;
    for (let member = 0; member < this.#streams.length; member++) this.stop(member);
    await Promise.allSettled(this.#done);
    const seconds = (endMs - this.startMs) / 1000;
    return { endMs, cpuMsPerSecond: (cpu.user + cpu.system) / 1000 / seconds, wakeupsPerSecond: fired / seconds };
  }

  /** Bytes per second the given members passed together over [fromMs, toMs). */
  rate(members: readonly number[], fromMs: number, toMs: number): number {
    const shares = this.recorder.shares(this.#streams.length, fromMs, toMs);
    return (members.reduce((sum, m) => sum + (shares[m] as number), 0) * 1000) / (toMs - fromMs);
  }

  /**
   * How long after `eventMs` the given members first passed `target` bytes per second (97 % of it)
   * over a window of 100 ms that starts after the event, ms (checked every 5 ms; NaN if never
   * within `withinMs`). 100 ms is the least it can say.
   */
  reachedAfter(members: readonly number[], eventMs: number, target: number, withinMs = 2000): number {
    for (let d = 100; d <= withinMs; d += 5) {
      if (this.rate(members, eventMs + d - 100, eventMs + d) >= 0.97 * target) return d;
    }
    return Number.NaN;
  }
}
