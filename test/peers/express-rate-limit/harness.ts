/**
 * What express-rate-limit's own tests use (test/library/helpers/create-server.ts, and supertest's
 * `request(app)`), for running them against tokenpace's `rateLimit` (./*.test.ts): the same Express
 * app and routes, on a real loopback port, and a real HTTP client (undici).
 *
 * express-rate-limit's `limit` and `windowMs` map to a token bucket (docs/migrating.md, and
 * docs/peer-suites.md for why): `burst: limit` and `rate: limit / windowMs`, its defaults (5 per
 * minute) included. Each limiter runs on the test's fake clock ({@link erl}), so a case that moves
 * time (`jest.advanceTimersByTime`) moves that clock, and the answers are exact.
 */

import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Application, type Request, type RequestHandler, type Response } from 'express';
import { Agent, request as undiciRequest } from 'undici';
import { afterEach } from 'vitest';
import type { Clock } from '../../../src/clock.js';
import type { RateLimitOptions } from '../../../src/http/rate-limit-options.js';
import { fakeClock } from '../../helpers/fake-clock.js';

/** The wall-clock time `X-RateLimit-Reset` is written from, ms since the epoch. */
export const WALL_MS = Date.UTC(2026, 0, 1);

/**
 * Options for tokenpace's `rateLimit` from express-rate-limit's `limit` (default 5) and `windowMs`
 * (default 60 s), on `clock`, with `extra` added.
 */
export function erl<Req = Request, Res = Response>(
  clock: Clock,
  { limit = 5, windowMs = 60_000 }: { limit?: number; windowMs?: number } = {},
  extra: Omit<RateLimitOptions<Req, Res>, 'rate' | 'burst' | 'clock'> = {},
): RateLimitOptions<Req, Res> {
  return { rate: (limit * 1000) / windowMs, burst: limit, clock, wallClock: () => WALL_MS, ...extra };
}

/** A fake clock for the limiters of one test. */
export function testClock() {
  return fakeClock();
}

/** express-rate-limit's createServer: an Express app with the middleware, then its test routes. */
export function createServer(middleware: RequestHandler | RequestHandler[]): Application {
  const app = express();
  app.use(middleware);
  app.all('/', (_request, response) => {
    response.send('Hi there!');
  });
  app.get('/error', (_request, response) => {
    response.sendStatus(400);
  });
  app.post('/crash', (_request, response) => {
    const error = new Error('Oops!');
    response.destroy(error);
    response.emit('error', error);
  });
  return app;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** A header as one string (undefined when absent). */
  get(name: string): string | undefined;
}

const servers = new Map<Application, Promise<{ server: Server; url: string }>>();
const client = new Agent({ connections: 8 });

afterEach(async () => {
  for (const [app, started] of servers) {
    servers.delete(app);
    const { server } = await started;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** The app's base URL, listening on a loopback port from the first call (closed after the test). */
export function urlOf(app: Application): Promise<string> {
  let started = servers.get(app);
  if (started === undefined) {
    started = new Promise((resolve) => {
      const server = createHttpServer(app);
      server.listen(0, '127.0.0.1', () =>
        resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
      );
    });
    servers.set(app, started);
  }
  return started.then(({ url }) => url);
}

/** supertest's `request(app).get(path)` (or another method), over a real connection. */
export async function request(
  app: Application,
  path = '/',
  options: { method?: 'GET' | 'POST'; headers?: Record<string, string>; query?: Record<string, string | number> } = {},
): Promise<Reply> {
  const query =
    options.query === undefined
      ? ''
      : `?${new URLSearchParams(Object.entries(options.query).map(([k, v]): [string, string] => [k, String(v)])).toString()}`;
  const response = await undiciRequest(`${await urlOf(app)}${path}${query}`, {
    method: options.method ?? 'GET',
    headers: options.headers,
    dispatcher: client,
  });
  const text = await response.body.text();
  const headers = response.headers;
  return {
    status: response.statusCode,
    headers,
    text,
    get: (name) => {
      const value = headers[name.toLowerCase()];
      return Array.isArray(value) ? value.join(', ') : value;
    },
  };
}

/**
 * A middleware to put first, and a promise of each response's end: `next()` resolves once the next
 * response has closed and what its `close` listeners started (a cost given back) has run.
 */
export function closeWatch(): { middleware: RequestHandler; next(): Promise<void> } {
  const closed: Array<() => void> = [];
  const pending: Promise<void>[] = [];
  return {
    middleware: (_request, response, next) => {
      pending.push(
        new Promise<void>((resolve) => {
          response.once('close', () => setImmediate(resolve));
        }),
      );
      for (const wake of closed.splice(0)) wake();
      next();
    },
    async next() {
      while (pending.length === 0) await new Promise<void>((resolve) => closed.push(resolve));
      await pending.shift();
    },
  };
}
