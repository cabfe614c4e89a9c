/**
 * Diagnostics channels (`node:diagnostics_channel`): every part of tokenpace
 * that decides or fails publishes here, as undici publishes its own. Nothing
 * is built or published unless someone subscribes (`channel.hasSubscribers`),
 * so an unobserved process pays one property read per event.
 *
 * | channel                          | published when                                   | message |
 * |----------------------------------|--------------------------------------------------|---------|
 * | `tokenpace:http:decision`        | the middleware decided a request (admitted or 429) | {@link DecisionMessage} |
 * | `tokenpace:http:error`           | a `key`/`cost`/`skip` function threw, or the limiter rejected | {@link ErrorMessage} |
 * | `tokenpace:http:client:start`    | the interceptor sent a request to its origin     | {@link ClientStartMessage} |
 * | `tokenpace:http:client:refused`  | the interceptor refused a request (queue full, wait too long) | {@link ClientRefusedMessage} |
 * | `tokenpace:http:client:pause`    | an origin answered 429/503 asking to wait        | {@link ClientPauseMessage} |
 * | `tokenpace:keyed:decision`       | a KeyedLimiter's store answered `tryTake` or `take` | {@link KeyedDecisionMessage} |
 * | `tokenpace:keyed:refusal`        | a KeyedLimiter refused (`tryTake` refused, `take` over `maxWait` or denied) | {@link KeyedRefusalMessage} |
 * | `tokenpace:redis:degraded`       | a RedisStore's decisions start following its `onError` policy | {@link StoreDegradedMessage} |
 * | `tokenpace:redis:recovered`      | a RedisStore's Redis answers again               | {@link StoreRecoveredMessage} |
 * | `tokenpace:redis:failure`        | a call or probe to Redis failed or timed out     | {@link StoreFailureMessage} |
 *
 * The Redis channels carry what a store's events (`degraded`, `recovered`,
 * `failure`) carry, plus the store (a RedisStore, RedisWindowStore or
 * RedisFleetStore), so one subscriber sees every store of the process without
 * holding a reference to each.
 */

import { channel } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import type { RedisFleetStore } from './fleet/redis-fleet-store.js';
import type { KeyedLimiter } from './keyed/keyed-limiter.js';
import type { FailurePolicy, RedisStore } from './keyed/redis-store.js';
import type { StoreResult } from './keyed/store.js';
import type { RedisWindowStore } from './keyed/window-store.js';
import type { Decision } from './meters/decision.js';
import type { ActiveJob, RejectedJob } from './scheduler/options.js';

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

/** `tokenpace:keyed:decision`: a KeyedLimiter's store answered (`peek` is not published). */
export interface KeyedDecisionMessage {
  readonly limiter: KeyedLimiter;
  readonly key: string;
  readonly cost: number;
  /** `'try'` for `tryTake`, `'reserve'` for `take`. */
  readonly mode: 'try' | 'reserve';
  /**
   * The decision as the store made it. For `take`: `allowed` means reserved (charged); the caller
   * then waits `waitMs`. A `take` over `maxWait` is `allowed: false` with the wait it would have needed.
   */
  readonly decision: Decision;
  /** For `take`: how long the caller waits before acting, ms (0 = now); for `tryTake`, 0. */
  readonly waitMs: number;
  /** Who decided: the store, or a RedisStore's failure policy (`'allow'`, `'deny'`, `'local'`). */
  readonly source: StoreResult['source'];
}

/** `tokenpace:keyed:refusal`: a KeyedLimiter turned a request away. */
export interface KeyedRefusalMessage {
  readonly limiter: KeyedLimiter;
  readonly key: string;
  readonly cost: number;
  readonly mode: 'try' | 'reserve';
  /**
   * `'limit'`: the buckets do not hold the cost (`tryTake`); `'max-wait'`: the wait would exceed
   * `take`'s `maxWait` (nothing charged); `'store-unavailable'`: a RedisStore with `onError: 'deny'`
   * could not reach Redis.
   */
  readonly reason: 'limit' | 'max-wait' | 'store-unavailable';
  /** When to try again, ms. */
  readonly retryAfterMs: number;
}

/** `tokenpace:redis:degraded`: decisions now follow the store's policy. */
export interface StoreDegradedMessage {
  /** A `RedisStore`, a `RedisWindowStore`, or a `RedisFleetStore` (a fleet Scheduler's). */
  readonly store: RedisStore | RedisWindowStore | RedisFleetStore;
  readonly error: Error;
  readonly policy: FailurePolicy;
}

/** `tokenpace:redis:recovered`: Redis answers again. */
export interface StoreRecoveredMessage {
  readonly store: RedisStore | RedisWindowStore | RedisFleetStore;
  /** How long decisions followed the policy, ms. */
  readonly downMs: number;
}

/** `tokenpace:redis:failure`: one failed or timed-out call (or probe: `operations` 0). */
export interface StoreFailureMessage {
  readonly store: RedisStore | RedisWindowStore | RedisFleetStore;
  readonly error: Error;
  /** Decisions the failed call carried. */
  readonly operations: number;
}

/** `tokenpace:scheduler:start`: a Scheduler started a job (its `active` event). */
export interface SchedulerStartMessage {
  /** The Scheduler that started it. */
  readonly scheduler: object;
  readonly job: ActiveJob;
}

/** `tokenpace:scheduler:refused`: a Scheduler turned a job away or removed it before it started (its `rejected` event). */
export interface SchedulerRefusedMessage {
  readonly scheduler: object;
  /** `reason` is `queueFull`, `waitTooLong`, `costExceedsCapacity`, `aborted` or `cleared`; `error` carries `retryAfterMs` where one is known. */
  readonly job: RejectedJob;
}

/** `tokenpace:stream:wait`: a Throttle or a ThrottleGroup ran short of tokens and sleeps until they are there (once per wait, never per chunk). */
export interface StreamWaitMessage {
  /** The Throttle, or the ThrottleGroup for the group's own bucket. */
  readonly stream: object;
  /** How long it sleeps, ms. */
  readonly waitMs: number;
}

/** The channel names, for `diagnostics_channel.subscribe(name, fn)`. */
export const channelNames = {
  decision: 'tokenpace:http:decision',
  error: 'tokenpace:http:error',
  clientStart: 'tokenpace:http:client:start',
  clientRefused: 'tokenpace:http:client:refused',
  clientPause: 'tokenpace:http:client:pause',
  keyedDecision: 'tokenpace:keyed:decision',
  keyedRefusal: 'tokenpace:keyed:refusal',
  storeDegraded: 'tokenpace:redis:degraded',
  storeRecovered: 'tokenpace:redis:recovered',
  storeFailure: 'tokenpace:redis:failure',
  schedulerStart: 'tokenpace:scheduler:start',
  schedulerRefused: 'tokenpace:scheduler:refused',
  streamWait: 'tokenpace:stream:wait',
} as const;

export const decisionChannel = channel(channelNames.decision);
export const errorChannel = channel(channelNames.error);
export const clientStartChannel = channel(channelNames.clientStart);
export const clientRefusedChannel = channel(channelNames.clientRefused);
export const clientPauseChannel = channel(channelNames.clientPause);
export const keyedDecisionChannel = channel(channelNames.keyedDecision);
export const keyedRefusalChannel = channel(channelNames.keyedRefusal);
export const storeDegradedChannel = channel(channelNames.storeDegraded);
export const storeRecoveredChannel = channel(channelNames.storeRecovered);
export const storeFailureChannel = channel(channelNames.storeFailure);
export const schedulerStartChannel = channel(channelNames.schedulerStart);
export const schedulerRefusedChannel = channel(channelNames.schedulerRefused);
export const streamWaitChannel = channel(channelNames.streamWait);
