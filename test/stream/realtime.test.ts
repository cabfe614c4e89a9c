/**
 * A few short tests on the real clock and timers, with tolerances: the bytes
 * come out intact, a capped transfer takes the time the cap says, and a fast
 * source into a slow cap holds no more than the streams' buffers.
 * None asserts how fast the machine is; each takes well under 2 s.
 */

import { createHash, randomBytes } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { Throttle, ThrottleGroup } from '../../src/index.js';
import { byteSource } from './support.js';

/** A source that passes `data` in chunks of random sizes (1 byte to 64 KiB). */
function randomChunks(data: Buffer): Readable {
  let offset = 0;
  return new Readable({
    read() {
      if (offset >= data.length) {
        this.push(null);
        return;
      }
      const size = 1 + Math.floor(Math.random() * 65536);
      this.push(data.subarray(offset, offset + size));
      offset += size;
    },
  });
}

function hashingSink(): Writable & { digest(): string; bytes: number } {
  const hash = createHash('sha256');
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      sink.bytes += chunk.length;
      hash.update(chunk);
      callback();
    },
  }) as Writable & { digest(): string; bytes: number };
  sink.bytes = 0;
  sink.digest = () => hash.digest('hex');
  return sink;
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('Throttle in real time', () => {
  it('bytes out equal bytes in (sha256), alone and in a group', async () => {
    const data = randomBytes(4 * 1048576);
    const alone = hashingSink();
    await pipeline(randomChunks(data), new Throttle({ rate: '64MiB/s' }), alone);
    expect(alone.bytes).toBe(data.length);
    expect(alone.digest()).toBe(sha256(data));

    const group = new ThrottleGroup({ rate: '96MiB/s' });
    const inputs = [randomBytes(1048576 + 17), randomBytes(2 * 1048576), randomBytes(333_333)];
    const sinks = inputs.map(() => hashingSink());
    await Promise.all(
      inputs.map((input, i) =>
        pipeline(randomChunks(input), group.throttle(i === 2 ? { rate: '8MiB/s' } : {}), sinks[i] as Writable),
      ),
    );
    for (const [i, input] of inputs.entries()) expect(sinks[i]?.digest()).toBe(sha256(input));
    expect(group.size).toBe(0);
  });

  it('a capped transfer takes the time the cap says', async () => {
    const throttle = new Throttle({ rate: '2MiB/s' });
    const burst = throttle.burst as number;
    const total = burst + 1048576; // the burst at once, then 1 MiB at 2 MiB/s: 500 ms
    const start = performance.now();
    await pipeline(byteSource(total, 16384), throttle, hashingSink());
    const elapsedMs = performance.now() - start;
    expect(elapsedMs).toBeGreaterThanOrEqual(495); // never faster than the cap (a timer may fire <1 ms early)
    expect(elapsedMs).toBeLessThan(800); // and not much slower
    expect(throttle.counters.bytes).toBe(total);
    expect(throttle.counters.averageBytesPerSecond).toBeLessThan(total / 0.495);
  });

  it('memory stays flat: a fast source into a slow cap holds only the buffers', async () => {
    const source = byteSource(10 * 1024 ** 3, 65536); // 10 GiB, fresh buffers, produced only when read
    const throttle = new Throttle({ rate: '1MiB/s' });
    let received = 0;
    let maxInFlight = 0;
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        received += chunk.length;
        maxInFlight = Math.max(maxInFlight, source.produced - received);
        callback();
      },
    });
    const controller = new AbortController();
    const done = pipeline(source, throttle, sink, { signal: controller.signal }).catch((error: unknown) => error);
    const samples: number[] = [];
    const sampler = setInterval(() => samples.push(source.produced - received), 20);
    await new Promise((resolve) => setTimeout(resolve, 700));
    clearInterval(sampler);
    controller.abort();
    expect(await done).toMatchObject({ name: 'AbortError' });
    maxInFlight = Math.max(maxInFlight, ...samples);
    // Source buffer + the throttle's held chunk and write queue + one piece: a few 64 KiB chunks.
    expect(maxInFlight).toBeLessThanOrEqual(6 * 65536);
    // The source was held back by backpressure: about burst + 0.7 s of 1 MiB/s was produced, not gigabytes.
    expect(source.produced).toBeLessThan(2 * 1048576);
    expect(received).toBeGreaterThan(0.5 * 1048576);
  });
});
