/**
 * The bandwidth stores: one contract, run on MemoryBandwidthStore and on RedisBandwidthStore
 * against a real redis-server, on one virtual time so the answers compare exactly; replays and
 * late calls; the failure policies; and two fleet groups sharing one cap through Redis in real time.
 */

import { Readable, Writable } from 'node:stream';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BandwidthExchangeOp,
  type BandwidthStore,
  fairShare,
  MemoryBandwidthStore,
} from '../../src/fleet/bandwidth-store.js';
import { RedisBandwidthStore } from '../../src/fleet/redis-bandwidth-store.js';
import { ThrottleGroup } from '../../src/stream/group.js';
import type { Throttle } from '../../src/stream/throttle.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const KiB = 1024;
const params = { ratePerSecond: 100 * KiB, burst: 40 * KiB };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let server: RedisServer;
const clients: Redis[] = [];
beforeAll(async () => {
  server = await startRedis(['--enable-debug-command', 'yes']);
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await server.stop();
});

function client(): Redis {
  const c = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  c.on('error', () => {});
  clients.push(c);
  return c;
}

function op(member: string, seq: number, change: Partial<BandwidthExchangeOp> = {}): BandwidthExchangeOp {
  return {
    key: 'k',
    member,
    seq,
    demand: 1,
    capPerSecond: Number.POSITIVE_INFINITY,
    giveBackBytes: 0,
    heldBytes: 0,
    leaseMs: 200,
    params,
    ...change,
  };
}

describe('fairShare: max-min by demand', () => {
  it.each([
    {
      rate: 100,
      members: [
        [1, Infinity],
        [1, Infinity],
      ],
      me: 0,
      share: 50,
    },
    {
      rate: 100,
      members: [
        [1, 10],
        [1, Infinity],
      ],
      me: 1,
      share: 90,
    },
    {
      rate: 100,
      members: [
        [1, 10],
        [1, Infinity],
      ],
      me: 0,
      share: 10,
    },
    {
      rate: 320,
      members: [
        [1, Infinity],
        [31, Infinity],
      ],
      me: 0,
      share: 10,
    },
    {
      rate: 100,
      members: [
        [2, 80],
        [1, Infinity],
      ],
      me: 0,
      share: 100 * (2 / 3),
    },
    {
      rate: 100,
      members: [
        [0, Infinity],
        [1, Infinity],
      ],
      me: 0,
      share: 0,
    },
    // floors first, the rest by demand
    {
      rate: 100,
      members: [
        [1, Infinity, 60],
        [3, Infinity],
      ],
      me: 0,
      share: 70,
    },
    {
      rate: 100,
      members: [
        [1, Infinity, 60],
        [3, Infinity],
      ],
      me: 1,
      share: 30,
    },
    // a floor above the cap counts as the cap; the cap left is shared max-min
    {
      rate: 100,
      members: [
        [1, 20, 50],
        [1, Infinity, 10],
      ],
      me: 1,
      share: 80,
    },
    {
      rate: 100,
      members: [
        [1, 30, 10],
        [1, Infinity],
      ],
      me: 0,
      share: 30,
    },
    // floors above the rate are scaled down to it
    {
      rate: 100,
      members: [
        [1, Infinity, 150],
        [1, Infinity, 50],
      ],
      me: 0,
      share: 75,
    },
    // a floor without demand counts for nothing
    {
      rate: 100,
      members: [
        [0, Infinity, 80],
        [1, Infinity],
      ],
      me: 1,
      share: 100,
    },
  ])('$rate among $members: member $me gets $share', ({ rate, members, me, share }) => {
    const list = members.map(([demand, capPerSecond, floorPerSecond]) => ({
      demand: demand as number,
      capPerSecond: capPerSecond as number,
      floorPerSecond: floorPerSecond ?? 0,
    }));
    expect(fairShare(rate, list, list[me] as (typeof list)[number])).toBeCloseTo(share, 9);
  });
});

describe.each(['memory', 'redis'] as const)('the bandwidth store contract (%s)', (kind) => {
  let nowMs = 1_000_000;
  function store(): BandwidthStore {
    const clock = { now: () => nowMs, setTimeout, clearTimeout };
    if (kind === 'memory') return new MemoryBandwidthStore({ clock });
    return new RedisBandwidthStore({
      client: client(),
      onError: 'deny',
      prefix: `c${Math.random().toString(36).slice(2)}`,
      now: () => nowMs,
    });
  }

  it('grants one lease of the share, splits by demand, and refills at the rate', async () => {
    const s = store();
    const a = await s.exchange(op('a', 1));
    expect(a.sharePerSecond).toBe(params.ratePerSecond);
    expect(a.grantedBytes).toBe((params.ratePerSecond * 200) / 1000);
    const b = await s.exchange(op('b', 1, { demand: 3 }));
    expect(b.sharePerSecond).toBe(params.ratePerSecond * 0.75);
    expect(b.demand).toBe(4);
    expect(b.members).toBe(2);
    // the bucket held 40 KiB less a's 20 KiB: b's lease (15 KiB) fits
    expect(b.grantedBytes).toBe(15 * KiB);
    expect(b.retryMs).toBe(0);
    // c's (10 KiB) does not: it gets the 5 KiB left, and is told when the rest is there
    const c = await s.exchange(op('c', 1, { demand: 4 }));
    expect(c.sharePerSecond).toBe(params.ratePerSecond / 2);
    expect(c.grantedBytes).toBe(5 * KiB);
    expect(c.retryMs).toBeCloseTo((5 * KiB * 1000) / params.ratePerSecond, 6);
    nowMs += 100;
    const again = await s.exchange(op('a', 2, { heldBytes: 5 * KiB }));
    expect(again.sharePerSecond).toBe(params.ratePerSecond / 8);
    expect(again.grantedBytes).toBe(0); // it holds more than a lease of its new share
    nowMs += 1000;
  });

  it('a replayed call changes nothing and grants nothing; a late one only gives back', async () => {
    const s = store();
    const first = await s.exchange(op('a', 5));
    expect(first.grantedBytes).toBeGreaterThan(0);
    const replay = await s.exchange(op('a', 5));
    expect(replay.grantedBytes).toBe(0);
    expect(replay.tokens).toBe(first.tokens);
    const late = await s.exchange(op('a', 6, { deadlineMs: nowMs - 1, giveBackBytes: 1000 }));
    expect(late.grantedBytes).toBe(0);
    expect(late.tokens).toBe(first.tokens + 1000);
  });

  it('a call may write the limits: the bucket keeps its tokens up to the new burst; a replay or a late call writes nothing', async () => {
    const s = store();
    const first = await s.exchange(op('a', 1)); // 20 KiB of 40 granted
    expect(first.tokens).toBe(20 * KiB);
    const half = { ratePerSecond: 50 * KiB, burst: 10 * KiB };
    const late = await s.exchange(op('a', 2, { params: half, writeParams: true, deadlineMs: nowMs - 1 }));
    expect(late.params).toEqual(params);
    const written = await s.exchange(op('a', 3, { params: half, writeParams: true, heldBytes: 1e9 }));
    expect(written.params).toEqual(half);
    expect(written.tokens).toBe(10 * KiB);
    expect(written.sharePerSecond).toBe(half.ratePerSecond);
    const replay = await s.exchange(op('a', 3, { params, writeParams: true }));
    expect(replay.params).toEqual(half);
    // another member's call, with other defaults, is split and granted by the written limits
    nowMs += 100; // 5 KiB more at the new rate (capped at the new burst)
    const b = await s.exchange(op('b', 1));
    expect(b.params).toEqual(half);
    expect(b.sharePerSecond).toBe(half.ratePerSecond / 2);
    expect(b.grantedBytes).toBe(5 * KiB); // its lease, half the rate for 200 ms
    expect(b.tokens).toBe(5 * KiB);
    nowMs += 1000;
  });

  it('splits floors first, then the rest by demand', async () => {
    const s = store();
    await s.exchange(op('a', 1, { floorPerSecond: 60 * KiB }));
    const b = await s.exchange(op('b', 1, { demand: 3 }));
    expect(b.sharePerSecond).toBe(30 * KiB);
    const a = await s.exchange(op('a', 2, { floorPerSecond: 60 * KiB, heldBytes: 1e9 }));
    expect(a.sharePerSecond).toBe(70 * KiB);
    nowMs += 1000;
  });

  it('a member leaves the split one lease after its last call', async () => {
    const s = store();
    await s.exchange(op('a', 1));
    const both = await s.exchange(op('b', 1));
    expect(both.sharePerSecond).toBe(params.ratePerSecond / 2);
    nowMs += 150;
    expect((await s.exchange(op('b', 2, { heldBytes: 1e9 }))).sharePerSecond).toBe(params.ratePerSecond / 2);
    nowMs += 60; // a's registration (200 ms) has run out
    const alone = await s.exchange(op('b', 3, { heldBytes: 1e9 }));
    expect(alone.sharePerSecond).toBe(params.ratePerSecond);
    expect(alone.members).toBe(1);
  });
});

describe('fairShare with floors (property)', () => {
  const memberArb = fc.record({
    demand: fc.oneof(fc.constant(0), fc.double({ min: 0.001, max: 40, noNaN: true })),
    capPerSecond: fc.oneof(fc.constant(Number.POSITIVE_INFINITY), fc.double({ min: 0, max: 2000, noNaN: true })),
    floorPerSecond: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 800, noNaN: true })),
  });
  it('each busy member gets its scaled floor (at most its cap) and at most its cap; the rate is shared out whole while one is uncapped', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1, max: 1000, noNaN: true }),
        fc.array(memberArb, { minLength: 1, maxLength: 8 }),
        (rate, members) => {
          const busy = members.filter((m) => m.demand > 0);
          let floors = 0;
          for (const m of busy) floors += Math.min(m.floorPerSecond, m.capPerSecond);
          const scale = floors > rate ? rate / floors : 1;
          let total = 0;
          for (const m of members) {
            const share = fairShare(rate, members, m);
            if (!(m.demand > 0)) {
              expect(share).toBe(0);
              continue;
            }
            total += share;
            expect(share).toBeLessThanOrEqual(m.capPerSecond * (1 + 1e-9) + 1e-9);
            expect(share).toBeGreaterThanOrEqual(
              Math.min(m.floorPerSecond, m.capPerSecond) * scale * (1 - 1e-9) - 1e-9,
            );
          }
          expect(total).toBeLessThanOrEqual(rate * (1 + 1e-9) + 1e-9);
          if (busy.some((m) => m.capPerSecond === Number.POSITIVE_INFINITY)) expect(total).toBeCloseTo(rate, 6);
        },
      ),
    );
  });

  it('the Lua twin gives the same shares as fairShare', async () => {
    const c = client();
    let nowMs = 5_000_000;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(memberArb, { minLength: 1, maxLength: 6 }), async (members) => {
        const s = new RedisBandwidthStore({ client: c, onError: 'deny', prefix: `twin${run++}`, now: () => nowMs });
        const memory = new MemoryBandwidthStore({ clock: { now: () => nowMs, setTimeout, clearTimeout } });
        const list = members.map((m, i) => ({ ...m, member: `m${i}` }));
        for (const store of [s, memory]) {
          for (const m of list) await store.exchange(op(m.member, 1, { ...m, heldBytes: 1e12 }));
        }
        for (const m of list) {
          const change = { ...m, heldBytes: 1e12 };
          const [viaRedis, viaMemory] = [
            await s.exchange(op(m.member, 2, change)),
            await memory.exchange(op(m.member, 2, change)),
          ];
          // The same doubles up to rounding: a relative bound, since shares run to 1e5 and beyond.
          const close = (a: number, b: number) =>
            expect(Math.abs(a - b)).toBeLessThanOrEqual(1e-9 * Math.max(1, Math.abs(b)));
          close(viaRedis.sharePerSecond, viaMemory.sharePerSecond);
          close(viaMemory.sharePerSecond, fairShare(params.ratePerSecond, list, m));
        }
        nowMs += 1000;
        s.close();
      }),
      { numRuns: 40 },
    );
  });
});

describe('RedisBandwidthStore when Redis fails', () => {
  it.each([
    ['deny', 0],
    ['local', 25 * KiB],
    ['allow', 100 * KiB],
  ] as const)("'%s' answers with a share of %d B/s, and Redis answers again after a restart", async (policy, share) => {
    const c = client();
    await c.ping();
    const s = new RedisBandwidthStore({
      client: c,
      onError: policy,
      expectedWorkers: 4,
      timeout: 100,
      probeInterval: 50,
      prefix: `f${policy}`,
    });
    const ok = await s.exchange(op('a', 1));
    expect(ok.source).toBe('store');
    server.signal('SIGSTOP');
    try {
      const down = await s.exchange(op('a', 2));
      expect(down.source).toBe(policy);
      expect(down.sharePerSecond).toBe(share);
    } finally {
      server.signal('SIGCONT');
    }
    const recovered = new Promise((resolve) => s.once('recovered', resolve));
    await recovered;
    const back = await s.exchange(op('a', 3));
    expect(back.source).toBe('store');
    // the call given up on ran when the server resumed, after its deadline: it granted nothing
    expect(back.sharePerSecond).toBe(params.ratePerSecond);
    s.close();
  });
});

describe('two fleet groups on one Redis key, real time (tolerant)', () => {
  /** Two groups on one key (1 stream and 3), endless sources; `counts` per group. */
  function fleet(prefix: string, rate: number) {
    const stores = [0, 1].map(() => new RedisBandwidthStore({ client: client(), onError: 'deny', prefix }));
    const groups = stores.map((store) => new ThrottleGroup({ rate, store, key: 'egress' }));
    const counts = [0, 0];
    const chunk = Buffer.alloc(16 * KiB);
    const streams: { source: Readable; t: Throttle }[] = [];
    for (const [g, n] of [
      [0, 1],
      [1, 3],
    ] as const) {
      for (let i = 0; i < n; i++) {
        const t = (groups[g] as ThrottleGroup).throttle();
        const source = new Readable({
          read() {
            this.push(chunk);
          },
        });
        const sink = new Writable({
          write(c: Buffer, _e, cb) {
            counts[g] = (counts[g] as number) + c.length;
            cb();
          },
        });
        source.pipe(t).pipe(sink);
        streams.push({ source, t });
      }
    }
    /** Bytes per group over the next `ms`, and the seconds it took. */
    const measure = async (ms: number) => {
      const start = [...counts];
      const t0 = performance.now();
      await sleep(ms);
      const seconds = (performance.now() - t0) / 1000;
      return { passed: counts.map((c, i) => c - (start[i] as number)), seconds };
    };
    const stop = () => {
      for (const { source, t } of streams) {
        source.destroy();
        t.destroy();
      }
      for (const g of groups) g.destroy();
    };
    return { groups, measure, stop };
  }

  it('pass one rate together, split by their streams', async () => {
    const rate = 2 * 1024 * KiB;
    const { groups, measure, stop } = fleet('rt', rate);
    await sleep(1000);
    const { passed, seconds } = await measure(2000);
    stop();
    const total = (passed[0] as number) + (passed[1] as number);
    expect(total / seconds / rate).toBeGreaterThan(0.9);
    expect(total / seconds / rate).toBeLessThan(1.1);
    expect((passed[0] as number) / total).toBeGreaterThan(0.15);
    expect((passed[0] as number) / total).toBeLessThan(0.35);
    for (const g of groups) expect((g.fleet?.exchanges ?? 0) / 3).toBeLessThan(25);
  });

  it('setRate on one holds for both, through the store', async () => {
    const rate = 2 * 1024 * KiB;
    const { groups, measure, stop } = fleet('rt-set', rate);
    const [a, b] = groups as [ThrottleGroup, ThrottleGroup];
    await sleep(800);
    a.setRate(rate / 2);
    await sleep(500);
    expect(b.rate).toBe(rate / 2);
    const { passed, seconds } = await measure(1500);
    stop();
    const total = (passed[0] as number) + (passed[1] as number);
    expect(total / seconds / (rate / 2)).toBeGreaterThan(0.9);
    expect(total / seconds / (rate / 2)).toBeLessThan(1.1);
    expect((passed[0] as number) / total).toBeGreaterThan(0.15);
    expect((passed[0] as number) / total).toBeLessThan(0.35);
  });
});
