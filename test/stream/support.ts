/**
 * Helpers for the stream tests: byte sources and recording sinks, and a way
 * to move a fake clock while the (real) microtask and nextTick queues let
 * the streams flow between timer firings.
 */

import { Readable, Writable } from 'node:stream';
import type { FakeClock } from '../helpers/fake-clock.js';

/** Lets nextTick, microtasks and setImmediate callbacks run until the streams are quiet. */
export async function settle(rounds = 4): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Advances the fake clock by `ms`, one millisecond at a time, letting the streams flow after each step. */
export async function advance(fake: FakeClock, ms: number): Promise<void> {
  await settle();
  for (let i = 0; i < ms; i++) {
    fake.timers.tick(1);
    await settle();
  }
}

/** Byte i of the pattern sources produce: a recognisable, non-repeating-per-chunk sequence. */
export function patternByte(i: number): number {
  return (i * 31 + (i >> 8)) & 0xff;
}

/**
 * A source of `totalBytes` bytes in chunks of the given sizes (cycled), each
 * chunk a fresh Buffer with the pattern bytes. Counts what it has produced.
 */
export function byteSource(
  totalBytes: number,
  chunkSizes: number | readonly number[],
  options: { highWaterMark?: number } = {},
): Readable & { produced: number } {
  const sizes = typeof chunkSizes === 'number' ? [chunkSizes] : chunkSizes;
  let position = 0;
  let index = 0;
  const source = new Readable({
    highWaterMark: options.highWaterMark,
    read() {
      if (position >= totalBytes) {
        this.push(null);
        return;
      }
      const size = Math.min(sizes[index++ % sizes.length] as number, totalBytes - position);
      const chunk = Buffer.allocUnsafe(size);
      for (let i = 0; i < size; i++) chunk[i] = patternByte(position + i);
      position += size;
      source.produced = position;
      this.push(chunk);
    },
  }) as Readable & { produced: number };
  source.produced = 0;
  return source;
}

export interface Piece {
  atMs: number;
  bytes: number;
}

/** A sink that records every piece with the clock's time, and keeps the bytes. */
export function recordingSink(now: () => number): Writable & { pieces: Piece[]; received: number; data(): Buffer } {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      sink.pieces.push({ atMs: now(), bytes: chunk.length });
      sink.received += chunk.length;
      chunks.push(chunk);
      callback();
    },
  }) as Writable & { pieces: Piece[]; received: number; data(): Buffer };
  sink.pieces = [];
  sink.received = 0;
  sink.data = () => Buffer.concat(chunks);
  return sink;
}

/** The most bytes in any window of `windowMs` (closed at both ends, as the conformance bound is). */
export function maxInWindow(pieces: readonly Piece[], windowMs: number): number {
  let best = 0;
  let sum = 0;
  let start = 0;
  for (let end = 0; end < pieces.length; end++) {
    sum += (pieces[end] as Piece).bytes;
    while ((pieces[end] as Piece).atMs - (pieces[start] as Piece).atMs > windowMs) {
      sum -= (pieces[start] as Piece).bytes;
      start++;
    }
    if (sum > best) best = sum;
  }
  return best;
}

/** Bytes per second over (fromMs, toMs]: the least-squares slope of the bytes delivered so far against time. */
export function slope(pieces: readonly Piece[], fromMs: number, toMs: number): number {
  const points: [number, number][] = [];
  let total = 0;
  for (const piece of pieces) {
    total += piece.bytes;
    if (piece.atMs > fromMs && piece.atMs <= toMs) {
      const last = points[points.length - 1];
      if (last && last[0] === piece.atMs) last[1] = total;
      else points.push([piece.atMs, total]);
    }
  }
  const n = points.length;
  const meanT = points.reduce((a, [t]) => a + t, 0) / n;
  const meanB = points.reduce((a, [, b]) => a + b, 0) / n;
  let covariance = 0;
  let variance = 0;
  for (const [t, b] of points) {
    covariance += (t - meanT) * (b - meanB);
    variance += (t - meanT) ** 2;
  }
  return (covariance / variance) * 1000;
}

/** Sum of piece bytes grouped by time: `[[0, 100], [50, 50], ...]`. */
export function byTime(pieces: readonly Piece[]): [number, number][] {
  const out: [number, number][] = [];
  for (const piece of pieces) {
    const last = out[out.length - 1];
    if (last && last[0] === piece.atMs) last[1] += piece.bytes;
    else out.push([piece.atMs, piece.bytes]);
  }
  return out;
}

/**
 * A socket-like source on the fake clock: bytes "arrive" at `bytesPerSecond`
 * on a timer every `intervalMs`, and what has arrived is pushed in chunks of
 * up to `chunkBytes` (the pattern bytes), between the stream's own wake-ups.
 * While the reader is paused nothing more is pushed; arrivals then pile up to
 * at most `maxBufferedBytes` (a socket's buffer; the sender is blocked beyond).
 * `stop()` clears its timer.
 */
export function timedSource(
  fake: FakeClock,
  options: {
    bytesPerSecond: number;
    chunkBytes: number;
    intervalMs: number;
    totalBytes?: number;
    maxBufferedBytes?: number;
  },
): Readable & { produced: number; stop(): void } {
  const { bytesPerSecond, chunkBytes, intervalMs } = options;
  const totalBytes = options.totalBytes ?? Number.POSITIVE_INFINITY;
  const maxBuffered = options.maxBufferedBytes ?? Math.max(4 * chunkBytes, (bytesPerSecond * intervalMs) / 1000);
  let arrived = 0; // bytes that have arrived and not been pushed yet
  let position = 0;
  let paused = false;
  const source = new Readable({
    read() {
      paused = false;
      flush();
    },
    destroy(error, callback) {
      fake.timers.clearInterval(timer);
      callback(error);
    },
  }) as Readable & { produced: number; stop(): void };
  const flush = () => {
    while (!paused && arrived >= 1 && position < totalBytes) {
      const size = Math.min(chunkBytes, Math.floor(arrived), totalBytes - position);
      const chunk = Buffer.allocUnsafe(size);
      for (let i = 0; i < size; i++) chunk[i] = patternByte(position + i);
      arrived -= size;
      position += size;
      source.produced = position;
      if (!source.push(chunk)) paused = true;
    }
    if (position >= totalBytes && !source.readableEnded) {
      fake.timers.clearInterval(timer);
      source.push(null);
    }
  };
  const timer = fake.timers.setInterval(() => {
    arrived = Math.min(maxBuffered, arrived + (bytesPerSecond * intervalMs) / 1000);
    flush(); // what a paused reader left in the buffer goes as soon as it reads again (read() above)
  }, intervalMs);
  source.produced = 0;
  source.stop = () => fake.timers.clearInterval(timer);
  return source;
}
