/**
 * Limits by plan on KeyedLimiter: `limits(key)` or `plans` + `plan(key)`, sync or async, on a
 * MemoryStore and on a RedisStore against a real redis-server. A key that changes plan keeps its
 * tokens, capped at the new burst, and is never handed a fresh bucket (a property over random plan
 * changes, against a model in whole tokens).
 */

import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { MemoryStore } from '../../src/keyed/memory-store.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import type { KeyedStore } from '../../src/keyed/store.js';
import { manualClock } from '../helpers/fake-clock.js';

const port = inject('redisPort');
const ioredis = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
let n = 0;

beforeAll(async () => {
  await ioredis.connect();
});
afterAll(() => {
  ioredis.disconnect();
});

const PLANS = {
  free: { rate: 1, burst: 10 },
  pro: { rate: 5, burst: 50 },
  paid: { rate: '20/s', burst: 500 },
} as const;
type Plan = keyof typeof PLANS;

type Clock = ReturnType<typeof manualClock>;
const stores: Array<[string, (clock: Clock) => KeyedStore]> = [
  ['MemoryStore', (clock) => new MemoryStore({ clock })],
  [
    'RedisStore',
    (clock) =>
      new RedisStore({ client: ioredis, prefix: `plans-${process.pid}-${++n}`, onError: 'deny', now: clock.now }),
  ],
];

/** Takes one at a time until refused; returns how many were admitted. */
async function drain(limiter: KeyedLimiter, key: string): Promise<number> {
  let admitted = 0;
  while ((await limiter.tryTake(key)).allowed) admitted++;
  return admitted;
}

describe.each(stores)('limits by plan on a %s', (_name, makeStore) => {
  it('gives each key its plan: a free key 10 at once, a paid one 500', async () => {
    const clock = manualClock(1000);
    const planOf: Record<string, Plan> = { alice: 'free', bob: 'paid' };
    const limiter = new KeyedLimiter({
      plans: PLANS,
      plan: (key) => planOf[key] ?? 'free',
      store: makeStore(clock),
      clock,
    });
    expect(await drain(limiter, 'alice')).toBe(10);
    expect(await drain(limiter, 'bob')).toBe(500);
    const refused = await limiter.tryTake('alice');
    expect(refused).toMatchObject({ allowed: false, limit: 10, retryAfterMs: 1000 });
    expect((await limiter.tryTake('bob')).retryAfterMs).toBe(50);
    clock.advance(1000);
    expect(await limiter.tryTake('alice')).toMatchObject({ allowed: true, remaining: 0, limit: 10 });
    expect(limiter.rate).toBeUndefined();
    expect(limiter.burst).toBeUndefined();
  });

  it('takes limits from an async function of the key, and take() waits on the key own rate', async () => {
    const clock = manualClock(1000);
    const limiter = new KeyedLimiter({
      limits: async (key) => (key.startsWith('vip:') ? { rate: 100, burst: 2 } : { rate: 1, burst: 2 }),
      store: makeStore(clock),
      clock,
    });
    expect(await drain(limiter, 'vip:1')).toBe(2);
    expect(await drain(limiter, 'user:1')).toBe(2);
    expect((await limiter.tryTake('vip:1')).retryAfterMs).toBe(10);
    expect((await limiter.tryTake('user:1')).retryAfterMs).toBe(1000);
    await expect(limiter.take('user:1', 1, { maxWait: 500 })).rejects.toMatchObject({ code: 'ERR_WAIT_TOO_LONG' });
    expect((await limiter.peek('vip:1')).limit).toBe(2);
  });

  it('a global bucket over all keys still binds, whatever their plans', async () => {
    const clock = manualClock(1000);
    const limiter = new KeyedLimiter({
      plans: PLANS,
      plan: (key) => (key === 'big' ? 'paid' : 'free'),
      global: { rate: 10, burst: 30 },
      store: makeStore(clock),
      clock,
    });
    expect(await drain(limiter, 'small')).toBe(10);
    expect(await drain(limiter, 'big')).toBe(20);
    expect((await limiter.tryTake('big')).retryAfterMs).toBe(100); // the global bucket's wait
  });

  it('a key that changes plan keeps its tokens, capped at the new burst: never a fresh bucket (property)', async () => {
    // The model: the store keeps a key's tokens as of its last charge, and no parameters; at each
    // decision the time since then refills at the rate of the key's current plan, capped at its burst.
    // Whole seconds and integer rates: the model counts in exact whole tokens.
    const step = fc.record({
      plan: fc.constantFrom<Plan>('free', 'pro', 'paid'),
      waitS: fc.integer({ min: 0, max: 3 }),
      cost: fc.integer({ min: 1, max: 12 }),
    });
    const rateOf = (plan: Plan) => (plan === 'paid' ? 20 : PLANS[plan].rate);
    let refusals = 0;
    let capped = 0;
    let upgrades = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
        const clock = manualClock(1000);
        let current: Plan = 'free';
        const limiter = new KeyedLimiter({ plans: PLANS, plan: () => current, store: makeStore(clock), clock });
        let charged: { tokens: number; atS: number } | undefined; // undefined: a new key, full on its plan
        let nowS = 0;
        for (const { plan, waitS, cost } of steps) {
          clock.advance(waitS * 1000);
          nowS += waitS;
          if (PLANS[plan].burst > PLANS[current].burst && charged !== undefined) upgrades++;
          current = plan;
          const burst = PLANS[plan].burst;
          const take = Math.min(cost, burst);
          if (charged !== undefined && charged.tokens > burst) capped++;
          const tokens =
            charged === undefined ? burst : Math.min(burst, charged.tokens + (nowS - charged.atS) * rateOf(plan));
          const d = await limiter.tryTake('k', take);
          const allowed = tokens >= take;
          if (allowed) charged = { tokens: tokens - take, atS: nowS };
          else refusals++;
          expect(d.allowed).toBe(allowed);
          expect(d.remaining).toBe(allowed ? tokens - take : tokens);
          expect(d.remaining).toBeLessThan(burst); // never a fresh bucket: this key has been charged
          expect(d.limit).toBe(burst);
        }
      }),
      { numRuns: 60 },
    );
    expect(refusals).toBeGreaterThan(0);
    expect(capped).toBeGreaterThan(0);
    expect(upgrades).toBeGreaterThan(0);
  }, 60_000);

  it('answers a plan name not in the table, or bad limits, with a coded error naming them', async () => {
    const clock = manualClock(1000);
    const store = makeStore(clock);
    const byName = new KeyedLimiter({ plans: PLANS, plan: () => 'gold', store, clock });
    await expect(byName.tryTake('k')).rejects.toThrow(
      /plan\(\) returned "gold", which is not one of `plans` \(free, pro, paid\)/,
    );
    const bad = new KeyedLimiter({ limits: () => ({ rate: 0, burst: 1 }), store, clock });
    await expect(bad.tryTake('k')).rejects.toMatchObject({ code: 'ERR_INVALID_RATE' });
    const over = new KeyedLimiter({ plans: PLANS, plan: () => 'free', store, clock });
    await expect(over.tryTake('k', 11)).rejects.toMatchObject({ code: 'ERR_COST_EXCEEDS_CAPACITY' });
  });
});

describe('limits by plan: options and memory', () => {
  it('refuses options that mix or miss a part, naming them', () => {
    const limits = () => ({ rate: 1, burst: 1 });
    // @ts-expect-error: rate beside limits
    expect(() => new KeyedLimiter({ rate: 1, burst: 1, limits })).toThrow(/either `rate` and `burst`/);
    expect(() => new KeyedLimiter({ plan: () => 'free' })).toThrow(/Expected `plans` to be a table/);
    expect(() => new KeyedLimiter({ plans: PLANS })).toThrow(/Expected `plan` to be a function/);
    expect(() => new KeyedLimiter({ limits, plans: PLANS, plan: () => 'free' })).toThrow(/either `limits`/);
    expect(() => new KeyedLimiter({ plans: { free: { rate: 1 } as never }, plan: () => 'free' })).toThrow(
      /plans\.free to have both `rate` and `burst`/,
    );
    expect(() => new KeyedLimiter({ limits }).setRate(2)).toThrow(
      expect.objectContaining({ code: 'ERR_NOT_SUPPORTED' }),
    );
  });

  it('parses a limits object again only when its rate or burst changed', async () => {
    const clock = manualClock(1000);
    const limits = { rate: 1, burst: 3 };
    const limiter = new KeyedLimiter({ limits: () => limits, clock });
    expect((await limiter.tryTake('k')).limit).toBe(3);
    limits.burst = 5;
    expect((await limiter.tryTake('k')).limit).toBe(5);
  });

  it('MemoryStore judges a key full by its own plan: a paid key half spent is not dropped for a free key', async () => {
    const clock = manualClock(1000);
    const store = new MemoryStore({ maxKeys: 2, clock });
    const limiter = new KeyedLimiter({ plans: PLANS, plan: (key) => (key === 'paid' ? 'paid' : 'free'), store, clock });
    await limiter.tryTake('free-1');
    await limiter.tryTake('paid', 480); // 20 left of 500: more than a free key's whole burst
    await limiter.tryTake('free-2'); // needs room: the sweep finds no full bucket, the least recently used goes
    expect(store.has('paid')).toBe(true);
    expect(store.has('free-1')).toBe(false);
    expect((await limiter.tryTake('paid')).remaining).toBe(19);
  });
});
