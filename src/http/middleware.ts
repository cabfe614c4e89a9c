/**
 * `rateLimit`: the 429 middleware for node:http, Connect and Express,
 * `(req, res, next) => void`; `rateLimitHook` (fastify.ts) is the same
 * limiter as a Fastify hook. The decision is engine.ts's; this file applies
 * it to a `ServerResponse`: an admitted request gets its rate-limit fields
 * (added to those of earlier limiters) and `req.rateLimit`, and goes on
 * (`next()`); a refused one gets a 429 with `Retry-After` and a problem body
 * (response.ts), unless `onLimit` answers; one that could not be decided gets
 * a 500 or 503, unless `onError` answers. Under Express with its `trust proxy`
 * setting on, the default key is Express's `req.ip` (unless `trustProxy` is
 * given).
 *
 * Invariants: the server never crashes on it, no rejection goes unhandled,
 * and every request ends: a refusal or failure whose response's headers have
 * gone out goes to `onLimit` or `onError` if given (no header is set on it),
 * else destroys the connection; a user's `onLimit` or `onError` that
 * throws goes to `next(error)` (Express's and Connect's error path) when
 * `next` takes an argument, else is answered 500. Each of these is published
 * on `tokenpace:http:error`.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { createEngine, type Outcome } from './engine.js';
import type { RateLimitOptions } from './rate-limit-options.js';
import { abandon, failureHeaders, readResponseField, salvage, sendProblem } from './response.js';
import { nodeTransport } from './transport.js';

/** A Connect/Express/node:http middleware over the framework's request and response types. */
export type RateLimitMiddleware<
  Req extends IncomingMessage = IncomingMessage,
  Res extends ServerResponse = ServerResponse,
> = (req: Req, res: Res, next: (error?: unknown) => void) => void;

/**
 * The request `rateLimit`'s callbacks see when TypeScript cannot tell the framework's own type
 * (`app.get(path, rateLimit(...), handler)`): node:http's, with the fields Express adds that a key
 * function reads. With `app.use(rateLimit(...))` they see Express's `Request` itself.
 */
export interface HttpRequest extends IncomingMessage {
  /** Express's client address (with its `trust proxy` setting); undefined in plain node:http. */
  readonly ip?: string | undefined;
  /** Express's path without the query string. */
  readonly path?: string | undefined;
}

/**
 * A rate-limit middleware for node:http, Connect and Express:
 * `(req, res, next) => void`.
 *
 * @example
 * // 20 requests/s per client address, bursts of 40; 429 past that
 * app.use(rateLimit({ rate: 20, burst: 40 }));
 *
 * @example
 * // per API key, with a protective limit over all keys
 * app.use(rateLimit({
 *   rate: 100, burst: 200, global: { rate: 1000, burst: 1000 },
 *   key: (req) => String(req.headers['x-api-key'] ?? 'anonymous'),
 * }));
 */
export function rateLimit<Req extends IncomingMessage = HttpRequest, Res extends ServerResponse = ServerResponse>(
  options: RateLimitOptions<Req, Res>,
): RateLimitMiddleware<Req, Res> {
  // The callbacks are the user's, typed by their framework; the engine hands them the very objects
  // the framework passed in, so the request and response types are only narrowed, never changed.
  return nodeMiddleware(options as unknown as RateLimitOptions) as RateLimitMiddleware<Req, Res>;
}

function nodeMiddleware(options: RateLimitOptions): RateLimitMiddleware {
  const engine = createEngine(options, {
    transport: nodeTransport,
    readField: readResponseField,
    frameworkAddress: expressAddress,
  });

  /** A refusal or failure that can no longer be answered: its headers went out before it. */
  const cutShort = (req: IncomingMessage, res: ServerResponse, what: string): void => {
    const error = new Error(
      `rateLimit could not answer a ${what} request: its response's headers had been sent (status ` +
        `${res.statusCode}) by an earlier handler, so the connection was destroyed; put the limiter first`,
    );
    engine.failed(req, 'response', error, 0);
    abandon(res);
  };

  /** A user's callback threw or rejected: Connect/Express's `next(error)` if `next` takes one, else a 500. */
  const callbackFailed = (
    stage: 'onLimit' | 'onError' | 'next',
    error: unknown,
    req: IncomingMessage,
    res: ServerResponse,
    next: (error?: unknown) => void,
  ): void => {
    if (next.length > 0) {
      engine.failed(req, stage, error, 0);
      try {
        next(error);
      } catch {
        salvage(res);
      }
      return;
    }
    engine.failed(req, stage, error, res.headersSent ? 0 : 500);
    salvage(res);
  };

  // Synchronous for the common outcomes; only a user's onLimit/onError may return a promise.
  const apply = (
    outcome: Outcome,
    req: IncomingMessage,
    res: ServerResponse,
    next: () => void,
  ): void | Promise<void> => {
    switch (outcome.kind) {
      case 'skip':
        next();
        return;
      case 'allow':
        if (!res.headersSent) for (const [name, value] of outcome.headers) res.setHeader(name, value);
        next();
        return;
      case 'limit': {
        const { info } = outcome;
        if (engine.onLimit === undefined) {
          if (res.headersSent) return cutShort(req, res, 'refused');
          return sendProblem(res, info.problem, info.headers);
        }
        // Headers that went out before the refusal cannot be added to: onLimit answers as it can.
        if (!res.headersSent) for (const [name, value] of info.headers) res.setHeader(name, value);
        return engine.onLimit(req, res, info);
      }
      case 'error':
        if (engine.onError !== undefined) return engine.onError(outcome.error, req, res, next, outcome.info);
        if (res.headersSent) return cutShort(req, res, 'failed');
        return sendProblem(res, outcome.info.problem, failureHeaders(outcome.info.statusCode));
      case 'gone':
        return;
    }
  };
  const settle = (
    outcome: Outcome,
    req: IncomingMessage,
    res: ServerResponse,
    next: (error?: unknown) => void,
  ): void => {
    let pending: void | Promise<void>;
    try {
      pending = apply(outcome, req, res, next);
    } catch (error) {
      callbackFailed(stageOf(outcome), error, req, res, next);
      return;
    }
    if (pending !== undefined) {
      Promise.resolve(pending).catch((error: unknown) => callbackFailed(stageOf(outcome), error, req, res, next));
    }
  };
  const finish = async (
    pending: Promise<Outcome>,
    req: IncomingMessage,
    res: ServerResponse,
    next: (error?: unknown) => void,
  ): Promise<void> => {
    let outcome: Outcome;
    try {
      outcome = await pending;
    } catch {
      salvage(res);
      return;
    }
    settle(outcome, req, res, next);
  };
  return (req, res, next) => {
    const outcome = engine.run(req, res, req, res);
    if (outcome instanceof Promise) void finish(outcome, req, res, next);
    else settle(outcome, req, res, next);
  };
}

/** Which user callback an outcome runs: what failed if applying it threw. */
function stageOf(outcome: Outcome): 'onLimit' | 'onError' | 'next' {
  return outcome.kind === 'limit' ? 'onLimit' : outcome.kind === 'error' ? 'onError' : 'next';
}

/**
 * Express's `req.ip` when its `trust proxy` setting is on: Express has resolved the client through
 * its proxies, and its user expects that answer. Otherwise (plain node:http, Connect, Express with
 * the setting off) undefined: the socket's peer, as `req.ip` would say too.
 */
function expressAddress(req: IncomingMessage): string | undefined {
  const app = (req as { app?: { get?: (setting: string) => unknown } }).app;
  if (typeof app?.get !== 'function') return undefined;
  const setting = app.get('trust proxy');
  if (setting === undefined || setting === false || setting === 0) return undefined;
  return (req as { ip?: string }).ip;
}
