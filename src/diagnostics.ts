/**
 * Diagnostics channels (`node:diagnostics_channel`): every part of tokenpace
 * that decides or fails publishes here, as undici publishes its own. A leaf:
 * channel names and channel objects only, importing nothing of tokenpace's;
 * each message type lives with the module that publishes it. Nothing is
 * built or published unless someone subscribes (`channel.hasSubscribers`), so
 * an unobserved process pays one property read per event.
 *
 * | channel                          | published by (message type's home)              | when |
 * |----------------------------------|-------------------------------------------------|------|
 * | `tokenpace:http:decision`        | `rateLimit` (`HttpDecisionMessage`, http/messages.ts) | a request was decided (admitted or 429) |
 * | `tokenpace:http:error`           | `rateLimit` (`HttpErrorMessage`, http/messages.ts) | a request could not be decided (`key`/`cost`/`skip`, the limiter), answered (`onLimit`/`onError` threw, headers already sent) or given back (`credit`) |
 * | `tokenpace:http:client:start`    | `throttleInterceptor` (`ClientStartMessage`, http/messages.ts) | a request left for its origin |
 * | `tokenpace:http:client:rejected` | `throttleInterceptor` (`ClientRejectedMessage`, http/messages.ts) | a request was rejected (queue full, wait too long) |
 * | `tokenpace:http:client:pause`    | `throttleInterceptor` (`ClientPauseMessage`, http/messages.ts) | an origin answered 429/503 asking to wait |
 * | `tokenpace:http:client:rate`     | `throttleInterceptor` with `adaptive` (`ClientRateMessage`, http/messages.ts) | an origin's learned rate changed |
 * | `tokenpace:keyed:decision`       | `KeyedLimiter` (`KeyedDecisionMessage`, keyed/keyed-limiter.ts) | its store answered `tryTake` or `take` |
 * | `tokenpace:keyed:rejected`       | `KeyedLimiter` (`KeyedRejectedMessage`, keyed/keyed-limiter.ts) | it turned a request away (`tryTake` not allowed, `take` over `maxWait` or denied) |
 * | `tokenpace:redis:degraded`       | every store in Redis (`StoreDegradedMessage`, stores/health.ts) | decisions start following its `onError` policy |
 * | `tokenpace:redis:recovered`      | every store in Redis (`StoreRecoveredMessage`, stores/health.ts) | a probe succeeded: decisions go to Redis again |
 * | `tokenpace:redis:failure`        | every store in Redis (`StoreFailureMessage`, stores/health.ts) | a call or probe to Redis failed or timed out |
 * | `tokenpace:redis:eviction`       | every store in Redis (`StoreEvictionMessage`, stores/health.ts) | Redis's `maxmemory-policy` may evict its keys (read at its first call and each recovery) |
 * | `tokenpace:scheduler:start`      | `Scheduler` (`SchedulerStartMessage`, scheduler/events.ts) | a job started (its `active` event) |
 * | `tokenpace:scheduler:rejected`   | `Scheduler` (`SchedulerRejectedMessage`, scheduler/events.ts) | a job was rejected or removed before it started (its `rejected` event) |
 * | `tokenpace:stream:wait`          | `Throttle`, `ThrottleGroup` (`StreamWaitMessage`, stream/counters.ts) | a stream ran short of tokens and sleeps (once per wait) |
 *
 * "Rejected" is the one word for work turned away: a job or request whose
 * promise rejects, or a decision that does not allow it.
 */

import { channel } from 'node:diagnostics_channel';

/** The channel names, for `diagnostics_channel.subscribe(name, fn)`. */
export const channelNames = {
  decision: 'tokenpace:http:decision',
  error: 'tokenpace:http:error',
  clientStart: 'tokenpace:http:client:start',
  clientRejected: 'tokenpace:http:client:rejected',
  clientPause: 'tokenpace:http:client:pause',
  clientRate: 'tokenpace:http:client:rate',
  keyedDecision: 'tokenpace:keyed:decision',
  keyedRejected: 'tokenpace:keyed:rejected',
  storeDegraded: 'tokenpace:redis:degraded',
  storeRecovered: 'tokenpace:redis:recovered',
  storeFailure: 'tokenpace:redis:failure',
  storeEviction: 'tokenpace:redis:eviction',
  schedulerStart: 'tokenpace:scheduler:start',
  schedulerRejected: 'tokenpace:scheduler:rejected',
  streamWait: 'tokenpace:stream:wait',
} as const;

export const decisionChannel = channel(channelNames.decision);
export const errorChannel = channel(channelNames.error);
export const clientStartChannel = channel(channelNames.clientStart);
export const clientRejectedChannel = channel(channelNames.clientRejected);
export const clientPauseChannel = channel(channelNames.clientPause);
export const clientRateChannel = channel(channelNames.clientRate);
export const keyedDecisionChannel = channel(channelNames.keyedDecision);
export const keyedRejectedChannel = channel(channelNames.keyedRejected);
export const storeDegradedChannel = channel(channelNames.storeDegraded);
export const storeRecoveredChannel = channel(channelNames.storeRecovered);
export const storeFailureChannel = channel(channelNames.storeFailure);
export const storeEvictionChannel = channel(channelNames.storeEviction);
export const schedulerStartChannel = channel(channelNames.schedulerStart);
export const schedulerRejectedChannel = channel(channelNames.schedulerRejected);
export const streamWaitChannel = channel(channelNames.streamWait);
