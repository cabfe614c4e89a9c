/**
 * One process of the fleet bandwidth bench (bench/fleet-bandwidth.ts), bundled with esbuild.
 * argv: port, key, JSON options { rate, lease, streams, localRate?, sampleMs?, classes? }. Prints
 * "ready", waits for "go" on stdin, then pipes endless sources through one fleet ThrottleGroup into
 * counting sinks (with `classes`, each class's streams through a fleet class of that group), and
 * prints one JSON line at once and every `sampleMs` (100): { t (wall ms), bytes (per stream,
 * cumulative, class by class), exchanges }.
 */

import { Readable, Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { RedisBandwidthStore, ThrottleGroup } from '../src/index.js';

interface ClassSpec {
  key: string;
  guaranteed?: number;
  weight?: number;
  rate?: number;
  streams: number;
}
const [portArg, key, json] = process.argv.slice(2);
const o = JSON.parse(json as string) as {
  rate: number;
  lease: number;
  streams: number;
  localRate?: number;
  sampleMs?: number;
  classes?: ClassSpec[];
};
const client = new Redis({ port: Number(portArg), host: '127.0.0.1' });
const store = new RedisBandwidthStore({ client, onError: 'deny', timeout: 1000 });
// localRate: the baseline, a group of this process's own at that rate (no store)
const group =
  o.localRate === undefined
    ? new ThrottleGroup({ rate: o.rate, store, key: key as string, lease: o.lease })
    : new ThrottleGroup({ rate: o.localRate });
const members: ThrottleGroup[] = [];
for (const c of o.classes ?? [{ streams: o.streams }]) {
  const spec = c as Partial<ClassSpec> & { streams: number };
  const target =
    spec.key === undefined
      ? group
      : group.group({ key: spec.key, guaranteed: spec.guaranteed, weight: spec.weight, rate: spec.rate });
  for (let i = 0; i < spec.streams; i++) members.push(target);
}
const bytes = new Array<number>(members.length).fill(0);
const chunk = Buffer.alloc(64 * 1024);
const wall = () => performance.timeOrigin + performance.now();

function start(): void {
  members.forEach((target, i) => {
    const source = new Readable({
      read() {
        this.push(chunk);
      },
    });
    const sink = new Writable({
      highWaterMark: 64 * 1024,
      write(c: Buffer, _e, cb) {
        bytes[i] = (bytes[i] as number) + c.length;
        cb();
      },
    });
    source.pipe(target.throttle()).pipe(sink);
  });
  const report = () =>
    process.stdout.write(`${JSON.stringify({ t: wall(), bytes, exchanges: group.fleet?.exchanges ?? 0 })}\n`);
  report();
  setInterval(report, o.sampleMs ?? 100);
}

process.stdout.write('ready\n');
process.stdin.once('data', () => start());
