import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, describe, inject } from 'vitest';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { MemoryFleetStore } from '../../src/fleet/store.js';
import { fleetContract } from './contract.js';

describe('MemoryFleetStore', () => {
  const shared = new MemoryFleetStore();
  fleetContract({ make: () => shared });
});

describe('RedisFleetStore (ioredis)', () => {
  const client = new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
  afterAll(() => client.disconnect());
  fleetContract({ make: () => new RedisFleetStore({ client, onError: 'deny', timeoutMs: 2000 }) });
});

describe('RedisFleetStore (node-redis)', () => {
  const client = createClient({ socket: { port: inject('redisPort'), host: '127.0.0.1' } });
  const ready = client.connect();
  afterAll(async () => {
    await ready;
    client.destroy();
  });
  fleetContract({
    make: () => {
      const store = new RedisFleetStore({ client, onError: 'deny', timeoutMs: 2000 });
      return {
        acquire: async (op) => (await ready, store.acquire(op)),
        cancel: async (...a) => (await ready, store.cancel(...a)),
        renew: async (...a) => (await ready, store.renew(...a)),
        release: async (...a) => (await ready, store.release(...a)),
        configure: async (...a) => (await ready, store.configure(...a)),
        inspect: async (...a) => (await ready, store.inspect(...a)),
      };
    },
  });
});
