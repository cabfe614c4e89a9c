/**
 * Many busy streams on a fake clock, with socket-like sources (chunks on
 * timers): 1,000 in one group, and 1,000 in 100 tenants, at 100 MiB/s. Over
 * short windows: first bytes, the longest gap between deliveries, Jain over
 * every 1 s window, every tenant's share over every 1 s window.
 */

import { describe, expect, it } from 'vitest';
import { ThrottleGroup } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { type BusyMember, between, busyMember, jain, MiB } from './classes-support.js';
import { advance, settle } from './support.js';

const RATE = 100 * MiB;
const STREAMS = 1000;
const RUN_MS = 3000;
const FROM_MS = 500;

/** Each member's longest wait between deliveries (and from its last one to the end), in order. */
function longestGaps(members: readonly BusyMember[]): number[] {
  const gaps = members.map((m) => {
    const times = m.sink.pieces.map((p) => p.atMs);
    let longest = RUN_MS - (times.at(-1) ?? 0);
    for (let k = 1; k < times.length; k++) longest = Math.max(longest, (times[k] as number) - (times[k - 1] as number));
    return longest;
  });
  return gaps.sort((a, b) => a - b);
}

const p99 = (sorted: readonly number[]) => sorted[Math.ceil(0.99 * sorted.length) - 1] as number;

/** The bytes of each group of members (member i is in group i % groups) over (fromMs, toMs]. */
function perGroup(members: readonly BusyMember[], groups: number, fromMs: number, toMs: number): number[] {
  const out = new Array<number>(groups).fill(0);
  members.forEach((m, i) => {
    out[i % groups] = (out[i % groups] as number) + between(m.sink.pieces, fromMs, toMs);
  });
  return out;
}

async function run(tenants: number) {
  const fake = fakeClock();
  const root = new ThrottleGroup({ rate: RATE, clock: fake.clock });
  const classes = tenants === 0 ? [root] : Array.from({ length: tenants }, () => root.group());
  const members = Array.from({ length: STREAMS }, (_, i) =>
    busyMember(fake, classes[i % classes.length] as ThrottleGroup, (1.5 * RATE) / STREAMS),
  );
  await advance(fake, RUN_MS);
  const delivered = members.reduce((sum, m) => sum + between(m.sink.pieces, FROM_MS, RUN_MS), 0);
  const done = async () => {
    for (const m of members) m.stop();
    await settle();
    expect(fake.pending()).toBe(0);
    expect(root.size).toBe(0);
  };
  return { members, aggregate: delivered / ((RATE * (RUN_MS - FROM_MS)) / 1000), done };
}

describe('1,000 busy streams at 100 MiB/s', () => {
  it('in one group: first bytes within 250 ms, gaps under 250 ms at p99, Jain >= 0.99 over every 1 s window', async () => {
    const { members, aggregate, done } = await run(0);
    expect(aggregate).toBeGreaterThanOrEqual(0.99);
    expect(Math.max(...members.map((m) => m.sink.pieces[0]?.atMs ?? Number.POSITIVE_INFINITY))).toBeLessThan(250);
    expect(p99(longestGaps(members))).toBeLessThan(250);
    for (let t = FROM_MS; t + 1000 <= RUN_MS; t += 100) {
      expect(jain(perGroup(members, STREAMS, t, t + 1000))).toBeGreaterThanOrEqual(0.99);
    }
    await done();
  }, 120_000);

  it('in 100 tenants: the whole rate, every tenant within 2 % of its share over every 1 s window', async () => {
    const { members, aggregate, done } = await run(100);
    expect(aggregate).toBeGreaterThanOrEqual(0.99);
    expect(p99(longestGaps(members))).toBeLessThanOrEqual(250);
    for (let t = FROM_MS; t + 1000 <= RUN_MS; t += 100) {
      const got = perGroup(members, 100, t, t + 1000);
      const share = got.reduce((a, b) => a + b, 0) / got.length;
      for (const g of got) expect(Math.abs(g / share - 1)).toBeLessThanOrEqual(0.02);
    }
    await done();
  }, 120_000);
});
