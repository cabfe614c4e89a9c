/**
 * rateLimit in Express 5 (as middleware), Fastify 5 (as an onRequest hook and
 * as a plugin with per-route options), Hono 4 and Koa 3, each on a real
 * loopback port; `maxWait` in all five frameworks (the cases every framework
 * shares are in failures, outcomes, stacked and client-address.test.ts).
 */

import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { rateLimitHook } from '../../src/http/fastify.js';
import { rateLimitPlugin } from '../../src/http/fastify-plugin.js';
import { rateLimit } from '../../src/http/middleware.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { FRAMEWORKS, startApp } from './apps.js';
import { agent, call, until } from './support.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

describe('Express', () => {
  it('limits per client, passes headers to the route, and answers 429 itself', async () => {
    const { clock } = fakeClock();
    const app = express();
    app.use(rateLimit({ rate: 20, burst: 40, clock }));
    app.get('/items', (_req, res) => {
      res.json({ ok: true });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const client = agent();
    cleanups.push(async () => {
      await client.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/items`;
    const replies = await Promise.all(Array.from({ length: 45 }, () => call(url, { dispatcher: client })));
    const ok = replies.filter((r) => r.status === 200);
    expect(ok).toHaveLength(40);
    expect(ok[0]?.body).toBe('{"ok":true}');
    expect(ok[0]?.headers['ratelimit-policy']).toBe('"default";q=40;w=2');
    const refused = replies.filter((r) => r.status === 429);
    expect(refused).toHaveLength(5);
    expect(refused[0]?.headers['retry-after']).toBe('1');
    expect(refused[0]?.headers['content-type']).toBe('application/problem+json');
  });

  it('answers 500 from a throwing key function and keeps serving', async () => {
    const app = express();
    app.use(
      rateLimit({
        rate: 10,
        burst: 10,
        key: (req) => {
          if (req.url === '/bad') throw new Error('boom');
          return 'k';
        },
      }),
    );
    app.get('/{*path}', (_req, res) => {
      res.send('ok');
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const client = agent();
    cleanups.push(async () => {
      await client.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    expect((await call(`${base}/bad`, { dispatcher: client })).status).toBe(500);
    expect((await call(`${base}/good`, { dispatcher: client })).status).toBe(200);
  });
});

describe('Fastify', () => {
  it('works as an onRequest hook: headers on 200, 429 with problem+json, route not run when refused', async () => {
    const { clock } = fakeClock();
    const app = Fastify();
    let routeRuns = 0;
    app.addHook(
      'onRequest',
      rateLimitHook({ rate: 20, burst: 40, clock, key: (request) => String(request.headers['x-api-key']) }),
    );
    app.get('/items', async () => {
      routeRuns++;
      return { ok: true };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const client = agent();
    cleanups.push(async () => {
      await client.close();
      await app.close();
    });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/items`;
    const send = (n: number, key: string) =>
      Promise.all(Array.from({ length: n }, () => call(url, { dispatcher: client, headers: { 'x-api-key': key } })));
    const first = await send(30, 'a');
    expect(first.every((r) => r.status === 200)).toBe(true);
    expect(first[0]?.headers['ratelimit-policy']).toBe('"default";q=40;w=2');
    expect(first[0]?.headers.ratelimit).toMatch(/^"default";r=\d+;t=\d+$/);
    const second = await send(30, 'a');
    expect(second.filter((r) => r.status === 200)).toHaveLength(10);
    const refused = second.filter((r) => r.status === 429);
    expect(refused).toHaveLength(20);
    expect(refused[0]?.headers['retry-after']).toBe('1');
    expect(refused[0]?.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(refused[0]?.body ?? '{}')).toMatchObject({ status: 429 });
    expect(routeRuns).toBe(40);
    expect((await send(1, 'b'))[0]?.status).toBe(200); // another key is untouched
  });

  it('lets onLimit answer with the reply, and onError fail open', async () => {
    const { clock } = fakeClock();
    const app = Fastify();
    const failing = () => Promise.reject(new Error('store down'));
    app.addHook('onRequest', async (request, reply) => {
      const hook =
        request.url === '/open'
          ? rateLimitHook({ limiter: { tryTake: failing, take: failing }, onError: (_e, _q, _r, next) => next() })
          : limited;
      return hook(request, reply);
    });
    const limited = rateLimitHook({
      rate: 1,
      burst: 1,
      clock,
      onLimit: (_request, reply, info) => {
        reply.code(429).send(`wait ${info.retryAfterSeconds}s`);
      },
    });
    app.get('/*', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const client = agent();
    cleanups.push(async () => {
      await client.close();
      await app.close();
    });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    expect((await call(`${base}/a`, { dispatcher: client })).status).toBe(200);
    const refused = await call(`${base}/a`, { dispatcher: client });
    expect(refused).toMatchObject({ status: 429, body: 'wait 1s' });
    expect(refused.headers['retry-after']).toBe('1');
    expect((await call(`${base}/open`, { dispatcher: client })).status).toBe(200);
  });

  it('answers 503 when the limiter fails', async () => {
    const app = Fastify();
    const fail = () => Promise.reject(new Error('store down'));
    app.addHook('onRequest', rateLimitHook({ limiter: { tryTake: fail, take: fail } }));
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const client = agent();
    cleanups.push(async () => {
      await client.close();
      await app.close();
    });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/`;
    const reply = await call(url, { dispatcher: client });
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
  });
});

describe('Fastify: rateLimitPlugin', () => {
  async function start(register: (app: ReturnType<typeof Fastify>) => void | Promise<void>) {
    const app = Fastify();
    await register(app);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const client = agent();
    cleanups.push(async () => {
      await client.close();
      await app.close();
    });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    return (path: string) => call(`${base}${path}`, { dispatcher: client });
  }

  it('limits every route after it; config.rateLimit gives a route its own buckets, false none', async () => {
    const { clock } = fakeClock();
    const get = await start(async (app) => {
      await app.register(rateLimitPlugin, { rate: 1, burst: 2, clock, policyName: 'site' });
      app.get('/a', async () => 'a');
      app.get('/b', async () => 'b');
      app.get('/report', { config: { rateLimit: { burst: 3, policyName: 'report' } } }, async () => 'report');
      app.get('/health', { config: { rateLimit: false } }, async () => 'up');
      // A route of an encapsulated plugin below: the plugin's onRoute hook reaches it (skip-override).
      await app.register(async (child: FastifyInstance) => {
        child.get('/child', async () => 'child');
      });
    });
    expect((await get('/a')).status).toBe(200);
    const shared = await get('/b'); // /a and /b share the plugin's buckets
    expect(shared.status).toBe(200);
    expect(shared.headers['ratelimit-policy']).toBe('"site";q=2;w=2');
    const refused = await get('/child');
    expect(refused.status).toBe(429);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(refused.body)['violated-policies']).toEqual(['site']);
    const report = [];
    for (let i = 0; i < 4; i++) report.push(await get('/report'));
    expect(report.map((r) => r.status)).toEqual([200, 200, 200, 429]); // its own burst, the plugin's rate
    expect(report[0]?.headers['ratelimit-policy']).toBe('"report";q=3;w=3');
    const health = await get('/health');
    expect(health.status).toBe(200);
    expect(health.headers.ratelimit).toBeUndefined();
  });

  it("a route that gives its own limiter drops the plugin's rate and burst", async () => {
    const refusing = {
      tryTake: async () => ({ allowed: false, remaining: 0, retryAfterMs: 3000, resetAfterMs: 3000, limit: 1 }),
      take: () => Promise.reject(new Error('unused')),
    };
    const get = await start(async (app) => {
      await app.register(rateLimitPlugin, { rate: 100, burst: 100 });
      app.get('/closed', { config: { rateLimit: { limiter: refusing } } }, async () => 'never');
    });
    const reply = await get('/closed');
    expect(reply.status).toBe(429);
    expect(reply.headers['retry-after']).toBe('3');
  });

  it("refuses bad options when the plugin is registered, and a route's when the route is", async () => {
    const app = Fastify();
    cleanups.push(() => app.close());
    await expect(app.register(rateLimitPlugin, { rate: 1 })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
    const other = Fastify();
    cleanups.push(() => other.close());
    await other.register(rateLimitPlugin, { rate: 1, burst: 1 });
    expect(() => other.get('/x', { config: { rateLimit: { burst: -1 } } }, async () => 'x')).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_SIZE' }),
    );
  });
});

describe.each(FRAMEWORKS)('%s: maxWait', (framework) => {
  it('holds a request until it conforms, refuses at once one predicted to wait longer', async () => {
    const fake = fakeClock();
    const app = await startApp(framework, { layers: [{ rate: 1, burst: 1, clock: fake.clock, maxWait: '1500ms' }] });
    const client = agent();
    cleanups.push(async () => {
      await client.close();
      await app.close();
    });
    expect((await call(app.url, { dispatcher: client })).status).toBe(200);
    const held = call(app.url, { dispatcher: client });
    await until(() => fake.pending() === 1, 'the held request to arm its timer');
    const beyond = await call(app.url, { dispatcher: client }); // would start at 2 s > 1.5 s
    expect(beyond.status).toBe(429);
    expect(beyond.headers['retry-after']).toBe('1');
    fake.timers.tick(1000);
    const admitted = await held;
    expect(admitted.status).toBe(200);
    expect(JSON.parse(admitted.body).rateLimit).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('a client that leaves while held frees its place: the timer is cleared', async () => {
    const fake = fakeClock();
    const app = await startApp(framework, { layers: [{ rate: 1, burst: 1, clock: fake.clock, maxWait: '5s' }] });
    const client = agent();
    cleanups.push(async () => {
      await client.close();
      await app.close();
    });
    expect((await call(app.url, { dispatcher: client })).status).toBe(200);
    const abort = new AbortController();
    const held = call(app.url, { dispatcher: client, signal: abort.signal });
    await until(() => fake.pending() === 1, 'the held request to arm its timer');
    abort.abort();
    await expect(held).rejects.toThrow();
    await until(() => fake.pending() === 0, 'the held request to be given up');
  });
});
