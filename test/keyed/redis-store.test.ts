import fc from 'fast-check';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { MemoryStore } from '../../src/keyed/memory-store.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import type { StoreMode, StoreOp, StoreResult } from '../../src/keyed/store.js';
import { manualClock } from '../helpers/fake-clock.js';

const port = inject('redisPort');
const ioredis = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
const nodeRedis = createClient({ socket: { port, host: '127.0.0.1' } });
let n = 0;
const prefix = () => `rs-${process.pid}-${++n}`;

beforeAll(async () => {
  await ioredis.connect();
  await nodeRedis.connect();
});
afterAll(async () => {
  ioredis.disconnect();
  await nodeRedis.close();
});

describe('RedisStore', () => {
  it('the Lua script and the memory store agree to the last bit on any sequence of operations', async () => {
    // what the runs met, so that the property cannot pass on a world too easy (no refusal, say)
    const seen = { refusedTries: 0, refusedTriesAlone: 0, admitted: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 1, max: 300 }),
        fc.boolean(),
        fc.array(
          fc.record({
            // now and then no time at all, or a few ms, so that buckets drain and tries are refused
            dt: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.double({ min: -50, max: 500, noNaN: true }), {
              arbitrary: fc.constantFrom(0, 1, 5),
              weight: 3,
            }),
            key: fc.constantFrom('a', 'b', '__proto__'),
            // a share of the burst: fast-check's doubles lean to tiny ones, so large shares are added, which drain
            cost: fc.oneof(fc.double({ min: 0, max: 1, noNaN: true }), {
              arbitrary: fc.constantFrom(0.3, 0.5, 0.9, 1),
              weight: 2,
            }),
            mode: fc.constantFrom<StoreMode | 'cancel'>('try', 'try', 'reserve', 'peek', 'cancel'),
            maxWaitMs: fc.oneof(fc.constant(Number.POSITIVE_INFINITY), fc.integer({ min: 0, max: 2000 })),
            // now and then the burst is lowered below what the buckets were written with (clampToCapacity
            // on read); never raised: Redis forgets a full bucket (it is full at the new burst), where
            // memory may still hold it at the old one and refill to the new one at the rate
            burstScale: fc.constantFrom(1, 1, 1, 1, 1, 0.8),
          }),
          { minLength: 8, maxLength: 40 },
        ),
        async (rate, burst, withGlobal, steps) => {
          const clock = manualClock(1_700_000_000_000);
          const memory = new MemoryStore({ clock });
          // through both clients, each on its own keys
          const stores = [ioredis, nodeRedis].map(
            (client) => new RedisStore({ client, prefix: prefix(), onError: 'deny', now: () => clock.now() }),
          );
          let lastReserve:
            | {
                op: StoreOp;
                m: Awaited<ReturnType<MemoryStore['decide']>>;
                r: Awaited<ReturnType<RedisStore['decide']>>[];
              }
            | undefined;
          let scale = 1;
          for (const step of steps) {
            clock.set(clock.now() + step.dt);
            scale *= step.burstScale;
            const bucket = { ratePerSecond: rate, burst: burst * scale };
            const global = withGlobal ? { ratePerSecond: rate * 2, burst: burst * 1.5 * scale } : undefined;
            const cost = step.cost * bucket.burst;
            if (step.mode === 'cancel') {
              if (lastReserve === undefined) continue;
              await memory.refund(lastReserve.op, lastReserve.m);
              for (const [i, redis] of stores.entries())
                await redis.refund(lastReserve.op, lastReserve.r[i] as StoreResult);
              lastReserve = undefined;
              continue;
            }
            const op: StoreOp = { mode: step.mode, key: step.key, cost, bucket, global, maxWaitMs: step.maxWaitMs };
            const m = await memory.decide(op);
            const r: StoreResult[] = [];
            for (const redis of stores) r.push(await redis.decide(op));
            expect(r).toEqual([m, m]);
            if (m.allowed) seen.admitted++;
            else if (op.mode === 'try') {
              seen.refusedTries++;
              if (global === undefined) seen.refusedTriesAlone++; // answered with the bucket's state (flag 2)
            }
            if (op.mode === 'reserve' && m.allowed) lastReserve = { op, m, r };
          }
        },
      ),
      {
        numRuns: 60,
        examples: [
          // A full bucket written at t, then a decision a fraction of a ms earlier: both stores keep the
          // bucket's time t (a full bucket is written, not deleted, so a later read does not start afresh).
          [
            1,
            1,
            false,
            [
              { dt: 0, key: 'a', cost: 0, mode: 'try', maxWaitMs: 0, burstScale: 1 },
              {
                dt: -0.00012207031250000003,
                key: 'a',
                cost: 0,
                mode: 'try',
                maxWaitMs: Number.POSITIVE_INFINITY,
                burstScale: 1,
              },
              {
                dt: 0,
                key: 'a',
                cost: 0.0009997558593750067,
                mode: 'try',
                maxWaitMs: Number.POSITIVE_INFINITY,
                burstScale: 1,
              },
              { dt: 1, key: 'a', cost: 0, mode: 'try', maxWaitMs: 0, burstScale: 1 },
            ],
          ],
          // The clock goes back before a refused try: both stores keep the bucket re-counted from the
          // earlier time (Redis writes it back although it charged nothing), so the next try refills from there.
          [
            100,
            1,
            false,
            [
              { dt: 0, key: 'a', cost: 1, mode: 'try', maxWaitMs: 0, burstScale: 1 },
              { dt: -10, key: 'a', cost: 1, mode: 'try', maxWaitMs: 0, burstScale: 1 },
              { dt: 5, key: 'a', cost: 1, mode: 'try', maxWaitMs: 0, burstScale: 1 },
              { dt: 10, key: 'a', cost: 1, mode: 'try', maxWaitMs: 0, burstScale: 1 },
            ],
          ],
        ],
      },
    );
    expect(seen.refusedTriesAlone).toBeGreaterThan(10);
    expect(seen.refusedTries).toBeGreaterThan(seen.refusedTriesAlone);
    expect(seen.admitted).toBeGreaterThan(100);
  });

  it('a batch of concurrent decisions equals the same decisions made one by one in memory', async () => {
    // without a global bucket a refused try comes back as the bucket's state, which the client works out
    const clients = [ioredis, nodeRedis];
    for (const [client, withGlobal] of clients.flatMap((c) => [[c, true] as const, [c, false] as const])) {
      const clock = manualClock(1_000_000);
      const memory = new MemoryStore({ clock });
      const redis = new RedisStore({ client, prefix: prefix(), onError: 'deny', now: () => clock.now() });
      const bucket = { ratePerSecond: 3, burst: 7 };
      const global = withGlobal ? { ratePerSecond: 10, burst: 40 } : undefined;
      for (let round = 0; round < 3; round++) {
        const ops: StoreOp[] = Array.from({ length: 150 }, (_, i) => ({
          mode: (['try', 'reserve', 'peek'] as const)[i % 3] as StoreMode,
          key: `k${(i * 7) % 11}`,
          cost: 1 + (i % 4) / 2,
          bucket,
          global,
          maxWaitMs: i % 5 === 0 ? Number.POSITIVE_INFINITY : 400,
        }));
        const batched = await Promise.all(ops.map((op) => redis.decide(op)));
        const oneByOne = [];
        for (const op of ops) oneByOne.push(await memory.decide(op));
        expect(batched).toEqual(oneByOne);
        expect(batched.filter((r) => r.allowed).length).toBeGreaterThan(5);
        expect(batched.filter((r, i) => !r.allowed && ops[i]?.mode === 'try').length).toBeGreaterThan(5);
        clock.advance(1500);
      }
      expect(redis.stats.calls).toBeLessThanOrEqual(3 * (Math.ceil(150 / 32) + 1)); // 450 decisions, calls of up to 32
    }
  });

  it("uses Redis's TIME: real time refills the bucket, whatever the client's clock says", async () => {
    // this instance's clock never moves (its timers are real)
    const frozen = {
      now: () => 0,
      setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms),
      clearTimeout: (h: unknown) => clearTimeout(h as NodeJS.Timeout),
    };
    const store = new RedisStore({ client: ioredis, prefix: prefix(), onError: 'deny', clock: frozen });
    const limiter = new KeyedLimiter({ rate: 5, burst: 10, store, clock: frozen });
    const startMs = performance.now();
    expect((await limiter.tryTake('k', 10)).allowed).toBe(true);
    const eleventh = await limiter.tryTake('k');
    // a token takes 200 ms to refill; a loaded machine may take that long between two calls
    if (performance.now() - startMs < 150) expect(eleventh.allowed).toBe(false);
    await new Promise((r) => setTimeout(r, 650));
    expect((await limiter.tryTake('k', 2)).allowed).toBe(true); // 3 tokens refilled by Redis's clock
  });

  it('take paces three instances to one shared rate in real time (reservations in Redis, waits local)', async () => {
    const extra = new Redis({ port, host: '127.0.0.1' });
    const p = prefix();
    const limiters = [ioredis, extra, nodeRedis].map(
      (client) =>
        new KeyedLimiter({
          rate: 50,
          burst: 5,
          store: new RedisStore({ client, prefix: p, onError: 'deny', timeout: '2s' }),
        }),
    );
    const startMs = performance.now();
    const done: number[] = [];
    await Promise.all(
      limiters.flatMap((limiter) =>
        Array.from({ length: 10 }, () => limiter.take('shared').then(() => done.push(performance.now() - startMs))),
      ),
    );
    extra.disconnect();
    done.sort((a, b) => a - b);
    // 30 takes at 50/s with a burst of 5: the last may not start before (30 - 5) / 50 s = 500 ms
    expect(done[29]).toBeGreaterThanOrEqual(495);
    // and no window of T ms saw more than burst + rate * T starts (+2: the window's edge, and local
    // timers' jitter against Redis's clock on a loaded machine)
    for (let i = 0; i < done.length; i++) {
      for (let j = i; j < done.length; j++) {
        const windowMs = (done[j] as number) - (done[i] as number);
        expect(j - i + 1).toBeLessThanOrEqual(5 + (50 * windowMs) / 1000 + 2);
      }
    }
  });

  it('expires a bucket no sooner than it would be full again (at most 1.5x later), and one written full 1 ms after its time', async () => {
    const p = prefix();
    const store = new RedisStore({ client: ioredis, prefix: p, onError: 'deny' }); // Redis's TIME
    const limiter = new KeyedLimiter({ rate: 100, burst: 200, store });
    await limiter.tryTake('k', 200);
    const ttl = await ioredis.pttl(`${p}:k:k`);
    expect(ttl).toBeGreaterThan(2900);
    expect(ttl).toBeLessThanOrEqual(3001);
    await limiter.reset('k');
    expect(await ioredis.exists(`${p}:k:k`)).toBe(0);
    await limiter.tryTake('k', 0);
    // a bucket written full lives 1 ms past its time (as the memory store keeps it), then is no key at all
    expect(await ioredis.pttl(`${p}:k:k`)).toBeLessThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 5));
    expect(await ioredis.exists(`${p}:k:k`)).toBe(0);
  });

  it('keeps a late enough expiry (KEEPTTL) and moves it only when the bucket would outlive it', async () => {
    const p = prefix();
    const store = new RedisStore({ client: ioredis, prefix: p, onError: 'deny' });
    const limiter = new KeyedLimiter({ rate: 1000, burst: 10_000, store });
    const key = `${p}:k:k`;
    let moved = 0;
    let last = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 40; i++) {
      const d = await limiter.tryTake('k', 100);
      const ttl = await ioredis.pttl(key);
      // never sooner than full again (less the few ms since the decision), never over 1.5x + 1 ms
      expect(ttl).toBeGreaterThanOrEqual(d.resetAfterMs - 5);
      expect(ttl).toBeLessThanOrEqual(Math.ceil(d.resetAfterMs) * 1.5 + 2);
      if (ttl > last + 1) moved++;
      last = ttl;
    }
    // 40 takes of 100 with a time to full growing 100 ms each: the expiry moves a few times, not 40
    expect(moved).toBeGreaterThan(1);
    expect(moved).toBeLessThan(15);
  });

  it('lays keys out for Redis Cluster: one slot with a global bucket, spread without', async () => {
    const p = prefix();
    const store = new RedisStore({ client: nodeRedis, prefix: p, onError: 'allow' });
    expect(store.keyFor('user:1', false)).toBe(`${p}:k:user:1`);
    expect(store.keyFor('user:1', true)).toBe(`{${p}}:k:user:1`);
    expect(store.globalKey).toBe(`{${p}}:g`);
    const limiter = new KeyedLimiter({ rate: 1, burst: 1, global: { rate: 10, burst: 10 }, store });
    await limiter.tryTake('user:1');
    expect(await ioredis.exists(store.keyFor('user:1', true), store.globalKey)).toBe(2);
  });

  it('batches decisions in flight together: 500 concurrent calls, far fewer script calls, exact admission', async () => {
    for (const client of [ioredis, nodeRedis]) {
      const store = new RedisStore({ client, prefix: prefix(), onError: 'deny' });
      const failures: string[] = [];
      store.on('failure', ({ error }) => failures.push(error.message));
      const limiter = new KeyedLimiter({ rate: 0.001, burst: 100, global: { rate: 0.001, burst: 250 }, store });
      const decisions = await Promise.all(Array.from({ length: 500 }, (_, i) => limiter.tryTake(`k${i % 5}`)));
      const admitted = decisions.filter((d) => d.allowed).length;
      expect(failures).toEqual([]);
      expect(admitted).toBe(250);
      expect(store.stats.decisions).toBe(500);
      expect(store.stats.calls).toBeLessThanOrEqual(Math.ceil(500 / 32) + 1);
    }
  });

  it('refuses bad options with the fix in the message', () => {
    expect(() => new RedisStore({ client: {} as never, onError: 'deny' })).toThrow(/ioredis client/);
    expect(() => new RedisStore({ client: ioredis, onError: 'maybe' as never })).toThrow(/'allow' \(fail-open\)/);
    expect(() => new RedisStore({ client: ioredis, onError: 'deny', prefix: 'a{b}' })).toThrow(/without \{ or \}/);
    expect(() => new RedisStore({ client: ioredis, onError: 'deny', timeout: 0 })).toThrow(/timeout/);
    expect(() => new RedisStore({ client: ioredis, onError: 'deny', probeInterval: Number.NaN })).toThrow(
      /probeInterval/,
    );
  });
});
