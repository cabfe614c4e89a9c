/**
 * Keys that are not well-formed UTF-16 (lone surrogates) stay apart in Redis
 * as they do in memory: each store sends them as WTF-8 bytes
 * (src/redis/client.ts), and well-formed keys as themselves.
 */

import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import type { FleetParams } from '../../src/fleet/store.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import { MemoryWindowStore, RedisWindowStore } from '../../src/keyed/window-store.js';
import { wtf8 } from '../../src/redis/client.js';
import { clusterSlot } from '../../src/redis/cluster-slot.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const A = 'user-\uD800';
const B = 'user-\uDBFF';
let server: RedisServer;
let client: Redis;
beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1' });
});
afterAll(async () => {
  client.disconnect();
  await server.stop();
});

describe('lone surrogates', () => {
  it('WTF-8 is UTF-8 on well-formed text and tells lone surrogates apart', () => {
    expect(Buffer.from(wtf8('a\u00e9\u{1F600}')).equals(Buffer.from('a\u00e9\u{1F600}'))).toBe(true);
    expect(Buffer.from(wtf8(A)).equals(Buffer.from(wtf8(B)))).toBe(false);
    expect([...wtf8('\uD800')]).toEqual([0xed, 0xa0, 0x80]);
    expect(clusterSlot('{\uD800}')).not.toBe(clusterSlot('{\uDBFF}'));
  });

  it('RedisStore keeps them apart, as the MemoryStore does', async () => {
    const store = new RedisStore({ client, onError: 'deny', prefix: `lone-${Date.now()}` });
    const limiter = new KeyedLimiter({ rate: 1, burst: 1, store });
    expect((await limiter.tryTake(A)).allowed).toBe(true);
    expect((await limiter.tryTake(A)).allowed).toBe(false);
    expect((await limiter.tryTake(B)).allowed).toBe(true);
    await limiter.reset(A);
    expect((await limiter.tryTake(A)).allowed).toBe(true);
    expect((await limiter.tryTake(B)).allowed).toBe(false);
    store.close();
  });

  it('RedisStore on node-redis keeps them apart too (the WTF-8 bytes go as a Buffer)', async () => {
    const nodeClient = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
    await nodeClient.connect();
    const store = new RedisStore({ client: nodeClient, onError: 'deny', prefix: `lonen-${Date.now()}` });
    const limiter = new KeyedLimiter({ rate: 1, burst: 1, store });
    expect((await limiter.tryTake(A)).allowed).toBe(true);
    expect((await limiter.tryTake(A)).allowed).toBe(false);
    expect((await limiter.tryTake(B)).allowed).toBe(true);
    await limiter.reset(B);
    expect((await limiter.tryTake(B)).allowed).toBe(true);
    store.close();
    nodeClient.destroy();
  });

  it('RedisWindowStore keeps them apart, as the MemoryWindowStore does', async () => {
    for (const store of [
      new RedisWindowStore({ client, onError: 'deny', prefix: `lonew-${Date.now()}` }),
      new MemoryWindowStore(),
    ]) {
      const limiter = new KeyedLimiter({ algorithm: 'fixed-window', limit: 1, window: 60_000, store });
      expect((await limiter.tryTake(A)).allowed).toBe(true);
      expect((await limiter.tryTake(A)).allowed).toBe(false);
      expect((await limiter.tryTake(B)).allowed).toBe(true);
      (store as { close?: () => void }).close?.();
    }
  });

  it('RedisFleetStore keeps fleet keys apart', async () => {
    const store = new RedisFleetStore({ client, onError: 'deny', prefix: `lonef-${Date.now()}` });
    const params: FleetParams = { ratePerSecond: Number.POSITIVE_INFINITY, burst: 1, concurrency: 1 };
    const op = (key: string, leaseId: string) => ({
      key,
      cost: 1,
      maxWaitMs: 0,
      leaseId,
      leaseMs: 10_000,
      claimTtlMs: 100,
      params,
    });
    expect((await store.acquire(op(A, 'a'))).status).toBe('ok');
    expect((await store.acquire(op(A, 'a2'))).status).toBe('busy');
    expect((await store.acquire(op(B, 'b'))).status).toBe('ok');
    store.close();
  });
});
