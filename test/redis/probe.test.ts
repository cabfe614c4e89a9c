/**
 * A store's probe shows that a decision can succeed, not only that Redis
 * answers. A read-only replica and a Redis out of memory both answer PING
 * and refuse every write, so each of the three stores in Redis must stay
 * degraded through them (one `degraded`, no `recovered`, each probe a
 * `failure`) while decisions keep coming, and recover once, when a decision
 * can succeed again (the replica promoted, the memory freed).
 *
 * Out of memory, the error is Redis's "OOM command not allowed when used
 * memory > 'maxmemory'": the failure policy decides, and once memory is back
 * decisions go to Redis by the same path as before (EVALSHA, no EVAL).
 *
 * This file starts its own servers: a primary and its replica, and a small
 * server with `--maxmemory 3mb --maxmemory-policy noeviction`, which it fills
 * with other values. Times are real, so the bounds are generous.
 */

import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { clients, type Store, type Subject, sleep, subjects, until } from './stores.js';

/** Long enough that a loaded machine does not time a call out: the faults here are refusals. */
const TIMEOUT_MS = 1000;
const PROBE_MS = 50;
/** How long decisions keep coming while Redis cannot decide: about 16 probes. */
const FAULT_MS = 800;

/** Calls of `command` a server has run since it started (INFO commandstats). */
async function calls(admin: Redis, command: 'eval' | 'evalsha'): Promise<number> {
  const info = String(await admin.info('commandstats'));
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
}

let primary: RedisServer;
let replica: RedisServer;
let small: RedisServer;
let replicaAdmin: Redis;
let smallAdmin: Redis;

/** Makes `replica` a replica of `primary` again, synchronised. */
async function follow(): Promise<void> {
  await replicaAdmin.call('REPLICAOF', '127.0.0.1', String(primary.port));
  await until(
    async () => String(await replicaAdmin.info('replication')).includes('master_link_status:up'),
    10_000,
    'the replica to sync',
  );
}

beforeAll(async () => {
  primary = await startRedis(['--repl-diskless-sync-delay', '0']); // a replica syncs at once
  replica = await startRedis(['--replicaof', '127.0.0.1', String(primary.port)]);
  small = await startRedis(['--maxmemory', '3mb', '--maxmemory-policy', 'noeviction']);
  replicaAdmin = new Redis({ port: replica.port, host: '127.0.0.1' });
  smallAdmin = new Redis({ port: small.port, host: '127.0.0.1' });
  await follow();
});
afterAll(async () => {
  replicaAdmin.disconnect();
  smallAdmin.disconnect();
  await Promise.all([replica.stop(), primary.stop(), small.stop()]);
});

let n = 0;

/** A fresh store on a fresh client to `port`, with its events recorded. */
async function open(subject: Subject, clientName: keyof typeof clients, port: number) {
  const { client, close } = await clients[clientName](port);
  const store = subject.make(client, `probe-${process.pid}-${++n}`, {
    onError: 'deny',
    timeout: TIMEOUT_MS,
    probeInterval: PROBE_MS,
  });
  const events = { degraded: 0, recovered: 0, failures: [] as string[] };
  store.on('degraded', () => events.degraded++);
  store.on('recovered', () => events.recovered++);
  store.on('failure', ({ error }) => events.failures.push(error.message));
  const done = async () => {
    store.close();
    close();
  };
  return { store, events, done };
}

/** Decisions every 10 ms for `ms`: how many Redis made. */
async function decideFor(subject: Subject, store: Store, ms: number): Promise<{ all: number; byRedis: number }> {
  const end = Date.now() + ms;
  let all = 0;
  let byRedis = 0;
  while (Date.now() < end) {
    all++;
    if (await subject.take(store, `k-${all % 4}`)) byRedis++;
    await sleep(10);
  }
  return { all, byRedis };
}

for (const [storeName, subject] of Object.entries(subjects)) {
  describe.each(['ioredis', 'node-redis'] as const)(`${storeName} with %s`, (clientName) => {
    it('on a read-only replica: degraded once, no recovered while no decision can succeed; recovered once promoted', async () => {
      const { store, events, done } = await open(subject, clientName, replica.port);
      try {
        const during = await decideFor(subject, store, FAULT_MS);
        expect(during.byRedis).toBe(0);
        expect(events.degraded).toBe(1);
        expect(events.recovered).toBe(0);
        expect(store.healthy).toBe(false);
        expect(events.failures.length).toBeGreaterThanOrEqual(3); // the first call and the probes
        for (const message of events.failures) expect(message).toMatch(/READONLY/);

        await replicaAdmin.call('REPLICAOF', 'NO', 'ONE'); // a fail-over promotes it
        await until(() => store.healthy, 5000, 'recovery');
        const after = await decideFor(subject, store, 200);
        expect(after.byRedis).toBe(after.all);
        expect([events.degraded, events.recovered]).toEqual([1, 1]);
      } finally {
        await done();
        await follow();
      }
    }, 20_000);

    it('out of memory: the failure policy decides (no ACL refusal), no flapping, then EVALSHA again', async () => {
      const { store, events, done } = await open(subject, clientName, small.port);
      try {
        expect(await subject.take(store, 'k-0')).toBe(true);
        // fill the memory with other values until Redis refuses writes
        const filler = 'x'.repeat(10_000);
        for (let i = 0; ; i++) {
          const refused = await smallAdmin.set(`fill:${i}`, filler).then(
            () => false,
            (error: Error) => /^OOM /.test(error.message),
          );
          if (refused) break;
          if (i > 10_000) throw new Error('the server never ran out of memory');
        }
        // and the limit below the memory in use, so that keys expiring meanwhile cannot bring it back
        // under: Redis stays out of memory until the values go
        const used = Number(/used_memory:(\d+)/.exec(String(await smallAdmin.info('memory')))?.[1]);
        await smallAdmin.config('SET', 'maxmemory', String(used - 256 * 1024));

        const during = await decideFor(subject, store, FAULT_MS);
        expect(during.byRedis).toBe(0);
        expect([events.degraded, events.recovered]).toEqual([1, 0]);
        expect(events.failures.length).toBeGreaterThanOrEqual(3);
        for (const message of events.failures) {
          expect(message).toMatch(/OOM command not allowed when used memory > 'maxmemory'/);
        }

        const fills = await smallAdmin.keys('fill:*');
        for (let i = 0; i < fills.length; i += 100) await smallAdmin.del(...fills.slice(i, i + 100));
        await until(() => store.healthy, 5000, 'recovery');
        await sleep(50); // the fleet's renewals after recovery
        const [sha, evals] = [await calls(smallAdmin, 'evalsha'), await calls(smallAdmin, 'eval')];
        const after = await decideFor(subject, store, 200);
        expect(after.byRedis).toBe(after.all);
        // the same path as before the fault: EVALSHA, the script still loaded
        expect(await calls(smallAdmin, 'evalsha')).toBeGreaterThanOrEqual(sha + after.all);
        expect(await calls(smallAdmin, 'eval')).toBe(evals);
        expect([events.degraded, events.recovered]).toEqual([1, 1]);
      } finally {
        await done();
        await smallAdmin.flushall();
        await smallAdmin.config('SET', 'maxmemory', '3mb');
      }
    }, 30_000);
  });
}
