import { Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Decision, KeyedStore, RedisClientLike } from '../../src/index.js';
import * as tokenpace from '../../src/index.js';

describe('keyed: public exports', () => {
  it.each(['KeyedLimiter', 'MemoryStore', 'RedisStore'])('exports %s', (name) => {
    expect(tokenpace).toHaveProperty(name);
  });

  it('exports nothing internal', () => {
    for (const internal of ['refundable', 'timeToFullMs', 'clusterSlot', 'KEYED_SCRIPT']) {
      expect(tokenpace).not.toHaveProperty(internal);
    }
  });

  it('types the keyed API precisely, and both client libraries fit the structural client type', () => {
    const limiter = new tokenpace.KeyedLimiter({ rate: '10/s', burst: 20 });
    expectTypeOf(limiter.tryTake).returns.toEqualTypeOf<Promise<Decision>>();
    expectTypeOf(limiter.take).returns.toEqualTypeOf<Promise<Decision>>();
    expectTypeOf(limiter.peek).returns.toEqualTypeOf<Promise<Decision>>();
    expectTypeOf<Decision>().toEqualTypeOf<{
      allowed: boolean;
      remaining: number;
      retryAfterMs: number;
      resetAfterMs: number;
      limit: number;
    }>();
    expectTypeOf(limiter.store).toEqualTypeOf<KeyedStore>();
    // Compile-time checks (never called): each client type is accepted as is.
    const fits = () => {
      const a: RedisClientLike = new Redis({ lazyConnect: true });
      const b: RedisClientLike = createClient();
      const c: RedisClientLike = createCluster({ rootNodes: [] });
      return [a, b, c];
    };
    expectTypeOf(fits).toBeFunction();
  });
});
