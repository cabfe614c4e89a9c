/**
 * The framework-neutral part of `rateLimit`: from a request to an
 * {@link Outcome} (skip, allow, limit, error, or gone). The adapters
 * (middleware.ts for node:http/Connect/Express, fastify.ts, hono.ts, koa.ts)
 * only apply it; what it needs of the connection is a {@link Transport}.
 *
 * Each request is mapped to a key (the client's address by default, see
 * client-address.ts), a cost (1 by default) and, with limits by plan, its
 * limits (whose policy its header fields advertise), and the limiter decides at
 * once, or with `maxWait` holds the request in its own FIFO of reservations
 * (at most `maxQueue` at a time; beyond that the decision is immediate).
 * The decision is put on the request (`req.rateLimit`) and turned into header
 * fields added to those of earlier limiters (response.ts).
 *
 * Invariants: a request is decided once, and nothing that fails becomes an
 * unhandled rejection or a crash: a `key`, `cost`, `skip`, `limits` or `plan` function that
 * throws, rejects, returns a bad value or does not settle within
 * `functionTimeout`, or a limiter that rejects, is an `error` outcome (and a
 * `tokenpace:http:error` message). A held request whose client goes away is
 * `gone`, and its reservation is given back. With `skipSuccessfulRequests` or
 * `skipFailedRequests`, an admitted request's cost is credited back once its
 * response is done, if its outcome says so. docs/internals/http.md says why
 * the steps are written as they are.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { decisionChannel, errorChannel } from '../diagnostics.js';
import { isTokenpaceError } from '../errors.js';
import type { BucketParams } from '../meters/bucket.js';
import { addressKey, forwardedClient } from './client-address.js';
import { retryAfterSeconds } from './headers.js';
import type { HttpDecisionMessage, HttpErrorMessage } from './messages.js';
import {
  type ErrorInfo,
  type LimitInfo,
  type RateLimitOptions,
  type RequestRateLimit,
  resolveRateLimitOptions,
} from './rate-limit-options.js';
import { type FieldReader, failureProblem, type HeaderList, refusalProblem } from './response.js';
import type { Transport } from './transport.js';
import type { Decision } from './types.js';

/** What became of a request; the adapters apply it. */
export type Outcome =
  | { readonly kind: 'skip' }
  | { readonly kind: 'allow'; readonly headers: HeaderList }
  | { readonly kind: 'limit'; readonly info: LimitInfo }
  | { readonly kind: 'error'; readonly error: unknown; readonly info: ErrorInfo }
  | { readonly kind: 'gone' };

const SKIP: Outcome = Object.freeze({ kind: 'skip' });
const GONE: Outcome = Object.freeze({ kind: 'gone' });

/**
 * One request on its way to an outcome: the framework's request and response, the connection's
 * (node:http's, the same objects for node:http), and its key and cost, set as the steps find them.
 */
interface Pending<Req, Res, Raw, RawRes> {
  readonly req: Req;
  readonly res: Res;
  readonly raw: Raw;
  readonly rawRes: RawRes;
  key: string;
  cost: number;
  /** With limits by plan, the request's; `undefined`: the limiter's own. */
  limits: BucketParams | undefined;
}

/** A held request's decision, and how long it was held. */
interface Held {
  readonly decision: Decision;
  readonly waitedMs: number;
}

/** What an adapter tells the engine about its framework. */
export interface EngineAdapter<Req, Res, Raw, RawRes> {
  /** The connection under the framework's request and response. */
  readonly transport: Transport<Raw, RawRes>;
  /** Reads a field set on the response so far (lowercase name): stacked limiters add to it. */
  readonly readField: FieldReader<Res>;
  /**
   * The client's address as the framework resolved it, used for the default key when `trustProxy`
   * is not given; `undefined`: the socket's peer.
   */
  readonly frameworkAddress?: (req: Req) => string | undefined;
  /** Puts the decision where the framework's handlers look for it. @default `req[name] = decision` */
  readonly setDecision?: (req: Req, name: string, decision: RequestRateLimit) => void;
}

/** The engine of one `rateLimit`: `run` decides a request; `onLimit`/`onError` are the user's answers, if any. */
export interface Engine<Req, Res, Raw = IncomingMessage, RawRes = ServerResponse> {
  /** `req`/`res` are the framework's, `raw`/`rawRes` the connection's (the same objects for node:http). */
  run(req: Req, res: Res, raw: Raw, rawRes: RawRes): Outcome | Promise<Outcome>;
  readonly onLimit: RateLimitOptions<Req, Res>['onLimit'];
  readonly onError: RateLimitOptions<Req, Res>['onError'];
  /** Publishes on `tokenpace:http:error` a failure the adapter met while answering. */
  failed(raw: Raw, stage: HttpErrorMessage['stage'], error: unknown, statusCode: number): void;
}

/** Checks `options` (throwing on a bad one) and makes the engine that decides requests with them. */
export function createEngine<Req, Res, Raw, RawRes>(
  options: RateLimitOptions<Req, Res>,
  adapter: EngineAdapter<Req, Res, Raw, RawRes>,
): Engine<Req, Res, Raw, RawRes> {
  const {
    limiter,
    planned,
    advertisedCapacity,
    clock,
    policyName,
    fields,
    maxWaitMs,
    maxQueue,
    trust,
    trustGiven,
    proxyHeader,
    ipv6Subnet,
    functionTimeoutMs,
    requestProperty,
    giveBack,
    key: keyFn,
    cost: costFn,
    skip: skipFn,
    onLimit,
    onError,
  } = resolveRateLimitOptions(options);
  const { readField, transport, setDecision } = adapter;
  const frameworkAddress = trustGiven ? undefined : adapter.frameworkAddress;
  let held = 0;

  const failed = (raw: Raw, stage: HttpErrorMessage['stage'], error: unknown, statusCode: number): void => {
    if (errorChannel.hasSubscribers) {
      errorChannel.publish({ req: transport.message(raw), stage, error, statusCode } satisfies HttpErrorMessage);
    }
  };

  const refusedAfterWait = (retryAfterMs: number, limits: BucketParams | undefined): Decision => ({
    allowed: false,
    remaining: 0,
    retryAfterMs,
    resetAfterMs: retryAfterMs,
    limit: limits?.burst ?? advertisedCapacity,
  });

  /** Holds the request (with `maxWait`) until it conforms; `undefined` if the client went away meanwhile. */
  const hold = async ({ key, cost, limits, rawRes }: Pending<Req, Res, Raw, RawRes>): Promise<Held | undefined> => {
    held++;
    const abort = new AbortController();
    const stopListening = transport.onAbort(rawRes, () => abort.abort());
    const startMs = clock.now();
    try {
      const options = { signal: abort.signal, maxWait: maxWaitMs };
      const decision =
        limits === undefined
          ? await limiter.take(key, cost, options)
          : await (planned as NonNullable<typeof planned>).limiter.takeOn(limits, key, cost, options);
      return { decision, waitedMs: clock.now() - startMs };
    } catch (error) {
      if (abort.signal.aborted) return undefined;
      if (!isTokenpaceError(error, 'ERR_WAIT_TOO_LONG')) throw error;
      return { decision: refusedAfterWait(error.retryAfterMs, limits), waitedMs: 0 };
    } finally {
      held--;
      stopListening();
    }
  };

  const errorOutcome = (stage: ErrorInfo['stage'], error: unknown, raw: Raw): Outcome => {
    const unavailable = stage === 'limiter' && !isTokenpaceError(error, 'ERR_COST_EXCEEDS_CAPACITY');
    const statusCode = unavailable ? 503 : 500;
    failed(raw, stage, error, statusCode);
    return { kind: 'error', error, info: { stage, statusCode, problem: failureProblem(stage, unavailable) } };
  };

  /** Once an admitted request's response is done: credits its cost back if its outcome says so. */
  const watchOutcome = ({ req, res, raw, rawRes, key, cost, limits }: Pending<Req, Res, Raw, RawRes>): void => {
    const { successful, failed: failedToo, wasSuccessful, credit } = giveBack as NonNullable<typeof giveBack>;
    transport.onDone(rawRes, (completed, statusCode) => {
      const give = (success: boolean): void => {
        if (!(success ? successful : failedToo)) return;
        const given =
          limits === undefined
            ? credit(key, cost)
            : (planned as NonNullable<typeof planned>).limiter.creditOn(limits, key, cost);
        given.catch((error: unknown) => failed(raw, 'credit', error, 0));
      };
      if (!completed) return give(false); // cut short: a failure
      if (wasSuccessful === undefined) return give(statusCode < 400);
      try {
        const verdict = wasSuccessful(req, res);
        if (typeof verdict === 'boolean') give(verdict);
        else Promise.resolve(verdict).then(give, (error: unknown) => failed(raw, 'credit', error, 0));
      } catch (error) {
        failed(raw, 'credit', error, 0);
      }
    });
  };

  /** The outcome of `pending`'s decision, `waitedMs` after it arrived (0 unless held). */
  const outcomeOf = (pending: Pending<Req, Res, Raw, RawRes>, decision: Decision, waitedMs: number): Outcome => {
    const { req, res, raw, key, cost } = pending;
    if (decisionChannel.hasSubscribers) {
      const message = { req: transport.message(raw), key, cost, decision, waitedMs };
      decisionChannel.publish(message satisfies HttpDecisionMessage);
    }
    // Earlier limiters' fields, if any, are added to (stacked limiters); the common case reads one field.
    const own = pending.limits === undefined ? undefined : planned?.policyOf?.(pending.limits);
    let name = policyName;
    let headers: Array<[string, string]>;
    if (fields.marker === undefined || readField(res, fields.marker) === undefined)
      headers = fields.first(decision, own);
    else ({ name, fields: headers } = fields.stacked(decision, res, readField, own));
    if (requestProperty !== undefined) {
      const info: RequestRateLimit = {
        allowed: decision.allowed,
        remaining: decision.remaining,
        retryAfterMs: decision.retryAfterMs,
        resetAfterMs: decision.resetAfterMs,
        limit: decision.limit,
        policy: name,
        key,
        cost,
      };
      if (setDecision === undefined) (req as unknown as Record<string, unknown>)[requestProperty] = info;
      else setDecision(req, requestProperty, info);
    }
    if (decision.allowed) {
      if (giveBack !== undefined && cost > 0) watchOutcome(pending);
      return { kind: 'allow', headers };
    }
    const seconds = retryAfterSeconds(decision.retryAfterMs);
    headers.push(['Retry-After', String(seconds)]);
    const problem = refusalProblem(seconds, name);
    return { kind: 'limit', info: { key, cost, decision, retryAfterSeconds: seconds, headers, problem } };
  };

  // From a request to an outcome: skip?, key, cost, decide. Each step stays synchronous while the
  // user's functions return plain values, and goes through a promise only when one returns one.

  /** Sets `pending`'s limits by plan, if there are any, then decides it. */
  const withCost = (pending: Pending<Req, Res, Raw, RawRes>): Outcome | Promise<Outcome> => {
    if (planned === undefined) return decide(pending);
    let result: BucketParams | Promise<BucketParams>;
    try {
      result = planned.of(pending.req, pending.key);
      if (!(result instanceof Promise)) {
        pending.limits = result;
        return decide(pending);
      }
    } catch (error) {
      return errorOutcome('limits', error, pending.raw);
    }
    return bounded(result, 'limits').then(
      (limits) => {
        pending.limits = limits;
        return decide(pending);
      },
      (error: unknown) => errorOutcome('limits', error, pending.raw),
    );
  };

  /** Decides `pending` (its key, cost and limits known): holds it with `maxWait`, else decides at once. */
  const decide = (pending: Pending<Req, Res, Raw, RawRes>): Outcome | Promise<Outcome> => {
    if (maxWaitMs > 0 && held < maxQueue) {
      return hold(pending).then(
        (done) => (done === undefined ? GONE : outcomeOf(pending, done.decision, done.waitedMs)),
        (error: unknown) => errorOutcome('limiter', error, pending.raw),
      );
    }
    return decideNow(pending);
  };

  /** Decides `pending` at once (`tryTake`). */
  const decideNow = async (pending: Pending<Req, Res, Raw, RawRes>): Promise<Outcome> => {
    let decision: Decision;
    try {
      const { key, cost, limits } = pending;
      decision = await (limits === undefined
        ? limiter.tryTake(key, cost)
        : (planned as NonNullable<typeof planned>).limiter.decideOn('try', limits, key, cost));
    } catch (error) {
      return errorOutcome('limiter', error, pending.raw);
    }
    return outcomeOf(pending, decision, 0);
  };

  /** A user function's promise, rejected with a `TimeoutError` if it has not settled within `functionTimeout`. */
  const bounded = <T>(value: T | Promise<T>, what: string): Promise<T> => {
    const promise = Promise.resolve(value);
    if (functionTimeoutMs === Number.POSITIVE_INFINITY) return promise;
    return new Promise<T>((resolve, reject) => {
      const timer = clock.setTimeout(() => {
        const message =
          `${what}(req) did not settle within ${functionTimeoutMs} ms (functionTimeout): ` +
          'make it settle (a lookup with its own timeout), or raise `functionTimeout`';
        reject(new DOMException(message, 'TimeoutError'));
      }, functionTimeoutMs);
      promise.then(
        (result) => {
          clock.clearTimeout(timer);
          resolve(result);
        },
        (error: unknown) => {
          clock.clearTimeout(timer);
          reject(error);
        },
      );
    });
  };

  const checkCost = (value: unknown): number => {
    if (typeof value !== 'number' || !(value >= 0) || value === Number.POSITIVE_INFINITY) {
      throw new TypeError(`cost(req) must return a finite number >= 0, got ${String(value)}`);
    }
    return value;
  };

  /** Sets `pending`'s cost (1 without a `cost` function), then decides it. */
  const withKey = (pending: Pending<Req, Res, Raw, RawRes>): Outcome | Promise<Outcome> => {
    if (costFn === undefined) return withCost(pending);
    let result: number | Promise<number>;
    try {
      result = costFn(pending.req);
      if (typeof result === 'number') {
        pending.cost = checkCost(result);
        return withCost(pending);
      }
    } catch (error) {
      return errorOutcome('cost', error, pending.raw);
    }
    return bounded(result, 'cost').then(
      (cost) => {
        try {
          pending.cost = checkCost(cost);
          return withCost(pending);
        } catch (error) {
          return errorOutcome('cost', error, pending.raw);
        }
      },
      (error: unknown) => errorOutcome('cost', error, pending.raw),
    );
  };

  const checkKey = (value: unknown): string => {
    if (typeof value !== 'string' || value.length === 0) {
      const got = typeof value === 'string' ? 'an empty string' : typeof value;
      throw new TypeError(`key(req) must return a non-empty string, got ${got}`);
    }
    return value;
  };

  /** The default key; `''` when the client's address is unknown. */
  const addressOf = (req: Req, raw: Raw): string => {
    const resolved = frameworkAddress?.(req);
    if (resolved !== undefined) return addressKey(resolved, ipv6Subnet);
    const peer = transport.peer(raw);
    const address =
      trust === undefined ? peer : forwardedClient(peer, transport.header(raw, proxyHeader), trust, proxyHeader);
    return addressKey(address, ipv6Subnet);
  };

  const unknownAddress = (raw: Raw): Outcome => {
    if (transport.closed(raw)) return GONE; // the connection closed: nobody to answer
    const message =
      "the client's address is unknown (the server listens on a Unix socket or a pipe, or the runtime " +
      'does not tell it): ' +
      'give `key`, or `trustProxy` to read it from the forwarding header';
    return errorOutcome('key', new TypeError(message), raw);
  };

  /** Sets `pending`'s key (the client's address without a `key` function), then goes on to its cost. */
  const unskipped = (pending: Pending<Req, Res, Raw, RawRes>): Outcome | Promise<Outcome> => {
    const { req, raw } = pending;
    let result: string | Promise<string>;
    try {
      if (keyFn === undefined) {
        const key = addressOf(req, raw);
        if (key === '') return unknownAddress(raw);
        pending.key = key;
        return withKey(pending);
      }
      result = keyFn(req);
      if (typeof result === 'string') {
        pending.key = checkKey(result);
        return withKey(pending);
      }
    } catch (error) {
      return errorOutcome('key', error, raw);
    }
    return bounded(result, 'key').then(
      (key) => {
        try {
          pending.key = checkKey(key);
          return withKey(pending);
        } catch (error) {
          return errorOutcome('key', error, raw);
        }
      },
      (error: unknown) => errorOutcome('key', error, raw),
    );
  };

  const run = (req: Req, res: Res, raw: Raw, rawRes: RawRes): Outcome | Promise<Outcome> => {
    const pending: Pending<Req, Res, Raw, RawRes> = { req, res, raw, rawRes, key: '', cost: 1, limits: undefined };
    if (skipFn === undefined) return unskipped(pending);
    let result: boolean | Promise<boolean>;
    try {
      result = skipFn(req);
    } catch (error) {
      return errorOutcome('skip', error, raw);
    }
    if (typeof result === 'boolean') return result ? SKIP : unskipped(pending);
    return bounded(result, 'skip').then(
      (skipped) => (skipped === true ? SKIP : unskipped(pending)),
      (error: unknown) => errorOutcome('skip', error, raw),
    );
  };

  return { run, onLimit, onError, failed };
}
