/**
 * Bandwidth classes on a fake clock: subgroups with weights, guaranteed rates
 * and ceilings, borrowing, join and leave, counters, live changes, and the
 * one timer per tree; sources are socket-like (chunks on timers).
 */

import { describe, expect, it } from 'vitest';
import { InvalidOptionError, ThrottleGroup } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { between, busyMember, jain, MiB, withStreamBuffers } from './classes-support.js';
import { advance, maxInWindow, settle } from './support.js';

describe('bandwidth classes: shares', () => {
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
    expect(aTotal / (2 * MiB)).toBeGreaterThan(0.98);
    expect(bShare / MiB).toBeGreaterThan(0.98);
    expect(jain(aShares)).toBeGreaterThanOrEqual(0.99);
    expect((aTotal + bShare) / rate).toBeGreaterThanOrEqual(0.99);
    expect(fake.pending()).toBe(1 + 6); // the root's timer, and the sources'
    for (const m of [...aMembers, bMember]) m.stop();
    await settle();
    expect(fake.pending()).toBe(0);
  }, 60_000);

  it('borrowing: an idle sibling lends its share at once, and gets it back at once', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const a = root.group({ weight: 2 });
    const b = root.group({ weight: 1 });
    const aMembers = Array.from({ length: 5 }, () => busyMember(fake, a, rate));
    let bMember = busyMember(fake, b, 2 * rate);
    await advance(fake, 1500);
    bMember.stop(); // B goes idle
    const idleAt = fake.timers.now;
    await advance(fake, 1000);
    const aDuring = aMembers.reduce((sum, m) => sum + between(m.sink.pieces, idleAt + 200, idleAt + 1000), 0);
    expect(aDuring / (rate * 0.8)).toBeGreaterThan(0.98);
    bMember = busyMember(fake, b, 2 * rate); // B is back
    const backAt = fake.timers.now;
    await advance(fake, 1000);
    expect(between(bMember.sink.pieces, backAt + 200, backAt + 1000) / (MiB * 0.8)).toBeGreaterThan(0.97);
    const aAfter = aMembers.reduce((sum, m) => sum + between(m.sink.pieces, backAt + 200, backAt + 1000), 0);
    expect(aAfter / (2 * MiB * 0.8)).toBeGreaterThan(0.97);
    for (const m of [...aMembers, bMember]) m.stop();
    await settle();
    expect(fake.pending()).toBe(0);
  }, 60_000);

  it('a ceiling is never passed, whatever is idle around it, and is reached when the rest is idle', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const capped = root.group({ rate: MiB / 2 });
    const other = root.group();
    const cappedMembers = [0, 1].map(() => busyMember(fake, capped, rate));
    const otherMembers = [0, 1].map(() => busyMember(fake, other, rate));
    await advance(fake, 1500);
    for (const m of otherMembers) m.stop();
    await advance(fake, 1500);
    const all = cappedMembers.flatMap((m) => m.sink.pieces).sort((x, y) => x.atMs - y.atMs);
    for (const windowMs of [0, 5, 50, 200, 1000]) {
      expect(maxInWindow(all, windowMs)).toBeLessThanOrEqual(capped.burst + ((MiB / 2) * windowMs) / 1000 + 1e-6);
    }
    // Alone, it gets its whole ceiling (not more).
    const alone = cappedMembers.reduce((sum, m) => sum + between(m.sink.pieces, 2000, 3000), 0);
    expect(alone / (MiB / 2)).toBeGreaterThan(0.98);
    expect(capped.counters.bytes).toBe(cappedMembers.reduce((sum, m) => sum + m.sink.received, 0));
    for (const m of cappedMembers) m.stop();
    await settle();
    expect(fake.pending()).toBe(0);
  }, 60_000);

  it('a class guaranteed 0.8 MiB/s against a weight-10 sibling gets its guarantee and its weight of the rest', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const sure = root.group({ guaranteed: 0.8 * MiB });
    const heavy = root.group({ weight: 10 });
    const sureMember = busyMember(fake, sure, rate);
    const heavyMembers = [0, 1, 2].map(() => busyMember(fake, heavy, rate));
    await advance(fake, 5000);
    // Over 4 s: the output comes in rounds of 75 ms, each window of 0.5 s within 7 % of the rate.
    const sureRate = between(sureMember.sink.pieces, 1000, 5000) / 4;
    const heavyRate = heavyMembers.reduce((sum, m) => sum + between(m.sink.pieces, 1000, 5000), 0) / 4;
    // 0.8 + (3 - 0.8) / 11 = 1.0 MiB/s; the heavy sibling 2.0.
    expect(sureRate / MiB).toBeGreaterThan(0.8);
    expect(sureRate / MiB).toBeGreaterThan(0.98);
    expect(sureRate / MiB).toBeLessThan(1.03);
    expect(heavyRate / (2 * MiB)).toBeGreaterThan(0.98);
    for (const m of [sureMember, ...heavyMembers]) m.stop();
    await settle();
  }, 60_000);

  it('weights on members: shares in proportion', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const members = [1, 2, 3].map((weight) => busyMember(fake, root, rate, { weight }));
    await advance(fake, 2500);
    const shares = members.map((m) => between(m.sink.pieces, 500, 2500) / 2);
    shares.forEach((share, i) => {
      expect(share / ((rate * (i + 1)) / 6)).toBeGreaterThan(0.97);
      expect(share / ((rate * (i + 1)) / 6)).toBeLessThan(1.03);
    });
    for (const m of members) m.stop();
    await settle();
  }, 60_000);
});

// Found by classes.property.test.ts on Node 20: with 16 KiB buffers a member holds one 32 KiB chunk
// at a time and runs dry between chunks. Only a child its own cap held goes first when it comes back
// (node.ts's `request`): B, capped above its share, runs dry, not short of its own tokens, and must
// not take a turn of its whole bucket each time it comes back.
describe('bandwidth classes: 32 KiB chunks through 16 KiB buffers', () => {
  it('a capped member among weighted siblings, in a class with a ceiling, gets its share', async () => {
    await withStreamBuffers(16 * 1024, async () => {
      const fake = fakeClock();
      const rate = 716_781;
      const chunk = 32 * 1024;
      const root = new ThrottleGroup({ rate, clock: fake.clock });
      const klass = root.group({ rate: 430_078, weight: 0.5 });
      const source = 1.5 * rate;
      const alone = busyMember(fake, root, source, { weight: 0.5 }, chunk);
      const a = busyMember(fake, klass, source, { rate: 60_446, weight: 0.5 }, chunk);
      const b = busyMember(fake, klass, source, { rate: 238_231, weight: 2 }, chunk);
      const c = busyMember(fake, klass, source, { weight: 3 }, chunk);
      await advance(fake, 3600);
      const perSecond = (m: typeof a) => between(m.sink.pieces, 600, 3600) / 3;
      for (const m of [alone, a, b, c]) m.stop();
      await settle();
      const half = rate / 2;
      expect(perSecond(alone) / half).toBeGreaterThan(0.97);
      expect(perSecond(a) / ((half * 0.5) / 5.5)).toBeGreaterThan(0.97);
      expect(perSecond(b) / ((half * 2) / 5.5)).toBeLessThan(1.03);
      expect(perSecond(c) / ((half * 3) / 5.5)).toBeGreaterThan(0.97);
    });
  }, 60_000);
});

describe('bandwidth classes: options and refusals', () => {
  it('subgroups: both forms, their numbers, and the options they refuse', () => {
    const fake = fakeClock();
    const root = new ThrottleGroup({ rate: '10MiB/s', clock: fake.clock });
    const a = root.group({ rate: '2MiB/s', weight: 2, guaranteed: '1MiB/s' });
    const b = new ThrottleGroup({ parent: root });
    expect(a.parent).toBe(root);
    expect(b.parent).toBe(root);
    expect(root.parent).toBeUndefined();
    expect([a.rate, a.burst, a.weight, a.guaranteed]).toEqual([2 * MiB, Math.ceil(0.1 * MiB), 2, MiB]);
    expect([b.rate, b.burst, b.weight, b.guaranteed]).toEqual([10 * MiB, root.burst, 1, 0]);
    expect(() => root.group({ weight: 0 })).toThrow(/invalid weight 0: expected a number above 0/);
    expect(() => root.group({ weight: Number.NaN })).toThrow(InvalidOptionError);
    expect(() => root.group({ burst: '1MiB' })).toThrow(/burst applies to a subgroup's own rate/);
    expect(() => new ThrottleGroup({ parent: {} as ThrottleGroup })).toThrow(/expected `parent` to be a ThrottleGroup/);
    expect(() => new ThrottleGroup({ parent: root, clock: fake.clock } as never)).toThrow(/uses its root's clock/);
    expect(() => new ThrottleGroup({ rate: 1000, weight: 2 } as never)).toThrow(/weight is a share in a parent group/);
    expect(() => new ThrottleGroup({} as never)).toThrow(/needs a `rate`/);
    expect(() => root.setWeight(2)).toThrow(/a root group has none/);
    expect(() => root.throttle({ weight: -1 })).toThrow(/invalid weight -1/);
    expect(() => root.throttle({ rate: '1MiB/s', guaranteed: '2MiB/s' })).toThrow(
      /guaranteed 2097152 bytes per second \(2 MiB\/s\) is above its own rate 1048576 bytes per second \(1 MiB\/s\)/,
    );
    expect(() => root.group({ rate: '1MiB/s', guaranteed: '2MiB/s' })).toThrow(/is above its own rate/);
    expect(() => b.setBurst('1MiB')).toThrow(/has no rate of its own/);
    expect(root.size).toBe(0);
  });

  it('refuses guaranteed rates that add up to more than the rate they share, naming the numbers, and changes nothing', () => {
    const fake = fakeClock();
    const root = new ThrottleGroup({ rate: '10MiB/s', clock: fake.clock });
    const a = root.group({ guaranteed: '6MiB/s' });
    const message =
      /guaranteed rates would add up to 12582912 bytes per second \(12 MiB\/s\) in a group whose rate is 10485760 bytes per second \(10 MiB\/s\)/;
    expect(() => root.group({ guaranteed: '6MiB/s' })).toThrow(message);
    expect(() => root.throttle({ guaranteed: '6MiB/s' })).toThrow(message);
    const member = root.throttle({ guaranteed: '3MiB/s' });
    expect(member.guaranteed).toBe(3 * MiB);
    expect(() => member.setGuaranteed('5MiB/s')).toThrow(/add up to 11534336 bytes per second \(11 MiB\/s\)/);
    expect(member.guaranteed).toBe(3 * MiB);
    // Nested: a subgroup is guaranteed at least its children's guarantees together.
    const b = root.group();
    b.throttle({ guaranteed: '1MiB/s' });
    expect(() => b.throttle({ guaranteed: '1MiB/s' })).toThrow(/add up to 11534336 bytes per second/);
    expect(() => b.group({ guaranteed: '2MiB/s' })).toThrow(InvalidOptionError);
    // Its rate may not go below the guarantees it holds.
    expect(() => root.setRate('9MiB/s')).toThrow(
      /add up to 10485760 bytes per second \(10 MiB\/s\) in a group whose rate is 9437184/,
    );
    expect(root.rate).toBe(10 * MiB);
    const c = root.group({ rate: '4MiB/s' });
    expect(() => c.setGuaranteed('5MiB/s')).toThrow(/add up to|above its own rate/);
    expect(() => a.setGuaranteed('7MiB/s')).toThrow(/add up to 11534336 bytes per second/);
    a.setGuaranteed('5MiB/s');
    expect(a.guaranteed).toBe(5 * MiB);
    expect(() => new ThrottleGroup({ rate: 1000 }).throttle({ guaranteed: 2000 })).toThrow(
      /add up to 2000 bytes per second \(2 kB\/s\) in a group whose rate is 1000 bytes per second: a class with demand always gets its guaranteed rate/,
    );
  });
});

/** The clock of `fake`, counting the timers that fire (a group's wake-ups). */
function countingClock(fake: ReturnType<typeof fakeClock>) {
  const clock = {
    fired: 0,
    now: fake.clock.now,
    setTimeout: (fn: () => void, ms: number) =>
      fake.clock.setTimeout(() => {
        clock.fired++;
        fn();
      }, ms),
    clearTimeout: fake.clock.clearTimeout,
  };
  return clock;
}

describe('bandwidth classes: the tree changes while it runs', () => {
  it('a destroyed subgroup frees its share at once; its members fail, its guarantee is freed', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const a = root.group();
    const b = root.group({ guaranteed: 2 * MiB });
    const aMembers = [0, 1].map(() => busyMember(fake, a, rate));
    const bMembers = [0, 1].map(() => busyMember(fake, b, rate));
    await advance(fake, 1000);
    expect(root.size).toBe(4);
    const errors: unknown[] = [];
    for (const m of bMembers) m.throttle.on('error', (error) => errors.push(error));
    b.destroy(new Error('tenant gone'));
    expect(b.destroyed).toBe(true);
    expect(root.size).toBe(2);
    expect(() => b.throttle()).toThrow(/was destroyed/);
    expect(() => root.group({ guaranteed: 3 * MiB })).not.toThrow(); // its guarantee is free again
    const at = fake.timers.now;
    await advance(fake, 1000);
    await settle();
    expect(errors.length).toBe(2);
    const aRate = aMembers.reduce((sum, m) => sum + between(m.sink.pieces, at + 150, at + 1000), 0) / 0.85;
    expect(aRate / rate).toBeGreaterThan(0.97);
    for (const m of aMembers) m.stop();
    await settle();
    expect(fake.pending()).toBe(0);
  }, 60_000);

  it('subgroups and members join and leave at any time; shares follow', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const a = root.group();
    const a1 = busyMember(fake, a, rate);
    await advance(fake, 500);
    const b = root.group({ weight: 2 });
    const b1 = busyMember(fake, b, rate);
    const b2 = busyMember(fake, b, rate);
    await advance(fake, 1500);
    expect(between(a1.sink.pieces, 1000, 2000) / MiB).toBeGreaterThan(0.97);
    expect((between(b1.sink.pieces, 1000, 2000) + between(b2.sink.pieces, 1000, 2000)) / (2 * MiB)).toBeGreaterThan(
      0.97,
    );
    const c = a.group({ weight: 3 }); // a subgroup of a subgroup: a's share splits 1 : 3
    const c1 = busyMember(fake, c, rate);
    await advance(fake, 1500);
    expect(between(a1.sink.pieces, 2500, 3500) / (MiB / 4)).toBeGreaterThan(0.95);
    expect(between(c1.sink.pieces, 2500, 3500) / ((3 * MiB) / 4)).toBeGreaterThan(0.97);
    b1.stop();
    b2.stop();
    await advance(fake, 1000);
    expect(between(c1.sink.pieces, 3800, 4500) / ((3 * rate * 0.7) / 4)).toBeGreaterThan(0.97);
    for (const m of [a1, c1]) m.stop();
    await settle();
    expect(fake.pending()).toBe(0);
    expect(root.size).toBe(0);
  }, 60_000);

  it('live setWeight, setGuaranteed, setRate and setBurst on subgroups and members', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const a = root.group();
    const b = root.group();
    const a1 = busyMember(fake, a, rate);
    const b1 = busyMember(fake, b, rate);
    /** Each member's rate over the 2 s after the first 0.5 s that follow a change. */
    const ratesAfterChange = async (): Promise<[number, number]> => {
      const at = fake.timers.now;
      await advance(fake, 2500);
      const rateOf = (m: typeof a1) => between(m.sink.pieces, at + 500, at + 2500) / 2 / MiB;
      return [rateOf(a1), rateOf(b1)];
    };
    await advance(fake, 500);
    a.setWeight(2);
    expect(a.weight).toBe(2);
    let [aRate, bRate] = await ratesAfterChange();
    expect(aRate / 2).toBeGreaterThan(0.97);
    expect(bRate / 1).toBeGreaterThan(0.97);
    b.setGuaranteed(2.5 * MiB); // b: 2.5 + 0.5 / 3, a: 0.5 * 2 / 3
    [aRate, bRate] = await ratesAfterChange();
    expect(bRate / (2.5 + 0.5 / 3)).toBeGreaterThan(0.97);
    expect(aRate / (1 / 3)).toBeGreaterThan(0.95);
    b.setGuaranteed(0);
    a.setRate(0.5 * MiB); // a ceiling
    a.setBurst(64 * 1024);
    expect([a.rate, a.burst]).toEqual([0.5 * MiB, 65536]);
    [aRate, bRate] = await ratesAfterChange();
    expect(aRate / 0.5).toBeGreaterThan(0.97);
    expect(aRate / 0.5).toBeLessThan(1.01);
    expect(bRate / 2.5).toBeGreaterThan(0.97);
    b1.throttle.setWeight(5);
    expect(b1.throttle.weight).toBe(5);
    expect(() => b1.throttle.setGuaranteed(4 * MiB)).toThrow(/add up to/);
    for (const m of [a1, b1]) m.stop();
    await settle();
    expect(fake.pending()).toBe(0);
  }, 60_000);

  it('counters on every class: bytes, rate, time waited', async () => {
    const fake = fakeClock();
    const rate = 3 * MiB;
    const root = new ThrottleGroup({ rate, clock: fake.clock });
    const a = root.group({ weight: 2 });
    const b = root.group();
    const members = [busyMember(fake, a, rate), busyMember(fake, a, rate), busyMember(fake, b, rate)];
    await advance(fake, 2000);
    const received = members.map((m) => m.sink.received);
    expect(a.counters.bytes).toBe((received[0] as number) + (received[1] as number));
    expect(b.counters.bytes).toBe(received[2]);
    expect(root.counters.bytes).toBe(received.reduce((x, y) => x + y, 0));
    expect(a.counters.currentBytesPerSecond / (2 * MiB)).toBeGreaterThan(0.95);
    expect(b.counters.currentBytesPerSecond / MiB).toBeGreaterThan(0.95);
    expect(a.counters.waitedMs).toBeGreaterThan(1500);
    for (const m of members) m.stop();
    await settle();
  }, 60_000);
});

describe('bandwidth classes: one timer per tree', () => {
  it('wake-ups for a tree of 8 tenants x 5 streams stay within 1.2x those of a flat group of 40', async () => {
    const rate = 3 * MiB;
    const run = async (tree: boolean) => {
      const fake = fakeClock();
      const clock = countingClock(fake);
      const root = new ThrottleGroup({ rate, clock });
      const members = Array.from({ length: 40 }, (_, i) => {
        const group = tree ? (i % 5 === 0 ? root.group() : undefined) : root;
        return { group, i };
      });
      let tenant = root;
      const busy = members.map(({ group }) => {
        if (group !== undefined) tenant = group;
        return busyMember(fake, tree ? tenant : root, rate / 10);
      });
      await advance(fake, 500);
      const before = clock.fired;
      await advance(fake, 2000);
      const fired = clock.fired - before;
      const delivered = busy.reduce((sum, m) => sum + between(m.sink.pieces, 500, 2500), 0);
      expect(fake.pending()).toBe(1 + 40); // the root's one timer (and the sources')
      for (const m of busy) m.stop();
      await settle();
      expect(fake.pending()).toBe(0);
      return { fired, delivered };
    };
    const flat = await run(false);
    const tree = await run(true);
    expect(tree.delivered / (rate * 2)).toBeGreaterThan(0.98);
    expect(tree.fired).toBeLessThanOrEqual(1.2 * flat.fired);
  }, 60_000);
});

describe('bandwidth classes: lifecycle of a tree', () => {
  it('endAll and destroyAll reach the members of subgroups; destroy takes the group out, and it takes no new members', async () => {
    const fake = fakeClock();
    const root = new ThrottleGroup({ rate: 100_000, clock: fake.clock });
    const a = root.group({ rate: 50_000 });
    const b = a.group();
    const members = [root.throttle(), a.throttle(), b.throttle()];
    for (const m of members) {
      m.resume();
      m.write(Buffer.alloc(1000));
    }
    expect([root.size, a.size, b.size]).toEqual([3, 2, 1]);
    root.endAll();
    await advance(fake, 100);
    expect(members.map((m) => m.writableFinished)).toEqual([true, true, true]);
    expect(root.size).toBe(0);
    const more = [a.throttle(), b.throttle()];
    const errors: unknown[] = [];
    for (const m of more) m.on('error', (error) => errors.push(error));
    root.destroyAll(new Error('stop'));
    await settle();
    expect(errors.length).toBe(2);
    expect(more.every((m) => m.destroyed)).toBe(true);
    expect(b.destroyed).toBe(false); // the groups stay usable
    b.throttle().destroy();
    root.destroy();
    expect([root.destroyed, a.destroyed, b.destroyed]).toEqual([true, true, true]);
    expect(() => root.throttle()).toThrow(/was destroyed/);
    expect(() => a.group()).toThrow(/was destroyed/);
    await settle();
    expect(fake.pending()).toBe(0);
  });

  it('counters of a subgroup start at zero, and a subgroup with no ceiling reports the rate above it', () => {
    const fake = fakeClock();
    const root = new ThrottleGroup({ rate: '4MiB/s', clock: fake.clock });
    const a = root.group({ weight: 3 });
    expect(a.counters).toMatchObject({ bytes: 0, waitedMs: 0, currentBytesPerSecond: 0 });
    expect([a.rate, a.burst, a.weight, a.quantum]).toEqual([root.rate, root.burst, 3, root.quantum]);
    expect(a.waiting).toBe(0);
  });
});
