/**
 * A Redis that may evict a store's keys is told, never silent. Each of the
 * three stores in Redis reads `maxmemory-policy` at its first call and after
 * each recovery (CONFIG GET, or INFO memory where an ACL refuses CONFIG), and
 * a policy other than `noeviction` is an `eviction` event, a message on
 * `tokenpace:redis:eviction` and the store's `maxmemoryPolicy`.
 *
 * The last case shows why: under `allkeys-lru` with other clients writing,
 * Redis evicts a key's bucket and it comes back full, so the key admits far
 * more than its bound. The bound cannot hold while Redis deletes the state;
 * the promise is that the store says so.
 *
 * This file starts its own servers: one with `--maxmemory 3mb
 * --maxmemory-policy allkeys-lru`, one with the defaults (`noeviction`), which
 * it pauses. Times are real, so the bounds are generous.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channelNames } from '../../src/diagnostics.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import type { StoreEvictionMessage } from '../../src/stores/health.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clients, type Store, sleep, subjects, until } from './stores.js';

const options = { onError: 'deny', timeout: 500, probeInterval: 50 } as const;
const MAXMEMORY = 3 * 1024 * 1024;

let lru: RedisServer;
let plain: RedisServer;
let lruAdmin: Redis;
let plainAdmin: Redis;
beforeAll(async () => {
  lru = await startRedis(['--maxmemory', '3mb', '--maxmemory-policy', 'allkeys-lru']);
  plain = await startRedis();
  lruAdmin = new Redis({ port: lru.port, host: '127.0.0.1' });
  plainAdmin = new Redis({ port: plain.port, host: '127.0.0.1' });
  // one user without CONFIG (as managed services often are), one without CONFIG or INFO
  await lruAdmin.call('ACL', 'SETUSER', 'noconfig', 'on', '>pw', '~*', '&*', '+@all', '-config');
  await lruAdmin.call('ACL', 'SETUSER', 'noinfo', 'on', '>pw', '~*', '&*', '+@all', '-config', '-info');
});
afterAll(async () => {
  lruAdmin.disconnect();
  plainAdmin.disconnect();
  await Promise.all([lru.stop(), plain.stop()]);
});

let n = 0;
const prefix = () => `evict-${process.pid}-${++n}`;

/** The store's `eviction` events, and the channel's messages about it. */
function watch(store: Store) {
  const events: unknown[] = [];
  const published: StoreEvictionMessage[] = [];
  store.on('eviction', (settings) => events.push(settings));
  const listener = (message: unknown) => {
    if ((message as StoreEvictionMessage).store === store) published.push(message as StoreEvictionMessage);
  };
  subscribe(channelNames.storeEviction, listener);
  return { events, published, off: () => unsubscribe(channelNames.storeEviction, listener) };
}

for (const [storeName, subject] of Object.entries(subjects)) {
  describe.each(['ioredis', 'node-redis'] as const)(`${storeName} with %s`, (clientName) => {
    it('under allkeys-lru: an eviction event at the first call, on the channel too, and maxmemoryPolicy', async () => {
      const { client, close } = await clients[clientName](lru.port);
      const store = subject.make(client, prefix(), options);
      const seen = watch(store);
      expect(store.maxmemoryPolicy).toBeUndefined();
      expect(await subject.take(store, 'k')).toBe(true);
      await until(() => seen.events.length > 0, 2000, 'the eviction event');
      expect(seen.events).toEqual([{ policy: 'allkeys-lru', maxmemoryBytes: MAXMEMORY }]);
      expect(seen.published).toEqual([{ store, policy: 'allkeys-lru', maxmemoryBytes: MAXMEMORY }]);
      expect(store.maxmemoryPolicy).toBe('allkeys-lru');
      // once: later calls do not ask again
      for (let i = 0; i < 5; i++) await subject.take(store, 'k');
      await sleep(50);
      expect(seen.events).toHaveLength(1);
      seen.off();
      store.close();
      close();
    });

    it('under noeviction: no event, and maxmemoryPolicy says noeviction', async () => {
      const { client, close } = await clients[clientName](plain.port);
      const store = subject.make(client, prefix(), options);
      const seen = watch(store);
      expect(await subject.take(store, 'k')).toBe(true);
      await until(() => store.maxmemoryPolicy !== undefined, 2000, 'the policy');
      expect(store.maxmemoryPolicy).toBe('noeviction');
      expect(seen.events).toEqual([]);
      expect(seen.published).toEqual([]);
      seen.off();
      store.close();
      close();
    });
  });
}

describe.each(['ioredis', 'node-redis'] as const)('RedisStore with %s, CONFIG refused', (clientName) => {
  it('by an ACL: the policy read from INFO memory instead', async () => {
    const { client, close } = await clients[clientName](lru.port, { username: 'noconfig', password: 'pw' });
    const store = subjects.RedisStore?.make(client, prefix(), options) as Store;
    const seen = watch(store);
    expect(await subjects.RedisStore?.take(store, 'k')).toBe(true);
    await until(() => seen.events.length > 0, 2000, 'the eviction event');
    expect(seen.events).toEqual([{ policy: 'allkeys-lru', maxmemoryBytes: MAXMEMORY }]);
    seen.off();
    store.close();
    close();
  });

  it('CONFIG and INFO both refused: the policy unknown, no event, and decisions as usual', async () => {
    const { client, close } = await clients[clientName](lru.port, { username: 'noinfo', password: 'pw' });
    const store = subjects.RedisStore?.make(client, prefix(), options) as Store;
    const seen = watch(store);
    let failures = 0;
    store.on('failure', () => failures++);
    for (let i = 0; i < 3; i++) expect(await subjects.RedisStore?.take(store, 'k')).toBe(true);
    await sleep(600); // longer than the timeout: any answer has come
    expect(store.maxmemoryPolicy).toBeUndefined();
    expect(seen.events).toEqual([]);
    expect([failures, store.healthy]).toEqual([0, true]);
    seen.off();
    store.close();
    close();
  });
});

describe('RedisStore after a recovery', () => {
  it('reads the policy again: a Redis that came back evicting is an eviction event', async () => {
    const { client, close } = await clients.ioredis(plain.port);
    const store = subjects.RedisStore?.make(client, prefix(), options) as Store;
    const seen = watch(store);
    expect(await subjects.RedisStore?.take(store, 'k')).toBe(true);
    await until(() => store.maxmemoryPolicy === 'noeviction', 2000, 'the policy');
    await plainAdmin.config('SET', 'maxmemory-policy', 'volatile-lru');
    try {
      plain.signal('SIGSTOP');
      try {
        expect(await subjects.RedisStore?.take(store, 'k')).toBe(false);
        expect(store.healthy).toBe(false);
      } finally {
        plain.signal('SIGCONT');
      }
      await until(() => store.healthy, 5000, 'recovery');
      await until(() => seen.events.length > 0, 2000, 'the eviction event');
      expect(seen.events).toEqual([{ policy: 'volatile-lru', maxmemoryBytes: 0 }]);
      expect(store.maxmemoryPolicy).toBe('volatile-lru');
    } finally {
      await plainAdmin.config('SET', 'maxmemory-policy', 'noeviction');
      seen.off();
      store.close();
      close();
    }
  });
});

describe('a key limited to 10/s, burst 10, while other clients fill a 3 MB allkeys-lru Redis', () => {
  it('admits far more than its bound (Redis evicts its bucket), and the store said so at its first call', async () => {
    const { client, close } = await clients.ioredis(lru.port);
    const store = new RedisStore({ client, prefix: prefix(), onError: 'deny', timeout: 1000 });
    const evictions: unknown[] = [];
    store.on('eviction', (settings) => evictions.push(settings));
    const limiter = new KeyedLimiter({ rate: 10, burst: 10, store });
    const filler = new Redis({ port: lru.port, host: '127.0.0.1' });
    const evictedBefore = Number(/evicted_keys:(\d+)/.exec(String(await lruAdmin.info('stats')))?.[1]);

    const RUN_MS = 2000;
    const start = Date.now();
    let filling = true;
    const fill = (async () => {
      const value = 'v'.repeat(10_000);
      for (let i = 0; filling; i += 20) {
        const batch = filler.pipeline();
        for (let j = 0; j < 20; j++) batch.set(`other:${i + j}`, value);
        await batch.exec();
      }
    })();
    let admitted = 0;
    while (Date.now() - start < RUN_MS) {
      if ((await limiter.tryTake('hot')).allowed) admitted++;
      await sleep(2);
    }
    const elapsedS = (Date.now() - start) / 1000;
    filling = false;
    await fill;
    const evicted = Number(/evicted_keys:(\d+)/.exec(String(await lruAdmin.info('stats')))?.[1]) - evictedBefore;
    const bound = Math.round(10 + 10 * elapsedS);
    console.log(
      `allkeys-lru: admitted ${admitted} in ${elapsedS.toFixed(2)} s (bound ${bound}); ${evicted} keys evicted`,
    );

    expect(evictions).toEqual([{ policy: 'allkeys-lru', maxmemoryBytes: MAXMEMORY }]);
    expect(store.maxmemoryPolicy).toBe('allkeys-lru');
    expect(evicted).toBeGreaterThan(0);
    expect(admitted).toBeGreaterThan(bound);
    filler.disconnect();
    store.close();
    close();
  }, 20_000);
});
