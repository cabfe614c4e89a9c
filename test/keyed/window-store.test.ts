import fc from 'fast-check';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { MemoryStore } from '../../src/keyed/memory-store.js';
import {
  MemoryWindowStore,
  RedisWindowStore,
  type WindowKind,
  type WindowStore,
} from '../../src/keyed/window-store.js';
import { manualClock } from '../helpers/fake-clock.js';

const port = inject('redisPort');
const ioredis = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
const nodeRedis = createClient({ socket: { port, host: '127.0.0.1' } });
let n = 0;
const prefix = () => `ws-${process.pid}-${++n}`;

beforeAll(async () => {
  await ioredis.connect();
  await nodeRedis.connect();
});
afterAll(async () => {
  ioredis.disconnect();
  await nodeRedis.close();
});

/** 2023-11-14T22:13:20Z: a whole number of minutes since the epoch. */
const NOON = 1_700_000_040_000;
type Clk = ReturnType<typeof manualClock>;
type Factory = (clock: Clk) => WindowStore;

const stores: [string, Factory, WindowKind[]][] = [
  ['memory', (clock) => new MemoryWindowStore({ clock }), ['fixed', 'counter', 'log']],
  [
    'redis (ioredis)',
    (clock) =>
      new RedisWindowStore({ client: ioredis, prefix: prefix(), now: clock.now, onError: 'deny', timeout: 2000 }),
    ['fixed', 'counter'],
  ],
  [
    'redis (node-redis)',
    (clock) =>
      new RedisWindowStore({ client: nodeRedis, prefix: prefix(), now: clock.now, onError: 'deny', timeout: 2000 }),
    ['fixed', 'counter'],
  ],
];

function limiterFor(kind: WindowKind, store: WindowStore, limit: number, window: string | number) {
  return kind === 'fixed'
    ? new KeyedLimiter({ algorithm: 'fixed-window', limit, window, store })
    : new KeyedLimiter({ algorithm: 'sliding-window', mode: kind, limit, window, store });
}

async function takeMany(limiter: KeyedLimiter, key: string, count: number, cost = 1): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < count; i++) if ((await limiter.tryTake(key, cost)).allowed) admitted++;
  return admitted;
}

expect(NOON % 60_000).toBe(0);

for (const [name, make, kinds] of stores) {
  describe(`window store contract: ${name}`, () => {
    it('fixed window: 100 at 12:00:59 and 100 at 12:01:00 both pass; the 101st in each is refused until the boundary', async () => {
      const clock = manualClock(NOON + 59_000);
      const limiter = limiterFor('fixed', make(clock), 100, '1 min');
      expect(await takeMany(limiter, 'k', 100)).toBe(100);
      const refused = await limiter.tryTake('k');
      expect(refused).toEqual({ allowed: false, remaining: 0, retryAfterMs: 1000, resetAfterMs: 1000, limit: 100 });
      clock.set(NOON + 59_999);
      expect((await limiter.tryTake('k')).allowed).toBe(false);
      clock.set(NOON + 60_000);
      expect(await takeMany(limiter, 'k', 101)).toBe(100);
      const d = await limiter.peek('k');
      expect(d).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 60_000 });
    });

    if (kinds.includes('counter')) {
      it('sliding counter: the previous window is weighted by the share still inside the window', async () => {
        const clock = manualClock(NOON + 900);
        const limiter = limiterFor('counter', make(clock), 100, 1000);
        expect(await takeMany(limiter, 'k', 100)).toBe(100);
        clock.set(NOON + 1000); // estimate 100 * (1 - 0) + 0
        const refused = await limiter.tryTake('k');
        expect(refused.allowed).toBe(false);
        expect(refused.retryAfterMs).toBeCloseTo(10, 9);
        clock.set(NOON + 1010); // estimate 100 * 0.99 = 99: room for one
        expect(await takeMany(limiter, 'k', 3)).toBe(1);
        clock.set(NOON + 1500); // 100 * 0.5 + 1 = 51: room for 49
        expect(await takeMany(limiter, 'k', 60)).toBe(49);
        clock.set(NOON + 3000); // two windows later: empty
        expect(await takeMany(limiter, 'k', 120)).toBe(100);
      });
    }

    for (const kind of kinds) {
      describe(`${kind}`, () => {
        it('counts cost; a refusal charges nothing; peek counts nothing; keys are independent', async () => {
          const clock = manualClock(NOON + 100);
          const limiter = limiterFor(kind, make(clock), 10, '1s');
          // peek answers as tryTake would (remaining after counting), counting nothing
          expect(await limiter.peek('a', 10)).toMatchObject({ allowed: true, remaining: 0 });
          expect(await limiter.tryTake('a', 4)).toMatchObject({ allowed: true, remaining: 6, limit: 10 });
          expect(await limiter.tryTake('a', 4)).toMatchObject({ allowed: true, remaining: 2 });
          const refused = await limiter.tryTake('a', 4);
          expect(refused).toMatchObject({ allowed: false, remaining: 2 });
          expect(refused.retryAfterMs).toBeGreaterThan(0);
          expect(await limiter.peek('a', 2)).toMatchObject({ allowed: true, remaining: 0 });
          expect(await limiter.tryTake('a', 2)).toMatchObject({ allowed: true, remaining: 0 });
          expect((await limiter.tryTake('a', 1)).allowed).toBe(false);
          expect(await limiter.tryTake('b', 10)).toMatchObject({ allowed: true, remaining: 0 });
          expect((await limiter.tryTake('a', 0)).allowed).toBe(true);
        });

        it('reset forgets a key', async () => {
          const clock = manualClock(NOON + 100);
          const limiter = limiterFor(kind, make(clock), 5, '1 min');
          expect(await takeMany(limiter, 'k', 6)).toBe(5);
          await limiter.reset('k');
          expect(await takeMany(limiter, 'k', 6)).toBe(5);
        });

        it('refuses take, setRate, a global limit and a cost above the limit with coded errors', async () => {
          const clock = manualClock(NOON);
          const store = make(clock);
          const limiter = limiterFor(kind, store, 5, '1s');
          await expect(limiter.take('k')).rejects.toSatisfy((e) => isTokenpaceError(e, 'ERR_NOT_SUPPORTED'));
          expect(() => limiter.setRate(1)).toThrow(expect.objectContaining({ code: 'ERR_NOT_SUPPORTED' }));
          await expect(limiter.tryTake('k', 6)).rejects.toSatisfy((e) =>
            isTokenpaceError(e, 'ERR_COST_EXCEEDS_CAPACITY'),
          );
          await expect(limiter.tryTake('', 1)).rejects.toSatisfy((e) => isTokenpaceError(e, 'ERR_INVALID_OPTION'));
          expect(
            () =>
              new KeyedLimiter({
                algorithm: 'fixed-window',
                limit: 5,
                window: '1s',
                store,
                global: { rate: 1, burst: 1 },
              } as never),
          ).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
          expect(await takeMany(limiter, 'k', 6)).toBe(5);
        });
      });
    }
  });
}

describe('KeyedLimiter with a window algorithm', () => {
  it('uses a memory window store by default, with the exact log for sliding windows', async () => {
    const clock = manualClock(NOON);
    const limiter = new KeyedLimiter({ algorithm: 'sliding-window', limit: 3, window: '1s', clock });
    expect(limiter.algorithm).toBe('sliding-window');
    expect(limiter.windowStore).toBeInstanceOf(MemoryWindowStore);
    expect(limiter.window).toEqual({ limit: 3, windowMs: 1000 });
    clock.set(NOON + 900);
    expect(await takeMany(limiter, 'k', 3)).toBe(3);
    clock.set(NOON + 1500); // the exact log still holds all three (a counter would admit one more)
    expect((await limiter.tryTake('k')).allowed).toBe(false);
    clock.set(NOON + 1900);
    expect(await takeMany(limiter, 'k', 4)).toBe(3);
  });

  it('MemoryWindowStore keeps at most maxKeys, dropping the least recently used; peek adds no key', async () => {
    const clock = manualClock(NOON);
    const store = new MemoryWindowStore({ clock, maxKeys: 2 });
    const limiter = new KeyedLimiter({ algorithm: 'fixed-window', limit: 1, window: '1 h', store });
    expect((await limiter.tryTake('a')).allowed).toBe(true);
    expect((await limiter.tryTake('b')).allowed).toBe(true);
    expect((await limiter.tryTake('a')).allowed).toBe(false); // a is now the most recent
    await limiter.peek('z');
    expect(store.size).toBe(2);
    expect((await limiter.tryTake('c')).allowed).toBe(true); // drops b
    expect(store.size).toBe(2);
    expect((await limiter.tryTake('a')).allowed).toBe(false);
    expect((await limiter.tryTake('b')).allowed).toBe(true); // forgotten: a fresh window
    expect(() => new MemoryWindowStore({ maxKeys: 0 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION' }),
    );
  });

  it('defaults a sliding window on a Redis store to the counter, and refuses the exact log there', async () => {
    const clock = manualClock(NOON);
    const store = new RedisWindowStore({
      client: ioredis,
      prefix: prefix(),
      now: clock.now,
      onError: 'deny',
      timeout: 2000,
    });
    const counter = new KeyedLimiter({ algorithm: 'sliding-window', limit: 3, window: '1s', store });
    expect((await counter.tryTake('k')).allowed).toBe(true);
    const log = new KeyedLimiter({ algorithm: 'sliding-window', mode: 'log', limit: 3, window: '1s', store });
    await expect(log.tryTake('k')).rejects.toSatisfy((e) => isTokenpaceError(e, 'ERR_NOT_SUPPORTED'));
  });

  it('asks a RedisWindowStore for its failure policy and checks its times', () => {
    const invalid = expect.objectContaining({ code: 'ERR_INVALID_OPTION' });
    // @ts-expect-error onError is required
    expect(() => new RedisWindowStore({ client: ioredis })).toThrow(invalid);
    expect(() => new RedisWindowStore({ client: ioredis, onError: 'deny', timeout: 0 })).toThrow(invalid);
    expect(() => new RedisWindowStore({ client: ioredis, onError: 'deny', probeInterval: Infinity })).toThrow(invalid);
    const store = new RedisWindowStore({ client: ioredis, onError: 'local', timeout: '150ms' });
    expect([store.policy, store.timeoutMs, store.probeIntervalMs, store.healthy]).toEqual(['local', 150, 250, true]);
    store.close();
  });

  it('refuses a bucket store, rate/burst, a bad algorithm or mode', () => {
    const base = { limit: 5, window: '1s' } as const;
    const bad: unknown[] = [
      { algorithm: 'fixed-window', ...base, store: new MemoryStore() },
      { algorithm: 'fixed-window', ...base, rate: 1 },
      { algorithm: 'fixed-window', ...base, mode: 'counter' },
      { algorithm: 'sliding-window', ...base, mode: 'exact' },
      { algorithm: 'leaky', ...base },
      { algorithm: 'fixed-window', limit: 0, window: '1s' },
      { algorithm: 'fixed-window', limit: 5, window: 0 },
    ];
    for (const options of bad) {
      expect(() => new KeyedLimiter(options as never), JSON.stringify(options)).toThrow(
        expect.objectContaining({ code: expect.stringMatching(/^ERR_INVALID_/) }),
      );
    }
  });

  it('the Lua script and windows.ts agree on any sequence (fixed window and sliding counter)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<WindowKind>('fixed', 'counter'),
        fc.integer({ min: 1, max: 50 }),
        fc.constantFrom(1, 7, 1000, 60_000),
        fc.array(
          fc.record({
            dt: fc.oneof(fc.integer({ min: 0, max: 1500 }), fc.double({ min: -50, max: 500, noNaN: true })),
            key: fc.constantFrom('a', 'b', '__proto__'),
            cost: fc.double({ min: 0, max: 1, noNaN: true }),
            peek: fc.boolean(),
          }),
          { maxLength: 40 },
        ),
        async (kind, limit, windowMs, steps) => {
          const clock = manualClock(NOON + 123.25);
          const memory = limiterFor(kind, new MemoryWindowStore({ clock }), limit, windowMs);
          const client = steps.length % 2 === 0 ? ioredis : nodeRedis;
          const redis = limiterFor(
            kind,
            new RedisWindowStore({ client, prefix: prefix(), now: clock.now, onError: 'deny', timeout: 2000 }),
            limit,
            windowMs,
          );
          for (const step of steps) {
            clock.set(clock.now() + step.dt);
            const cost = step.cost * limit;
            const m = step.peek ? await memory.peek(step.key, cost) : await memory.tryTake(step.key, cost);
            const r = step.peek ? await redis.peek(step.key, cost) : await redis.tryTake(step.key, cost);
            expect(r).toEqual(m);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
