/**
 * ThrottleGroup on a fake clock: deficit round robin order, fairness by
 * bytes whatever the chunk sizes, max-min fairness with capped members,
 * join and leave, live changes, and the one timer.
 */

import { pipeline } from 'node:stream/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import {
  BurstTooSmallError,
  InvalidOptionError,
  Throttle,
  ThrottleGroup,
  type ThrottleGroupOptions,
  type ThrottleMemberOptions,
} from '../../src/index.js';
import { type FakeClock, fakeClock } from '../helpers/fake-clock.js';
import {
  advance,
  byteSource,
  maxInWindow,
  type Piece,
  patternByte,
  recordingSink,
  settle,
  slope,
  timedSource,
} from './support.js';

function groupSetup(options: Omit<ThrottleGroupOptions, 'clock'>) {
  const fake = fakeClock();
  const group = new ThrottleGroup({ ...options, clock: fake.clock });
  const members: { throttle: Throttle; sink: ReturnType<typeof recordingSink> }[] = [];
  /** A member fed by an endless source of `chunkBytes` chunks. */
  const busy = (chunkBytes: number | number[], memberOptions: ThrottleMemberOptions = {}) => {
    const throttle = group.throttle(memberOptions);
    const sink = recordingSink(() => fake.timers.now);
    pipeline(byteSource(1e12, chunkBytes), throttle, sink).catch(() => {});
    const member = { throttle, sink };
    members.push(member);
    return member;
  };
  return { fake, group, busy, members };
}

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

describe('ThrottleGroup: options', () => {
  it('derives burst and quantum from the rate', () => {
    const group = new ThrottleGroup({ rate: '10MiB/s' });
    expect(group.rate).toBe(10 * 1048576);
    expect(group.burst).toBe(524288);
    expect(group.quantum).toBe(52429); // 5 ms of the rate
    expect(new ThrottleGroup({ rate: 1000 }).quantum).toBe(250); // 1 KiB floor, at most a wake piece (250 ms)
    expect(new ThrottleGroup({ rate: 1000, burst: 400, quantum: 50 }).quantum).toBe(50);
  });

  it('throws for a burst too small and a quantum above half the burst', () => {
    expect(() => new ThrottleGroup({ rate: '1GiB/s', burst: '1MiB' })).toThrow(BurstTooSmallError);
    expect(() => new ThrottleGroup({ rate: 1000, burst: 400, quantum: 300 })).toThrow(
      /quantum 300 bytes must be at most half the burst \(200 bytes\)/,
    );
    expect(() => new ThrottleGroup({ rate: 1000, quantum: 'much' })).toThrow(/invalid quantum "much"/);
    expect(() => new ThrottleGroup(undefined as unknown as ThrottleGroupOptions)).toThrow(InvalidOptionError);
    expect(() => new ThrottleGroup({ rate: 1000, burst: 'x' })).toThrow(/invalid burst "x"/);
  });

  it('checks member options', () => {
    const fake = fakeClock();
    const group = new ThrottleGroup({ rate: 1000, clock: fake.clock });
    expect(() => group.throttle({ burst: 100 })).toThrow(/applies to the member's own cap/);
    expect(() => new Throttle({ rate: 100, group, clock: fakeClock().clock })).toThrow(/uses the group's clock/);
    expect(() => new Throttle({ group: {} as ThrottleGroup })).toThrow(/expected `group` to be a ThrottleGroup/);
    expect(group.size).toBe(0); // the member that threw did not stay
    const member = group.throttle();
    expect(member.group).toBe(group);
    expect(member.rate).toBeUndefined();
    expect(() => member.setBurst(100)).toThrow(/has no cap of its own/);
    member.setRate(500);
    expect(member.rate).toBe(500);
    expect(group.size).toBe(1);
    expect(new Throttle({ group, clock: fake.clock }).group).toBe(group);
  });
});

describe('ThrottleGroup: deficit round robin', () => {
  it('serves waiting members in turn, one quantum each, waking for a whole wake piece', async () => {
    const { fake, group, members } = groupSetup({ rate: 1000, burst: 225, quantum: 50 });
    const log: [number, number, number][] = [];
    for (let i = 0; i < 3; i++) {
      const throttle = group.throttle();
      const sink = recordingSink(() => fake.timers.now);
      throttle.on('data', (chunk: Buffer) => log.push([fake.timers.now, i, chunk.length]));
      throttle.pipe(sink);
      throttle.write(Buffer.alloc(10_000));
      members.push({ throttle, sink });
    }
    await advance(fake, 1000);
    // The full bucket goes to the first member (no one was waiting yet). Then the
    // group sleeps for a group wake piece (the burst less 10 ms of the rate, less
    // 15 ms more of room: 200 bytes, 200 ms) and each wake-up serves four turns of
    // one quantum (50 bytes), round robin.
    expect(log.slice(0, 13)).toEqual([
      [0, 0, 225],
      [200, 0, 50],
      [200, 1, 50],
      [200, 2, 50],
      [200, 0, 50],
      [400, 1, 50],
      [400, 2, 50],
      [400, 0, 50],
      [400, 1, 50],
      [600, 2, 50],
      [600, 0, 50],
      [600, 1, 50],
      [600, 2, 50],
    ]);
    // The aggregate: exactly the burst plus the rate for 1 s (the wake-up at 1000 ms included).
    const total = log.reduce((sum, [, , bytes]) => sum + bytes, 0);
    expect(total).toBe(225 + 1000);
    expect(fake.pending()).toBe(1); // one timer for the whole group
    for (const m of members) m.throttle.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
    expect(group.waiting).toBe(0);
    expect(group.size).toBe(0);
  });

  it('shares by bytes, not by chunks: 64-byte and 4 KiB chunks get the same rate', async () => {
    const { fake, busy } = groupSetup({ rate: 10_000 });
    const small = busy(64);
    const large = busy(4096);
    const mixed = busy([1, 700, 33, 2048]);
    await advance(fake, 5000);
    const shares = [small, large, mixed].map((m) => between(m.sink.pieces, 1000, 5000));
    for (const share of shares) {
      expect(share).toBeGreaterThan(40_000 / 3 - 1100);
      expect(share).toBeLessThan(40_000 / 3 + 1100);
    }
    expect(shares.reduce((a, b) => a + b, 0)).toBeGreaterThan(40_000 - 600);
    expect(jain(shares)).toBeGreaterThan(0.99);
  });

  it('is max-min fair: a member capped below its share gets its cap, the others split the rest', async () => {
    const { fake, busy } = groupSetup({ rate: 300_000 });
    const capped = busy(16384, { rate: 50_000 });
    const a = busy(16384);
    const b = busy(4096);
    await advance(fake, 5000);
    // Over 4 s: the capped member its 50 kB/s (its own bucket never overflows
    // while it waits for the group), the others (300 - 50) / 2 = 125 kB/s each.
    const cappedShare = between(capped.sink.pieces, 1000, 5000);
    expect(cappedShare).toBeGreaterThan(200_000 * 0.98);
    expect(cappedShare).toBeLessThanOrEqual((capped.throttle.burst as number) + 200_000); // burst + rate * T
    for (const m of [a, b]) {
      const share = between(m.sink.pieces, 1000, 5000);
      expect(share).toBeGreaterThan(500_000 * 0.97);
      expect(share).toBeLessThan(500_000 * 1.03);
    }
    // The capped member never beats its own cap: burst + rate * T.
    expect(capped.sink.received).toBeLessThanOrEqual((capped.throttle.burst as number) + 50_000 * 5);
    // And together they get the group's whole rate.
    const sum = [capped, a, b].reduce((total, m) => total + between(m.sink.pieces, 1000, 5000), 0);
    expect(sum).toBeGreaterThanOrEqual(300_000 * 4 * 0.99);
    expect(sum).toBeLessThanOrEqual(300_000 * 4 + 15_000);
  });

  // Node 22 raised the default highWaterMark from 16 KiB to 64 KiB: a member
  // then holds more bytes ready, which made its piece as large as its own
  // tokens, and the group kept it waiting for them until its own bucket overflowed.
  for (const highWaterMark of [1, 16 * 1024, 64 * 1024, 1024 * 1024]) {
    it(`holds a capped member's cap within 1 % whatever its highWaterMark (${highWaterMark} bytes), the others fair`, async () => {
      const { fake, busy } = groupSetup({ rate: 300_000 });
      const capped = busy(16384, { rate: 50_000, highWaterMark });
      const a = busy(16384, { highWaterMark });
      const b = busy(4096, { highWaterMark });
      await advance(fake, 7000);
      const cappedRate = slope(capped.sink.pieces, 1000, 7000);
      expect(cappedRate).toBeGreaterThan(50_000 * 0.99);
      expect(cappedRate).toBeLessThan(50_000 * 1.01);
      for (const m of [a, b]) {
        const rate = slope(m.sink.pieces, 1000, 7000);
        expect(rate).toBeGreaterThan(125_000 * 0.99);
        expect(rate).toBeLessThan(125_000 * 1.01);
      }
      expect(capped.sink.received).toBeLessThanOrEqual((capped.throttle.burst as number) + 50_000 * 7);
      expect(maxInWindow(capped.sink.pieces, 1000)).toBeLessThanOrEqual((capped.throttle.burst as number) + 50_000);
    });
  }

  it('a member capped above its share gets no more than the others', async () => {
    const { fake, busy } = groupSetup({ rate: 300_000 });
    const capped = busy(16384, { rate: 200_000 });
    const a = busy(16384);
    const b = busy(4096);
    await advance(fake, 4000);
    const shares = [capped, a, b].map((m) => between(m.sink.pieces, 1000, 4000));
    for (const share of shares) {
      expect(share).toBeGreaterThan(300_000 * 0.97);
      expect(share).toBeLessThan(300_000 * 1.03);
    }
    const sum = shares.reduce((x, y) => x + y, 0);
    expect(sum).toBeGreaterThanOrEqual(900_000 * 0.99);
    expect(sum).toBeLessThanOrEqual(900_000 + 15_000);
  });

  it('a member with an own burst above the group burst gets through, in pieces that fit the group', async () => {
    const { fake, group, busy } = groupSetup({ rate: 300_000, burst: 15_000 });
    const big = busy(65536, { rate: 50_000, burst: 100_000 });
    const other = busy(4096);
    await advance(fake, 3000);
    expect(Math.max(...big.sink.pieces.map((p) => p.bytes))).toBeLessThanOrEqual(15_000);
    // Its own bucket started full (100 kB), then 50 kB/s; the group has room for it.
    expect(big.sink.received).toBeGreaterThan(100_000 + 50_000 * 2.5);
    expect(big.sink.received + other.sink.received).toBeLessThanOrEqual(15_000 + 300_000 * 3);
    // Together they get the group's rate (the other member takes what the capped one leaves).
    const sum = between(big.sink.pieces, 500, 3000) + between(other.sink.pieces, 500, 3000);
    expect(sum).toBeGreaterThanOrEqual(300_000 * 2.5 * 0.98);
    for (const m of [big, other]) m.throttle.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
    expect(group.size).toBe(0);
  });

  it('once every waiting member has ended, the group sleeps only for what they hold', async () => {
    const { fake, group } = groupSetup({ rate: 1000, burst: 210, quantum: 50 });
    const sinks = [0, 1].map(() => {
      const member = group.throttle();
      const sink = recordingSink(() => fake.timers.now);
      member.pipe(sink);
      member.end(Buffer.alloc(130));
      return sink;
    });
    await advance(fake, 100);
    // 210 at once (130 + 80), then 50 for the second member's last bytes: 50 ms, not a wake piece.
    expect(sinks[0]?.received).toBe(130);
    expect(sinks[1]?.received).toBe(130);
    expect(sinks[1]?.pieces.at(-1)?.atMs).toBe(50);
    expect(fake.pending()).toBe(0);
    expect(group.size).toBe(0);
  });

  it('members join and leave at any time; a destroyed member frees its share at once', async () => {
    const { fake, group, busy } = groupSetup({ rate: 2000 });
    const a = busy(512);
    const b = busy(512);
    await advance(fake, 2000);
    expect(between(a.sink.pieces, 1000, 2000)).toBeGreaterThan(1000 - 300);
    expect(between(b.sink.pieces, 1000, 2000)).toBeGreaterThan(1000 - 300);
    const c = busy(512);
    await advance(fake, 2000);
    for (const m of [a, b, c]) {
      const share = between(m.sink.pieces, 2500, 4000);
      expect(share).toBeGreaterThan(1000 - 350);
      expect(share).toBeLessThan(1000 + 350);
    }
    const sum3 = [a, b, c].reduce((total, m) => total + between(m.sink.pieces, 2500, 4000), 0);
    expect(sum3).toBeGreaterThanOrEqual(3000 - 600); // 1.5 s at 2000 B/s, less a wake piece at each end
    expect(sum3).toBeLessThanOrEqual(3000 + 1024);
    expect(group.size).toBe(3);
    a.throttle.destroy();
    await settle();
    expect(group.size).toBe(2);
    await advance(fake, 2000);
    for (const m of [b, c]) {
      const share = between(m.sink.pieces, 4500, 6000);
      expect(share).toBeGreaterThan(1500 - 350);
      expect(share).toBeLessThan(1500 + 350);
    }
    b.throttle.destroy();
    c.throttle.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
    expect(group.waiting).toBe(0);
  });

  it('an ended member leaves the group and the others take its share', async () => {
    const { fake, group, busy } = groupSetup({ rate: 2000 });
    const finite = group.throttle();
    const finiteSink = recordingSink(() => fake.timers.now);
    const done = pipeline(byteSource(3000, 256), finite, finiteSink);
    const b = busy(256);
    await advance(fake, 3000);
    await done;
    expect(finiteSink.received).toBe(3000);
    expect(group.size).toBe(1);
    const end = finiteSink.pieces.at(-1)?.atMs ?? 0;
    expect(end).toBeLessThan(2500);
    // While both ran, they added up to the group's rate (less a wake piece at each end).
    const both = between(finiteSink.pieces, 200, end) + between(b.sink.pieces, 200, end);
    expect(both).toBeGreaterThanOrEqual((2000 * (end - 200)) / 1000 - 2 * 1024);
    // After it ended, the other gets the whole rate.
    expect(between(b.sink.pieces, end + 100, end + 500)).toBeGreaterThan(2000 * 0.4 - 600);
    b.throttle.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
  });

  it('keeps no reference to a member that has ended or been destroyed', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { fake, group } = groupSetup({ rate: 1000 });
    const refs: WeakRef<Throttle>[] = [];
    (() => {
      for (let i = 0; i < 3; i++) {
        const member = group.throttle();
        member.resume();
        member.write(Buffer.alloc(5000)); // waiting in the ring, or on the timer
        refs.push(new WeakRef(member));
        member.destroy();
      }
      const ended = group.throttle();
      ended.resume();
      ended.end(Buffer.alloc(10));
      refs.push(new WeakRef(ended));
    })();
    await advance(fake, 10);
    expect(group.size).toBe(0);
    expect(group.waiting).toBe(0);
    expect(fake.pending()).toBe(0);
    for (let i = 0; i < 3; i++) {
      gc();
      await settle();
    }
    expect(refs.map((ref) => ref.deref() === undefined)).toEqual([true, true, true, true]);
  });

  it('a member made with a signal already aborted is destroyed and never counted', async () => {
    const { fake, group } = groupSetup({ rate: 1000 });
    const member = group.throttle({ signal: AbortSignal.abort() });
    const errors: unknown[] = [];
    member.on('error', (error) => errors.push(error));
    await settle();
    expect(member.destroyed).toBe(true);
    expect(errors[0]).toMatchObject({ name: 'AbortError' });
    expect(group.size).toBe(0);
    expect(fake.pending()).toBe(0);
    expect(() => group.throttle({ signal: {} as AbortSignal })).toThrow(/signal/);
    expect(group.size).toBe(0);
  });

  it('a member whose reader stops leaves its share to the others until it reads again', async () => {
    const { fake, group, busy } = groupSetup({ rate: 10_000, burst: 2000, quantum: 500 });
    const a = busy(4096);
    const stalled = group.throttle({ readableHighWaterMark: 100 });
    stalled.write(Buffer.alloc(50_000)); // nobody reads it
    await advance(fake, 1000);
    // One piece (here the group's full bucket, taken at once while no one waited) sits in
    // its readable buffer; the rest waits for _read(), holding no turn.
    expect(stalled.readableLength).toBeGreaterThan(0);
    expect(stalled.readableLength).toBeLessThanOrEqual(2000);
    expect(stalled.counters.bytes).toBe(stalled.readableLength);
    expect(between(a.sink.pieces, 200, 1000)).toBeGreaterThan(10_000 * 0.8 * 0.95);
    const sink = recordingSink(() => fake.timers.now);
    stalled.pipe(sink);
    await advance(fake, 1000);
    // Reading again, it takes its share back: about half of 10 kB/s; together, the whole rate.
    expect(between(sink.pieces, 1200, 2000)).toBeGreaterThan(5000 * 0.8 * 0.9);
    expect(between(sink.pieces, 1200, 2000) + between(a.sink.pieces, 1200, 2000)).toBeGreaterThanOrEqual(
      10_000 * 0.8 - 2000,
    );
    for (const t of [a.throttle, stalled]) t.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
  });

  it('a member that runs dry mid-turn keeps its turn: its next data passes on arrival, and holding loses no rate', async () => {
    const { fake, group, busy } = groupSetup({ rate: 1000, burst: 225, quantum: 50 });
    const a = busy(100);
    const b = group.throttle();
    const bSink = recordingSink(() => fake.timers.now);
    b.pipe(bSink);
    await advance(fake, 1000);
    b.write(Buffer.alloc(10)); // joins the ring behind A, which waits for tokens
    let t = fake.timers.now;
    while (bSink.received === 0 && t < 2000) {
      await advance(fake, 1);
      t = fake.timers.now;
    }
    expect(bSink.received).toBe(10); // served at the next wake-up; its turn (50) is still open
    await settle();
    const heldAt = fake.timers.now;
    b.write(Buffer.alloc(20)); // arrives while B holds its turn: passes at once, no timer
    await settle();
    expect(fake.timers.now).toBe(heldAt);
    expect(bSink.received).toBe(30);
    // Holding costs no rate: over the next 2 s, A and B together get the group's rate.
    const before = a.sink.received + bSink.received;
    await advance(fake, 2000);
    expect(a.sink.received + bSink.received - before).toBeGreaterThanOrEqual(2000 - 225);
    expect(fake.pending()).toBe(1); // the group's one timer
    a.throttle.destroy();
    b.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
  });

  it('a lone member passes at once while the group has the tokens', async () => {
    const { fake, group } = groupSetup({ rate: 1000, burst: 1000 });
    const member = group.throttle();
    const sink = recordingSink(() => fake.timers.now);
    member.pipe(sink);
    member.write(Buffer.alloc(600));
    await settle();
    expect(sink.received).toBe(600);
    expect(fake.pending()).toBe(0);
    member.write(Buffer.alloc(600));
    await settle();
    expect(sink.received).toBe(1000); // the prefix that conforms
    await advance(fake, 249); // the group sleeps for a wake piece: 250 bytes, 250 ms
    expect(sink.received).toBe(1000);
    await advance(fake, 1);
    expect(sink.received).toBe(1200);
  });
});

/** The clock of `fake`, counting the timers that fire (the group's wake-ups). */
function countingClock(fake: FakeClock): Clock & { fired: number } {
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

describe('ThrottleGroup: aggregate counters, endAll and destroyAll', () => {
  it('counts the whole group: bytes of all members, time some member waited, the group rate', async () => {
    const { fake, group, busy } = groupSetup({ rate: 1000, burst: 200, quantum: 50 });
    expect(group.counters).toMatchObject({ bytes: 0, waitedMs: 0, currentBytesPerSecond: 0 });
    const a = busy(64);
    const b = busy(100);
    await advance(fake, 3000);
    const counters = group.counters;
    const members = a.throttle.counters.bytes + b.throttle.counters.bytes;
    expect(counters.bytes).toBe(members);
    expect(counters.bytes).toBe(a.sink.received + b.sink.received);
    // The burst, then the rate: both sides.
    expect(counters.bytes).toBeGreaterThanOrEqual(200 + 1000 * 2.8); // less a group wake piece still being earned
    expect(counters.bytes).toBeLessThanOrEqual(200 + 1000 * 3);
    expect(counters.currentBytesPerSecond).toBeGreaterThan(950);
    expect(counters.currentBytesPerSecond).toBeLessThan(1050);
    // Busy members wait nearly all the time after the burst.
    expect(counters.waitedMs).toBeGreaterThan(2700);
    expect(counters.waitedMs).toBeLessThanOrEqual(3000);
    group.destroyAll();
    await settle();
  });

  it('a group whose members never wait counts no waiting', async () => {
    const { fake, group } = groupSetup({ rate: 1000, burst: 1000 });
    const member = group.throttle();
    member.resume();
    member.write(Buffer.alloc(300));
    await advance(fake, 500);
    member.write(Buffer.alloc(300));
    await advance(fake, 500);
    expect(group.counters).toMatchObject({ bytes: 600, waitedMs: 0 });
  });

  it('endAll ends every member: what they hold still passes at the rate, then they finish', async () => {
    const { fake, group } = groupSetup({ rate: 1000, burst: 100, quantum: 50 });
    const sinks = [0, 1, 2].map(() => {
      const member = group.throttle();
      const sink = recordingSink(() => fake.timers.now);
      member.pipe(sink);
      member.write(Buffer.alloc(300));
      return { member, sink };
    });
    group.endAll();
    await advance(fake, 700);
    expect(sinks.map(({ sink }) => sink.received).reduce((x, y) => x + y)).toBeLessThan(900); // 800 bytes after the burst need 800 ms
    await advance(fake, 200);
    for (const { member, sink } of sinks) {
      expect(sink.received).toBe(300);
      expect(member.writableFinished).toBe(true);
    }
    expect(group.size).toBe(0);
    expect(fake.pending()).toBe(0);
  });

  it('destroyAll destroys every member with the error given: pipelines fail with it, no timer is left', async () => {
    const { fake, group, busy } = groupSetup({ rate: 1000 });
    const pipelines = [0, 1].map(() => {
      const member = group.throttle();
      return pipeline(
        byteSource(1e9, 100),
        member,
        recordingSink(() => fake.timers.now),
      ).then(
        () => 'ok',
        (error: Error) => error.message,
      );
    });
    busy(64, { rate: 500 });
    await advance(fake, 200);
    expect(group.waiting).toBeGreaterThan(0);
    group.destroyAll(new Error('shutting down'));
    expect(await Promise.all(pipelines)).toEqual(['shutting down', 'shutting down']);
    await settle();
    expect(group.size).toBe(0);
    expect(group.waiting).toBe(0);
    expect(fake.pending()).toBe(0);
  });
});

describe('ThrottleGroup: the whole rate from real-shaped sources', () => {
  it('64 KiB chunks arriving every 1 ms: a 100 MiB/s group passes its rate, fairly, with few wake-ups', async () => {
    const fake = fakeClock();
    const clock = countingClock(fake);
    const rate = 100 * 1048576;
    const group = new ThrottleGroup({ rate, clock });
    const members = [0, 1, 2, 3].map(() => {
      const throttle = group.throttle();
      const sink = recordingSink(() => fake.timers.now);
      const source = timedSource(fake, { bytesPerSecond: 65536 * 1000, chunkBytes: 65536, intervalMs: 1 });
      pipeline(source, throttle, sink).catch(() => {});
      return { throttle, sink, source };
    });
    await advance(fake, 500);
    const firedBefore = clock.fired;
    await advance(fake, 1000);
    const shares = members.map((m) => between(m.sink.pieces, 500, 1500));
    const sum = shares.reduce((a, b) => a + b, 0);
    // The output comes in wake-up steps (25 ms of the rate), so the rate is the slope through them.
    const all = members.flatMap((m) => m.sink.pieces).sort((x, y) => x.atMs - y.atMs);
    expect(slope(all, 500, 1500) / rate).toBeGreaterThanOrEqual(0.99);
    expect(sum).toBeGreaterThanOrEqual(rate - group.burst);
    expect(sum).toBeLessThanOrEqual(group.burst + rate);
    expect(jain(shares)).toBeGreaterThan(0.99);
    // About 40 wake-ups a second (the group's wake piece is 25 ms of the rate), not one per chunk.
    expect(clock.fired - firedBefore).toBeLessThanOrEqual(60);
    for (const m of members) {
      m.source.destroy();
      m.throttle.destroy();
    }
    await settle();
    expect(fake.pending()).toBe(0);
  }, 30_000);

  it.each([
    ['1 GiB/s, 64 KiB chunks', 1024 ** 3, 65536],
    ['32 MiB/s, 16 KiB chunks', 32 * 1048576, 16384],
  ])(
    '%s from synchronous sources: the aggregate is the rate',
    async (_label, rate, chunkBytes) => {
      const { fake, group, busy } = groupSetup({ rate });
      const members = [0, 1, 2, 3].map(() => busy(chunkBytes));
      await advance(fake, 300);
      const shares = members.map((m) => between(m.sink.pieces, 100, 300));
      const sum = shares.reduce((a, b) => a + b, 0);
      expect(sum / (rate * 0.2)).toBeGreaterThanOrEqual(0.99);
      expect(sum).toBeLessThanOrEqual(group.burst + rate * 0.2);
      expect(jain(shares)).toBeGreaterThan(0.99);
      for (const m of members) m.throttle.destroy();
      await settle();
    },
    30_000,
  );

  it('socket-like members of any speed and chunk size: the aggregate is the rate, fairly, never above burst + rate * T', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1_000_000, max: 20_000_000 }),
        fc.double({ min: 0.02, max: 0.05, noNaN: true }),
        fc.array(
          fc.record({
            chunkBytes: fc.integer({ min: 1024, max: 65536 }),
            intervalMs: fc.integer({ min: 1, max: 5 }),
            speed: fc.double({ min: 1.5, max: 3, noNaN: true }),
          }),
          { minLength: 1, maxLength: 5 },
        ),
        async (ratePerSecond, burstSeconds, specs) => {
          const fake = fakeClock();
          const burst = Math.max(Math.ceil(ratePerSecond * burstSeconds), Math.ceil(ratePerSecond / 100));
          const group = new ThrottleGroup({ rate: ratePerSecond, burst, clock: fake.clock });
          const all: Piece[] = [];
          const members = specs.map((spec) => {
            const throttle = group.throttle();
            const sink = recordingSink(() => fake.timers.now);
            const source = timedSource(fake, {
              bytesPerSecond: (spec.speed * ratePerSecond) / specs.length,
              chunkBytes: spec.chunkBytes,
              intervalMs: spec.intervalMs,
            });
            pipeline(source, throttle, sink).catch(() => {});
            throttle.on('data', (chunk: Buffer) => all.push({ atMs: fake.timers.now, bytes: chunk.length }));
            return { throttle, sink, source };
          });
          await advance(fake, 1300);
          for (const windowMs of [0, 5, 50, 200]) {
            expect(maxInWindow(all, windowMs)).toBeLessThanOrEqual(burst + (ratePerSecond * windowMs) / 1000 + 1e-6);
          }
          // Every member outruns its share from ~0.1 s on: together they get the whole rate
          // (less what the bucket may gain over the span, at most its capacity), and equal shares.
          const shares = members.map((m) => between(m.sink.pieces, 300, 1300));
          expect(shares.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(ratePerSecond - burst);
          expect(jain(shares)).toBeGreaterThanOrEqual(0.99);
          for (const m of members) {
            const data = m.sink.data();
            for (let i = 0; i < data.length; i++) if (data[i] !== patternByte(i)) expect.fail(`byte ${i} differs`);
            m.source.destroy();
            m.throttle.destroy();
          }
          await settle();
          expect(group.size).toBe(0);
          expect(fake.pending()).toBe(0);
        },
      ),
      { numRuns: 8 },
    );
  }, 120_000);
});

describe('ThrottleGroup: live changes', () => {
  it('setRate applies to the next piece, without losing data', async () => {
    const { fake, group, busy } = groupSetup({ rate: 1000 });
    const a = busy(300);
    const b = busy(300);
    await advance(fake, 1000);
    group.setRate(4000);
    expect(group.rate).toBe(4000);
    expect(group.burst).toBe(1024);
    expect(group.quantum).toBe(512);
    await advance(fake, 1000);
    const total = between(a.sink.pieces, 1200, 2000) + between(b.sink.pieces, 1200, 2000);
    expect(total).toBeGreaterThan(4000 * 0.8 - 700);
    expect(total).toBeLessThanOrEqual(1024 + 4000 * 0.8);
    // Data is intact: each member received a prefix of its pattern.
    for (const m of [a, b]) expect(m.sink.received).toBe(m.throttle.counters.bytes);
    for (const m of [a, b]) m.throttle.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
  });

  it('setBurst changes the bucket and the quantum; a burst too small throws', async () => {
    const { fake, group, busy } = groupSetup({ rate: 1000 });
    expect(() => group.setBurst(5)).toThrow(BurstTooSmallError);
    expect(() => group.setRate(1e9)).not.toThrow(); // a default burst follows the rate
    group.setRate(1000);
    group.setBurst(200);
    expect(group.burst).toBe(200);
    expect(group.quantum).toBe(100);
    expect(() => group.setRate(1e6)).toThrow(BurstTooSmallError); // the burst is explicit now
    const a = busy(1000);
    await advance(fake, 1000);
    expect(a.sink.received).toBeGreaterThanOrEqual(1100);
    expect(a.sink.received).toBeLessThanOrEqual(1200);
    expect(Math.max(...a.sink.pieces.map((p) => p.bytes))).toBeLessThanOrEqual(200);
    a.throttle.destroy();
    await settle();
  });

  it('a smaller burst does not leave a turn larger than the bucket (members keep flowing)', async () => {
    const { fake, group, busy } = groupSetup({ rate: 100_000 });
    expect(group.quantum).toBe(1024);
    const a = busy(4096);
    const b = busy(4096);
    await advance(fake, 100);
    expect(group.waiting).toBe(2);
    group.setBurst(1000); // the smallest that sustains 100 000 B/s; the quantum becomes 500
    const before = a.sink.received + b.sink.received;
    await advance(fake, 200);
    const passed = a.sink.received + b.sink.received - before;
    expect(passed).toBeGreaterThan(100_000 * 0.2 * 0.9);
    expect(passed).toBeLessThanOrEqual(1000 + 100_000 * 0.2);
    for (const m of [a, b]) m.throttle.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
  });

  it('a member setRate re-plans its own wait', async () => {
    const { fake, group } = groupSetup({ rate: 10_000 });
    const member = group.throttle({ rate: 100, burst: 100 });
    const sink = recordingSink(() => fake.timers.now);
    member.pipe(sink);
    member.write(Buffer.alloc(1000));
    await settle();
    expect(sink.received).toBe(100);
    member.setRate(1000); // re-plans: a wake piece of 90 bytes at 1000 B/s
    await advance(fake, 89);
    expect(sink.received).toBe(100);
    await advance(fake, 1);
    expect(sink.received).toBe(190);
    member.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
    expect(group.size).toBe(0);
  });
});

describe('ThrottleGroup: conformance property', () => {
  it('for any members, caps and chunkings: the group and each capped member keep burst + rate * T, data intact', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2000, max: 40_000 }),
        fc.double({ min: 0.02, max: 0.2, noNaN: true }),
        fc.array(
          fc.record({
            chunks: fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 4 }),
            capShare: fc.option(fc.double({ min: 0.2, max: 1.5, noNaN: true }), { nil: undefined }),
            totalBytes: fc.integer({ min: 1, max: 8000 }),
          }),
          { minLength: 1, maxLength: 5 },
        ),
        async (ratePerSecond, burstSeconds, specs) => {
          const fake = fakeClock();
          const burst = Math.max(Math.ceil(ratePerSecond * burstSeconds), Math.ceil(ratePerSecond / 100));
          const group = new ThrottleGroup({ rate: ratePerSecond, burst, clock: fake.clock });
          const all: Piece[] = [];
          const members = specs.map((spec) => {
            const ownRate = spec.capShare === undefined ? undefined : Math.ceil(ratePerSecond * spec.capShare);
            const throttle = group.throttle(ownRate === undefined ? {} : { rate: ownRate });
            const sink = recordingSink(() => fake.timers.now);
            let finished = false;
            pipeline(byteSource(spec.totalBytes, spec.chunks), throttle, sink).then(() => {
              finished = true;
            });
            throttle.on('data', (chunk: Buffer) => all.push({ atMs: fake.timers.now, bytes: chunk.length }));
            return { spec, ownRate, throttle, sink, done: () => finished };
          });
          const total = specs.reduce((sum, spec) => sum + spec.totalBytes, 0);
          // Enough time for everything: all bytes at the group's rate, then the slowest
          // own cap alone (a capped member may get less than its cap while others share), plus wake pieces.
          const slowestMs = Math.max(
            ...members.map((m) => (m.ownRate === undefined ? 0 : (m.spec.totalBytes * 1000) / m.ownRate)),
          );
          await advance(fake, Math.ceil((total * 1000) / ratePerSecond + slowestMs) + 1000);
          all.sort((x, y) => x.atMs - y.atMs);
          for (const windowMs of [0, 5, 50, 200]) {
            expect(maxInWindow(all, windowMs)).toBeLessThanOrEqual(burst + (ratePerSecond * windowMs) / 1000 + 1e-6);
          }
          for (const m of members) {
            expect(m.done()).toBe(true);
            expect(m.sink.received).toBe(m.spec.totalBytes);
            const data = m.sink.data();
            for (let i = 0; i < data.length; i++) if (data[i] !== patternByte(i)) expect.fail(`byte ${i} differs`);
            if (m.ownRate !== undefined) {
              const ownBurst = m.throttle.burst as number;
              for (const windowMs of [0, 50, 200]) {
                expect(maxInWindow(m.sink.pieces, windowMs)).toBeLessThanOrEqual(
                  ownBurst + (m.ownRate * windowMs) / 1000 + 1e-6,
                );
              }
            }
          }
          expect(group.size).toBe(0);
          expect(fake.pending()).toBe(0);
        },
      ),
      { numRuns: 15 },
    );
  }, 120_000);
});
