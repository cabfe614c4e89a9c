/**
 * Fault tests against a real redis-server that this file starts, kills,
 * pauses (SIGSTOP/SIGCONT) and restarts: each failure policy answers within
 * its timeout, says so through events, and recovers by itself, with no
 * unhandled rejection. Times are real, so the bounds are generous.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { type FailurePolicy, type RedisClientLike, RedisStore } from '../../src/keyed/redis-store.js';
import { RedisWindowStore } from '../../src/keyed/window-store.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const TIMEOUT_MS = 100;
/** Room for a loaded machine: an answer "within the timeout" must come within this. */
const SLACK_MS = 400;

let server: RedisServer;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  server = await startRedis(['--enable-debug-command', 'yes']);
  process.on('unhandledRejection', onUnhandled);
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await server.stop();
});

interface Client {
  client: RedisClientLike;
  close(): Promise<void>;
}

async function ioredisClient(): Promise<Client> {
  // the client's defaults: its own reconnect back-off and offline queue
  const client = new Redis({ port: server.port, host: '127.0.0.1' });
  client.on('error', () => {});
  await new Promise<void>((resolve) => client.once('ready', () => resolve()));
  return { client, close: async () => client.disconnect() };
}

async function nodeRedisClient(): Promise<Client> {
  const client = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
  client.on('error', () => {});
  await client.connect();
  return { client, close: async () => client.destroy() };
}

async function until(condition: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function timed<T>(promise: Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await promise;
  return { value, ms: performance.now() - start };
}

function expectByPolicy(policy: FailurePolicy, allowed: boolean[]): void {
  if (policy === 'allow') expect(allowed).toEqual([true, true, true, true, true]);
  if (policy === 'deny') expect(allowed).toEqual([false, false, false, false, false]);
  // 'local': a fresh in-memory bucket of burst 3 for this instance
  if (policy === 'local') expect(allowed).toEqual([true, true, true, false, false]);
}

const clients = { ioredis: ioredisClient, 'node-redis': nodeRedisClient };

describe.each(Object.entries(clients))('RedisStore failures with %s', (_name, connect) => {
  for (const policy of ['allow', 'deny', 'local'] as const) {
    it(`onError '${policy}': killed, then restarted; paused, then resumed`, async () => {
      const { client, close } = await connect();
      const store = new RedisStore({
        client,
        prefix: `faults-${policy}-${_name}`,
        onError: policy,
        timeout: TIMEOUT_MS,
        probeInterval: 50,
      });
      const events: string[] = [];
      store.on('degraded', ({ policy: p }) => events.push(`degraded:${p}`));
      store.on('recovered', () => events.push('recovered'));
      let failures = 0;
      store.on('failure', () => failures++);
      const limiter = new KeyedLimiter({ rate: 0.01, burst: 3, store });
      const k = `key-${Date.now()}`;
      expect((await limiter.tryTake(k)).allowed).toBe(true);
      expect(store.healthy).toBe(true);

      for (const fault of ['kill', 'pause'] as const) {
        if (fault === 'kill') server.signal('SIGKILL');
        else server.signal('SIGSTOP');
        await new Promise((r) => setTimeout(r, 20));
        // The first decision after the fault waits at most the timeout (a pause) or fails at once (a kill).
        const first = await timed(limiter.tryTake(`${k}-${fault}`));
        expect(first.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
        expect(store.healthy).toBe(false);
        // Degraded: the rest are decided by the policy at once.
        const rest = await timed(Promise.all([1, 2, 3, 4].map(() => limiter.tryTake(`${k}-${fault}`))));
        expect(rest.ms).toBeLessThan(SLACK_MS);
        expectByPolicy(policy, [first.value.allowed, ...rest.value.map((d) => d.allowed)]);
        if (policy === 'deny') expect(first.value.retryAfterMs).toBeGreaterThan(0);
        // take() follows the policy too
        const taken = limiter.take(`${k}-${fault}-take`).then(
          () => 'admitted',
          (e: unknown) => (isTokenpaceError(e, 'ERR_STORE_UNAVAILABLE') ? 'unavailable' : String(e)),
        );
        expect(await taken).toBe(policy === 'deny' ? 'unavailable' : 'admitted');
        expect(events.at(-1)).toBe(`degraded:${policy}`);

        if (fault === 'kill') await server.restart();
        else server.signal('SIGCONT');
        await until(() => store.healthy, 5000, 'recovery');
        expect(events.at(-1)).toBe('recovered');
        // Back to Redis: the key charged before the fault is still charged after a pause,
        // and starts over after a restart (the server keeps nothing).
        const before = store.stats.decisions;
        const after = await limiter.tryTake(k);
        expect(store.stats.decisions).toBe(before + 1);
        expect(after.remaining).toBe(fault === 'kill' ? 2 : 1);
      }
      expect(failures).toBeGreaterThanOrEqual(2);
      expect(events.filter((e) => e === 'recovered')).toHaveLength(2);
      store.close();
      await close();
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).toEqual([]);
    }, 20_000);
  }
});

describe.each(Object.entries(clients))('RedisWindowStore failures with %s', (_name, connect) => {
  for (const policy of ['allow', 'deny', 'local'] as const) {
    it(`onError '${policy}': killed, then restarted; paused, then resumed`, async () => {
      const { client, close } = await connect();
      const store = new RedisWindowStore({
        client,
        prefix: `wfaults-${policy}-${_name}`,
        onError: policy,
        timeout: TIMEOUT_MS,
        probeInterval: 50,
      });
      const events: string[] = [];
      store.on('degraded', ({ policy: p }) => events.push(`degraded:${p}`));
      store.on('recovered', () => events.push('recovered'));
      let failures = 0;
      store.on('failure', () => failures++);
      // The same diagnostics channels as RedisStore, with this store in each message.
      const published: string[] = [];
      const listeners = ['degraded', 'recovered', 'failure'].map((what) => {
        const name = `tokenpace:redis:${what}`;
        const listener = (message: unknown) => {
          if ((message as { store: unknown }).store === store) published.push(what);
        };
        subscribe(name, listener);
        return () => unsubscribe(name, listener);
      });
      // A day's window: its boundary (aligned to Redis's clock) is not crossed during the test.
      const limiter = new KeyedLimiter({ algorithm: 'fixed-window', limit: 3, window: '1 day', store });
      const k = `key-${Date.now()}`;
      expect((await limiter.tryTake(k)).allowed).toBe(true);
      expect(store.healthy).toBe(true);

      for (const fault of ['kill', 'pause'] as const) {
        if (fault === 'kill') server.signal('SIGKILL');
        else server.signal('SIGSTOP');
        await new Promise((r) => setTimeout(r, 20));
        const first = await timed(limiter.tryTake(`${k}-${fault}`));
        expect(first.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
        expect(store.healthy).toBe(false);
        const rest = await timed(Promise.all([1, 2, 3, 4].map(() => limiter.tryTake(`${k}-${fault}`))));
        expect(rest.ms).toBeLessThan(SLACK_MS);
        // 'local': a fresh in-memory window of limit 3 for this instance
        expectByPolicy(policy, [first.value.allowed, ...rest.value.map((d) => d.allowed)]);
        if (policy === 'deny') expect(first.value.retryAfterMs).toBeGreaterThan(0);
        expect(events.at(-1)).toBe(`degraded:${policy}`);

        if (fault === 'kill') await server.restart();
        else server.signal('SIGCONT');
        await until(() => store.healthy, 5000, 'recovery');
        expect(events.at(-1)).toBe('recovered');
        // Back to Redis: the count before the fault survives a pause, not a restart.
        const before = store.stats.decisions;
        const after = await limiter.tryTake(k);
        expect(store.stats.decisions).toBe(before + 1);
        expect(after.remaining).toBe(fault === 'kill' ? 2 : 1);
      }
      expect(failures).toBeGreaterThanOrEqual(2);
      expect(events.filter((e) => e === 'recovered')).toHaveLength(2);
      expect(published.filter((e) => e === 'degraded')).toHaveLength(2);
      expect(published.filter((e) => e === 'recovered')).toHaveLength(2);
      expect(published.filter((e) => e === 'failure').length).toBe(failures);
      for (const off of listeners) off();
      store.close();
      await close();
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).toEqual([]);
    }, 20_000);
  }
});

describe('KeyedLimiter on a RedisStore under CLIENT PAUSE, DEBUG SLEEP and SCRIPT FLUSH', () => {
  const faults = {
    'CLIENT PAUSE': (admin: Redis) => admin.call('CLIENT', 'PAUSE', '1000', 'ALL'),
    'DEBUG SLEEP': (admin: Redis) => admin.call('DEBUG', 'SLEEP', '1'),
    'SCRIPT FLUSH': (admin: Redis) => admin.call('SCRIPT', 'FLUSH'),
  };
  for (const [fault, apply] of Object.entries(faults)) {
    for (const policy of ['deny', 'local'] as const) {
      it(`${fault}, onError '${policy}': every decision within the timeout, Redis again within about 1 s`, async () => {
        const { client, close } = await ioredisClient();
        const admin = new Redis({ port: server.port, host: '127.0.0.1' });
        admin.on('error', () => {});
        const store = new RedisStore({
          client,
          prefix: `faults2-${policy}-${fault.replace(' ', '')}`,
          onError: policy,
          timeout: TIMEOUT_MS,
          probeInterval: 50,
        });
        const limiter = new KeyedLimiter({ rate: 1000, burst: 1000, store });
        const latencies: number[] = [];
        let running = true;
        const loop = (async () => {
          let i = 0;
          while (running) {
            const t = await timed(limiter.tryTake(`k-${i++ % 8}`));
            latencies.push(t.ms);
            await new Promise((r) => setTimeout(r, 10));
          }
        })();
        await new Promise((r) => setTimeout(r, 100));
        const faulted = apply(admin).catch(() => {});
        await faulted;
        // CLIENT PAUSE answers at once and lasts 1 s; DEBUG SLEEP answers when the server is back
        const backAt = performance.now() + (fault === 'CLIENT PAUSE' ? 1000 : 0);
        const decisions = store.stats.decisions;
        await until(() => store.healthy && store.stats.decisions > decisions, 2500, 'service from Redis again');
        const backMs = performance.now() - backAt;
        running = false;
        await loop;
        console.log(
          `keyed ${fault} / ${policy}: slowest decision ${Math.max(...latencies).toFixed(0)} ms, Redis again after ${backMs.toFixed(0)} ms`,
        );
        expect(Math.max(...latencies)).toBeLessThan(TIMEOUT_MS + SLACK_MS);
        expect(backMs).toBeLessThan(1000 + SLACK_MS);
        store.close();
        admin.disconnect();
        await close();
        expect(unhandled).toEqual([]);
      }, 15_000);
    }
  }
});
