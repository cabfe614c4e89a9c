/**
 * One process of the fleet bandwidth bench (bench/fleet-bandwidth.ts), bundled with esbuild.
 * argv: port, key, JSON options { rate, lease, streams, localRate? }. Prints "ready", waits for "go" on stdin,
 * then pipes `streams` endless sources through one fleet ThrottleGroup into counting sinks, and
 * prints one JSON line every 100 ms: { t (wall ms), bytes (per stream, cumulative), exchanges }.
 */

import { Readable, Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { RedisBandwidthStore, ThrottleGroup } from '../src/index.js';

const [portArg, key, json] = process.argv.slice(2);
const o = JSON.parse(json as string) as { rate: number; lease: number; streams: number; localRate?: number };
const client = new Redis({ port: Number(portArg), host: '127.0.0.1' });
const store = new RedisBandwidthStore({ client, onError: 'deny', timeout: 1000 });
// localRate: the baseline, a group of this process's own at that rate (no store)
const group =
  o.localRate === undefined
    ? new ThrottleGroup({ rate: o.rate, store, key: key as string, lease: o.lease })
    : new ThrottleGroup({ rate: o.localRate });
const bytes = new Array<number>(o.streams).fill(0);
const chunk = Buffer.alloc(64 * 1024);
const wall = () => performance.timeOrigin + performance.now();

function start(): void {
  for (let i = 0; i < o.streams; i++) {
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
    source.pipe(group.throttle()).pipe(sink);
  }
  setInterval(() => {
    process.stdout.write(`${JSON.stringify({ t: wall(), bytes, exchanges: group.fleet?.exchanges ?? 0 })}\n`);
  }, 100);
}

process.stdout.write('ready\n');
process.stdin.once('data', () => start());
