/**
 * Diagnostics channels (`node:diagnostics_channel`) of the HTTP adapters, as
 * undici publishes its own. Nothing is built or published unless someone
 * subscribes, so an unobserved server pays one property read per request.
 *
 * | channel                          | published when                                   | message |
 * |----------------------------------|--------------------------------------------------|---------|
 * | `tokenpace:http:decision`        | the middleware decided a request (admitted or 429) | {@link DecisionMessage} |
 * | `tokenpace:http:error`           | a `key`/`cost`/`skip` function threw, or the limiter rejected | {@link ErrorMessage} |
 * | `tokenpace:http:client:start`    | the interceptor sent a request to its origin     | {@link ClientStartMessage} |
 * | `tokenpace:http:client:refused`  | the interceptor refused a request (queue full, wait too long) | {@link ClientRefusedMessage} |
 * | `tokenpace:http:client:pause`    | an origin answered 429/503 asking to wait        | {@link ClientPauseMessage} |
 */

import { channel } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import type { Decision } from './types.js';

/** `tokenpace:http:decision`: one per decided request. */
export interface DecisionMessage {
  readonly req: IncomingMessage;
  readonly key: string;
  readonly cost: number;
  readonly decision: Decision;
  /** How long the request was held (with `maxWait`), ms; 0 if it was not. */
  readonly waitedMs: number;
}

/** `tokenpace:http:error`: the middleware could not decide. */
export interface ErrorMessage {
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

/** `tokenpace:http:client:refused`: the scheduler turned a request away. */
export interface ClientRefusedMessage {
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

/** The channel names, for `diagnostics_channel.subscribe(name, fn)`. */
export const channelNames = {
  decision: 'tokenpace:http:decision',
  error: 'tokenpace:http:error',
  clientStart: 'tokenpace:http:client:start',
  clientRefused: 'tokenpace:http:client:refused',
  clientPause: 'tokenpace:http:client:pause',
} as const;

export const decisionChannel = channel(channelNames.decision);
export const errorChannel = channel(channelNames.error);
export const clientStartChannel = channel(channelNames.clientStart);
export const clientRefusedChannel = channel(channelNames.clientRefused);
export const clientPauseChannel = channel(channelNames.clientPause);
