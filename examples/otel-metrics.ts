/**
 * tokenpace's HTTP diagnostics channels as OpenTelemetry metrics.
 *
 * The middleware and the interceptor publish on `node:diagnostics_channel`;
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
  type ClientRefusedMessage,
  type ClientStartMessage,
  channelNames,
  type DecisionMessage,
  type ErrorMessage,
} from '../src/index.js';

/** Subscribes to every HTTP channel; returns a function that unsubscribes. */
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

  const listeners: Array<[string, (message: unknown) => void]> = [
    [
      channelNames.decision,
      (m) => {
        const { decision, waitedMs } = m as DecisionMessage;
        decisions.add(1, { outcome: decision.allowed ? 'admitted' : 'refused' });
        if (decision.allowed && waitedMs > 0) held.record(waitedMs);
      },
    ],
    [
      channelNames.error,
      (m) => {
        const { stage, statusCode } = m as ErrorMessage;
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
      channelNames.clientRefused,
      (m) => {
        const { origin, error } = m as ClientRefusedMessage;
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
