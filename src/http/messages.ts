/**
 * The messages the HTTP adapters publish on their diagnostics channels
 * (src/diagnostics.ts): `rateLimit` on `tokenpace:http:decision` and
 * `tokenpace:http:error`, `throttleInterceptor` on `tokenpace:http:client:*`.
 */

import type { IncomingMessage } from 'node:http';
import type { Decision } from '../meters/decision.js';

/** `tokenpace:http:decision`: one per decided request. */
export interface HttpDecisionMessage {
  readonly req: IncomingMessage;
  readonly key: string;
  readonly cost: number;
  readonly decision: Decision;
  /** How long the request was held (with `maxWait`), ms; 0 if it was not. */
  readonly waitedMs: number;
}

/** `tokenpace:http:error`: the middleware could not decide. */
export interface HttpErrorMessage {
  readonly req: IncomingMessage;
  /** Where it failed. */
  readonly stage: 'key' | 'cost' | 'skip' | 'limiter';
  readonly error: unknown;
  /** The status answered (500, 503), or 0 if `onError` handled it. */
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
 * `tokenpace:http:client:refused`: a request failed before it was sent: its
 * origin's scheduler rejected it, or its origin's pause outlasts its `maxWait`.
 * (The channel keeps its first name; the act is a rejection.)
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
  /** Which header asked for it. */
  readonly source: 'retry-after' | 'ratelimit';
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

/** @deprecated The old name of {@link HttpDecisionMessage} (the message is HTTP's only). */
export type DecisionMessage = HttpDecisionMessage;
/** @deprecated The old name of {@link HttpErrorMessage} (the message is HTTP's only). */
export type ErrorMessage = HttpErrorMessage;
/** @deprecated The old name of {@link ClientRejectedMessage} ("reject" is the word for a request failed with an error). */
export type ClientRefusedMessage = ClientRejectedMessage;
