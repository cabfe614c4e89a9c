/**
 * `rateLimit.fastify`: the rate limiter as a Fastify `onRequest` hook, over
 * the same engine as the node:http middleware (engine.ts). Fastify's types
 * are written structurally here, so fastify is not a dependency.
 *
 * Invariant: an async hook that answered returns the reply, so Fastify stops
 * the request there; one that lets it through returns `undefined`.
 */

import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createEngine } from './engine.js';
import type { RateLimitOptions } from './rate-limit-options.js';
import { failureHeaders, type HeaderList, PROBLEM_TYPE, type ProblemDetails } from './response.js';

/** The parts of a Fastify request the hook uses (structural, so fastify is not a dependency). */
export interface FastifyRequestLike {
  readonly raw: IncomingMessage;
  readonly headers: IncomingHttpHeaders;
  readonly method: string;
  readonly url: string;
}

/** The parts of a Fastify reply the hook uses. */
export interface FastifyReplyLike {
  readonly raw: ServerResponse;
  readonly sent: boolean;
  code(statusCode: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  send(payload?: unknown): FastifyReplyLike;
}

/** A Fastify `onRequest` hook. */
export type RateLimitHook<Req extends FastifyRequestLike, Rep extends FastifyReplyLike> = (
  request: Req,
  reply: Rep,
) => Promise<Rep | undefined>;

/**
 * The same limiter as a Fastify `onRequest` hook:
 * `fastify.addHook('onRequest', rateLimit.fastify({ rate: 20, burst: 40 }))`.
 * `key`, `cost`, `skip`, `onLimit` and `onError` receive Fastify's request
 * and reply; the default key is still the socket's peer (with `trustProxy`
 * as above, independent of Fastify's own `trustProxy`).
 */
export function fastifyHook<
  Req extends FastifyRequestLike = FastifyRequestLike,
  Rep extends FastifyReplyLike = FastifyReplyLike,
>(options: RateLimitOptions<Req, Rep>): RateLimitHook<Req, Rep> {
  const engine = createEngine(options);
  const send = (reply: Rep, problem: ProblemDetails, headers: HeaderList): void => {
    if (reply.sent) return;
    reply.code(problem.status);
    for (const [name, value] of headers) reply.header(name, value);
    reply.header('content-type', PROBLEM_TYPE);
    reply.send(JSON.stringify(problem));
  };
  // An async hook that answered must return the reply, so Fastify stops the request there.
  return async (request, reply) => {
    const outcome = await engine.run(request, request.raw, reply.raw);
    switch (outcome.kind) {
      case 'skip':
        return undefined;
      case 'gone':
        return reply; // the client went away while held: nothing more to do
      case 'allow':
        for (const [name, value] of outcome.headers) reply.header(name, value);
        return undefined;
      case 'limit':
        if (engine.onLimit === undefined) send(reply, outcome.info.problem, outcome.info.headers);
        else {
          for (const [name, value] of outcome.info.headers) reply.header(name, value);
          await engine.onLimit(request, reply, outcome.info);
        }
        return reply;
      case 'error': {
        if (engine.onError === undefined) {
          send(reply, outcome.info.problem, failureHeaders(outcome.info.statusCode));
          return reply;
        }
        let passed = false;
        await engine.onError(
          outcome.error,
          request,
          reply,
          () => {
            passed = true;
          },
          outcome.info,
        );
        return passed ? undefined : reply;
      }
    }
  };
}

/** Alias of `rateLimit.fastify`. */
export const rateLimitHook = fastifyHook;
