import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, inject } from 'vitest';
import { MemoryStore } from '../../src/keyed/memory-store.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import { storeContract } from './contract.js';

const port = inject('redisPort');
const ioredis = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
const nodeRedis = createClient({ socket: { port, host: '127.0.0.1' } });
let n = 0;

beforeAll(async () => {
  await ioredis.connect();
  await nodeRedis.connect();
});
afterAll(async () => {
  ioredis.disconnect();
  await nodeRedis.close();
});

storeContract('MemoryStore', (_now, clock) => new MemoryStore({ clock }));
storeContract(
  'RedisStore (ioredis)',
  (now) => new RedisStore({ client: ioredis, prefix: `contract-io-${process.pid}-${++n}`, onError: 'deny', now }),
);
storeContract(
  'RedisStore (node-redis)',
  (now) => new RedisStore({ client: nodeRedis, prefix: `contract-nr-${process.pid}-${++n}`, onError: 'deny', now }),
);
