/**
 * The same Redis faults, the same cases, for the three stores in Redis
 * (RedisStore, RedisWindowStore, RedisFleetStore), with ioredis and with
 * node-redis: they call Redis one way (src/redis/lua-script.ts), so they must
 * come through each fault alike.
 *
 * - SCRIPT FLUSH (and FUNCTION FLUSH): the next calls load the script again
 *   by themselves (`EVAL` after `NOSCRIPT`), with no failure, no decision by
 *   the policy, and the state in Redis kept;
 * - paused (SIGSTOP): a call answers by the policy within the store's
 *   timeout, the store is degraded, and recovers once Redis answers again;
 * - killed (SIGKILL) and restarted empty: the same, and the script is loaded
 *   on the new server.
 *
 * This file starts its own redis-server (it pauses and kills it). Times are
 * real, so the bounds are generous.
 */

import type { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import { RedisWindowStore } from '../../src/keyed/window-store.js';
import type { RedisClientLike } from '../../src/redis/client.js';
import type { StoreEvents } from '../../src/stores/health.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const TIMEOUT_MS = 100;
/** Room for a loaded machine: an answer "within the timeout" must come within this more. */
const SLACK_MS = 400;
/** Every subject admits this many per key, then refuses. */
const LIMIT = 3;

type Store = EventEmitter<StoreEvents> & { readonly healthy: boolean; close(): void };

interface Subject {
  make(client: RedisClientLike, prefix: string): Store;
  /** One decision on `key`: whether it was admitted, and whether Redis made it (not the policy). */
  take(store: Store, key: string): Promise<{ allowed: boolean; fromRedis: boolean }>;
}

const options = { onError: 'deny', timeout: TIMEOUT_MS, probeInterval: '50ms' } as const;
let leases = 0;

const subjects: Record<string, Subject> = {
  RedisStore: {
    make: (client, prefix) => new RedisStore({ client, prefix, ...options }),
    async take(store, key) {
      const r = await (store as RedisStore).decide({
        mode: 'try',
        key,
        cost: 1,
        bucket: { ratePerSecond: 0.001, burst: LIMIT },
        global: undefined,
        maxWaitMs: 0,
      });
      return { allowed: r.allowed, fromRedis: r.source === 'store' };
    },
  },
  RedisWindowStore: {
    make: (client, prefix) => new RedisWindowStore({ client, prefix, ...options }),
    async take(store, key) {
      const s = store as RedisWindowStore;
      const byPolicy = s.stats.byPolicy;
      const d = await s.decideWindow({
        mode: 'try',
        key,
        cost: 1,
        kind: 'counter',
        params: { limit: LIMIT, windowMs: 86_400_000 },
      });
      return { allowed: d.allowed, fromRedis: s.stats.byPolicy === byPolicy };
    },
  },
  RedisFleetStore: {
    make: (client, prefix) => new RedisFleetStore({ client, prefix, ...options }),
    async take(store, key) {
      const r = await (store as RedisFleetStore).acquire({
        key,
        cost: 1,
        maxWaitMs: 0,
        leaseId: `lease-${++leases}`,
        leaseMs: 600_000,
        claimTtlMs: 100,
        params: { ratePerSecond: Number.POSITIVE_INFINITY, burst: 1, concurrency: LIMIT },
      });
      return { allowed: r.status === 'ok', fromRedis: r.source === 'store' };
    },
  },
};

let server: RedisServer;
let admin: Redis;
beforeAll(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: null });
  admin.on('error', () => {});
});
afterAll(async () => {
  admin.disconnect();
  await server.stop();
});

const clients: Record<string, () => Promise<{ client: RedisClientLike; close(): Promise<void> }>> = {
  ioredis: async () => {
    const client = new Redis({ port: server.port, host: '127.0.0.1' });
    client.on('error', () => {});
    await new Promise<void>((resolve) => client.once('ready', () => resolve()));
    return { client, close: async () => client.disconnect() };
  },
  'node-redis': async () => {
    const client = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
};

/** Calls of `command` the server has run since it started (INFO commandstats). */
async function calls(command: 'eval' | 'evalsha'): Promise<number> {
  const info = String(await admin.info('commandstats'));
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
}

async function until(condition: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

let n = 0;

for (const [storeName, subject] of Object.entries(subjects)) {
  describe.each(Object.keys(clients))(`${storeName} with %s`, (clientName) => {
    /** A fresh store on a fresh client, with its failures and events recorded. */
    async function open() {
      const { client, close } = await (clients[clientName] as (typeof clients)['ioredis'])();
      const store = subject.make(client, `faults-${process.pid}-${++n}`);
      const events: string[] = [];
      store.on('failure', ({ error }) => events.push(`failure: ${error.message}`));
      store.on('degraded', () => events.push('degraded'));
      store.on('recovered', () => events.push('recovered'));
      const done = async () => {
        store.close();
        await close();
      };
      return { store, events, done };
    }

    it('SCRIPT FLUSH, then FUNCTION FLUSH: the next calls load the script again, and the state is kept', async () => {
      const { store, events, done } = await open();
      const take = (key: string) => subject.take(store, key);
      expect(await take('k')).toEqual({ allowed: true, fromRedis: true });
      const sha = await calls('evalsha');
      const evals = await calls('eval');
      expect(await take('k')).toEqual({ allowed: true, fromRedis: true });
      expect([await calls('evalsha'), await calls('eval')]).toEqual([sha + 1, evals]); // EVALSHA, nothing else
      await admin.script('FLUSH');
      // calls in flight at once when the script is gone: each loads it again with EVAL
      const [a, b] = await Promise.all([take('k'), take('other')]);
      expect([a, b]).toEqual([
        { allowed: true, fromRedis: true },
        { allowed: true, fromRedis: true },
      ]);
      expect(await calls('eval')).toBeGreaterThan(evals);
      await admin.call('FUNCTION', 'FLUSH');
      // the key's three were counted before and after the flush: the fourth is refused, by Redis
      expect(await take('k')).toEqual({ allowed: false, fromRedis: true });
      expect(events).toEqual([]);
      expect(store.healthy).toBe(true);
      await done();
    });

    it('paused: a call answers by the policy within the timeout; Redis again once it resumes', async () => {
      const { store, events, done } = await open();
      expect(await subject.take(store, 'k')).toEqual({ allowed: true, fromRedis: true });
      server.signal('SIGSTOP');
      try {
        const start = performance.now();
        expect(await subject.take(store, 'k')).toEqual({ allowed: false, fromRedis: false });
        expect(performance.now() - start).toBeLessThan(TIMEOUT_MS + SLACK_MS);
        expect(store.healthy).toBe(false);
        expect(events[0]).toMatch(/^failure: Redis did not answer within the store's timeout \(100 ms\)/);
        expect(events).toContain('degraded');
      } finally {
        server.signal('SIGCONT');
      }
      await until(() => store.healthy, 5000, 'recovery');
      expect(events.at(-1)).toBe('recovered');
      // the call given up on may have run when Redis resumed, and counted: it errs on the strict side
      expect((await subject.take(store, 'other')).fromRedis).toBe(true);
      await done();
    });

    it('killed and restarted empty: the policy at once, then the script loaded on the new server', async () => {
      const { store, events, done } = await open();
      expect(await subject.take(store, 'k')).toEqual({ allowed: true, fromRedis: true });
      server.signal('SIGKILL');
      await new Promise((r) => setTimeout(r, 20));
      const start = performance.now();
      expect(await subject.take(store, 'k')).toEqual({ allowed: false, fromRedis: false });
      expect(performance.now() - start).toBeLessThan(TIMEOUT_MS + SLACK_MS);
      expect(events).toContain('degraded');
      await server.restart();
      await until(() => store.healthy, 5000, 'recovery');
      expect(events.at(-1)).toBe('recovered');
      // an empty server: no script, no state
      expect(await subject.take(store, 'k2')).toEqual({ allowed: true, fromRedis: true });
      expect(await calls('eval')).toBeGreaterThanOrEqual(1);
      await done();
    });
  });
}
