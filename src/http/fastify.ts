/**
 * `rateLimitHook`: the rate limiter as a Fastify `onRequest` hook, over
 * the same engine as the node:http middleware (engine.ts). Fastify's types
 * are written structurally here, so fastify is not a dependency. The default
 * key is Fastify's `request.ip` (its own `trustProxy`) unless `trustProxy` is
 * given; the decision is on `request.rateLimit`.
 *
 * Invariants: an async hook that answered returns the reply, so Fastify stops
 * the request there; one that lets it through returns `undefined`. A user's
 * `onLimit` or `onError` that throws is published and rethrown, so Fastify's
 * error handler answers it; a refusal whose headers have gone out goes to
 * `onLimit` if given (no header is set on it), else destroys the connection
 * (published too).
 */

import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createEngine } from './engine.js';
import type { RateLimitOptions } from './rate-limit-options.js';
import { abandon, failureHeaders, fieldText, type HeaderList, PROBLEM_TYPE, type ProblemDetails } from './response.js';
import { nodeTransport } from './transport.js';

/** The parts of a Fastify request the hook uses (structural, so fastify is not a dependency). */
export interface FastifyRequestLike {
  readonly raw: IncomingMessage;
  readonly headers: IncomingHttpHeaders;
  readonly method: string;
  readonly url: string;
  /** The client's address as Fastify resolved it (with its own `trustProxy`). */
  readonly ip?: string | undefined;
}

/** The parts of a Fastify reply the hook uses. */
export interface FastifyReplyLike {
  readonly raw: ServerResponse;
  readonly sent: boolean;
  code(statusCode: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  getHeader(name: string): number | string | string[] | undefined;
  send(payload?: unknown): FastifyReplyLike;
}

/** A Fastify `onRequest` hook. */
export type RateLimitHook<Req extends FastifyRequestLike, Rep extends FastifyReplyLike> = (
  request: Req,
  reply: Rep,
) => Promise<Rep | undefined>;

/**
 * The same limiter as a Fastify `onRequest` hook, for every route
 * (`fastify.addHook('onRequest', rateLimitHook({ rate: 20, burst: 40 }))`)
 * or one (`fastify.get('/report', { onRequest: rateLimitHook(...) }, handler)`).
 * `key`, `cost`, `skip`, `onLimit`, `onError` and `requestWasSuccessful`
 * receive Fastify's request and reply, typed as {@link FastifyRequestLike}
 * unless a callback's parameter says more (`key: (request: FastifyRequest) => ...`):
 * the hook's type is never inferred from where it is put, which would be `never`
 * in route options. The default key is `request.ip` (Fastify's own
 * `trustProxy`) unless `trustProxy` is given, and the decision is on
 * `request.rateLimit` (`requestPropertyName`). `rateLimitPlugin`
 * (`tokenpace/fastify`) registers it with per-route options.
 */
export function rateLimitHook<
  Req extends FastifyRequestLike = FastifyRequestLike,
  Rep extends FastifyReplyLike = FastifyReplyLike,
>(options: RateLimitOptions<Req, Rep>): RateLimitHook<NoInfer<Req>, NoInfer<Rep>> {
  const engine = createEngine(options, {
    transport: nodeTransport,
    readField: (reply, name) => fieldText(reply.getHeader(name)),
    frameworkAddress: (request) => request.ip,
  });
  const send = (reply: Rep, problem: ProblemDetails, headers: HeaderList): void => {
    reply.code(problem.status);
    for (const [name, value] of headers) reply.header(name, value);
    reply.header('content-type', PROBLEM_TYPE);
    reply.send(JSON.stringify(problem));
  };
  /** A refusal or failure that can no longer be answered: its headers went out before it. */
  const cutShort = (request: Req, reply: Rep, what: string): Rep => {
    const error = new Error(
      `rateLimit could not answer a ${what} request: its response's headers had been sent (status ` +
        `${reply.raw.statusCode}) by an earlier hook, so the connection was destroyed; register the limiter first`,
    );
    engine.failed(request.raw, 'response', error, 0);
    abandon(reply.raw);
    return reply;
  };
  /** Runs a user's callback; if it throws, publishes the error and rethrows it to Fastify's error handler. */
  const guarded = async (stage: 'onLimit' | 'onError', request: Req, call: () => void | Promise<void>) => {
    try {
      await call();
    } catch (error) {
      engine.failed(request.raw, stage, error, 0);
      throw error;
    }
  };
  // An async hook that answered must return the reply, so Fastify stops the request there.
  return async (request, reply) => {
    const outcome = await engine.run(request, reply, request.raw, reply.raw);
    switch (outcome.kind) {
      case 'skip':
        return undefined;
      case 'gone':
        return reply; // the client went away while held: nothing more to do
      case 'allow':
        if (!reply.raw.headersSent) for (const [name, value] of outcome.headers) reply.header(name, value);
        return undefined;
      case 'limit': {
        const { info } = outcome;
        const { onLimit } = engine;
        if (onLimit === undefined) {
          if (reply.raw.headersSent) return cutShort(request, reply, 'refused');
          send(reply, info.problem, info.headers);
          return reply;
        }
        // Headers that went out before the refusal cannot be added to: onLimit answers as it can.
        if (!reply.raw.headersSent) for (const [name, value] of info.headers) reply.header(name, value);
        await guarded('onLimit', request, () => onLimit(request, reply, info));
        return reply;
      }
      case 'error': {
        const { onError } = engine;
        if (onError === undefined) {
          if (reply.raw.headersSent) return cutShort(request, reply, 'failed');
          send(reply, outcome.info.problem, failureHeaders(outcome.info.statusCode));
          return reply;
        }
        let passed = false;
        const pass = (): void => {
          passed = true;
        };
        await guarded('onError', request, () => onError(outcome.error, request, reply, pass, outcome.info));
        return passed ? undefined : reply;
      }
    }
  };
}
