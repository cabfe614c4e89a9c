/**
 * The same app in the three frameworks rateLimit serves, each on a real
 * loopback port: a plain node:http server, an Express 5 app and a Fastify 5
 * app. Each runs the given limiters in order, then a route that answers
 * `{ rateLimit }` (what the handler finds on its request) with the status the
 * request asks for in `x-status` (200 by default). Each framework's own error
 * path answers 599 with `{ handled: message }`: the node:http server's `next`
 * takes an error, Express has an error middleware, Fastify an error handler.
 */

import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { type FastifyReplyLike, type FastifyRequestLike, rateLimitHook } from '../../src/http/fastify.js';
import { rateLimit } from '../../src/http/middleware.js';
import type { RateLimitOptions } from '../../src/http/rate-limit-options.js';

export type Framework = 'node:http' | 'express' | 'fastify';
export const FRAMEWORKS: readonly Framework[] = ['node:http', 'express', 'fastify'];

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
