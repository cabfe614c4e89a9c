/**
 * `rateLimit`: the 429 middleware, for node:http, Connect, Express and (as an
 * `onRequest` hook) Fastify.
 *
 * Each request is mapped to a key (the client's address by default, IPv6
 * grouped by /64; see client-address.ts) and a cost (1 by default), and the
 * limiter decides: admitted requests go on with `RateLimit-Policy` and
 * `RateLimit` headers (see headers.ts for the draft followed); refused ones
 * get status 429, `Retry-After` in whole seconds rounded up (at least 1), the
 * same headers and an RFC 9457 `application/problem+json` body, unless
 * `onLimit` answers instead.
 *
 * With `maxWait`, a request that would be refused is held instead, in the
 * limiter's own FIFO of reservations, until its tokens are there, as long as
 * that is within `maxWait`; past that it is refused at once (never held only
 * to be refused later). At most `maxQueue` requests are held at a time; beyond
 * that the decision is immediate again, so a flood costs a refusal per
 * request and no memory. A held request whose client goes away is dropped and
 * its reservation given back.
 *
 * Failures never take the server down and never leave an unhandled
 * rejection: a `key`, `cost` or `skip` function that throws answers 500; a
 * limiter that rejects (a store that failed with a fail-closed policy)
 * answers 503 with `Retry-After: 1`; `onError` can answer otherwise (for
 * example call `next()` to fail open). A cost above the limiter's burst can
 * never conform and answers 500 (the error, naming both numbers, is published
 * on `tokenpace:http:error`).
 */

import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { type Clock, systemClock } from '../clock.js';
import { decisionChannel, errorChannel } from '../diagnostics.js';
import { InvalidOptionError, isTokenpaceError } from '../errors.js';
import { KeyedLimiter } from '../keyed/keyed-limiter.js';
import {
  type DurationInput,
  parseDuration,
  parseRate,
  parseSizeOption,
  type RateInput,
  type SizeInput,
} from '../units.js';
import { addressKey, clientAddress, compileTrust, type ProxyHeader, type TrustProxy } from './client-address.js';
import {
  formatPolicy,
  formatRateLimitQuoted,
  type PolicyWindow,
  policyWindow,
  retryAfterSeconds,
  sfString,
} from './headers.js';
import type { HttpDecisionMessage, HttpErrorMessage } from './messages.js';
import type { Decision, RateLimitDecider } from './types.js';

/** The problem type the draft registers for a refused request. */
export const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/** An RFC 9457 problem details object, as the 429, 500 and 503 bodies carry. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

/** What `onLimit` is told about a refused request. */
export interface LimitInfo {
  readonly key: string;
  readonly cost: number;
  readonly decision: Decision;
  /** The `Retry-After` value, whole seconds (>= 1). */
  readonly retryAfterSeconds: number;
  /** The header fields the default answer sends (already set on the response for node:http/Express). */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** The body the default answer sends. */
  readonly problem: ProblemDetails;
}

/** What `onError` is told. */
export interface ErrorInfo {
  /** Where it failed: a user function (`key`, `cost`, `skip`) or the limiter itself. */
  readonly stage: 'key' | 'cost' | 'skip' | 'limiter';
  /** The status the default answer sends: 500, or 503 for a limiter that could not decide. */
  readonly statusCode: number;
  readonly problem: ProblemDetails;
}

/** Options for {@link rateLimit}. `Req`/`Res` are the framework's request and response types. */
export interface RateLimitOptions<Req = IncomingMessage, Res = ServerResponse> {
  /**
   * The limiter that decides: a `KeyedLimiter` (any store) or any object with
   * its `tryTake(key, cost)` and `take(key, cost, { signal, maxWait })`.
   * Give either this or `rate` and `burst`.
   */
  limiter?: RateLimitDecider;
  /** Each key's rate (with `burst`, instead of `limiter`): a number per second or a string such as `'100/min'`. */
  rate?: RateInput;
  /** Each key's burst (with `rate`). */
  burst?: SizeInput;
  /** A bucket over all keys: a request needs tokens in both, and neither is charged if either refuses. */
  global?: { rate: RateInput; burst: SizeInput };
  /**
   * With `rate`: the most keys kept in memory (the limiter's `MemoryStore`: full buckets go first,
   * then the least recently used). @default 100_000
   */
  maxKeys?: number;
  /** With `rate`: the time source of the buckets; also times `maxWait` holds. @default systemClock */
  clock?: Clock;
  /**
   * The request's key. @default the client's address (see `trustProxy`),
   * IPv6 grouped by /64
   */
  key?: (req: Req) => string | Promise<string>;
  /** The request's cost, a number >= 0. @default 1 */
  cost?: (req: Req) => number | Promise<number>;
  /** Requests for which this returns true pass without being counted or given headers. */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /**
   * Which forwarding hops to believe for the default key: `false` (the
   * socket's peer only), `true` (all), a hop count, a list of proxy
   * addresses/CIDR blocks, or a predicate `(address, hop) => boolean`.
   * @default false
   */
  trustProxy?: TrustProxy;
  /** The header that lists the forwarding chain, read only with `trustProxy`. @default 'x-forwarded-for' */
  proxyHeader?: ProxyHeader;
  /**
   * Hold a request that would be refused up to this long (ms or `'250ms'`)
   * until it conforms, instead of refusing it. @default 0 (refuse at once)
   */
  maxWait?: DurationInput;
  /** With `maxWait`: the most requests held at once; beyond that, decisions are immediate. @default 1000 */
  maxQueue?: number;
  /** The policy name in the `RateLimit-Policy` and `RateLimit` fields. @default 'default' */
  policyName?: string;
  /**
   * What `RateLimit-Policy` advertises, when `limiter` is given: its rate and
   * burst. Without it, the limiter's own numeric `rate` and `burst`
   * properties are used if it has them; otherwise the field is left out.
   * `false` leaves it out always.
   */
  policy?: { rate: RateInput; burst: SizeInput } | false;
  /** Send the `RateLimit-Policy` and `RateLimit` fields. @default true */
  headers?: boolean;
  /**
   * Answers a refused request instead of the default 429. It must end the
   * response (send the reply). The rate-limit fields and `Retry-After` are
   * already set on the response (the reply, for Fastify).
   */
  onLimit?: (req: Req, res: Res, info: LimitInfo) => void | Promise<void>;
  /**
   * Answers a request the middleware could not decide instead of the default
   * 500/503. It must end the response, or (node:http/Express) call `next()` to
   * let the request through unlimited.
   */
  onError?: (error: unknown, req: Req, res: Res, next: () => void, info: ErrorInfo) => void | Promise<void>;
}

/** A Connect/Express/node:http middleware. */
export type RateLimitMiddleware = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

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

type Outcome =
  | { readonly kind: 'skip' }
  | { readonly kind: 'allow'; readonly headers: ReadonlyArray<readonly [string, string]> }
  | { readonly kind: 'limit'; readonly info: LimitInfo }
  | { readonly kind: 'error'; readonly error: unknown; readonly info: ErrorInfo }
  | { readonly kind: 'gone' };

const SKIP: Outcome = Object.freeze({ kind: 'skip' });
const GONE: Outcome = Object.freeze({ kind: 'gone' });
const NO_HEADERS: ReadonlyArray<readonly [string, string]> = Object.freeze([]);
const DEFAULT_MAX_QUEUE = 1000;
const PROBLEM_TYPE = 'application/problem+json';

/** The framework-neutral part: from a request to an outcome. */
function createEngine<Req, Res>(options: RateLimitOptions<Req, Res>) {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'Expected rateLimit options to be an object');
  }
  let limiter: RateLimitDecider;
  let policy: PolicyWindow | undefined;
  let advertisedBurst = 0; // the burst, when known: the `limit` of a refusal made from a WaitTooLongError
  if (options.limiter !== undefined) {
    if (options.rate !== undefined || options.burst !== undefined || options.global !== undefined) {
      throw new InvalidOptionError(
        'limiter',
        options.limiter,
        'Give either `limiter` or `rate`/`burst`/`global`, not both: the limiter carries its own limits',
      );
    }
    limiter = options.limiter;
    if (typeof limiter.tryTake !== 'function' || typeof limiter.take !== 'function') {
      throw new InvalidOptionError(
        'limiter',
        limiter,
        'Expected `limiter` to have tryTake(key, cost) and take(key, cost, options)',
      );
    }
    const own = limiter as { rate?: unknown; burst?: unknown };
    if (options.policy) {
      advertisedBurst = parseSizeOption(options.policy.burst, 'burst');
      policy = policyWindow(parseRate(options.policy.rate), advertisedBurst);
    } else if (options.policy === undefined && typeof own.rate === 'number' && typeof own.burst === 'number') {
      advertisedBurst = own.burst;
      policy = policyWindow(own.rate, own.burst);
    }
  } else {
    if (options.rate === undefined || options.burst === undefined) {
      throw new InvalidOptionError(
        'rate',
        options.rate,
        'rateLimit needs either `limiter` or both `rate` and `burst` (e.g. { rate: 20, burst: 40 })',
      );
    }
    const made = new KeyedLimiter({
      rate: options.rate,
      burst: options.burst,
      global: options.global,
      maxKeys: options.maxKeys,
      clock: options.clock,
    });
    limiter = made;
    advertisedBurst = made.burst;
    if (options.policy !== false) policy = policyWindow(made.rate, made.burst);
  }
  const clock = options.clock ?? systemClock;
  const policyName = options.policyName ?? 'default';
  const quotedName = sfString(policyName); // validates, once
  const sendHeaders = options.headers !== false;
  const policyHeader = sendHeaders && policy !== undefined ? formatPolicy(policyName, policy) : undefined;
  const maxWaitMs = options.maxWait === undefined ? 0 : parseDuration(options.maxWait);
  const algorithm = (limiter as { algorithm?: unknown }).algorithm;
  if (maxWaitMs > 0 && (algorithm === 'fixed-window' || algorithm === 'sliding-window')) {
    // Holding a request is take(): a reservation in a token bucket. A window limiter has no take().
    throw new InvalidOptionError(
      'maxWait',
      options.maxWait,
      `\`maxWait\` holds requests with the limiter's take(), which a '${algorithm}' limiter does not have: ` +
        'remove `maxWait` (refusals then carry Retry-After), or give a token-bucket limiter (rate and burst)',
    );
  }
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  if (!(Number.isInteger(maxQueue) && maxQueue >= 0)) {
    throw new InvalidOptionError(
      'maxQueue',
      maxQueue,
      `Expected \`maxQueue\` to be an integer >= 0, got ${String(maxQueue)}`,
    );
  }
  const trust = compileTrust(options.trustProxy);
  const proxyHeader = options.proxyHeader ?? 'x-forwarded-for';
  if (proxyHeader !== 'x-forwarded-for' && proxyHeader !== 'forwarded') {
    throw new InvalidOptionError(
      'proxyHeader',
      proxyHeader,
      "Expected `proxyHeader` to be 'x-forwarded-for' or 'forwarded'",
    );
  }
  const { key: keyFn, cost: costFn, skip: skipFn } = options;
  let held = 0;

  const rateHeaders = (decision: Decision): Array<[string, string]> => {
    if (!sendHeaders) return [];
    const list: Array<[string, string]> = [];
    if (policyHeader !== undefined) list.push(['RateLimit-Policy', policyHeader]);
    list.push(['RateLimit', formatRateLimitQuoted(quotedName, decision)]);
    return list;
  };

  const refusedAfterWait = (retryAfterMs: number): Decision => ({
    allowed: false,
    remaining: 0,
    retryAfterMs,
    resetAfterMs: retryAfterMs,
    limit: advertisedBurst,
  });

  /** Holds the request (with `maxWait`) until it conforms; `undefined` if the client went away meanwhile. */
  const hold = async (key: string, cost: number, res: ServerResponse): Promise<[Decision, number] | undefined> => {
    held++;
    const abort = new AbortController();
    const onClose = (): void => abort.abort();
    res.once('close', onClose);
    const startMs = clock.now();
    try {
      const decision = await limiter.take(key, cost, { signal: abort.signal, maxWait: maxWaitMs });
      return [decision, clock.now() - startMs];
    } catch (error) {
      if (abort.signal.aborted) return undefined;
      if (isTokenpaceError(error, 'ERR_WAIT_TOO_LONG')) return [refusedAfterWait(error.retryAfterMs), 0];
      throw error;
    } finally {
      held--;
      res.off('close', onClose);
    }
  };

  const errorOutcome = (stage: ErrorInfo['stage'], error: unknown, raw: IncomingMessage): Outcome => {
    const unavailable = stage === 'limiter' && !isTokenpaceError(error, 'ERR_COST_EXCEEDS_CAPACITY');
    const statusCode = unavailable ? 503 : 500;
    const problem: ProblemDetails = unavailable
      ? {
          type: 'about:blank',
          title: 'Service Unavailable',
          status: 503,
          detail: 'The rate limiter could not decide this request; retry shortly.',
        }
      : {
          type: 'about:blank',
          title: 'Internal Server Error',
          status: 500,
          detail: `The rate limiter could not evaluate this request (${stage}).`,
        };
    if (errorChannel.hasSubscribers) {
      errorChannel.publish({ req: raw, stage, error, statusCode } satisfies HttpErrorMessage);
    }
    return { kind: 'error', error, info: { stage, statusCode, problem } };
  };

  /** The outcome of a decision. */
  const outcomeOf = (
    raw: IncomingMessage,
    key: string,
    cost: number,
    decision: Decision,
    waitedMs: number,
  ): Outcome => {
    if (decisionChannel.hasSubscribers) {
      decisionChannel.publish({ req: raw, key, cost, decision, waitedMs } satisfies HttpDecisionMessage);
    }
    if (decision.allowed) return { kind: 'allow', headers: sendHeaders ? rateHeaders(decision) : NO_HEADERS };
    const seconds = retryAfterSeconds(decision.retryAfterMs);
    const headers = rateHeaders(decision);
    headers.push(['Retry-After', String(seconds)]);
    const problem: ProblemDetails = {
      type: QUOTA_EXCEEDED,
      title: 'Too Many Requests',
      status: 429,
      detail: `Rate limit exceeded; retry in ${seconds} s.`,
      'violated-policies': [policyName],
    };
    return { kind: 'limit', info: { key, cost, decision, retryAfterSeconds: seconds, headers, problem } };
  };

  // From a request to an outcome. Written as a chain of steps that stay synchronous as long as the
  // user's functions return plain values, so the common path costs one promise: the limiter's.

  const decideNow = (
    raw: IncomingMessage,
    res: ServerResponse,
    key: string,
    cost: number,
  ): Outcome | Promise<Outcome> => {
    if (maxWaitMs > 0 && held < maxQueue) {
      return hold(key, cost, res).then(
        (decided) => (decided === undefined ? GONE : outcomeOf(raw, key, cost, decided[0], decided[1])),
        (error: unknown) => errorOutcome('limiter', error, raw),
      );
    }
    return decideAsync(raw, key, cost);
  };

  // An async function rather than .then() callbacks: no closure is made per request.
  const decideAsync = async (raw: IncomingMessage, key: string, cost: number): Promise<Outcome> => {
    let decision: Decision;
    try {
      decision = await limiter.tryTake(key, cost);
    } catch (error) {
      return errorOutcome('limiter', error, raw);
    }
    return outcomeOf(raw, key, cost, decision, 0);
  };

  const checkCost = (value: unknown): number => {
    if (typeof value !== 'number' || !(value >= 0) || value === Number.POSITIVE_INFINITY) {
      throw new TypeError(`cost(req) must return a finite number >= 0, got ${String(value)}`);
    }
    return value;
  };

  const withKey = (req: Req, raw: IncomingMessage, res: ServerResponse, key: string): Outcome | Promise<Outcome> => {
    if (costFn === undefined) return decideNow(raw, res, key, 1);
    let result: number | Promise<number>;
    try {
      result = costFn(req);
      if (typeof result === 'number') return decideNow(raw, res, key, checkCost(result));
    } catch (error) {
      return errorOutcome('cost', error, raw);
    }
    return Promise.resolve(result).then(
      (cost) => {
        try {
          return decideNow(raw, res, key, checkCost(cost));
        } catch (error) {
          return errorOutcome('cost', error, raw);
        }
      },
      (error: unknown) => errorOutcome('cost', error, raw),
    );
  };

  const checkKey = (value: unknown): string => {
    if (typeof value !== 'string') throw new TypeError(`key(req) must return a string, got ${typeof value}`);
    return value;
  };

  const unskipped = (req: Req, raw: IncomingMessage, res: ServerResponse): Outcome | Promise<Outcome> => {
    let result: string | Promise<string>;
    try {
      if (keyFn === undefined) return withKey(req, raw, res, addressKey(clientAddress(raw, trust, proxyHeader)));
      result = keyFn(req);
      if (typeof result === 'string') return withKey(req, raw, res, result);
    } catch (error) {
      return errorOutcome('key', error, raw);
    }
    return Promise.resolve(result).then(
      (key) => {
        try {
          return withKey(req, raw, res, checkKey(key));
        } catch (error) {
          return errorOutcome('key', error, raw);
        }
      },
      (error: unknown) => errorOutcome('key', error, raw),
    );
  };

  const run = (req: Req, raw: IncomingMessage, res: ServerResponse): Outcome | Promise<Outcome> => {
    if (skipFn === undefined) return unskipped(req, raw, res);
    let result: boolean | Promise<boolean>;
    try {
      result = skipFn(req);
    } catch (error) {
      return errorOutcome('skip', error, raw);
    }
    if (typeof result === 'boolean') return result ? SKIP : unskipped(req, raw, res);
    return Promise.resolve(result).then(
      (skipped) => (skipped === true ? SKIP : unskipped(req, raw, res)),
      (error: unknown) => errorOutcome('skip', error, raw),
    );
  };

  return { run, onLimit: options.onLimit, onError: options.onError };
}

/** Ends `res` with a problem details body, unless something was already sent. */
function sendProblem(
  res: ServerResponse,
  problem: ProblemDetails,
  headers: ReadonlyArray<readonly [string, string]>,
): void {
  if (res.headersSent || res.writableEnded) return;
  res.statusCode = problem.status;
  for (const [name, value] of headers) res.setHeader(name, value);
  res.setHeader('Content-Type', PROBLEM_TYPE);
  res.end(JSON.stringify(problem));
}

/** The last resort when a user callback (onLimit, onError, next) itself failed. */
function salvage(res: ServerResponse): void {
  if (!res.headersSent) {
    sendProblem(
      res,
      { type: 'about:blank', title: 'Internal Server Error', status: 500, detail: 'The request could not be handled.' },
      NO_HEADERS,
    );
  } else if (!res.writableEnded) {
    res.destroy();
  }
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
          sendProblem(res, outcome.info.problem, outcome.info.statusCode === 503 ? [['Retry-After', '1']] : NO_HEADERS);
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

/**
 * The same limiter as a Fastify `onRequest` hook:
 * `fastify.addHook('onRequest', rateLimit.fastify({ rate: 20, burst: 40 }))`.
 * `key`, `cost`, `skip`, `onLimit` and `onError` receive Fastify's request
 * and reply; the default key is still the socket's peer (with `trustProxy`
 * as above, independent of Fastify's own `trustProxy`).
 */
function fastifyHook<
  Req extends FastifyRequestLike = FastifyRequestLike,
  Rep extends FastifyReplyLike = FastifyReplyLike,
>(options: RateLimitOptions<Req, Rep>): RateLimitHook<Req, Rep> {
  const engine = createEngine(options);
  const send = (reply: Rep, problem: ProblemDetails, headers: ReadonlyArray<readonly [string, string]>): void => {
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
          send(reply, outcome.info.problem, outcome.info.statusCode === 503 ? [['Retry-After', '1']] : NO_HEADERS);
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

rateLimit.fastify = fastifyHook;

/** Alias of {@link rateLimit.fastify}. */
export const rateLimitHook = fastifyHook;
