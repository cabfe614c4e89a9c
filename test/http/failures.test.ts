/**
 * No request left hanging, and no failure swallowed, in node:http, Express 5,
 * Fastify 5, Hono 4 and Koa 3: a user's onLimit/onError that throws reaches the framework's
 * error path (here it answers 599), a refusal after the headers went out goes
 * to onLimit if given and else destroys the connection, a key of '' is a 500,
 * a key or cost promise that never settles is bounded by functionTimeout.
 * Every failure is published on tokenpace:http:error.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpErrorMessage } from '../../src/http/messages.js';
import { rateLimit } from '../../src/http/middleware.js';
import type { Decision, RateLimitDecider } from '../../src/http/types.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { type App, type AppSpec, FRAMEWORKS, SENDS_HEADERS_EARLY, startApp } from './apps.js';
import { agent, call, serve, until } from './support.js';

const client = agent();
const apps: App[] = [];
let errors: HttpErrorMessage[] = [];
const onError = (message: unknown): void => {
  errors.push(message as HttpErrorMessage);
};
beforeEach(() => {
  errors = [];
  subscribe('tokenpace:http:error', onError);
});
afterEach(async () => {
  unsubscribe('tokenpace:http:error', onError);
  for (const app of apps.splice(0)) await app.close();
});
afterAll(() => client.close());

async function start(framework: (typeof FRAMEWORKS)[number], spec: AppSpec): Promise<App> {
  const app = await startApp(framework, spec);
  apps.push(app);
  return app;
}

const messageOf = (message: HttpErrorMessage | undefined): string =>
  String((message?.error as Error | undefined)?.message);

const refusing: RateLimitDecider = {
  tryTake: async (): Promise<Decision> => ({
    allowed: false,
    remaining: 0,
    retryAfterMs: 1000,
    resetAfterMs: 1000,
    limit: 1,
  }),
  take: () => Promise.reject(new Error('unused')),
};
const failing: RateLimitDecider = {
  tryTake: () => Promise.reject(new Error('store down')),
  take: () => Promise.reject(new Error('store down')),
};

describe.each(FRAMEWORKS)('%s', (framework) => {
  it.each([
    [
      'throws',
      () => {
        throw new Error('bug in onLimit');
      },
    ],
    [
      'rejects',
      async () => {
        throw new Error('bug in onLimit');
      },
    ],
  ])('an onLimit that %s reaches the error path and is published', async (_how, onLimit) => {
    const app = await start(framework, { layers: [{ rate: 1, burst: 1, onLimit }] });
    expect((await call(app.url, { dispatcher: client })).status).toBe(200);
    const reply = await call(app.url, { dispatcher: client });
    expect(reply.status).toBe(599);
    expect(JSON.parse(reply.body)).toEqual({ handled: 'bug in onLimit' });
    expect(errors).toMatchObject([{ stage: 'onLimit', statusCode: 0, error: { message: 'bug in onLimit' } }]);
  });

  it('an onError that throws reaches the error path and is published with the failure itself', async () => {
    const app = await start(framework, {
      layers: [
        {
          limiter: failing,
          onError: () => {
            throw new Error('bug in onError');
          },
        },
      ],
    });
    const reply = await call(app.url, { dispatcher: client });
    expect(reply.status).toBe(599);
    expect(JSON.parse(reply.body)).toEqual({ handled: 'bug in onError' });
    expect(errors.map((e) => [e.stage, e.statusCode])).toEqual([
      ['limiter', 503],
      ['onError', 0],
    ]);
  });

  // Hono sends nothing before the app's Response: no refusal comes after the headers went out.
  const early = SENDS_HEADERS_EARLY.includes(framework);
  it.runIf(early).each([
    ['refused', refusing],
    ['failed', failing],
  ])(
    'a request %s after its headers went out: the connection is destroyed, and it is published',
    async (what, limiter) => {
      const app = await start(framework, { sendHeadersFirst: true, layers: [{ limiter }] });
      const started = performance.now();
      await expect(call(app.url, { dispatcher: client })).rejects.toThrow();
      expect(performance.now() - started).toBeLessThan(2000); // ended, not left to a timeout
      await until(() => errors.some((e) => e.stage === 'response'), 'the response message');
      const message = errors.find((e) => e.stage === 'response');
      expect(message).toMatchObject({ statusCode: 0 });
      expect(messageOf(message)).toContain(`could not answer a ${what} request`);
    },
  );

  it.runIf(early)('a request refused after its headers went out is handed to onLimit, with no header set', async () => {
    // express-rate-limit's "should not attempt to set headers if request.headersSent is true": the
    // user's handler answers, and no field is set on a response whose headers are out.
    const seen: unknown[] = [];
    const onLimit = (_req: unknown, res: unknown, info: { decision: Decision }): void => {
      seen.push(info.decision.allowed);
      const raw = (res as { raw?: ServerResponse }).raw ?? (res as ServerResponse);
      raw.end(' refused');
    };
    const app = await start(framework, { sendHeadersFirst: true, layers: [{ limiter: refusing, onLimit }] });
    const reply = await call(app.url, { dispatcher: client });
    expect(reply.status).toBe(200); // the status that went out first
    expect(reply.body).toBe('partial refused');
    expect(reply.headers['retry-after']).toBeUndefined();
    expect(seen).toEqual([false]);
    expect(errors).toEqual([]);
  });

  it("a key of '' is a 500 (a bug in the key function, not an outage), published", async () => {
    const app = await start(framework, { layers: [{ rate: 1, burst: 1, key: () => '' }] });
    const reply = await call(app.url, { dispatcher: client });
    expect(reply.status).toBe(500);
    expect(reply.headers['retry-after']).toBeUndefined();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ stage: 'key', statusCode: 500 });
    expect(messageOf(errors[0])).toMatch(/non-empty string, got an empty string/);
  });

  it('a key or cost promise that never settles is answered 500 after functionTimeout, published', async () => {
    const fake = fakeClock();
    const never = new Promise<never>(() => {});
    const app = await start(framework, {
      layers: [
        {
          rate: 1,
          burst: 5,
          clock: fake.clock,
          functionTimeout: '2s',
          key: (req) => (req.headers['x-hang'] === 'key' ? never : 'k'),
          cost: (req) => (req.headers['x-hang'] === 'cost' ? never : 1),
        },
      ],
    });
    for (const stage of ['key', 'cost'] as const) {
      const pending = call(app.url, { dispatcher: client, headers: { 'x-hang': stage } });
      await until(() => fake.pending() === 1, 'the timeout to be armed');
      fake.timers.tick(1999);
      expect(errors).toHaveLength(0);
      fake.timers.tick(1);
      const reply = await pending;
      expect(reply.status).toBe(500);
      expect(errors).toMatchObject([{ stage, statusCode: 500, error: { name: 'TimeoutError' } }]);
      expect(messageOf(errors[0])).toContain(`${stage}(req) did not settle within 2000 ms`);
      errors = [];
    }
    expect((await call(app.url, { dispatcher: client })).status).toBe(200);
    expect(fake.pending()).toBe(0); // a settled key leaves no timer
  });
});

describe.each(FRAMEWORKS)('%s on a Unix socket', (framework) => {
  it('the default key has no address to read: a 500 that says what to give, published', async () => {
    const path = join(tmpdir(), `tokenpace-w20-${process.pid}-${framework.replace(':', '')}.sock`);
    rmSync(path, { force: true });
    const app = await start(framework, { host: path, layers: [{ rate: 1, burst: 1 }] });
    const local = new Agent({ connect: { socketPath: path } });
    try {
      const reply = await call(`${app.url}/`, { dispatcher: local });
      expect(reply.status).toBe(500);
      expect(errors).toMatchObject([{ stage: 'key', statusCode: 500 }]);
      expect(messageOf(errors[0])).toMatch(/address is unknown .*give `key`, or `trustProxy`/);
      const keyed = await start(framework, { host: `${path}2`, layers: [{ rate: 1, burst: 1, key: () => 'k' }] });
      const second = new Agent({ connect: { socketPath: `${path}2` } });
      expect((await call(`${keyed.url}/`, { dispatcher: second })).status).toBe(200);
      await second.close();
    } finally {
      await local.close();
    }
  });
});

describe('node:http with a next() that takes no error', () => {
  it('answers 500 itself when onLimit throws, and publishes it with that status', async () => {
    const server = await serve(
      rateLimit({
        rate: 1,
        burst: 1,
        onLimit: () => {
          throw new Error('bug in onLimit');
        },
      }),
    );
    try {
      expect((await call(server.url, { dispatcher: client })).status).toBe(200);
      const reply = await call(server.url, { dispatcher: client });
      expect(reply.status).toBe(500);
      expect(reply.headers['content-type']).toBe('application/problem+json');
      expect(errors).toMatchObject([{ stage: 'onLimit', statusCode: 500 }]);
    } finally {
      await server.close();
    }
  });
});
