/**
 * What a user writes in Express and Fastify type-checks without type parameters: `npm run
 * typecheck` compiles this file; the runtime part only makes sure the apps are built.
 */

import express from 'express';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { rateLimit, rateLimitHook } from '../../src/index.js';

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
});
