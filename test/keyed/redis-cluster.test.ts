/**
 * A real three-node Redis Cluster, started by this file
 * (`redis-server --cluster-enabled yes` on free ports, `redis-cli --cluster create`):
 * the contract suite through both clients' cluster modes, keys spread over the
 * nodes without a global limit, and in one slot with one; the fleet store's
 * contract, and fleet keys (one slot per fleet key, fleets spread over the
 * nodes) under a Scheduler's fleet form.
 */

import { Cluster, Redis } from 'ioredis';
import { createCluster } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import { RedisWindowStore } from '../../src/keyed/window-store.js';
import { clusterSlot } from '../../src/redis/cluster-slot.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { fleetContract } from '../fleet/contract.js';
import { type RedisCluster, startRedisCluster } from '../helpers/redis-server.js';
import { storeContract } from './contract.js';

let cluster: RedisCluster;
let ioCluster: Cluster;
let nodeCluster: ReturnType<typeof createCluster>;
let n = 0;

beforeAll(async () => {
  cluster = await startRedisCluster();
  ioCluster = new Cluster(cluster.seeds);
  await new Promise<void>((resolve, reject) => {
    ioCluster.once('ready', () => resolve());
    ioCluster.once('error', reject);
  });
  nodeCluster = createCluster({ rootNodes: cluster.seeds.map((s) => ({ url: `redis://${s.host}:${s.port}` })) });
  nodeCluster.on('error', () => {});
  await nodeCluster.connect();
}, 30_000);

afterAll(async () => {
  ioCluster?.disconnect();
  await nodeCluster?.close();
  await cluster?.stop();
});

/** Keys held by each node. */
async function keysPerNode(pattern: string): Promise<number[]> {
  const counts = [];
  for (const node of cluster.nodes) {
    const client = new Redis({ port: node.port, host: '127.0.0.1' });
    counts.push((await client.keys(pattern)).length);
    client.disconnect();
  }
  return counts;
}

storeContract(
  'RedisStore (ioredis Cluster)',
  (now) => new RedisStore({ client: ioCluster, prefix: `cc-io-${++n}`, onError: 'deny', now, timeout: 1000 }),
);
storeContract(
  'RedisStore (node-redis cluster)',
  (now) => new RedisStore({ client: nodeCluster, prefix: `cc-nr-${++n}`, onError: 'deny', now, timeout: 1000 }),
);

describe('RedisStore on a three-node cluster', () => {
  it("computes Redis's slot for a key, hash tags included", async () => {
    const probe = new Redis({ port: cluster.nodes[0]?.port, host: '127.0.0.1' });
    for (const key of [
      'tokenpace:k:user:1',
      '{tokenpace}:k:user:1',
      '{tokenpace}:g',
      'a{}b',
      'a{b}c{d}',
      'é€',
      '{',
      '}{x}',
    ]) {
      expect(clusterSlot(key)).toBe(Number(await probe.call('cluster', 'keyslot', key)));
    }
    probe.disconnect();
  });

  for (const [name, client] of [
    ['ioredis', () => ioCluster],
    ['node-redis', () => nodeCluster],
  ] as const) {
    it(`${name}: without a global limit, keys spread over every node; 300 concurrent decisions are exact`, async () => {
      const prefix = `spread-${name}`;
      const store = new RedisStore({ client: client(), prefix, onError: 'deny', timeout: 2000 });
      const failures: string[] = [];
      store.on('failure', ({ error }) => failures.push(error.message));
      const limiter = new KeyedLimiter({ rate: 0.001, burst: 2, store });
      const decisions = await Promise.all(Array.from({ length: 300 }, (_, i) => limiter.tryTake(`user:${i % 100}`)));
      expect(failures).toEqual([]);
      expect(decisions.filter((d) => d.allowed)).toHaveLength(200);
      const perNode = await keysPerNode(`${prefix}:k:*`);
      expect(perNode.reduce((a, b) => a + b, 0)).toBe(100);
      for (const count of perNode) expect(count).toBeGreaterThan(10);
    });

    it(`${name}: with a global limit, every key and the global bucket share one slot; the global is exact`, async () => {
      const prefix = `global-${name}`;
      const store = new RedisStore({ client: client(), prefix, onError: 'deny', timeout: 2000 });
      const limiter = new KeyedLimiter({ rate: 0.001, burst: 5, global: { rate: 0.001, burst: 120 }, store });
      const decisions = await Promise.all(Array.from({ length: 400 }, (_, i) => limiter.tryTake(`user:${i % 50}`)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(120);
      const perNode = await keysPerNode(`{${prefix}}:*`);
      expect(perNode.filter((c) => c > 0)).toHaveLength(1);
      expect(perNode.reduce((a, b) => a + b, 0)).toBe(51); // 50 keys + the global bucket
    });

    it(`${name}: per-key windows (fixed, sliding counter) spread over every node; 300 concurrent decisions are exact`, async () => {
      for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
        const prefix = `window-${algorithm}-${name}`;
        const store = new RedisWindowStore({ client: client(), prefix, onError: 'deny', timeout: 2000 });
        const limiter = new KeyedLimiter({ algorithm, limit: 2, window: '1 h', store });
        const decisions = await Promise.all(Array.from({ length: 300 }, (_, i) => limiter.tryTake(`user:${i % 100}`)));
        expect(decisions.filter((d) => d.allowed)).toHaveLength(200);
        const perNode = await keysPerNode(`${prefix}:w:*`);
        expect(perNode.reduce((a, b) => a + b, 0)).toBe(100);
        for (const count of perNode) expect(count).toBeGreaterThan(10);
        await limiter.reset('user:1');
        expect((await limiter.tryTake('user:1')).allowed).toBe(true);
      }
    });
  }
});

describe('RedisFleetStore (ioredis Cluster)', () => {
  fleetContract({ make: () => new RedisFleetStore({ client: ioCluster, onError: 'deny', timeout: 2000 }) });
});

describe('RedisFleetStore (node-redis cluster)', () => {
  fleetContract({ make: () => new RedisFleetStore({ client: nodeCluster, onError: 'deny', timeout: 2000 }) });
});

describe('fleet keys on a three-node cluster', () => {
  for (const [name, client] of [
    ['ioredis', () => ioCluster],
    ['node-redis', () => nodeCluster],
  ] as const) {
    it(`${name}: each fleet key's five keys share one slot; fleets spread over the nodes; the budget holds`, async () => {
      const prefix = `fleet-${name}`;
      const store = new RedisFleetStore({ client: client(), prefix, onError: 'deny', timeout: 2000 });
      const failures: string[] = [];
      store.on('failure', ({ error }) => failures.push(error.message));
      const fleets = Array.from({ length: 12 }, (_, i) => {
        const scheduler = new Scheduler({ store, key: `fleet-${i}`, concurrency: 2, lease: 5000 });
        let running = 0;
        let highest = 0;
        const jobs = Array.from({ length: 20 }, () =>
          scheduler.schedule(async () => {
            running++;
            highest = Math.max(highest, running);
            await new Promise((r) => setTimeout(r, 2));
            running--;
          }),
        );
        return { scheduler, jobs, highest: () => highest };
      });
      // a key's leases outlive its jobs by their lease: look while they are held
      const one = fleets[0]?.scheduler.schedule(() => keysPerNode(`{${prefix}:fleet-0}:*`));
      const perKey = (await one) as number[];
      expect(perKey.filter((c) => c > 0)).toHaveLength(1);
      for (const fleet of fleets) await Promise.all(fleet.jobs);
      expect(failures).toEqual([]);
      for (const fleet of fleets) expect(fleet.highest()).toBeLessThanOrEqual(2);
      for (const fleet of fleets) expect(fleet.scheduler.counters.completed).toBe(fleet === fleets[0] ? 21 : 20);
      const slots = new Set(fleets.map((_, i) => clusterSlot(`{${prefix}:fleet-${i}}:s`)));
      expect(slots.size).toBeGreaterThan(1);
      const perNode = await keysPerNode(`{${prefix}:*}:s`);
      expect(perNode.filter((c) => c > 0).length).toBeGreaterThan(1);
      for (const fleet of fleets) await fleet.scheduler.close();
    });
  }
});
