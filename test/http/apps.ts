/**
 * The same app in the five frameworks rateLimit serves, each on a real
 * loopback port: a plain node:http server, an Express 5 app, a Fastify 5 app,
 * a Hono 4 app on @hono/node-server and a Koa 3 app. Each runs the given limiters in order, then a route that answers
 * `{ rateLimit }` (what the handler finds on its request) with the status the
 * request asks for in `x-status` (200 by default). Each framework's own error
 * path answers 599 with `{ handled: message }`: the node:http server's `next`
 * takes an error, Express has an error middleware, Fastify an error handler,
 * Hono `app.onError`, Koa a first middleware that catches. The limiters' options
 * are written once for all ({@link AnyOptions}); Hono's and Koa's callbacks take
 * one context, so they are adapted here ({@link forContext}).
 */

import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import express from 'express';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { Hono, type Context as HonoContext } from 'hono';
import Koa from 'koa';
import { type FastifyReplyLike, type FastifyRequestLike, rateLimitHook } from '../../src/http/fastify.js';
import { honoRateLimit } from '../../src/http/hono.js';
import { koaRateLimit } from '../../src/http/koa.js';
import { rateLimit } from '../../src/http/middleware.js';
import type { RateLimitOptions } from '../../src/http/rate-limit-options.js';

export type Framework = 'node:http' | 'express' | 'fastify' | 'hono' | 'koa';
export const FRAMEWORKS: readonly Framework[] = ['node:http', 'express', 'fastify', 'hono', 'koa'];

/** Frameworks that can send a response's headers before the limiter runs (Hono sends only the app's Response). */
export const SENDS_HEADERS_EARLY: readonly Framework[] = ['node:http', 'express', 'fastify', 'koa'];

/** Options whose functions read only what every framework's request has. */
export type AnyOptions = RateLimitOptions<{ readonly headers: IncomingHttpHeaders }, unknown>;

export interface AppSpec {
  layers: AnyOptions[];
  /** A step before the limiters that sends the response's headers (status 200) and a first chunk. */
  sendHeadersFirst?: boolean;
  /** Express's `trust proxy` setting, Fastify's `trustProxy` option. */
  frameworkTrustProxy?: string | boolean;
  /** Listen on this host (default 127.0.0.1), or on this Unix socket path (starting with `/`). */
  host?: string;
}

export interface App {
  url: string;
  close(): Promise<void>;
}

const status = (headers: IncomingHttpHeaders): number => Number(headers['x-status'] ?? 200);
const hangs = (headers: IncomingHttpHeaders): boolean => headers['x-hang'] === 'route';
const found = (req: object) => ({
  rateLimit: (req as { rateLimit?: unknown }).rateLimit ?? null,
  limits: (req as { limits?: unknown }).limits ?? null,
});
const handled = (error: unknown) => JSON.stringify({ handled: error instanceof Error ? error.message : String(error) });

type Req = { readonly headers: IncomingHttpHeaders };

/**
 * {@link AnyOptions} for a framework whose callbacks take one context: each `(req, res, ...)`
 * callback is called with `reqOf(context)` and `resOf(context)`.
 */
function forContext<C, A>(layer: AnyOptions, reqOf: (c: C) => Req, resOf: (c: C) => unknown, answer: () => A) {
  const { key, cost, skip, limits, plan, onLimit, onError, requestWasSuccessful, ...rest } = layer;
  return {
    ...rest,
    ...(key && { key: (c: C) => key(reqOf(c)) }),
    ...(cost && { cost: (c: C) => cost(reqOf(c)) }),
    ...(skip && { skip: (c: C) => skip(reqOf(c)) }),
    ...(limits && { limits: (c: C) => limits(reqOf(c)) }),
    ...(plan && { plan: (c: C) => plan(reqOf(c)) }),
    ...(requestWasSuccessful && { requestWasSuccessful: (c: C) => requestWasSuccessful(reqOf(c), resOf(c)) }),
    ...(onLimit && {
      onLimit: async (c: C, info: Parameters<typeof onLimit>[2]) => {
        await onLimit(reqOf(c), resOf(c), info);
        return answer(); // Hono's onLimit returns the answer
      },
    }),
    ...(onError && {
      onError: (error: unknown, c: C, next: () => Promise<unknown>, info: Parameters<typeof onError>[4]) =>
        onError(error, reqOf(c), resOf(c), () => void next(), info),
    }),
  };
}

type Step = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

const headersFirst: Step = (_req, res, next) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.write('partial');
  next();
};

export async function startApp(framework: Framework, spec: AppSpec): Promise<App> {
  const host = spec.host ?? '127.0.0.1';
  const unix = host.startsWith('/');
  const urlOf = (address: AddressInfo | string | null): string =>
    unix ? 'http://localhost' : `http://${host.includes(':') ? `[${host}]` : host}:${(address as AddressInfo).port}`;
  if (framework === 'hono') {
    const app = new Hono();
    const reqOf = (c: HonoContext): Req => ({ headers: Object.fromEntries(c.req.raw.headers) });
    for (const layer of spec.layers) {
      const resOf = (c: HonoContext) => ({ statusCode: c.res.status });
      app.use(honoRateLimit(forContext(layer, reqOf, resOf, () => new Response('answered by onLimit'))));
    }
    app.onError(
      (error) => new Response(handled(error), { status: 599, headers: { 'content-type': 'application/json' } }),
    );
    app.all('*', (c) => {
      const { headers } = reqOf(c);
      if (hangs(headers)) return new Promise<Response>(() => {});
      const body = { rateLimit: c.get('rateLimit' as never) ?? null, limits: c.get('limits' as never) ?? null };
      return c.body(JSON.stringify(body), status(headers) as 200, { 'content-type': 'application/json' });
    });
    return listening(createAdaptorServer({ fetch: app.fetch }) as ReturnType<typeof createServer>, host, urlOf);
  }
  if (framework === 'koa') {
    const app = new Koa();
    app.proxy = spec.frameworkTrustProxy !== undefined && spec.frameworkTrustProxy !== false;
    app.use(async (ctx, next) => {
      try {
        await next();
      } catch (error) {
        ctx.status = 599;
        ctx.type = 'application/json';
        ctx.body = handled(error);
      }
    });
    if (spec.sendHeadersFirst) {
      app.use(async (ctx, next) => {
        headersFirst(ctx.req, ctx.res, () => {});
        await next();
      });
    }
    for (const layer of spec.layers) {
      app.use(
        koaRateLimit(
          forContext(
            layer,
            (ctx: Koa.Context) => ctx,
            (ctx: Koa.Context) => ctx.res,
            () => {},
          ),
        ),
      );
    }
    app.use(async (ctx) => {
      if (hangs(ctx.headers)) return new Promise<void>(() => {});
      if (ctx.headerSent) {
        ctx.respond = false;
        ctx.res.end();
        return;
      }
      ctx.status = status(ctx.headers);
      ctx.body = found(ctx.state);
    });
    return listening(createServer(app.callback()), host, urlOf);
  }
  if (framework === 'fastify') {
    const app = Fastify({ trustProxy: spec.frameworkTrustProxy ?? false });
    if (spec.sendHeadersFirst) {
      app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
        headersFirst(request.raw, reply.raw, () => {});
      });
    }
    for (const layer of spec.layers) {
      app.addHook('onRequest', rateLimitHook<FastifyRequestLike, FastifyReplyLike>(layer));
    }
    app.setErrorHandler((error, _request, reply) => {
      reply.code(599).header('content-type', 'application/json').send(handled(error));
    });
    app.all('/*', async (request, reply) => {
      if (hangs(request.headers)) return new Promise(() => {});
      reply.code(status(request.headers));
      return found(request);
    });
    await app.listen(unix ? { path: host } : { port: 0, host });
    return { url: urlOf(app.server.address()), close: () => app.close() };
  }
  const steps: Step[] = [
    ...(spec.sendHeadersFirst ? [headersFirst] : []),
    ...spec.layers.map((layer) => rateLimit(layer)),
  ];
  const route = (req: IncomingMessage, res: ServerResponse): void => {
    if (hangs(req.headers)) return;
    if (res.headersSent) {
      res.end();
      return;
    }
    res.statusCode = status(req.headers);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(found(req)));
  };
  let server: ReturnType<typeof createServer>;
  if (framework === 'express') {
    const app = express();
    if (spec.frameworkTrustProxy !== undefined) app.set('trust proxy', spec.frameworkTrustProxy);
    for (const step of steps) app.use(step);
    app.all('/{*path}', (req, res) => route(req, res));
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(599).type('application/json').send(handled(error));
    });
    server = createServer(app);
  } else {
    server = createServer((req, res) => {
      const run = (i: number): void => {
        const step = steps[i];
        if (step === undefined) {
          route(req, res);
          return;
        }
        step(req, res, (error?: unknown) => {
          if (error === undefined) run(i + 1);
          else res.writeHead(599, { 'content-type': 'application/json' }).end(handled(error));
        });
      };
      run(0);
    });
  }
  return listening(server, host, urlOf);
}

/** Starts `server` on `host` (a Unix socket path if it starts with `/`). */
async function listening(
  server: ReturnType<typeof createServer>,
  host: string,
  urlOf: (address: AddressInfo | string | null) => string,
): Promise<App> {
  const unix = host.startsWith('/');
  await new Promise<void>((resolve) => (unix ? server.listen(host, resolve) : server.listen(0, host, resolve)));
  return {
    url: urlOf(server.address()),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
