/**
 * tokenpace's diagnostics channels as OpenTelemetry metrics.
 *
 * Every part (the HTTP middleware and interceptor, the keyed limiter, the
 * Redis store, the Scheduler, the streams) publishes on `node:diagnostics_channel`;
 * this subscribes and records counters and histograms through
 * `@opentelemetry/api`. With an OpenTelemetry SDK registered (a
 * MeterProvider with an exporter), they reach your metrics backend; without
 * one, the API's no-op meter makes them free.
 *
 *   import { metrics } from '@opentelemetry/api';
 *   const stop = instrumentTokenpace(metrics.getMeter('tokenpace'));
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Meter } from '@opentelemetry/api';
import {
  type ClientPauseMessage,
  type ClientRejectedMessage,
  type ClientStartMessage,
  channelNames,
  type HttpDecisionMessage,
  type HttpErrorMessage,
  type KeyedRejectedMessage,
  type SchedulerRejectedMessage,
  type SchedulerStartMessage,
  type StoreDegradedMessage,
  type StreamWaitMessage,
} from '../src/index.js';

/** Subscribes to every channel (HTTP, keyed, Redis store, scheduler, streams); returns a function that unsubscribes. */
export function instrumentTokenpace(meter: Meter): () => void {
  const decisions = meter.createCounter('tokenpace.http.server.decisions', {
    description: 'Requests decided by the rate-limit middleware, by outcome',
  });
  const held = meter.createHistogram('tokenpace.http.server.wait', {
    description: 'How long admitted requests were held (maxWait)',
    unit: 'ms',
  });
  const errors = meter.createCounter('tokenpace.http.server.errors', {
    description: 'Requests the middleware could not decide, by stage',
  });
  const clientWait = meter.createHistogram('tokenpace.http.client.wait', {
    description: 'How long outgoing requests waited in their origin queue',
    unit: 'ms',
  });
  const refused = meter.createCounter('tokenpace.http.client.refused', {
    description: 'Outgoing requests refused by the interceptor, by error code',
  });
  const pauses = meter.createCounter('tokenpace.http.client.pauses', {
    description: 'Origins paused by 429/503 pushback',
  });

  const keyedRejections = meter.createCounter('tokenpace.keyed.rejections', {
    description: 'Requests a KeyedLimiter turned away, by reason',
  });
  const storeDegraded = meter.createCounter('tokenpace.store.degraded', {
    description: 'Times a Redis store started following its failure policy',
  });
  const jobWait = meter.createHistogram('tokenpace.scheduler.wait', {
    description: 'How long jobs waited in a Scheduler before they started',
    unit: 'ms',
  });
  const jobRejections = meter.createCounter('tokenpace.scheduler.rejections', {
    description: 'Jobs a Scheduler turned away or removed before they started, by reason',
  });
  const streamWaits = meter.createHistogram('tokenpace.stream.wait', {
    description: 'How long a Throttle or ThrottleGroup slept for tokens, per wait',
    unit: 'ms',
  });

  const listeners: Array<[string, (message: unknown) => void]> = [
    [channelNames.keyedRejected, (m) => keyedRejections.add(1, { reason: (m as KeyedRejectedMessage).reason })],
    [channelNames.storeDegraded, (m) => storeDegraded.add(1, { policy: (m as StoreDegradedMessage).policy })],
    [channelNames.schedulerStart, (m) => jobWait.record((m as SchedulerStartMessage).job.waitedMs)],
    [
      channelNames.schedulerRejected,
      (m) => jobRejections.add(1, { reason: (m as SchedulerRejectedMessage).job.reason }),
    ],
    [channelNames.streamWait, (m) => streamWaits.record((m as StreamWaitMessage).waitMs)],
    [
      channelNames.decision,
      (m) => {
        const { decision, waitedMs } = m as HttpDecisionMessage;
        decisions.add(1, { outcome: decision.allowed ? 'admitted' : 'refused' });
        if (decision.allowed && waitedMs > 0) held.record(waitedMs);
      },
    ],
    [
      channelNames.error,
      (m) => {
        const { stage, statusCode } = m as HttpErrorMessage;
        errors.add(1, { stage, status: statusCode });
      },
    ],
    [
      channelNames.clientStart,
      (m) => {
        const { origin, waitedMs } = m as ClientStartMessage;
        clientWait.record(waitedMs, { origin });
      },
    ],
    [
      channelNames.clientRejected,
      (m) => {
        const { origin, error } = m as ClientRejectedMessage;
        refused.add(1, { origin, code: String((error as { code?: unknown }).code ?? 'unknown') });
      },
    ],
    [
      channelNames.clientPause,
      (m) => {
        const { origin, statusCode, source } = m as ClientPauseMessage;
        pauses.add(1, { origin, status: statusCode, source });
      },
    ],
  ];
  for (const [name, listener] of listeners) subscribe(name, listener);
  return () => {
    for (const [name, listener] of listeners) unsubscribe(name, listener);
  };
}
