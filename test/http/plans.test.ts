/**
 * rateLimit with limits by plan, on a real HTTP server: `limits(req)` and `plans` + `plan(req)`,
 * sync and async, and a KeyedLimiter with plans on a RedisStore (a real redis-server); each response
 * advertises its key's own policy (`RateLimit-Policy` q and w). Also @fastify/rate-limit's `max` as a
 * function of the request, written as `limits`.
 */

import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import type { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { rateLimitHook } from '../../src/http/fastify.js';
import { rateLimit } from '../../src/http/middleware.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { agent, call, type Loopback, serve } from './support.js';

const port = inject('redisPort');
const ioredis = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
let client: Agent;
const servers: Loopback[] = [];

beforeAll(async () => {
  await ioredis.connect();
  client = agent();
});
afterAll(async () => {
  ioredis.disconnect();
  await client.close();
});
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

const PLANS = { free: { rate: 2, burst: 4 }, paid: { rate: 100, burst: 200 } };
const keyOf = (req: IncomingMessage) => String(req.headers['x-api-key']);
const planOf = (req: IncomingMessage) => (keyOf(req).startsWith('paid-') ? 'paid' : 'free');

async function send(url: string, key: string, n: number) {
  const replies = [];
  for (let i = 0; i < n; i++) replies.push(await call(url, { dispatcher: client, headers: { 'x-api-key': key } }));
  return replies;
}

describe('rateLimit with limits by plan', () => {
  it('plans + plan(req): each key its plan, and headers advertise its own policy', async () => {
    const { clock } = fakeClock();
    const server = await serve(rateLimit({ plans: PLANS, plan: planOf, key: keyOf, clock }));
    servers.push(server);
    const free = await send(server.url, 'free-1', 5);
    expect(free.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);
    expect(free[0]?.headers['ratelimit-policy']).toBe('"default";q=4;w=2');
    expect(free[4]?.headers['retry-after']).toBe('1');
    const paid = await send(server.url, 'paid-1', 5);
    expect(paid.every((r) => r.status === 200)).toBe(true);
    expect(paid[0]?.headers['ratelimit-policy']).toBe('"default";q=200;w=2');
    expect(paid[4]?.headers.ratelimit).toBe('"default";r=195;t=1');
  });

  it('limits(req), async: the limit as a function of the request', async () => {
    const { clock } = fakeClock();
    const server = await serve(
      rateLimit({
        limits: async (req) => (req.url === '/search' ? { rate: 1, burst: 1 } : { rate: 10, burst: 10 }),
        key: (req) => `client-1:${req.url}`,
        clock,
      }),
    );
    servers.push(server);
    const search = await send(`${server.url}/search`, 'x', 2);
    expect(search.map((r) => r.status)).toEqual([200, 429]);
    expect(search[0]?.headers['ratelimit-policy']).toBe('"default";q=1;w=1');
    const other = await send(`${server.url}/other`, 'x', 1);
    expect(other[0]?.status).toBe(200);
    expect(other[0]?.headers['ratelimit-policy']).toBe('"default";q=10;w=1');
  });

  it('a plan function that fails, or names no plan, is a 500 at the limits stage', async () => {
    const { clock } = fakeClock();
    const server = await serve(rateLimit({ plans: PLANS, plan: () => 'gold', key: keyOf, clock }));
    servers.push(server);
    const [reply] = await send(server.url, 'a', 1);
    expect(reply?.status).toBe(500);
    expect(JSON.parse(reply?.body ?? '{}').detail).toMatch(/\(limits\)/);
  });

  it('holds a request with maxWait on its own plan', async () => {
    const { clock, timers } = fakeClock();
    const server = await serve(rateLimit({ plans: PLANS, plan: planOf, key: keyOf, clock, maxWait: 1000 }));
    servers.push(server);
    await send(server.url, 'free-2', 4);
    const held = call(server.url, { dispatcher: client, headers: { 'x-api-key': 'free-2' } });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await timers.tickAsync(500);
    expect((await held).status).toBe(200);
  });

  it('refuses limits beside a limiter, or beside rate', () => {
    const limiter = new KeyedLimiter({ rate: 1, burst: 1 });
    expect(() => rateLimit({ limiter, limits: () => ({ rate: 1, burst: 1 }) })).toThrow(/either `limiter` or `limits`/);
    expect(() => rateLimit({ rate: 1, burst: 1, plans: PLANS, plan: planOf })).toThrow(/either `rate` and `burst`/);
  });

  it('a KeyedLimiter with plans on a RedisStore: per-key policies in the headers', async () => {
    const store = new RedisStore({ client: ioredis, prefix: `http-plans-${process.pid}`, onError: 'deny' });
    const limiter = new KeyedLimiter({
      plans: PLANS,
      plan: (key) => (key.startsWith('paid-') ? 'paid' : 'free'),
      store,
    });
    const server = await serve(rateLimit({ limiter, key: keyOf }));
    servers.push(server);
    const free = await send(server.url, `free-${Date.now()}`, 5);
    expect(free.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);
    expect(free[0]?.headers['ratelimit-policy']).toBe('"default";q=4;w=2');
    const paid = await send(server.url, `paid-${Date.now()}`, 5);
    expect(paid.every((r) => r.status === 200)).toBe(true);
    expect(paid[0]?.headers['ratelimit-policy']).toBe('"default";q=200;w=2');
  });
});

describe("@fastify/rate-limit's `max` as a function, written as `limits`", () => {
  it('max: (request, key) => ... per route and per key', async () => {
    const { clock } = fakeClock();
    const app = Fastify();
    // @fastify/rate-limit: max: (request, key) => (key === 'vip' ? 10 : 2), timeWindow: '1 minute'
    app.addHook(
      'onRequest',
      rateLimitHook({
        key: (request) => String(request.headers['x-api-key']),
        limits: (request) =>
          request.headers['x-api-key'] === 'vip' ? { rate: '10/min', burst: 10 } : { rate: '2/min', burst: 2 },
        clock,
      }),
    );
    app.get('/', async () => ({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/`;
      const vip = await send(url, 'vip', 11);
      expect(vip.filter((r) => r.status === 200)).toHaveLength(10);
      expect(vip[0]?.headers['ratelimit-policy']).toBe('"default";q=10;w=60');
      const other = await send(url, 'other', 3);
      expect(other.map((r) => r.status)).toEqual([200, 200, 429]);
      expect(other[2]?.headers['retry-after']).toBe('30');
    } finally {
      await app.close();
    }
  });
});
