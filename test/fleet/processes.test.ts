/**
 * Real worker processes sharing one Scheduler (fleet form) through one real
 * Redis: the weighted concurrency budget (never exceeded), and a worker killed
 * with SIGKILL mid-job. The shared rate over 60 s is ./rate-4-processes-60s.test.ts.
 */

import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { Workers } from './workers.js';

const workers = new Workers('fleet-child');
beforeAll(() => workers.build());
afterAll(() => workers.killAll());

it('weighted concurrency: 4 processes, budget 5, costs 1..3: the in-flight weight in Redis never exceeds 5', async () => {
  const counter = `weight-counter-${process.pid}-${Date.now()}`;
  const results = await workers.runAll(inject('redisPort'), 'weight', {
    concurrency: 5,
    durationMs: 2500,
    counter,
    leaseMs: 2000,
  });
  const highest = Math.max(...results.map((r) => r.highest as number));
  const jobs = results.reduce((s, r) => s + (r.jobs as number), 0);
  console.log(`fleet weight: highest ${highest}, ${jobs} jobs, per worker ${results.map((r) => r.jobs).join(' ')}`);
  expect(highest).toBeLessThanOrEqual(5);
  expect(highest).toBeGreaterThanOrEqual(4); // it was really contended
  expect(jobs).toBeGreaterThan(200);
}, 30_000);

it('a worker killed with SIGKILL mid-job: its units come back when its lease expires', async () => {
  const key = `kill-${process.pid}-${Date.now()}`;
  const leaseMs = 600;
  const victim = workers.start(inject('redisPort'), key, 'hold', { concurrency: 4, cost: 4, leaseMs });
  expect(await victim.next()).toBe('ready');
  victim.process.stdin?.write('go\n');
  expect(await victim.next()).toBe('holding');
  const client = new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
  const store = new RedisFleetStore({ client, onError: 'deny', timeout: 2000 });
  const survivor = new Scheduler({ store, key, concurrency: 4, lease: leaseMs, pollInterval: 10 });
  let startedAt = 0;
  const job = survivor.schedule(() => {
    startedAt = performance.now();
  });
  // renewed while the victim lives: nothing starts for longer than a lease
  await new Promise((r) => setTimeout(r, leaseMs * 1.5));
  expect(startedAt).toBe(0);
  const exited = new Promise((r) => victim.process.once('exit', r));
  victim.process.kill('SIGKILL');
  const killedAt = performance.now();
  await exited;
  await job;
  const backAfterMs = startedAt - killedAt;
  console.log(`fleet kill: units back ${backAfterMs.toFixed(0)} ms after SIGKILL (leaseMs ${leaseMs})`);
  expect(backAfterMs).toBeGreaterThan(0);
  expect(backAfterMs).toBeLessThanOrEqual(leaseMs + 200);
  client.disconnect();
}, 20_000);
