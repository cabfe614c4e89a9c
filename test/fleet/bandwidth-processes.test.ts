/**
 * Fleet bandwidth groups in real worker processes (test/fleet/fixtures/bandwidth-child.ts) through a
 * real redis-server: a class's ceiling (`group({ key, rate })`) holds for its streams in every
 * process beside the root's rate. Real time, tolerant: the machine is shared.
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
    const options = { rate, classes: [{ key: 'c', rate: ceiling, streams: 2 }, { streams: 1 }] };
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
});
