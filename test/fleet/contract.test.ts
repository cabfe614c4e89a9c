import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, inject } from 'vitest';
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
  fleetContract({ make: () => new RedisFleetStore({ client, onError: 'deny', timeout: 2000 }) });
});

describe('RedisFleetStore (node-redis)', () => {
  const client = createClient({ socket: { port: inject('redisPort'), host: '127.0.0.1' } });
  beforeAll(async () => {
    await client.connect();
  });
  afterAll(() => client.destroy());
  fleetContract({ make: () => new RedisFleetStore({ client, onError: 'deny', timeout: 2000 }) });
});
