/**
 * What a user writes in Express, Fastify, Hono and Koa type-checks without type parameters: `npm
 * run typecheck` compiles this file; the runtime part only makes sure the apps are built.
 */

import express from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import { type Context, Hono } from 'hono';
import Koa from 'koa';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { rateLimitPlugin } from '../../src/http/fastify-plugin.js';
import { honoRateLimit, koaRateLimit, type RequestRateLimit, rateLimit, rateLimitHook } from '../../src/index.js';

describe('rateLimit types (compiled by npm run typecheck)', () => {
  it('Express: key, cost, skip and onLimit see req.ip, req.path and res.status', () => {
    const app = express();
    app.use(rateLimit({ rate: 10, burst: 20, key: (req) => req.ip ?? 'unknown' }));
    app.get(
      '/report',
      rateLimit({
        rate: 1,
        burst: 5,
        key: (req) => `${req.ip}:${req.headers['x-api-key'] ?? ''}`,
        cost: (req) => (req.url?.includes('full') ? 5 : 1),
        skip: (req) => req.method === 'OPTIONS',
      }),
      (_req, res) => {
        res.send('ok');
      },
    );
    expect(app).toBeTypeOf('function');
  });

  it('Fastify: the hook fits addHook, and key sees request.ip', async () => {
    const app = Fastify();
    app.addHook('onRequest', rateLimitHook({ rate: 10, burst: 20, key: (request) => request.ip ?? 'x' }));
    app.get('/', async () => 'ok');
    await app.ready();
    await app.close();
  });

  it('Fastify: the hook fits one route, alone or in a list, and a callback may ask for FastifyRequest', async () => {
    const app = Fastify();
    app.get('/one', { onRequest: rateLimitHook({ rate: 1, burst: 5, key: (request) => request.ip ?? 'x' }) }, h);
    app.get('/two', { onRequest: [rateLimitHook({ rate: 1, burst: 5 })] }, h);
    app.route({ method: 'GET', url: '/three', preHandler: rateLimitHook({ rate: 1, burst: 5 }), handler: h });
    app.get(
      '/four',
      {
        onRequest: rateLimitHook({
          rate: 1,
          burst: 5,
          key: (request: FastifyRequest) => request.routeOptions.url ?? '',
        }),
      },
      h,
    );
    await app.ready();
    await app.close();
  });

  it('Fastify: the plugin takes the options, and config.rateLimit is typed per route', async () => {
    const app = Fastify();
    await app.register(rateLimitPlugin, { rate: 10, burst: 20, key: (request) => request.routeOptions.url ?? '' });
    app.get('/report', { config: { rateLimit: { burst: 5, cost: () => 2 } } }, h);
    app.get('/health', { config: { rateLimit: false } }, h);
    // @ts-expect-error burst is a size, not a boolean (and refused when the route is added)
    expect(() => app.get('/bad', { config: { rateLimit: { burst: true } } }, h)).toThrow(/burst/);
    await app.ready();
    await app.close();
  });

  it('Hono: the middleware fits app.use and one route; c.req and c.get are typed', () => {
    const app = new Hono<{ Variables: { rateLimit: RequestRateLimit } }>();
    app.use(honoRateLimit({ rate: 10, burst: 20, key: (c) => c.req.header('x-api-key') ?? 'anonymous' }));
    app.get(
      '/report',
      honoRateLimit({ rate: 1, burst: 5, onLimit: (c, info) => c.body(`wait ${info.retryAfterSeconds} s`, 429) }),
      (c) => c.json({ remaining: c.get('rateLimit').remaining }),
    );
    app.use(honoRateLimit({ rate: 1, burst: 5, key: (c: Context) => c.req.path, onError: (_e, _c, next) => next() }));
    expectTypeOf(app.fetch).toBeFunction();
  });

  it('Koa: the middleware fits app.use; callbacks see the context', () => {
    const app = new Koa();
    app.use(koaRateLimit({ rate: 10, burst: 20, key: (ctx) => ctx.ip }));
    app.use(
      koaRateLimit({
        rate: 1,
        burst: 5,
        skip: (ctx: Koa.Context) => ctx.path === '/health',
        onLimit: (ctx, info) => {
          ctx.status = 429;
          ctx.body = { retryAfter: info.retryAfterSeconds };
        },
        onError: (_error, _ctx, next) => next(),
      }),
    );
    expect(app.middleware).toHaveLength(2);
  });
});

const h = async () => 'ok';
