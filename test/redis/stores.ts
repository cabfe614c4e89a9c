/**
 * The three stores in Redis as the Redis fault tests drive them: each makes
 * a store on a client and takes one decision on a key, and each client
 * library connects to a port. Decisions are cheap to admit (a large burst, a
 * large window, a large concurrency), and every admitted one writes to Redis.
 */

import type { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import { RedisWindowStore } from '../../src/keyed/window-store.js';
import type { RedisClientLike } from '../../src/redis/client.js';
import type { FailurePolicy, StoreEvents } from '../../src/stores/health.js';

/** What the tests read of any of the three stores. */
export type Store = EventEmitter<StoreEvents> & {
  readonly healthy: boolean;
  readonly maxmemoryPolicy: string | undefined;
  close(): void;
};

export interface StoreOptions {
  onError: FailurePolicy;
  timeout: number;
  probeInterval: number;
}

export interface Subject {
  make(client: RedisClientLike, prefix: string, options: StoreOptions): Store;
  /** One decision on `key`: whether Redis made it (not the policy). */
  take(store: Store, key: string): Promise<boolean>;
}

let leases = 0;

export const subjects: Record<string, Subject> = {
  RedisStore: {
    make: (client, prefix, options) => new RedisStore({ client, prefix, ...options }),
    async take(store, key) {
      const r = await (store as RedisStore).decide({
        mode: 'try',
        key,
        cost: 1,
        bucket: { ratePerSecond: 1000, burst: 1000 },
        global: undefined,
        maxWaitMs: 0,
      });
      return r.source === 'store';
    },
  },
  RedisWindowStore: {
    make: (client, prefix, options) => new RedisWindowStore({ client, prefix, ...options }),
    async take(store, key) {
      const s = store as RedisWindowStore;
      const byPolicy = s.stats.byPolicy;
      await s.decideWindow({ mode: 'try', key, cost: 1, kind: 'fixed', params: { limit: 1e6, windowMs: 60_000 } });
      return s.stats.byPolicy === byPolicy;
    },
  },
  RedisFleetStore: {
    make: (client, prefix, options) => new RedisFleetStore({ client, prefix, ...options }),
    async take(store, key) {
      const s = store as RedisFleetStore;
      const leaseId = `lease-${++leases}`;
      const r = await s.acquire({
        key,
        cost: 1,
        maxWaitMs: 0,
        leaseId,
        leaseMs: 600_000,
        claimTtlMs: 100,
        params: { ratePerSecond: Number.POSITIVE_INFINITY, burst: 1, concurrency: 1e6 },
      });
      if (r.status === 'ok') await s.release(key, [{ leaseId, cost: 1, source: r.source }]);
      return r.source === 'store';
    },
  },
};

export interface Connected {
  client: RedisClientLike;
  close(): void;
}

/** Each client library, connected to `port` on 127.0.0.1 (as `username` when given). */
export const clients: Record<
  'ioredis' | 'node-redis',
  (port: number, user?: { username: string; password: string }) => Promise<Connected>
> = {
  ioredis: async (port, user) => {
    const client = new Redis({ port, host: '127.0.0.1', ...user });
    client.on('error', () => {});
    await new Promise<void>((resolve) => client.once('ready', () => resolve()));
    return { client, close: () => client.disconnect() };
  },
  'node-redis': async (port, user) => {
    const client = createClient({ socket: { port, host: '127.0.0.1' }, ...user });
    client.on('error', () => {});
    await client.connect();
    return { client, close: () => client.destroy() };
  },
};

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until(condition: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
