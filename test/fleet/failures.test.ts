/**
 * Redis paused (SIGSTOP) or killed and restarted empty, under load, with each
 * failure policy: the failure is decided within its timeout and observable as
 * events, jobs follow the policy while Redis is away (deny: none start; allow:
 * the fleet's limits locally; local: 1/expectedWorkers of them), and the
 * scheduler converges back to the shared limit. An unhandled rejection would
 * fail the run (vitest reports them).
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channelNames } from '../../src/diagnostics.js';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import type { FailurePolicy, StoreDegradedMessage, StoreRecoveredMessage } from '../../src/stores/health.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server.stop();
});

const RATE = 100;
const TIMEOUT_MS = 100;

async function outage(policy: FailurePolicy, kind: 'pause' | 'restart') {
  const client = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: false });
  client.on('error', () => {}); // connection errors while Redis is down are expected
  const store = new RedisFleetStore({
    client,
    onError: policy,
    expectedWorkers: 4,
    timeout: TIMEOUT_MS,
    probeInterval: 50,
  });
  const key = `outage-${policy}-${kind}-${Date.now()}`;
  const scheduler = new Scheduler({
    store,
    key,
    rate: RATE,
    burst: 5,
    concurrency: 10,
    lease: 600,
    maxWait: 3000,
    pollInterval: 10,
  });
  const starts: number[] = [];
  const events: [string, number][] = [];
  scheduler.on('degraded', () => events.push(['degraded', performance.now()]));
  scheduler.on('recovered', () => events.push(['recovered', performance.now()]));
  // The store's fail-overs are on the diagnostics channels too (as a RedisStore's are).
  const published: string[] = [];
  const onDegraded = (m: unknown) => {
    if ((m as StoreDegradedMessage).store === store) published.push('degraded');
  };
  const onRecovered = (m: unknown) => {
    if ((m as StoreRecoveredMessage).store === store) published.push('recovered');
  };
  subscribe(channelNames.storeDegraded, onDegraded);
  subscribe(channelNames.storeRecovered, onRecovered);
  const rejections: string[] = [];
  let running = true;
  const feed = (async () => {
    while (running) {
      while (scheduler.size < 20 && running) {
        scheduler
          .schedule(async () => {
            starts.push(performance.now());
            await sleep(15);
          })
          .catch((e: { code?: string }) => rejections.push(String(e.code)));
      }
      await sleep(5);
    }
  })();
  await sleep(700);
  const downAt = performance.now();
  if (kind === 'pause') server.signal('SIGSTOP');
  else await server.stop();
  await sleep(1200);
  const upAt = performance.now();
  if (kind === 'pause') server.signal('SIGCONT');
  else await server.restart();
  await sleep(1500);
  running = false;
  await feed;
  scheduler.clear();
  await scheduler.onIdle();
  store.close();
  client.disconnect();
  unsubscribe(channelNames.storeDegraded, onDegraded);
  unsubscribe(channelNames.storeRecovered, onRecovered);

  const degradedAt = events.find(([e]) => e === 'degraded')?.[1] ?? Number.NaN;
  const recoveredAt = events.find(([e]) => e === 'recovered')?.[1] ?? Number.NaN;
  const count = (from: number, to: number) => starts.filter((t) => t >= from && t < to).length;
  // while degraded, leaving out the first 100 ms (reservations made before the outage start then)
  const downFrom = degradedAt + 100;
  const downRate = (count(downFrom, upAt) * 1000) / (upAt - downFrom);
  const afterFrom = recoveredAt + 300;
  const afterTo = starts.at(-1) as number;
  const afterRate = (count(afterFrom, afterTo) * 1000) / (afterTo - afterFrom);
  const summary = {
    decidedAfterMs: Math.round(degradedAt - downAt),
    recoveredAfterMs: Math.round(recoveredAt - upAt),
    downRate: Math.round(downRate),
    afterRate: Math.round(afterRate),
    events: events.map(([e]) => e).join(','),
    published: published.join(','),
    rejected: rejections.length,
  };
  console.log(`fleet outage ${policy}/${kind}: ${JSON.stringify(summary)}`);
  return { ...summary, rejections };
}

describe.each(['deny', 'allow', 'local'] as const)("onError '%s'", (policy) => {
  it.each(['pause', 'restart'] as const)(
    'Redis %s under load',
    async (kind) => {
      const r = await outage(policy, kind);
      expect(r.events).toBe('degraded,recovered');
      expect(r.published).toBe('degraded,recovered');
      // decided within its timeout (plus the gap to the next decision at 100/s and scheduling slack)
      expect(r.decidedAfterMs).toBeLessThanOrEqual(TIMEOUT_MS + 150);
      expect(r.recoveredAfterMs).toBeLessThan(1500);
      if (policy === 'deny') expect(r.downRate).toBe(0);
      if (policy === 'allow') {
        expect(r.downRate).toBeGreaterThan(RATE * 0.8);
        expect(r.downRate).toBeLessThan(RATE * 1.2);
      }
      if (policy === 'local') {
        expect(r.downRate).toBeGreaterThan((RATE / 4) * 0.7);
        expect(r.downRate).toBeLessThan((RATE / 4) * 1.4);
      }
      // back on the shared limit
      expect(r.afterRate).toBeGreaterThan(RATE * 0.85);
      expect(r.afterRate).toBeLessThan(RATE * 1.1);
      // only the jobs cleared at the end (the outage is shorter than maxWait)
      expect(r.rejections.filter((code) => code !== 'ABORT_ERR')).toEqual([]);
      expect(r.rejections.length).toBeLessThanOrEqual(20);
    },
    15_000,
  );
});
