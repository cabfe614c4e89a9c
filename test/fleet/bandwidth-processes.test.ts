/**
 * Fleet bandwidth groups in real worker processes (test/fleet/fixtures/bandwidth-child.ts) through a
 * real redis-server: a class's ceiling (`group({ key, rate })`) holds for its streams in every
 * process beside the root's rate; the HTB comparison's tree of fleet classes gives each class its
 * share with its streams spread over 3 processes; a process back from idle has its share within 200 ms while the
 * others keep theirs. Real time, tolerant: the machine is shared.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { type Worker, Workers } from './workers.js';

const MiB = 1024 * 1024;
const workers = new Workers('bandwidth-child', 'bandwidth-child.ts');
let server: RedisServer;
beforeAll(async () => {
  await workers.build();
  server = await startRedis();
});
afterAll(async () => {
  workers.killAll();
  await server.stop();
});

interface Sample {
  t: number;
  bytes: number[];
  ended: number;
  errors: number;
  starts: number;
}

/** A worker's samples as they come. */
function collect(worker: Worker): Sample[] {
  const samples: Sample[] = [];
  (async () => {
    for (;;) {
      const line = await worker.next();
      if (line === undefined) return;
      samples.push(JSON.parse(line) as Sample);
    }
  })().catch(() => {});
  return samples;
}

/** Bytes of class `i` passed between wall times `from` and `to`, linear between samples. */
function bytesAt(samples: readonly Sample[], i: number, t: number): number {
  for (let k = 1; k < samples.length; k++) {
    const a = samples[k - 1] as Sample;
    const b = samples[k] as Sample;
    if (b.t >= t) {
      const f = b.t === a.t ? 1 : Math.min(1, Math.max(0, (t - a.t) / (b.t - a.t)));
      return (a.bytes[i] as number) + f * ((b.bytes[i] as number) - (a.bytes[i] as number));
    }
  }
  return (samples.at(-1)?.bytes[i] as number) ?? 0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const wall = () => performance.timeOrigin + performance.now();

describe('fleet classes in worker processes', () => {
  it("a class's ceiling holds across 3 processes, beside the root's rate", async () => {
    const rate = 3 * MiB;
    const ceiling = 1 * MiB;
    const key = `classes-${process.pid}-${Date.now()}`;
    // weight 3 beside the 3 root streams: half the rate, above its ceiling
    const options = { rate, classes: [{ key: 'c', rate: ceiling, weight: 3, streams: 2 }, { streams: 1 }] };
    const started = [0, 1, 2].map(() => workers.start(server.port, key, 'class', options));
    for (const w of started) expect(await w.next()).toBe('ready');
    const samples = started.map(collect);
    for (const w of started) w.process.stdin?.write('go\n');
    await sleep(1200);
    const from = wall();
    await sleep(2000);
    const to = wall();
    await sleep(250); // a sample after `to`
    for (const w of started) w.process.stdin?.write('stop\n');
    const seconds = (to - from) / 1000;
    const perClass = [0, 1].map(
      (i) => samples.reduce((s, list) => s + bytesAt(list, i, to) - bytesAt(list, i, from), 0) / seconds,
    );
    const [c, root] = perClass as [number, number];
    expect(c / ceiling).toBeGreaterThan(0.9);
    expect(c / ceiling).toBeLessThan(1.05);
    expect((c + root) / rate).toBeGreaterThan(0.9);
    expect((c + root) / rate).toBeLessThan(1.05);
  }, 30_000);

  it("the HTB comparison's tree, each class's streams over 3 processes, gives each class its share", async () => {
    const rate = 8 * MiB;
    const key = `htb-${process.pid}-${Date.now()}`;
    const tree = [
      { key: 'a', guaranteed: MiB, weight: 1 },
      { key: 'b', guaranteed: 3 * MiB, weight: 3 },
      { key: 'c', guaranteed: 2 * MiB, weight: 2, rate: 3 * MiB },
    ];
    // each class's streams spread unevenly over the processes
    const streams = [
      [1, 3, 1],
      [2, 2, 4],
      [3, 1, 1],
    ];
    const started = streams.map((n) =>
      workers.start(server.port, key, 'htb', {
        rate,
        classes: tree.map((c, i) => ({ ...c, streams: n[i] as number })),
      }),
    );
    for (const w of started) expect(await w.next()).toBe('ready');
    const samples = started.map(collect);
    for (const w of started) w.process.stdin?.write('go\n');
    await sleep(1200);
    const from = wall();
    await sleep(2000);
    const to = wall();
    await sleep(250);
    for (const w of started) w.process.stdin?.write('stop\n');
    const seconds = (to - from) / 1000;
    const perClass = [0, 1, 2].map(
      (i) => samples.reduce((s, list) => s + bytesAt(list, i, to) - bytesAt(list, i, from), 0) / seconds,
    );
    // HTB: each its guarantee, the 2 MiB/s left by weight 1 : 3 : 2 (C below its ceiling)
    const shares = [MiB + (2 * MiB) / 6, 3 * MiB + MiB, 2 * MiB + (2 * MiB) / 3];
    // (within 2 % on a quiet machine; wider here, for a loaded one)
    for (const [i, share] of shares.entries()) {
      expect((perClass[i] as number) / share).toBeGreaterThan(0.9);
      expect((perClass[i] as number) / share).toBeLessThan(1.1);
    }
  }, 30_000);
});

describe('a fleet group in worker processes', () => {
  it('a process back from idle reaches its share within 200 ms, and the others keep theirs', async () => {
    const rate = 8 * MiB;
    const quarter = rate / 4;
    const key = `return-${process.pid}-${Date.now()}`;
    const busy = { rate, sampleMs: 20, classes: [{ streams: 8 }] };
    // 1 s of its quarter, then its streams end: it goes idle
    const late = { rate, sampleMs: 20, classes: [{ streams: 8, bytes: quarter / 8 }] };
    const started = [busy, busy, busy, late].map((o) => workers.start(server.port, key, 'return', o));
    for (const w of started) expect(await w.next()).toBe('ready');
    const samples = started.map(collect);
    for (const w of started) w.process.stdin?.write('go\n');
    await sleep(2500);
    const lateSamples = samples[3] as Sample[];
    expect(lateSamples.at(-1)?.ended).toBe(8); // idle since about 1 s
    (started[3] as Worker).process.stdin?.write('go\n');
    await sleep(1300);
    for (const w of started) w.process.stdin?.write('stop\n');
    const back = lateSamples.find((s) => s.starts === 2)?.t as number; // its own clock read at the restart
    expect(back).toBeDefined();
    const rateOf = (list: readonly Sample[][], from: number, to: number) =>
      list.reduce((s, l) => s + bytesAt(l, 0, back + to) - bytesAt(l, 0, back + from), 0) / ((to - from) / 1000);
    // within 200 ms it passes at its share (the first 50 ms may still be the call's round trip)
    expect(rateOf([lateSamples], 0, 200) / quarter).toBeGreaterThan(0.75);
    expect(rateOf([lateSamples], 200, 1000) / quarter).toBeGreaterThan(0.9);
    expect(rateOf([lateSamples], 200, 1000) / quarter).toBeLessThan(1.1);
    // the others: together at least their three quarters from one lease after its return
    expect(rateOf(samples.slice(0, 3), 200, 1000) / (3 * quarter)).toBeGreaterThan(0.9);
  }, 30_000);
});
