/**
 * Fleet groups through a real redis-server that stops (SIGSTOP) for 1 s mid-transfer, or is killed
 * (SIGKILL) and restarted empty after 1 s (with streams in a fleet class too), under each policy:
 * the bound of the policy holds during the outage, the store answers again after it, and every
 * stream ends (nothing hangs). Real time, tolerant.
 */

import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisBandwidthStore } from '../../src/fleet/redis-bandwidth-store.js';
import type { FailurePolicy } from '../../src/stores/health.js';
import { ThrottleGroup } from '../../src/stream/group.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { byteSource } from '../stream/support.js';

const KiB = 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let server: RedisServer;
const clients: Redis[] = [];
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await server.stop();
});

describe.each([
  // what two processes may pass in a 1 s outage, as a multiple of the rate: deny, what they hold
  // (at most a lease of the rate, 0.2); local, each its half; allow, each the whole rate
  ['deny', 0.3],
  ['local', 1.3],
  ['allow', 2.6],
] as [FailurePolicy, number][])("a 1 s outage of Redis under '%s'", (policy, most) => {
  // pause: SIGSTOP, then SIGCONT; kill: SIGKILL, then a fresh, empty server on the same port;
  // classes: kill, with one of each process's streams in a fleet class (guaranteed, with a ceiling)
  it.each(['pause', 'kill', 'classes'] as const)(
    '(%s) keeps the bound, and every stream ends',
    async (fault) => {
      const rate = 512 * KiB;
      const groups = [0, 1].map(() => {
        const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
        client.on('error', () => {});
        clients.push(client);
        const store = new RedisBandwidthStore({
          client,
          onError: policy,
          expectedWorkers: 2,
          timeout: 100,
          probeInterval: 50,
          prefix: `faults-${policy}-${fault}`,
        });
        const root = new ThrottleGroup({ rate, store, key: 'egress' });
        const tenant = fault === 'classes' ? root.group({ key: 'tenant', guaranteed: rate / 4, rate: rate / 2 }) : root;
        return { root, tenant };
      });
      let passed = 0;
      const total = 1.5 * rate; // per stream: 4 streams end after about 6 s at the rate
      const runs = groups.flatMap(({ root, tenant }) =>
        [root, tenant].map((group) => {
          const source = byteSource(total, 16 * KiB);
          const sink = new Writable({
            write(c: Buffer, _e, cb) {
              passed += c.length;
              cb();
            },
          });
          return pipeline(source, group.throttle(), sink);
        }),
      );
      await sleep(1500);
      server.signal(fault === 'pause' ? 'SIGSTOP' : 'SIGKILL');
      await sleep(150); // the calls in flight time out: the policy answers from here
      const before = passed;
      await sleep(1000);
      const during = passed - before;
      if (fault === 'pause') server.signal('SIGCONT');
      else await server.restart();
      await Promise.all(runs);
      // the store answers again
      for (const { root, tenant } of groups) {
        expect(root.fleet?.source).toBe('store');
        expect(tenant.fleet?.source).toBe('store');
        root.destroy();
      }
      expect(during / rate).toBeLessThanOrEqual(most);
      // measured here: deny 0.01, local 1.00, allow 2.01 (x the rate, in the 1 s outage)
      if (policy === 'local') expect(during / rate).toBeGreaterThan(0.7); // each at its half
      if (policy === 'allow') expect(during / rate).toBeGreaterThan(1.4); // each at the whole rate
      expect(passed).toBe(4 * total); // every byte of every stream
    },
    60_000,
  );
});
