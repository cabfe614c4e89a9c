/**
 * The messages the HTTP adapters publish on their diagnostics channels
 * (src/diagnostics.ts): `rateLimit` on `tokenpace:http:decision` and
 * `tokenpace:http:error`, `throttleInterceptor` on `tokenpace:http:client:*`.
 */

import type { IncomingMessage } from 'node:http';
import type { Decision } from '../meters/decision.js';

/** `tokenpace:http:decision`: one per decided request. */
export interface HttpDecisionMessage {
  /** node:http's request; the web `Request` where there is none (Hono on Bun, Deno, Workers). */
  readonly req: IncomingMessage | Request;
  readonly key: string;
  readonly cost: number;
  readonly decision: Decision;
  /** How long the request was held (with `maxWait`), ms; 0 if it was not. */
  readonly waitedMs: number;
}

/**
 * `tokenpace:http:error`: the middleware could not decide a request, or could not answer or
 * finish it as it should. Every such failure is published, whoever answers it.
 */
export interface HttpErrorMessage {
  /** node:http's request; the web `Request` where there is none (Hono on Bun, Deno, Workers). */
  readonly req: IncomingMessage | Request;
  /**
   * Where it failed: a `key`, `cost` or `skip` function, or the limiter (the request could not be
   * decided); the user's `onLimit` or `onError`, which threw or rejected; `next`, the handler a
   * plain node:http middleware passed the request to, which threw; `response`, a refusal or failure
   * that could not be answered because the response's headers had gone out (the connection was
   * destroyed); `credit`, a cost that could not be given back (`skipSuccessfulRequests`, ...).
   */
  readonly stage:
    | 'key'
    | 'cost'
    | 'skip'
    | 'limits'
    | 'limiter'
    | 'onLimit'
    | 'onError'
    | 'next'
    | 'response'
    | 'credit';
  readonly error: unknown;
  /**
   * The status the middleware answered (500, 503), or 0 when it answered nothing: `onError` or the
   * framework's error path answers, the connection was destroyed, or the response was already done.
   */
  readonly statusCode: number;
}

/** `tokenpace:http:client:start`: a request left for its origin. */
export interface ClientStartMessage {
  readonly origin: string;
  readonly method: string;
  readonly path: string;
  /** How long it waited in the origin's scheduler, ms. */
  readonly waitedMs: number;
}

/**
 * `tokenpace:http:client:rejected`: a request was rejected before it was sent:
 * its origin's scheduler rejected it, or its origin's pause outlasts its `maxWait`.
 */
export interface ClientRejectedMessage {
  readonly origin: string;
  readonly method: string;
  readonly path: string;
  /** A `QueueFullError`, `WaitTooLongError` or `CostExceedsCapacityError`. */
  readonly error: unknown;
}

/** `tokenpace:http:client:pause`: an origin is paused. */
export interface ClientPauseMessage {
  readonly origin: string;
  readonly statusCode: number;
  /** How long from now nothing is sent to the origin, ms. */
  readonly delayMs: number;
  /**
   * Which header asked for it: `Retry-After`, a `RateLimit` item with r=0 on a refusal, or (with
   * `adaptive`) the quota the answers said was left, spent until its reset (`'quota'`).
   */
  readonly source: 'retry-after' | 'ratelimit' | 'quota';
}

/** `tokenpace:http:client:rate`: an origin's learned rate changed (`adaptive`). */
export interface ClientRateMessage {
  readonly origin: string;
  /** Requests per second from now on. */
  readonly rate: number;
  readonly previousRate: number;
  /** `'increase'`: answers without pushback; `'pushback'`: a 429/503 or RateLimit r=0; `'policy'`: an advertised quota. */
  readonly reason: 'increase' | 'pushback' | 'policy';
}
