/**
 * Fleet bandwidth bench: one `ThrottleGroup({ rate, store, key })` shared by real worker processes
 * through one real redis-server on loopback (bench/fleet-bandwidth-child.ts). Each worker pipes
 * endless sources (64 KiB chunks) through its group and reports its streams' byte counts every
 * 100 ms; the figures below are computed from those samples (linear between them).
 *
 * - aggregate: 4 processes x 8 streams; each whole second's aggregate against the rate, the worst
 *   window of T against the stated bound burst + rate x (T + lease), the streams' Jain index per
 *   1 s window, and the store calls per second per process;
 * - the lease's size against the calls per second (100, 200, 400 ms);
 * - fairness by demand: a process of 1 stream beside one of 31;
 * - a process killed (SIGKILL): what the 3 others pass in the lease after, and in the second after;
 * - a returning process: idle, then 8 streams: its part of its quarter in its first lease and after,
 *   timed from its own first sample (taken as its streams start), sampled every 20 ms;
 * - fleet classes: the HTB comparison's tree, each class's streams over 3 processes, against HTB.
 *
 * Beside the aggregate, a baseline: 4 processes each with a group of its own at a quarter of the
 * rate (no store), run right after on the same machine: what the machine itself lets through.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { startRedis } from '../test/helpers/redis-server.js';
import { bundledProbe, type Section, table } from './harness.js';

const MiB = 1024 * 1024;
let childBundle = '';
let port = 0;
let keySeq = 0;

interface Sample {
  t: number;
  bytes: number[];
  exchanges: number;
}

interface Worker {
  process: ChildProcess;
  samples: Sample[];
  ready: Promise<void>;
  go(): void;
}

interface ClassSpec {
  key: string;
  guaranteed: number;
  weight: number;
  rate?: number;
  streams: number;
}

interface WorkerOptions {
  rate: number;
  lease: number;
  streams: number;
  localRate?: number | undefined;
  sampleMs?: number;
  classes?: ClassSpec[] | undefined;
}

function spawnWorker(key: string, options: WorkerOptions): Worker {
  const p = spawn(process.execPath, [childBundle, String(port), key, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const samples: Sample[] = [];
  let onReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    onReady = resolve;
  });
  createInterface({ input: p.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    if (line === 'ready') onReady();
    else samples.push(JSON.parse(line) as Sample);
  });
  return { process: p, samples, ready, go: () => p.stdin?.write('go\n') };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const wall = () => performance.timeOrigin + performance.now();

/** A worker's stream `i` (or all, i = -1) cumulative bytes at wall time t, linear between samples. */
function at(w: Worker, t: number, i = -1): number {
  const s = w.samples;
  const value = (x: Sample) => (i < 0 ? x.bytes.reduce((a, b) => a + b, 0) : (x.bytes[i] as number));
  if (s.length === 0 || t <= (s[0] as Sample).t) return 0;
  for (let k = 1; k < s.length; k++) {
    const b = s[k] as Sample;
    if (b.t >= t) {
      const a = s[k - 1] as Sample;
      return value(a) + ((value(b) - value(a)) * (t - a.t)) / (b.t - a.t);
    }
  }
  return value(s[s.length - 1] as Sample);
}

function passed(ws: readonly Worker[], from: number, to: number): number {
  return ws.reduce((sum, w) => sum + at(w, to) - at(w, from), 0);
}

function jain(xs: readonly number[]): number {
  const sum = xs.reduce((a, b) => a + b, 0);
  const squares = xs.reduce((a, b) => a + b * b, 0);
  return (sum * sum) / (xs.length * squares);
}

async function fleet(
  count: number,
  options: Omit<WorkerOptions, 'streams' | 'classes'> & { streams: number | number[]; classes?: ClassSpec[][] },
) {
  const key = `bw-${process.pid}-${keySeq++}`;
  const ws = Array.from({ length: count }, (_, i) =>
    spawnWorker(key, {
      ...options,
      streams: Array.isArray(options.streams) ? (options.streams[i] as number) : options.streams,
      classes: options.classes?.[i],
    }),
  );
  for (const w of ws) await w.ready;
  return ws;
}

function stop(ws: readonly Worker[]): void {
  for (const w of ws) w.process.kill('SIGKILL');
}

function pct(x: number): string {
  return `${(x * 100).toFixed(2)} %`;
}

const bench = {
  async aggregate(rate: number, lease: number, seconds: number, localRate?: number) {
    const ws = await fleet(4, { rate, lease, streams: 8, localRate });
    const t0 = wall();
    for (const w of ws) w.go();
    await sleep(seconds * 1000 + 150);
    stop(ws);
    const perSecond: number[] = [];
    for (let s = 1; s < seconds; s++) perSecond.push(passed(ws, t0 + s * 1000, t0 + (s + 1) * 1000) / rate);
    const burst = Math.max(0.05, (2 * lease) / 1000) * rate;
    const worst = [0.1, 0.5, 1].map((T) => {
      let max = 0;
      for (let a = t0; a + T * 1000 <= t0 + seconds * 1000; a += 20) max = Math.max(max, passed(ws, a, a + T * 1000));
      return { T, max, bound: burst + rate * (T + lease / 1000) };
    });
    const jains: number[] = [];
    for (let s = 1; s < seconds; s++) {
      const a = t0 + s * 1000;
      const b = a + 1000;
      const xs: number[] = [];
      for (const w of ws) for (let i = 0; i < 8; i++) xs.push(at(w, b, i) - at(w, a, i));
      jains.push(jain(xs));
    }
    const calls = ws.map((w) => {
      const a = w.samples.find((x) => x.t >= t0 + 1000) as Sample;
      const b = w.samples[w.samples.length - 1] as Sample;
      return ((b.exchanges - a.exchanges) * 1000) / (b.t - a.t);
    });
    return { perSecond, worst, jains, calls };
  },

  async demand(rate: number, lease: number, seconds: number) {
    const ws = await fleet(2, { rate, lease, streams: [1, 31] });
    const t0 = wall();
    for (const w of ws) w.go();
    await sleep(seconds * 1000 + 150);
    stop(ws);
    const a = t0 + 1000;
    const b = t0 + seconds * 1000;
    const lone = at(ws[0] as Worker, b, 0) - at(ws[0] as Worker, a, 0);
    const others: number[] = [];
    for (let i = 0; i < 31; i++) others.push(at(ws[1] as Worker, b, i) - at(ws[1] as Worker, a, i));
    const total = lone + others.reduce((x, y) => x + y, 0);
    return {
      lone: lone / total,
      meanOther: others.reduce((x, y) => x + y, 0) / 31 / total,
      jain: jain([lone, ...others]),
    };
  },

  async kill(rate: number, lease: number) {
    const ws = await fleet(4, { rate, lease, streams: 8 });
    for (const w of ws) w.go();
    await sleep(2000);
    const killedAt = wall();
    (ws[3] as Worker).process.kill('SIGKILL');
    await sleep(2000);
    stop(ws);
    const survivors = ws.slice(0, 3);
    const first = passed(survivors, killedAt, killedAt + lease) / (rate * (lease / 1000));
    const after = passed(survivors, killedAt + lease, killedAt + lease + 1000) / rate;
    return { first, after };
  },

  async returning(rate: number, lease: number) {
    const ws = await fleet(4, { rate, lease, streams: 8, sampleMs: 20 });
    for (const w of ws.slice(0, 3)) w.go();
    await sleep(2000);
    (ws[3] as Worker).go();
    await sleep(1500);
    stop(ws);
    const late = ws[3] as Worker;
    // timed from its own first sample, taken as its streams start
    const startAt = (late.samples[0] as Sample).t;
    const quarter = (from: number, to: number) => passed([late], from, to) / ((rate / 4) * ((to - from) / 1000));
    const firstLease = quarter(startAt, startAt + lease);
    const then = quarter(startAt + lease, startAt + lease + 1000);
    let othersMin = Number.POSITIVE_INFINITY;
    for (let a = startAt; a + 100 <= startAt + 1400; a += 50) {
      for (const w of ws.slice(0, 3)) othersMin = Math.min(othersMin, passed([w], a, a + 100) / (rate * 0.1));
    }
    return { firstLease, then, othersMin };
  },

  /** The HTB comparison's tree of fleet classes, each class's streams spread over 3 processes. */
  async classes(rate: number, lease: number, seconds: number) {
    const tree = [
      { key: 'a', guaranteed: MiB, weight: 1 },
      { key: 'b', guaranteed: 3 * MiB, weight: 3 },
      { key: 'c', guaranteed: 2 * MiB, weight: 2, rate: 3 * MiB },
    ];
    const streams = [
      [1, 3, 1],
      [2, 2, 4],
      [3, 1, 1],
    ];
    const classes = streams.map((n) => tree.map((c, i) => ({ ...c, streams: n[i] as number })));
    const ws = await fleet(3, { rate, lease, streams: 0, classes });
    const t0 = wall();
    for (const w of ws) w.go();
    await sleep(seconds * 1000 + 150);
    stop(ws);
    // HTB: each its guarantee, the 2 MiB/s left by weight 1 : 3 : 2 (C below its ceiling)
    const share = [MiB + (2 * MiB) / 6, 4 * MiB, 2 * MiB + (2 * MiB) / 3];
    const perSecond: number[][] = [];
    for (let s = 1; s < seconds; s++) {
      const from = t0 + s * 1000;
      perSecond.push(
        tree.map((_, k) => {
          let sum = 0;
          ws.forEach((w, p) => {
            const counts = streams[p] as number[];
            const first = counts.slice(0, k).reduce((a, b) => a + b, 0);
            for (let i = first; i < first + (counts[k] as number); i++) sum += at(w, from + 1000, i) - at(w, from, i);
          });
          return sum / (share[k] as number);
        }),
      );
    }
    return perSecond;
  },
};

export const fleetBandwidthSection: Section = {
  id: 'fleet-bandwidth',
  title: 'A fleet bandwidth cap: one ThrottleGroup over 4 processes through Redis',
  async run() {
    childBundle = await bundledProbe(new URL('./fleet-bandwidth-child.ts', import.meta.url));
    const server = await startRedis();
    port = server.port;
    const rate = Number(process.env.FLEET_BW_RATE ?? 100 * MiB);
    const out: string[] = [];
    try {
      const agg = await bench.aggregate(rate, 200, 6);
      const base = await bench.aggregate(rate, 200, 6, rate / 4);
      out.push(
        `Rate ${(rate / MiB).toFixed(0)} MiB/s, lease 200 ms, 4 processes x 8 streams, 6 s. Beside it, the baseline on the same machine right after: 4 processes each with a group of its own at a quarter of the rate (no store). Aggregate per whole second after the first:\n`,
      );
      out.push(
        table(
          ['second', 'fleet / rate', "fleet: streams' Jain", 'baseline / rate', "baseline: streams' Jain"],
          agg.perSecond.map((x, i) => [
            `s${i + 2}`,
            pct(x),
            (agg.jains[i] as number).toFixed(4),
            pct(base.perSecond[i] as number),
            (base.jains[i] as number).toFixed(4),
          ]),
        ),
      );
      out.push(
        '\nWorst window of T against the stated bound burst + rate x (T + lease) (burst = 2 leases of the rate):\n',
      );
      out.push(
        table(
          ['T', 'worst window / rate x T', 'bound / rate x T'],
          agg.worst.map((w) => [
            `${w.T * 1000} ms`,
            (w.max / (rate * w.T)).toFixed(3),
            (w.bound / (rate * w.T)).toFixed(3),
          ]),
        ),
      );
      const rows: string[][] = [['200 ms', agg.calls.map((c) => c.toFixed(1)).join(', ')]];
      for (const lease of [100, 400]) {
        const r = await bench.aggregate(rate, lease, 3);
        rows.push([`${lease} ms`, r.calls.map((c) => c.toFixed(1)).join(', ')]);
      }
      out.push('\nStore calls per second per process at steady state, by lease:\n');
      out.push(table(['lease', 'calls/s of each process'], rows));
      const d = await bench.demand(rate, 200, 4);
      out.push(
        `\nFairness by demand, 1 process of 1 stream beside 1 of 31 (ideal 1/32 = 3.125 %): the lone stream ${pct(d.lone)}, the mean of the 31 ${pct(d.meanOther)}, Jain index of the 32 streams ${d.jain.toFixed(4)}.`,
      );
      const k = await bench.kill(rate, 200);
      out.push(
        `\nA process of 4 killed (SIGKILL) at 2 s: the 3 others pass ${pct(k.first)} of the rate in the lease (200 ms) after the kill, and ${pct(k.after)} in the second after that.`,
      );
      const r = await bench.returning(rate, 200);
      out.push(
        `\nA process idle for 2 s beside 3 busy ones, then 8 streams (timed from its own clock as they start, sampled every 20 ms): it passes ${pct(r.firstLease)} of its quarter in its first lease (200 ms) and ${pct(r.then)} in the second after; meanwhile the others' lowest 100 ms window is ${pct(r.othersMin)} of the rate each (a quarter is 25 %).`,
      );
      const tree = await bench.classes(8 * MiB, 200, 5);
      out.push(
        "\nFleet classes, the HTB comparison's tree at 8 MiB/s (A guaranteed 1 MiB/s weight 1, B 3 MiB/s weight 3, C 2 MiB/s weight 2 ceiling 3 MiB/s), each class's streams over 3 processes (1/2/3, 3/2/1, 1/4/1), each class against its HTB share (1.33, 4, 2.67 MiB/s):\n",
      );
      out.push(
        table(
          ['second', 'A', 'B', 'C'],
          tree.map((row, i) => [`s${i + 2}`, ...row.map((x) => pct(x))]),
        ),
      );
    } finally {
      await server.stop();
    }
    return out.join('\n');
  },
};
