/**
 * Every level's bounds, both sides, for any class tree: on a fake clock, with
 * socket-like sources (chunks on timers) faster than anything a member may
 * get, every class and member passes at most burst + rate * T in any window
 * for each rate of its own, and at least its share (HTB's allocation as a
 * fluid, fluidShares) over a second.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ThrottleGroup } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import {
  type BuiltClass,
  buildTree,
  type ClassSpec,
  countMembers,
  effectiveGuaranteed,
  fluidShares,
  materialize,
  piecesOf,
  type Shape,
  stopTree,
  withStreamBuffers,
} from './classes-support.js';
import { advance, maxInWindow, type Piece, settle } from './support.js';

const fraction = (min: number, max: number) => fc.option(fc.double({ min, max, noNaN: true }), { nil: undefined });
const weight = fc.option(fc.constantFrom(1, 2, 3, 0.5), { nil: undefined });
const memberShape = fc.record({ weight, cap: fraction(0.1, 0.9), guaranteed: fraction(0, 1) });
const shape: fc.Arbitrary<Shape> = fc.letrec<{ node: Shape }>((tie) => ({
  node: fc.record({
    weight,
    ceiling: fraction(0.2, 1),
    guaranteed: fraction(0, 1),
    members: fc.array(memberShape, { minLength: 0, maxLength: 3 }),
    groups: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.constant([]),
      fc.array(tie('node'), { maxLength: 2 }),
    ) as fc.Arbitrary<Shape[]>,
  }),
})).node;

const WINDOWS_MS = [0, 5, 50, 200, 1000];

function expectBound(pieces: readonly Piece[], burst: number, ratePerSecond: number): void {
  for (const windowMs of WINDOWS_MS) {
    expect(maxInWindow(pieces, windowMs)).toBeLessThanOrEqual(burst + (ratePerSecond * windowMs) / 1000 + 1e-6);
  }
}

describe('bandwidth classes: every level keeps its bounds, both sides', () => {
  it('for any tree of weights, guarantees and ceilings: at most burst + rate * T, at least its share', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 400_000, max: 3_000_000 }),
        shape,
        fc.constantFrom(4096, 16384, 32768),
        // Stream buffers: Node 20's default, and Node 22's and later.
        fc.constantFrom(16 * 1024, 64 * 1024),
        async (rootRate, rootShape, chunkBytes, highWaterMark) => {
          const spec = materialize(rootShape, rootRate, 0.9 * rootRate, true);
          fc.pre(countMembers(spec) > 0 && countMembers(spec) <= 10);
          await withStreamBuffers(highWaterMark, () => checkTree(rootRate, spec, chunkBytes));
        },
      ),
      { numRuns: Number(process.env.PROPERTY_RUNS ?? 25) },
    );
  }, 300_000);
});

async function checkTree(rootRate: number, spec: ClassSpec, chunkBytes: number): Promise<void> {
  const fake = fakeClock();
  const root = new ThrottleGroup({ rate: rootRate, clock: fake.clock });
  // Every source outruns anything its member may get.
  const built = buildTree(fake, root, spec, 1.5 * rootRate, chunkBytes);
  const fromMs = 600;
  const toMs = 3600;
  await advance(fake, toMs);
  const shares = fluidShares(rootRate, spec);
  const seconds = (toMs - fromMs) / 1000;
  // Every class and member with its share and the burst of its own bucket
  // (if it has one), checked against burst + rate * T on the way.
  const entities: { pieces: Piece[]; share: number; burst: number; label: string }[] = [];
  const walk = (c: BuiltClass) => {
    const burst = c.spec.rate === undefined ? 0 : c.group.burst;
    const pieces = piecesOf(c);
    if (c.spec.rate !== undefined) expectBound(pieces, burst, c.spec.rate);
    const label = `class (guaranteed ${effectiveGuaranteed(c.spec)})`;
    entities.push({ pieces, share: shares.get(c.spec) as number, burst, label });
    for (const m of c.members) {
      const own = m.spec.rate === undefined ? 0 : (m.member.throttle.burst as number);
      if (m.spec.rate !== undefined) expectBound(m.member.sink.pieces, own, m.spec.rate);
      entities.push({
        pieces: m.member.sink.pieces,
        share: shares.get(m.spec) as number,
        burst: own,
        label: 'member',
      });
    }
    for (const g of c.groups) walk(g);
  };
  expectBound(piecesOf(built), root.burst, rootRate);
  walk(built);
  /**
   * At least its share over the span, less what the buckets may hold at
   * either end (a TBF flow with demand passes at least rate * T - burst, and
   * one with a bucket of its own may pass its saved burst over its rate and
   * take it from the others), a round of its share (the longest is 125 ms)
   * and two chunks.
   */
  const bursts = entities.reduce((sum, o) => sum + o.burst, root.burst);
  for (const e of entities) {
    let got = 0;
    for (const p of e.pieces) if (p.atMs > fromMs && p.atMs <= toMs) got += p.bytes;
    const floor = e.share * seconds * 0.97 - bursts - e.share * 0.125 - 2 * chunkBytes;
    if (got < floor) {
      expect.fail(`${e.label}: ${got} bytes, less than ${floor.toFixed(0)} (share ${e.share.toFixed(0)}/s)`);
    }
  }
  stopTree(built);
  await settle();
  expect(root.size, 'members left').toBe(0);
  expect(fake.pending(), 'timers left').toBe(0);
}
