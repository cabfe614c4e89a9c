/**
 * The framework-neutral part of `rateLimit`: from a request to an
 * {@link Outcome} (skip, allow, limit, error, or gone). The adapters
 * (middleware.ts for node:http/Connect/Express, fastify.ts) only apply it.
 *
 * Each request is mapped to a key (the client's address by default, see
 * client-address.ts) and a cost (1 by default), and the limiter decides at
 * once, or with `maxWait` holds the request in its own FIFO of reservations
 * (at most `maxQueue` at a time; beyond that the decision is immediate).
 *
 * Invariants: a request is decided once, and nothing that fails becomes an
 * unhandled rejection or a crash: a `key`, `cost` or `skip` function that
 * throws or rejects, or a limiter that rejects, is an `error` outcome (and a
 * `tokenpace:http:error` message). A held request whose client goes away is
 * `gone`, and its reservation is given back. docs/internals/http.md says why
 * the steps are written as they are.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { decisionChannel, errorChannel } from '../diagnostics.js';
import { isTokenpaceError } from '../errors.js';
import { addressKey, clientAddress } from './client-address.js';
import { retryAfterSeconds } from './headers.js';
import type { HttpDecisionMessage, HttpErrorMessage } from './messages.js';
import {
  type ErrorInfo,
  type LimitInfo,
  type RateLimitOptions,
  resolveRateLimitOptions,
} from './rate-limit-options.js';
import { failureProblem, type HeaderList, NO_HEADERS, refusalProblem } from './response.js';
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

/** The engine of one `rateLimit`: `run` decides a request; `onLimit`/`onError` are the user's answers, if any. */
export interface Engine<Req, Res> {
  run(req: Req, raw: IncomingMessage, res: ServerResponse): Outcome | Promise<Outcome>;
  readonly onLimit: RateLimitOptions<Req, Res>['onLimit'];
  readonly onError: RateLimitOptions<Req, Res>['onError'];
}

/** Checks `options` (throwing on a bad one) and makes the engine that decides requests with them. */
export function createEngine<Req, Res>(options: RateLimitOptions<Req, Res>): Engine<Req, Res> {
  const {
    limiter,
    advertisedCapacity,
    clock,
    policyName,
    sendHeaders,
    rateHeaders,
    maxWaitMs,
    maxQueue,
    trust,
    proxyHeader,
    key: keyFn,
    cost: costFn,
    skip: skipFn,
    onLimit,
    onError,
  } = resolveRateLimitOptions(options);
  let held = 0;

  const refusedAfterWait = (retryAfterMs: number): Decision => ({
    allowed: false,
    remaining: 0,
    retryAfterMs,
    resetAfterMs: retryAfterMs,
    limit: advertisedCapacity,
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
    const problem = failureProblem(stage, unavailable);
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
    const problem = refusalProblem(seconds, policyName);
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

  return { run, onLimit, onError };
}
