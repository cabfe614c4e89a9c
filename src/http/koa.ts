/**
 * `koaRateLimit`: the rate limiter as a Koa middleware,
 * `(ctx, next) => Promise<void>`, over the same engine as the node:http
 * middleware (engine.ts). Koa's types are written structurally here, so koa
 * is not a dependency. The default key is Koa's `ctx.ip` when the app's
 * `proxy` setting is on (unless `trustProxy` is given), else the socket's
 * peer; the decision is on `ctx.state.rateLimit` (`requestPropertyName`).
 *
 * Invariants: the promise it returns settles for every request: an admitted
 * one after the rest of the chain (`await next()`), a refused or undecided one
 * once it is answered (`ctx.status`, `ctx.body`); a user's `onLimit` or
 * `onError` that throws is published and rejects it, so Koa's error handling
 * answers; a refusal whose headers have gone out goes to `onLimit` if given
 * (no header is set on it), else destroys the connection (published too).
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { createEngine } from './engine.js';
import type { ErrorInfo, LimitInfo, RateLimitOptions } from './rate-limit-options.js';
import {
  abandon,
  failureHeaders,
  type HeaderList,
  PROBLEM_TYPE,
  type ProblemDetails,
  readResponseField,
} from './response.js';
import { nodeTransport } from './transport.js';

/** The parts of a Koa context the middleware uses (structural, so koa is not a dependency). */
export interface KoaContextLike {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly headers: IncomingMessage['headers'];
  readonly method: string;
  readonly url: string;
  readonly path: string;
  /** The client's address as Koa resolved it (through proxies when `app.proxy` is on). */
  readonly ip: string;
  readonly app: { readonly proxy: boolean };
  // biome-ignore lint/suspicious/noExplicitAny: Koa's own type for state
  readonly state: any;
  readonly headerSent: boolean;
  status: number;
  body: unknown;
  type: string;
  set(field: string, value: string): void;
}

/** `rateLimit`'s options for Koa: the callbacks take Koa's context. */
export interface KoaRateLimitOptions<Ctx extends KoaContextLike = KoaContextLike>
  extends Omit<RateLimitOptions<Ctx, Ctx>, 'onLimit' | 'onError' | 'requestWasSuccessful'> {
  /**
   * Answers a refused request instead of the default 429 (`ctx.status`, `ctx.body`); the rate-limit
   * fields are set already, unless an earlier middleware had sent the headers (`ctx.headerSent`).
   */
  onLimit?: (ctx: Ctx, info: LimitInfo) => void | Promise<void>;
  /**
   * Answers a request that could not be decided instead of the default 500/503, or lets it through
   * unlimited: `onError: (error, ctx, next) => next()`.
   */
  onError?: (error: unknown, ctx: Ctx, next: () => Promise<unknown>, info: ErrorInfo) => unknown;
  /** What counts as a success for `skipSuccessfulRequests`/`skipFailedRequests`. @default a status below 400 */
  requestWasSuccessful?: (ctx: Ctx) => boolean | Promise<boolean>;
}

/** A Koa middleware. */
export type KoaRateLimit<Ctx extends KoaContextLike = KoaContextLike> = (
  ctx: Ctx,
  next: () => Promise<unknown>,
) => Promise<void>;

/**
 * The rate limiter as a Koa middleware: `app.use(koaRateLimit({ rate: 20, burst: 40 }))`.
 * `key`, `cost`, `skip`, `onLimit`, `onError` and `requestWasSuccessful` receive Koa's context,
 * typed as {@link KoaContextLike} unless a callback's parameter says more (`key: (ctx: Context) => ...`).
 */
export function koaRateLimit<Ctx extends KoaContextLike = KoaContextLike>(
  options: KoaRateLimitOptions<Ctx>,
): KoaRateLimit<NoInfer<Ctx>> {
  // The engine hands the callbacks the context it was given; onLimit and onError are only returned
  // to this adapter, which calls them with Koa's arguments.
  const engine = createEngine(options as unknown as RateLimitOptions<Ctx, Ctx>, {
    transport: nodeTransport,
    readField: (ctx, name) => readResponseField(ctx.res, name),
    frameworkAddress: (ctx) => (ctx.app.proxy ? ctx.ip : undefined),
    setDecision: (ctx, name, decision) => {
      ctx.state[name] = decision;
    },
  });
  const onLimit = engine.onLimit as KoaRateLimitOptions<Ctx>['onLimit'];
  const onError = engine.onError as KoaRateLimitOptions<Ctx>['onError'];
  const send = (ctx: Ctx, problem: ProblemDetails, headers: HeaderList): void => {
    ctx.status = problem.status;
    for (const [name, value] of headers) ctx.set(name, value);
    ctx.body = JSON.stringify(problem);
    ctx.type = PROBLEM_TYPE;
  };
  /** A refusal or failure that can no longer be answered: its headers went out before it. */
  const cutShort = (ctx: Ctx, what: string): void => {
    const error = new Error(
      `rateLimit could not answer a ${what} request: its response's headers had been sent (status ` +
        `${ctx.res.statusCode}) by an earlier middleware, so the connection was destroyed; put the limiter first`,
    );
    engine.failed(ctx.req, 'response', error, 0);
    abandon(ctx.res);
  };
  /** Runs a user's callback; if it throws, publishes the error and rethrows it to Koa's error handling. */
  const guarded = async (stage: 'onLimit' | 'onError', ctx: Ctx, call: () => unknown): Promise<void> => {
    try {
      await call();
    } catch (error) {
      engine.failed(ctx.req, stage, error, 0);
      throw error;
    }
  };
  return async (ctx, next) => {
    const outcome = await engine.run(ctx, ctx, ctx.req, ctx.res);
    switch (outcome.kind) {
      case 'skip':
        await next();
        return;
      case 'gone':
        return; // the client went away while held: nothing more to do
      case 'allow':
        if (!ctx.headerSent) for (const [name, value] of outcome.headers) ctx.set(name, value);
        await next();
        return;
      case 'limit': {
        const { info } = outcome;
        if (onLimit === undefined) {
          if (ctx.headerSent) return cutShort(ctx, 'refused');
          return send(ctx, info.problem, info.headers);
        }
        // Headers that went out before the refusal cannot be added to: onLimit answers as it can.
        if (!ctx.headerSent) for (const [name, value] of info.headers) ctx.set(name, value);
        return guarded('onLimit', ctx, () => onLimit(ctx, info));
      }
      case 'error': {
        if (onError === undefined) {
          if (ctx.headerSent) return cutShort(ctx, 'failed');
          return send(ctx, outcome.info.problem, failureHeaders(outcome.info.statusCode));
        }
        return guarded('onError', ctx, () => onError(outcome.error, ctx, next, outcome.info));
      }
    }
  };
}
