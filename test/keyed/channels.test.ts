/**
 * The keyed limiter's and the RedisStore's diagnostics channels, subscribed
 * as an operator would (`diagnostics_channel.subscribe(name, fn)`): a fake
 * clock for the limiter's decisions, a real redis-server that this file kills
 * and restarts for the store's transitions.
 */

import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channelNames, keyedDecisionChannel } from '../../src/diagnostics.js';
import { type KeyedDecisionMessage, KeyedLimiter, type KeyedRejectedMessage } from '../../src/keyed/keyed-limiter.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import type { StoreDegradedMessage, StoreFailureMessage, StoreRecoveredMessage } from '../../src/stores/health.js';
import { record } from '../helpers/channel-recorder.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

describe('keyed channels', () => {
  it('names every channel under tokenpace:, the keyed and Redis ones included', () => {
    expect(channelNames).toMatchObject({
      keyedDecision: 'tokenpace:keyed:decision',
      keyedRejected: 'tokenpace:keyed:rejected',
      storeDegraded: 'tokenpace:redis:degraded',
      storeRecovered: 'tokenpace:redis:recovered',
      storeFailure: 'tokenpace:redis:failure',
    });
    expect(new Set(Object.values(channelNames)).size).toBe(Object.values(channelNames).length);
  });

  it('publishes each tryTake and take, and each refusal with its reason; peek is not published', async () => {
    const f = fakeClock(0);
    const limiter = new KeyedLimiter({ rate: 10, burst: 2, clock: f.clock });
    // Nobody listens yet: nothing to see, and the limiter decides as usual.
    expect(keyedDecisionChannel.hasSubscribers).toBe(false);
    expect((await limiter.tryTake('quiet')).allowed).toBe(true);

    const decisions = record<KeyedDecisionMessage>(channelNames.keyedDecision);
    const refusals = record<KeyedRejectedMessage>(channelNames.keyedRejected);
    expect((await limiter.tryTake('k', 2)).allowed).toBe(true);
    expect((await limiter.tryTake('k')).allowed).toBe(false);
    await limiter.peek('k');
    const taking = limiter.take('k', 1); // reserved now, acts at +100 ms
    await Promise.resolve();
    await f.timers.tickAsync(100);
    await taking;
    await expect(limiter.take('k', 2, { maxWait: 50 })).rejects.toMatchObject({ code: 'ERR_WAIT_TOO_LONG' });

    expect(decisions.map((m) => [m.key, m.mode, m.decision.allowed, m.waitMs, m.source])).toEqual([
      ['k', 'try', true, 0, 'store'],
      ['k', 'try', false, 0, 'store'],
      ['k', 'reserve', true, 100, 'store'],
      ['k', 'reserve', false, 0, 'store'], // 2 tokens at 0 are 200 ms away: over maxWait, nothing charged
    ]);
    for (const m of decisions) expect(m.limiter).toBe(limiter);
    expect(decisions[1]?.decision).toEqual({
      allowed: false,
      remaining: 0,
      retryAfterMs: 100,
      resetAfterMs: 200,
      limit: 2,
    });
    expect(refusals).toEqual([
      { limiter, key: 'k', cost: 1, mode: 'try', reason: 'limit', retryAfterMs: 100 },
      { limiter, key: 'k', cost: 2, mode: 'reserve', reason: 'max-wait', retryAfterMs: 150 },
    ]);
  });
});

describe('RedisStore channels', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('publishes failure, degraded and recovered with the store, and denied decisions as refusals', async () => {
    const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    await new Promise<void>((resolve) => client.once('ready', () => resolve()));
    const store = new RedisStore({ client, prefix: `channels-${process.pid}`, onError: 'deny', timeout: 100 });
    const events: string[] = [];
    store.on('degraded', () => events.push('degraded'));
    store.on('recovered', () => events.push('recovered'));
    const degraded = record<StoreDegradedMessage>(channelNames.storeDegraded);
    const recovered = record<StoreRecoveredMessage>(channelNames.storeRecovered);
    const failures = record<StoreFailureMessage>(channelNames.storeFailure);
    const refusals = record<KeyedRejectedMessage>(channelNames.keyedRejected);
    const decisions = record<KeyedDecisionMessage>(channelNames.keyedDecision);
    const limiter = new KeyedLimiter({ rate: 1, burst: 5, store });
    try {
      expect((await limiter.tryTake('k')).allowed).toBe(true);
      expect(degraded).toEqual([]);

      server.signal('SIGKILL');
      await new Promise((r) => setTimeout(r, 20));
      expect((await limiter.tryTake('k')).allowed).toBe(false);
      await expect(limiter.take('k')).rejects.toMatchObject({ code: 'ERR_STORE_UNAVAILABLE' });
      expect(degraded).toHaveLength(1);
      expect(degraded[0]).toMatchObject({ store, policy: 'deny' });
      expect(degraded[0]?.error).toBeInstanceOf(Error);
      expect(failures.length).toBeGreaterThanOrEqual(1);
      expect(failures[0]).toMatchObject({ store, operations: 1 });
      expect(refusals.map((m) => [m.mode, m.reason, m.retryAfterMs])).toEqual([
        ['try', 'store-unavailable', 1000],
        ['reserve', 'store-unavailable', 1000],
      ]);
      expect(decisions.map((m) => m.source)).toEqual(['store', 'deny', 'deny']);

      await server.restart();
      const deadline = Date.now() + 5000;
      while (!store.healthy && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(store.healthy).toBe(true);
      expect(recovered).toHaveLength(1);
      expect(recovered[0]?.store).toBe(store);
      expect(recovered[0]?.downMs).toBeGreaterThan(0);
      // the channels said what the events said, in the same number
      expect(events).toEqual(['degraded', 'recovered']);
    } finally {
      store.close();
      client.disconnect();
    }
  }, 15_000);
});
