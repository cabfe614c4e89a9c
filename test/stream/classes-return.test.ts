/**
 * A class that comes back from idle, on a fake clock: it takes no lump, and
 * its busy siblings keep their guaranteed rates in every 100 ms window while
 * it returns. The tree: root 8 MiB/s; A guaranteed 1 MiB/s, weight 1; B
 * guaranteed 3 MiB/s, weight 3; C guaranteed 2 MiB/s, ceiling 3 MiB/s,
 * weight 2. B and C are busy; then A joins (for the first time, or after an
 * idle spell), with a guarantee of 1 MiB/s, 0.25 MiB/s or none.
 */

import { describe, expect, it } from 'vitest';
import { ThrottleGroup } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { type BusyMember, between, busyMember, MiB } from './classes-support.js';
import { advance, type Piece, settle } from './support.js';

/** The fewest bytes in any window of `windowMs` (open at its start, closed at its end) starting from `fromMs` to `toMs - windowMs`, whole ms apart. */
function leanestWindow(pieces: readonly Piece[], fromMs: number, toMs: number, windowMs: number): number {
  let least = Number.POSITIVE_INFINITY;
  for (let startMs = fromMs; startMs + windowMs <= toMs; startMs++) {
    least = Math.min(least, between(pieces, startMs, startMs + windowMs));
  }
  return least;
}

const RATE = 8 * MiB;
/** The root's quantum: 5 ms of its rate. */
const QUANTUM = Math.ceil((RATE * 5) / 1000);

describe('bandwidth classes: a class back from idle', () => {
  for (const guaranteedA of [MiB, MiB / 4, 0]) {
    for (const how of ['joins', 'returns'] as const) {
      it(`A (guaranteed ${guaranteedA / MiB} MiB/s) ${how}: no lump, and B and C keep their guarantees in every 100 ms`, async () => {
        const fake = fakeClock();
        const root = new ThrottleGroup({ rate: RATE, clock: fake.clock });
        const a = root.group({ weight: 1, guaranteed: guaranteedA || undefined });
        const b = root.group({ weight: 3, guaranteed: 3 * MiB });
        const c = root.group({ weight: 2, guaranteed: 2 * MiB, rate: 3 * MiB });
        const bMember = busyMember(fake, b, 2 * RATE);
        const cMember = busyMember(fake, c, 2 * RATE);
        let aMember: BusyMember | undefined;
        if (how === 'returns') {
          aMember = busyMember(fake, a, 2 * RATE);
          await advance(fake, 1000);
          aMember.stop(); // A goes idle
          await advance(fake, 1000);
        } else {
          await advance(fake, 1500);
        }
        const backAt = fake.timers.now;
        aMember = busyMember(fake, a, 2 * RATE);
        await advance(fake, 1000);

        // A's share with all three busy: its guarantee and its weight's part of the rest.
        const excess = RATE - guaranteedA - 5 * MiB;
        const shareA = guaranteedA + excess / 6;
        const firstA = between(aMember.sink.pieces, backAt, backAt + 100);
        expect(firstA, "A's first 100 ms").toBeLessThanOrEqual(shareA * 0.1 + QUANTUM);
        // And it does come back: at least its share over its first second, less a round.
        expect(between(aMember.sink.pieces, backAt, backAt + 1000)).toBeGreaterThan(shareA * (1 - 0.125) * 0.97);

        // Every 100 ms window that overlaps A's return, and the second after it.
        const leanestB = leanestWindow(bMember.sink.pieces, backAt - 100, backAt + 1000, 100);
        const leanestC = leanestWindow(cMember.sink.pieces, backAt - 100, backAt + 1000, 100);
        expect(leanestB / (3 * MiB * 0.1), "B's leanest 100 ms, of its guarantee").toBeGreaterThanOrEqual(1);
        expect(leanestC / (2 * MiB * 0.1), "C's leanest 100 ms, of its guarantee").toBeGreaterThanOrEqual(1);

        for (const m of [aMember, bMember, cMember]) m.stop();
        await settle();
        expect(fake.pending()).toBe(0);
      }, 60_000);
    }
  }
});
