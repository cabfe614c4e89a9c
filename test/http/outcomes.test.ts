/**
 * What a route handler finds on its request (`req.rateLimit`, Fastify's
 * `request.rateLimit`), and costs given back once a response's status is
 * known (`skipSuccessfulRequests`, `skipFailedRequests`), in node:http,
 * Express 5, Fastify 5, Hono 4 and Koa 3; the give-back also on a RedisStore against a real
 * redis-server.
 */

import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { type App, type AppSpec, FRAMEWORKS, startApp } from './apps.js';
import { agent, call, type Reply } from './support.js';

const client = agent();
const apps: App[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});
afterAll(() => client.close());

async function start(framework: (typeof FRAMEWORKS)[number], spec: AppSpec): Promise<App> {
  const app = await startApp(framework, spec);
  apps.push(app);
  return app;
}

/** Requests one after another with these statuses asked of the route; the statuses answered. */
async function statuses(app: App, asked: number[]): Promise<number[]> {
  const out: number[] = [];
  for (const status of asked) {
    out.push((await call(app.url, { dispatcher: client, headers: { 'x-status': String(status) } })).status);
  }
  return out;
}

const body = (reply: Reply | undefined): { rateLimit: unknown; limits: unknown } => JSON.parse(reply?.body ?? '{}');

describe.each(FRAMEWORKS)('%s: the decision on the request', (framework) => {
  it('req.rateLimit holds the decision, the key, the cost and the policy name', async () => {
    const { clock } = fakeClock();
    const app = await start(framework, { layers: [{ rate: 1, burst: 3, clock }] });
    const reply = await call(app.url, { dispatcher: client });
    expect(body(reply).rateLimit).toEqual({
      allowed: true,
      remaining: 2,
      retryAfterMs: 0,
      resetAfterMs: 1000,
      limit: 3,
      policy: 'default',
      key: '127.0.0.1',
      cost: 1,
    });
  });

  it('requestPropertyName puts it elsewhere (stacked limiters keep each), false nowhere', async () => {
    const { clock } = fakeClock();
    const app = await start(framework, {
      layers: [
        { rate: 1, burst: 3, clock, policyName: 'short' },
        { rate: 1, burst: 50, clock, policyName: 'long', requestPropertyName: 'limits' },
      ],
    });
    const found = body(await call(app.url, { dispatcher: client }));
    expect(found.rateLimit).toMatchObject({ policy: 'short', remaining: 2 });
    expect(found.limits).toMatchObject({ policy: 'long', remaining: 49 });
    const none = await start(framework, { layers: [{ rate: 1, burst: 3, clock, requestPropertyName: false }] });
    expect(body(await call(none.url, { dispatcher: client }))).toEqual({ rateLimit: null, limits: null });
  });
});

describe.each(FRAMEWORKS)('%s: giving costs back once the status is known', (framework) => {
  it('skipSuccessfulRequests: a login limiter counts only the failed attempts', async () => {
    const { clock } = fakeClock();
    const app = await start(framework, { layers: [{ rate: 0.001, burst: 2, clock, skipSuccessfulRequests: true }] });
    expect(await statuses(app, [200, 200, 200, 200, 401, 200, 401, 401, 200])).toEqual([
      200, 200, 200, 200, 401, 200, 401, 429, 429,
    ]);
  });

  it('skipFailedRequests: failures (4xx, 5xx, and a response cut short) do not count', async () => {
    const { clock } = fakeClock();
    const app = await start(framework, { layers: [{ rate: 0.001, burst: 2, clock, skipFailedRequests: true }] });
    expect(await statuses(app, [500, 404, 500, 200])).toEqual([500, 404, 500, 200]);
    const abort = new AbortController();
    const cut = call(app.url, { dispatcher: client, signal: abort.signal, headers: { 'x-hang': 'route' } });
    setTimeout(() => abort.abort(), 50);
    await expect(cut).rejects.toThrow();
    await new Promise((resolve) => setTimeout(resolve, 50)); // the server sees the close
    expect(await statuses(app, [200, 200])).toEqual([200, 429]);
  });

  it('requestWasSuccessful decides what counts as a success; the credit never exceeds the burst', async () => {
    const { clock } = fakeClock();
    const app = await start(framework, {
      layers: [
        {
          rate: 0.001,
          burst: 3,
          clock,
          skipSuccessfulRequests: true,
          requestWasSuccessful: (_req, res) => (res as { statusCode: number }).statusCode !== 404,
        },
      ],
    });
    expect(await statuses(app, [500, 500, 500, 500])).toEqual([500, 500, 500, 500]); // all "successes"
    const reply = await call(app.url, { dispatcher: client, headers: { 'x-status': '404' } });
    expect(body(reply).rateLimit).toMatchObject({ remaining: 2 }); // full again after the credits, never above 3
    expect(await statuses(app, [404, 404, 404])).toEqual([404, 404, 429]);
  });
});

describe('giving costs back on a RedisStore (a real redis-server)', () => {
  const redis = new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
  afterAll(() => redis.disconnect());

  it.each(FRAMEWORKS)('%s: skipSuccessfulRequests', async (framework) => {
    const store = new RedisStore({ client: redis, prefix: `give-back-${framework}-${process.pid}`, onError: 'deny' });
    const limiter = new KeyedLimiter({ rate: 0.001, burst: 2, store, global: { rate: 0.001, burst: 100 } });
    const app = await start(framework, { layers: [{ limiter, skipSuccessfulRequests: true }] });
    const asked = [200, 200, 200, 401, 200, 401, 401];
    const answered: number[] = [];
    for (const status of asked) {
      answered.push(...(await statuses(app, [status])));
      await new Promise((resolve) => setTimeout(resolve, 20)); // the credit's round trip
    }
    expect(answered).toEqual([200, 200, 200, 401, 200, 401, 429]);
    store.close();
  });
});
