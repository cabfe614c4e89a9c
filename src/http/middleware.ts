/**
 * `rateLimit`: the 429 middleware for node:http, Connect and Express,
 * `(req, res, next) => void`; `rateLimit.fastify` is the same limiter as a
 * Fastify hook (fastify.ts). The decision is engine.ts's; this file applies
 * it to a `ServerResponse`: an admitted request gets its `RateLimit-Policy`
 * and `RateLimit` headers and goes on (`next()`); a refused one gets a 429
 * with `Retry-After` and a problem body (response.ts), unless `onLimit`
 * answers; one that could not be decided gets a 500 or 503, unless `onError`
 * answers.
 *
 * Invariant: the server never crashes on it and no rejection goes unhandled;
 * if a user's `onLimit`, `onError` or `next` throws, the request is answered
 * 500 (or cut short if its headers have gone out).
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { createEngine, type Outcome } from './engine.js';
import { fastifyHook } from './fastify.js';
import type { RateLimitOptions } from './rate-limit-options.js';
import { failureHeaders, salvage, sendProblem } from './response.js';

/** A Connect/Express/node:http middleware. */
export type RateLimitMiddleware = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

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
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  const engine = createEngine(options);
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
          sendProblem(res, info.problem, info.headers);
          return;
        }
        if (!res.headersSent) for (const [name, value] of info.headers) res.setHeader(name, value);
        return engine.onLimit(req, res, info);
      }
      case 'error':
        if (engine.onError === undefined) {
          sendProblem(res, outcome.info.problem, failureHeaders(outcome.info.statusCode));
          return;
        }
        return engine.onError(outcome.error, req, res, next, outcome.info);
      case 'gone':
        return;
    }
  };
  const settle = (outcome: Outcome, req: IncomingMessage, res: ServerResponse, next: () => void): void => {
    try {
      const pending = apply(outcome, req, res, next);
      if (pending !== undefined) Promise.resolve(pending).catch(() => salvage(res));
    } catch {
      salvage(res);
    }
  };
  const finish = async (
    pending: Promise<Outcome>,
    req: IncomingMessage,
    res: ServerResponse,
    next: () => void,
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
    const outcome = engine.run(req, req, res);
    if (outcome instanceof Promise) void finish(outcome, req, res, next);
    else settle(outcome, req, res, next);
  };
}

rateLimit.fastify = fastifyHook;
