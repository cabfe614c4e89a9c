/**
 * `honoRateLimit`: the rate limiter as a Hono middleware,
 * `(c, next) => Promise<Response | void>`, over the same engine as the
 * node:http middleware (engine.ts). Hono takes web `Request`s and runs on
 * Node (@hono/node-server), Bun, Deno and Workers; its types are written
 * structurally here, so hono is not a dependency.
 *
 * The default key is the client's address: the socket of @hono/node-server's
 * `c.env.incoming`, Bun's `server.requestIP()` (`c.env`), Deno's
 * `info.remoteAddr` (`c.env`), with `trustProxy` read from `c.req.header()`.
 * Where the runtime does not say (Workers), give `key`. The decision is
 * `c.get('rateLimit')` (`requestPropertyName`).
 *
 * Invariants: an admitted request gets its rate-limit fields through
 * `c.header()` and goes on (`await next()`); a refused one is answered with a
 * `Response` (429 and a problem body) unless `onLimit` returns one; a user's
 * `onLimit` or `onError` that throws is published and rethrown to Hono's
 * `app.onError`. Hono sends nothing before the app's `Response`, so no refusal
 * comes after the headers went out.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { createEngine } from './engine.js';
import type { ErrorInfo, LimitInfo, RateLimitOptions } from './rate-limit-options.js';
import { failureHeaders, type HeaderList, PROBLEM_TYPE, type ProblemDetails } from './response.js';
import { nodeTransport, type Transport } from './transport.js';

/** The parts of a Hono `Context` the middleware uses (structural, so hono is not a dependency). */
export interface HonoContextLike {
  readonly req: {
    readonly raw: Request;
    readonly path: string;
    readonly method: string;
    header(name: string): string | undefined;
  };
  /** Hono's bindings: @hono/node-server's `{ incoming, outgoing }`, Bun's server, Deno's handler info. */
  readonly env?: unknown;
  readonly res: Response;
  header(name: string, value: string): void;
  body(data: string | null, status: number): Response;
  json(object: unknown, status?: number): Response;
  text(text: string, status?: number): Response;
}

/** `rateLimit`'s options for Hono: the callbacks take Hono's context, and `onLimit` returns the answer. */
export interface HonoRateLimitOptions<C extends HonoContextLike = HonoContextLike>
  extends Omit<RateLimitOptions<C, C>, 'onLimit' | 'onError' | 'requestWasSuccessful'> {
  /** Answers a refused request instead of the default 429; the rate-limit fields are set already. */
  onLimit?: (c: C, info: LimitInfo) => Response | Promise<Response>;
  /**
   * Answers a request that could not be decided instead of the default 500/503, with a `Response`,
   * or lets it through unlimited: `onError: (error, c, next) => next()`.
   */
  onError?: (
    error: unknown,
    c: C,
    next: () => Promise<void>,
    info: ErrorInfo,
  ) => Response | Promise<Response> | void | Promise<void>;
  /** What counts as a success for `skipSuccessfulRequests`/`skipFailedRequests`. @default a status below 400 */
  requestWasSuccessful?: (c: C) => boolean | Promise<boolean>;
}

/** A Hono middleware. */
export type HonoRateLimit<C extends HonoContextLike = HonoContextLike> = (
  c: C,
  next: () => Promise<void>,
) => Promise<Response | undefined>;

/** One request as the engine sees it: Hono's context, and node:http's objects under @hono/node-server. */
interface Exchange {
  readonly c: HonoContextLike;
  readonly incoming: IncomingMessage | undefined;
  readonly outgoing: ServerResponse | undefined;
  /** Told once the response is done, where node:http cannot tell it (see {@link honoTransport}). */
  done: ((completed: boolean, statusCode: number) => void) | undefined;
}

/** The client's address where the runtime says it: Bun's `server.requestIP(request)`, Deno's `info.remoteAddr`. */
function runtimePeer(c: HonoContextLike): string {
  const env = c.env as
    | { requestIP?: (request: Request) => { address?: string } | null; remoteAddr?: { hostname?: string } }
    | undefined;
  if (typeof env?.requestIP === 'function') return env.requestIP(c.req.raw)?.address ?? '';
  return env?.remoteAddr?.hostname ?? '';
}

/** node:http's under @hono/node-server; the web `Request` and its signal elsewhere. */
const honoTransport: Transport<Exchange, Exchange> = {
  message: (x) => x.incoming ?? x.c.req.raw,
  peer: (x) => (x.incoming === undefined ? runtimePeer(x.c) : nodeTransport.peer(x.incoming)),
  header: (x, name) => x.c.req.header(name),
  closed: (x) => (x.incoming === undefined ? x.c.req.raw.signal.aborted : nodeTransport.closed(x.incoming)),
  onAbort: (x, listener) => {
    if (x.outgoing !== undefined) return nodeTransport.onAbort(x.outgoing, listener);
    const { signal } = x.c.req.raw;
    signal.addEventListener('abort', listener, { once: true });
    return () => signal.removeEventListener('abort', listener);
  },
  onDone: (x, listener) => {
    if (x.outgoing !== undefined) nodeTransport.onDone(x.outgoing, listener);
    else x.done = listener;
  },
};

/**
 * The rate limiter as a Hono middleware:
 * `app.use(honoRateLimit({ rate: 20, burst: 40 }))`, or on one route
 * (`app.get('/report', honoRateLimit({ ... }), handler)`). `key`, `cost`,
 * `skip`, `onLimit`, `onError` and `requestWasSuccessful` receive Hono's
 * context, typed as {@link HonoContextLike} unless a callback's parameter says
 * more (`key: (c: Context) => ...`).
 */
export function honoRateLimit<C extends HonoContextLike = HonoContextLike>(
  options: HonoRateLimitOptions<C>,
): HonoRateLimit<NoInfer<C>> {
  // The engine hands the callbacks the context it was given; onLimit and onError are only returned
  // to this adapter, which calls them with Hono's arguments.
  const engine = createEngine(options as unknown as RateLimitOptions<C, C>, {
    transport: honoTransport,
    readField: (c, name) => c.res.headers.get(name) ?? undefined,
    setDecision: (c, name, decision) =>
      (c as unknown as { set(key: string, value: unknown): void }).set(name, decision),
  });
  const onLimit = engine.onLimit as HonoRateLimitOptions<C>['onLimit'];
  const onError = engine.onError as HonoRateLimitOptions<C>['onError'];
  const send = (c: C, problem: ProblemDetails, headers: HeaderList): Response => {
    for (const [name, value] of headers) c.header(name, value);
    c.header('content-type', PROBLEM_TYPE);
    return c.body(JSON.stringify(problem), problem.status);
  };
  /** Runs a user's callback; if it throws, publishes the error and rethrows it to Hono's `app.onError`. */
  const guarded = async <T>(stage: 'onLimit' | 'onError', x: Exchange, call: () => T | Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      engine.failed(x, stage, error, 0);
      throw error;
    }
  };
  /** Goes on to the next handler, and tells the engine how the response ended when node:http cannot. */
  const proceed = async (x: Exchange, next: () => Promise<void>): Promise<undefined> => {
    const { done } = x;
    if (done === undefined) {
      await next();
      return undefined;
    }
    const { signal } = x.c.req.raw;
    let told = false;
    const tell = (completed: boolean, statusCode: number): void => {
      if (told) return;
      told = true;
      signal.removeEventListener('abort', cutShort);
      done(completed, statusCode);
    };
    const cutShort = (): void => tell(false, 0);
    signal.addEventListener('abort', cutShort, { once: true });
    try {
      await next();
    } catch (error) {
      tell(true, 500);
      throw error;
    }
    tell(true, x.c.res.status);
    return undefined;
  };
  return async (c, next) => {
    const env = c.env as { incoming?: IncomingMessage; outgoing?: ServerResponse } | undefined;
    const x: Exchange = { c, incoming: env?.incoming, outgoing: env?.outgoing, done: undefined };
    const outcome = await engine.run(c, c, x, x);
    switch (outcome.kind) {
      case 'skip':
        await next();
        return undefined;
      case 'gone':
        return c.body(null, 499); // the client went away while held: nobody reads this
      case 'allow':
        for (const [name, value] of outcome.headers) c.header(name, value);
        return proceed(x, next);
      case 'limit': {
        const { info } = outcome;
        if (onLimit === undefined) return send(c, info.problem, info.headers);
        for (const [name, value] of info.headers) c.header(name, value);
        return guarded('onLimit', x, () => onLimit(c, info));
      }
      case 'error': {
        if (onError === undefined) return send(c, outcome.info.problem, failureHeaders(outcome.info.statusCode));
        let passed = false;
        const pass = async (): Promise<void> => {
          passed = true;
          await next();
        };
        const answer = await guarded('onError', x, () => onError(outcome.error, c, pass, outcome.info));
        return passed ? undefined : (answer ?? undefined);
      }
    }
  };
}
