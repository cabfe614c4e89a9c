/**
 * A few short tests on the real clock and timers, with tolerances: the bytes
 * come out intact, a capped transfer takes the time the cap says, and a fast
 * source into a slow cap holds no more than the streams' buffers.
 * None asserts how fast the machine is; each takes well under 2 s. The HTTP
 * ones take a few MiB/s, a small part of what loopback carries even on a
 * loaded machine, and allow 3 % below the rate.
 */

import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Agent, request } from 'undici';
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

/**
 * The most `pieces` carry beyond `burstBytes + ratePerSecond * T` in any
 * window of T between two of them (both ends closed), bytes: at most 0 when the
 * bound holds. Exact over every pair, in one pass: for each piece j, the least
 * of (bytes before i) - rate * t_i over the pieces i up to j.
 */
function mostOverBound(pieces: readonly { atMs: number; bytes: number }[], burstBytes: number, ratePerSecond: number) {
  let worst = Number.NEGATIVE_INFINITY;
  let least = Number.POSITIVE_INFINITY;
  let before = 0;
  for (const { atMs, bytes } of pieces) {
    const earned = (ratePerSecond * atMs) / 1000;
    least = Math.min(least, before - earned);
    before += bytes;
    worst = Math.max(worst, before - earned - least - burstBytes);
  }
  return worst;
}

/** Float rounding in {@link mostOverBound}'s sums (times near 10^5 ms, byte counts near 10^7), bytes. */
const ROUNDING_BYTES = 1e-3;

describe('the bound at the output, on the real clock', () => {
  // A sink writes synchronously, inside the stream's push(): performance.now() there is the
  // instant the piece came out. The bound holds for every window, with nothing allowed but float
  // rounding, however late or early the timers fire.
  it('a Throttle: no window of T at its sink carries more than burst + rate * T', async () => {
    const rate = 4 * 1048576;
    const burst = 256 * 1024;
    for (const chunkBytes of [65536, 16384]) {
      const throttle = new Throttle({ rate, burst });
      const sink = timedSink();
      await pipeline(byteSource(burst + rate * 0.6, chunkBytes), throttle, sink);
      expect(mostOverBound(sink.pieces, burst, rate), `chunks of ${chunkBytes}`).toBeLessThanOrEqual(ROUNDING_BYTES);
    }
  });

  it('a subgroup ceiling, and the root above it: no window of T carries more than burst + rate * T', async () => {
    const rate = 4 * 1048576;
    const burst = 256 * 1024;
    const root = new ThrottleGroup({ rate: 3 * rate });
    const tenant = root.group({ rate, burst });
    const other = root.group();
    const members = [tenant.throttle(), tenant.throttle(), other.throttle()];
    const sinks = members.map(() => timedSink());
    await Promise.all(
      members.map((member, i) =>
        pipeline(byteSource(i === 2 ? 3 * rate * 0.6 : rate * 0.4, 65536), member, sinks[i] as Writable),
      ),
    );
    const byTime = (pieces: { atMs: number; bytes: number }[]) => pieces.sort((a, b) => a.atMs - b.atMs);
    const tenantPieces = byTime([...(sinks[0]?.pieces ?? []), ...(sinks[1]?.pieces ?? [])]);
    expect(mostOverBound(tenantPieces, burst, rate), 'the ceiling').toBeLessThanOrEqual(ROUNDING_BYTES);
    const all = byTime(sinks.flatMap((sink) => sink.pieces));
    expect(mostOverBound(all, root.burst, 3 * rate), 'the root').toBeLessThanOrEqual(ROUNDING_BYTES);
  });
});

/** A loopback server whose every response is an endless body of 64 KiB writes, kept by backpressure. */
async function endlessServer(): Promise<{ url: string; close(): Promise<void> }> {
  const block = Buffer.alloc(65536, 0x62);
  const server = createServer((_req, res) => {
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

/** A sink recording (time, bytes) of every piece, on the real clock. */
function timedSink(): Writable & { pieces: { atMs: number; bytes: number }[] } {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      sink.pieces.push({ atMs: performance.now(), bytes: chunk.length });
      callback();
    },
  }) as Writable & { pieces: { atMs: number; bytes: number }[] };
  sink.pieces = [];
  return sink;
}

function bytesBetween(pieces: readonly { atMs: number; bytes: number }[], fromMs: number, toMs: number): number {
  let sum = 0;
  for (const piece of pieces) if (piece.atMs > fromMs && piece.atMs <= toMs) sum += piece.bytes;
  return sum;
}

function mostIn100ms(pieces: readonly { atMs: number; bytes: number }[]): number {
  let best = 0;
  let sum = 0;
  let start = 0;
  for (let end = 0; end < pieces.length; end++) {
    sum += (pieces[end] as { bytes: number }).bytes;
    while ((pieces[end] as { atMs: number }).atMs - (pieces[start] as { atMs: number }).atMs > 100)
      sum -= (pieces[start++] as { bytes: number }).bytes;
    if (sum > best) best = sum;
  }
  return best;
}

describe('Throttle and ThrottleGroup on real HTTP bodies (node:http on 127.0.0.1, undici)', () => {
  /** Runs each undici body through its throttle into a timed sink for `durationMs`. */
  async function transfer(url: string, throttles: readonly Writable[], durationMs: number) {
    const dispatcher = new Agent({ connections: throttles.length });
    const sinks = throttles.map(() => timedSink());
    const start = performance.now();
    const bodies = await Promise.all(throttles.map(() => request(url, { dispatcher }).then((r) => r.body)));
    const done = bodies.map((body, i) =>
      pipeline(body, throttles[i] as Writable, sinks[i] as Writable).catch(() => undefined),
    );
    await new Promise((resolve) => setTimeout(resolve, durationMs));
    const end = performance.now();
    for (const body of bodies) body.destroy();
    await Promise.all(done);
    await dispatcher.close();
    return { sinks, start, end };
  }

  it('a lone Throttle delivers its rate from an HTTP body, and burst + rate * 0.1 s at most in 100 ms', async () => {
    const server = await endlessServer();
    try {
      const rate = 4 * 1048576;
      // Best of two runs: a process descheduled for tens of ms (the suite runs in parallel, on a
      // shared machine) loses what overflows the 50 ms bucket, as a blocked event loop does; a
      // shortfall of the cap itself (0.82 before exact charging) shows in both runs.
      let best = 0;
      for (let attempt = 0; attempt < 2 && best < 0.97; attempt++) {
        const throttle = new Throttle({ rate });
        const { sinks, end } = await transfer(server.url, [throttle], 1300);
        const pieces = (sinks[0] as ReturnType<typeof timedSink>).pieces;
        const first = (pieces[0] as { atMs: number }).atMs;
        // After the initial burst: 1 s from 250 ms in.
        const steady = bytesBetween(pieces, first + 250, end) / ((end - first - 250) / 1000);
        expect(steady / rate).toBeLessThanOrEqual(1.1);
        best = Math.max(best, steady / rate);
        // The sink writes inside the stream's push(): it sees the bound itself.
        expect(mostIn100ms(pieces)).toBeLessThanOrEqual((throttle.burst as number) + rate * 0.1 + ROUNDING_BYTES);
      }
      expect(best).toBeGreaterThanOrEqual(0.97);
    } finally {
      await server.close();
    }
  });

  it('a group of three HTTP bodies: the members add up to the rate, in equal shares', async () => {
    const server = await endlessServer();
    try {
      const rate = 6 * 1048576;
      let best = 0; // best of two runs, as above
      for (let attempt = 0; attempt < 2 && best < 0.97; attempt++) {
        const group = new ThrottleGroup({ rate });
        const members = [0, 1, 2].map(() => group.throttle());
        const { sinks, end } = await transfer(server.url, members, 1300);
        const all = sinks.flatMap((sink) => sink.pieces).sort((a, b) => a.atMs - b.atMs);
        const first = (all[0] as { atMs: number }).atMs;
        const from = first + 250;
        const seconds = (end - from) / 1000;
        const shares = sinks.map((sink) => bytesBetween(sink.pieces, from, end) / seconds);
        const sum = shares.reduce((a, b) => a + b, 0);
        expect(sum / rate).toBeLessThanOrEqual(1.1);
        for (const share of shares) expect(share / sum).toBeGreaterThan(0.3);
        expect(mostIn100ms(all)).toBeLessThanOrEqual(group.burst + rate * 0.1 + ROUNDING_BYTES); // as above
        expect(group.size).toBe(0);
        best = Math.max(best, sum / rate);
      }
      expect(best).toBeGreaterThanOrEqual(0.97);
    } finally {
      await server.close();
    }
  });
});
