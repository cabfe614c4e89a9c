/**
 * Bandwidth classes on a fake clock: subgroups with weights, guaranteed rates
 * and ceilings, borrowing, join and leave, counters, live changes, and the
 * one timer per tree; sources are socket-like (chunks on timers).
 */

import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { type Throttle, ThrottleGroup } from '../../src/index.js';
import { type FakeClock, fakeClock } from '../helpers/fake-clock.js';
import { advance, type Piece, recordingSink, settle, timedSource } from './support.js';

const MiB = 1048576;

/** Bytes a sink received at times in (fromMs, toMs]. */
function between(pieces: readonly Piece[], fromMs: number, toMs: number): number {
  let sum = 0;
  for (const piece of pieces) if (piece.atMs > fromMs && piece.atMs <= toMs) sum += piece.bytes;
  return sum;
}

function jain(values: readonly number[]): number {
  const sum = values.reduce((a, b) => a + b, 0);
  const squares = values.reduce((a, b) => a + b * b, 0);
  return (sum * sum) / (values.length * squares);
}

/** A member of `group` fed by a socket-like source at `bytesPerSecond` (16 KiB chunks every 2 ms). */
function busyMember(fake: FakeClock, group: ThrottleGroup, bytesPerSecond: number, options = {}) {
  const throttle: Throttle = group.throttle(options);
  const sink = recordingSink(() => fake.timers.now);
  const source = timedSource(fake, { bytesPerSecond, chunkBytes: 16384, intervalMs: 2 });
  pipeline(source, throttle, sink).catch(() => {});
  return {
    throttle,
    sink,
    source,
    stop: () => {
      source.destroy();
      throttle.destroy();
    },
  };
}

describe('bandwidth classes: weights', () => {
  it('nested caps: root 3 MiB/s, A (weight 2, 5 streams) gets 2, 0.4 each, B (weight 1) gets 1', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const a = root.group({ weight: 2 });
    const b = root.group({ weight: 1 });
    const aMembers = Array.from({ length: 5 }, () => busyMember(fake, a, rate));
    const bMember = busyMember(fake, b, 2 * rate);
    await advance(fake, 3000);
    const aShares = aMembers.map((m) => between(m.sink.pieces, 1000, 3000) / 2);
    const bShare = between(bMember.sink.pieces, 1000, 3000) / 2;
    const aTotal = aShares.reduce((x, y) => x + y, 0);
    console.log(
      aShares.map((s) => (s / MiB).toFixed(3)),
      (aTotal / MiB).toFixed(3),
      (bShare / MiB).toFixed(3),
    );
    expect(aTotal / (2 * MiB)).toBeGreaterThan(0.98);
    expect(bShare / MiB).toBeGreaterThan(0.98);
    expect(jain(aShares)).toBeGreaterThanOrEqual(0.99);
    expect((aTotal + bShare) / rate).toBeGreaterThanOrEqual(0.99);
    for (const m of [...aMembers, bMember]) m.stop();
    await settle();
    expect(fake.pending()).toBe(0);
  }, 60_000);
});
