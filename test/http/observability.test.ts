/**
 * The diagnostics channels, subscribed the way an operator would: through the
 * OpenTelemetry example (a recording Meter stands in for an SDK), with real
 * traffic from a rate-limited server and a paced client.
 */

import type { Attributes, Counter, Histogram, Meter } from '@opentelemetry/api';
import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { instrumentTokenpace } from '../../examples/otel-metrics.js';
import * as tokenpace from '../../src/index.js';
import { rateLimit, throttleInterceptor } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { type Loopback, serve } from './support.js';

type Recorded = Array<{ name: string; value: number; attributes: Attributes | undefined }>;

function recordingMeter(recorded: Recorded): Meter {
  const instrument = (name: string) => ({
    add: (value: number, attributes?: Attributes) => recorded.push({ name, value, attributes }),
    record: (value: number, attributes?: Attributes) => recorded.push({ name, value, attributes }),
  });
  return {
    createCounter: (name: string) => instrument(name) as unknown as Counter,
    createHistogram: (name: string) => instrument(name) as unknown as Histogram,
  } as unknown as Meter;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

describe('observability', () => {
  it('exports the adapters and the channel names from the package root', () => {
    expect(typeof tokenpace.rateLimit).toBe('function');
    expect(typeof tokenpace.rateLimitHook).toBe('function');
    expect(Object.keys(tokenpace.rateLimit)).toEqual([]); // nothing is assigned onto the function
    expect(typeof tokenpace.throttleInterceptor).toBe('function');
    expect(Object.values(tokenpace.channelNames).every((n) => n.startsWith('tokenpace:'))).toBe(true);
    const http = Object.values(tokenpace.channelNames).filter((n) => n.startsWith('tokenpace:http:'));
    expect(http).toHaveLength(6);
  });

  it('feeds decisions, refusals and pauses into OpenTelemetry instruments', async () => {
    const recorded: Recorded = [];
    cleanups.push(instrumentTokenpace(recordingMeter(recorded)));
    const fake = fakeClock();
    const server: Loopback = await serve(rateLimit({ rate: 1, burst: 2, clock: fake.clock }));
    cleanups.push(() => server.close());
    const agent = new Agent();
    cleanups.push(() => agent.close());
    const dispatcher = agent.compose(throttleInterceptor({ concurrency: 1, maxQueue: 0, clock: fake.clock }));
    for (let i = 0; i < 3; i++) {
      const response = await request(server.url, { dispatcher });
      await response.body.text();
    }
    // The third got a 429 with Retry-After: 1, which paused the origin; with no queue (maxQueue 0), the next is rejected.
    await expect(request(server.url, { dispatcher })).rejects.toMatchObject({ code: 'ERR_QUEUE_FULL' });

    const count = (name: string, attributes?: Attributes) =>
      recorded.filter(
        (r) =>
          r.name === name &&
          (attributes === undefined || expect.objectContaining(attributes).asymmetricMatch(r.attributes)),
      ).length;
    expect(count('tokenpace.http.server.decisions', { outcome: 'admitted' })).toBe(2);
    expect(count('tokenpace.http.server.decisions', { outcome: 'refused' })).toBe(1);
    expect(count('tokenpace.http.client.wait', { origin: server.url })).toBe(3);
    expect(count('tokenpace.http.client.pauses', { origin: server.url, status: 429, source: 'retry-after' })).toBe(1);
    expect(count('tokenpace.http.client.refused', { code: 'ERR_QUEUE_FULL' })).toBe(1);
    // The interceptor's per-origin Scheduler publishes too: three starts, one queue-full rejection.
    expect(count('tokenpace.scheduler.wait')).toBe(3);
    expect(count('tokenpace.scheduler.rejections', { reason: 'queueFull' })).toBe(1);
    // And a KeyedLimiter's rejection (the middleware's third request).
    expect(count('tokenpace.keyed.rejections', { reason: 'limit' })).toBe(1);
  });
});
