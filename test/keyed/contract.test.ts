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
// A store of one's own around a MemoryStore, with and without the optional decideSync: the limiter
// knows no store class, so both keep the whole contract.
storeContract('a wrapper around MemoryStore (decide only)', (_now, clock) => {
  const inner = new MemoryStore({ clock });
  return {
    decide: (op) => inner.decide(op),
    refund: (op, result) => inner.refund(op, result),
    credit: (op) => inner.credit(op),
    reset: (key) => inner.reset(key),
  };
});
storeContract('a wrapper around MemoryStore (with decideSync)', (_now, clock) => {
  const inner = new MemoryStore({ clock });
  return {
    decide: (op) => inner.decide(op),
    decideSync: (op) => inner.decideSync(op),
    refund: (op, result) => inner.refund(op, result),
    credit: (op) => inner.credit(op),
    reset: (key) => inner.reset(key),
  };
});
storeContract(
  'RedisStore (ioredis)',
  (now) => new RedisStore({ client: ioredis, prefix: `contract-io-${process.pid}-${++n}`, onError: 'deny', now }),
);
storeContract(
  'RedisStore (node-redis)',
  (now) => new RedisStore({ client: nodeRedis, prefix: `contract-nr-${process.pid}-${++n}`, onError: 'deny', now }),
);
