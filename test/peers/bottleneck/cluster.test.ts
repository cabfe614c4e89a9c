/**
 * bottleneck's own tests, from test/cluster.js of SGrondin/bottleneck at v2.19.5 (MIT License, (c) Simon
 * Grondin): the cases on limits shared by several limiters that have an equivalent, run on the two
 * fleet forms (several Schedulers on one MemoryFleetStore or RedisFleetStore and one key), on a fake
 * clock. The local form has nothing to share. docs/peer-suites.md lists the other cases.
 */

import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { RedisFleetStore } from '../../../src/fleet/redis-fleet-store.js';
import { type FleetStore, MemoryFleetStore } from '../../../src/fleet/store.js';
import { Scheduler, type SchedulerOptions } from '../../../src/scheduler/scheduler.js';
import { fakeClock } from '../../helpers/fake-clock.js';

let client: Redis | undefined;
let keys = 0;
const prefix = `tokenpace-bottleneck-cluster-${process.pid}`;
afterAll(async () => {
  await client?.quit();
});

/** Workers of one fleet on a fake clock; `tick` moves it, letting every store call answer between timers. */
function fleetOf(redis: boolean) {
  const fake = fakeClock();
  const clock = fake.clock;
  const inFlight = new Set<Promise<unknown>>();
  let base: FleetStore;
  if (redis) {
    client ??= new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
    base = new RedisFleetStore({ client, prefix, onError: 'deny', now: () => clock.now() });
  } else {
    base = new MemoryFleetStore({ clock });
  }
  const store = new Proxy(base, {
    get(target, property) {
      const value = Reflect.get(target, property) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (result instanceof Promise) {
          inFlight.add(result);
          result.then(
            () => inFlight.delete(result),
            () => inFlight.delete(result),
          );
        }
        return result;
      };
    },
  });
  const key = `k${keys++}`;
  const settle = async () => {
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      if (inFlight.size === 0) return;
      await Promise.allSettled([...inFlight]);
    }
  };
  const nextTimerAt = (): number | undefined => {
    const timers = (fake.timers as unknown as { timers?: Map<number, { callAt: number }> }).timers;
    let next: number | undefined;
    for (const timer of timers?.values() ?? []) if (next === undefined || timer.callAt < next) next = timer.callAt;
    return next;
  };
  const tick = async (ms: number) => {
    const end = fake.timers.now + ms;
    for (;;) {
      await settle();
      const next = nextTimerAt();
      if (next === undefined || next > end) break;
      await fake.timers.tickAsync(Math.max(0, next - fake.timers.now));
    }
    await fake.timers.tickAsync(end - fake.timers.now);
    await settle();
  };
  const calls: Array<{ result: unknown; time: number }> = [];
  const slowPromise = (ms: number, result: unknown) =>
    new Promise<unknown>((resolve) =>
      clock.setTimeout(() => {
        calls.push({ result, time: clock.now() });
        resolve(result);
      }, ms),
    );
  const worker = (options: Omit<SchedulerOptions, 'clock' | 'store' | 'key'>) =>
    new Scheduler({ ...options, clock, store, key });
  return { clock, tick, settle, calls, slowPromise, worker };
}

describe.each([
  ['memory fleet', false],
  ['redis fleet', true],
])('Cluster (%s)', (_name, redis) => {
  it('Should use shared settings', async () => {
    const f = fleetOf(redis);
    const first = f.worker({ concurrency: 2 });
    const made = first.schedule(() => 0); // the key is made with concurrency 2
    await f.tick(0);
    await made;
    const limiter2 = f.worker({ concurrency: 1 });
    const jobs = [limiter2.schedule(() => f.slowPromise(100, 1)), limiter2.schedule(() => f.slowPromise(100, 2))];
    await f.tick(300);
    await Promise.all(jobs);
    expect(f.calls.map((c) => c.result)).toEqual([1, 2]);
    expect(f.calls.at(-1)?.time).toBe(100); // both at once: the stored concurrency (2) wins
    await Promise.all([first.close(), limiter2.close()]);
  });

  it('Should pass the remaining capacity to other limiters', async () => {
    const f = fleetOf(redis);
    const limiters = [1, 2, 3, 4].map(() => f.worker({ concurrency: 3 }));
    const [limiter1, limiter2, limiter3, limiter4] = limiters as [Scheduler, Scheduler, Scheduler, Scheduler];
    for (const [limiter, name] of [
      [limiter1, 'A'],
      [limiter2, 'B'],
      [limiter3, 'C'],
      [limiter4, 'D'],
    ] as const) {
      const job = limiter.schedule(() => f.slowPromise(0, name));
      await f.tick(0);
      await job;
    }
    const start = f.clock.now();
    const p1 = limiter1.schedule(() => f.slowPromise(50, 1), { cost: 2 });
    const p2 = limiter2.schedule(() => f.slowPromise(550, 2));
    await f.settle();
    expect(limiter1.pending + limiter1.size).toBe(1);
    expect(limiter2.pending + limiter2.size).toBe(1);
    const p3 = limiter3.schedule(() => f.slowPromise(50, 3));
    const p4 = limiter4.schedule(() => f.slowPromise(50, 4));
    const p5 = limiter4.schedule(() => f.slowPromise(50, 5));
    await f.settle();
    expect(limiter3.size).toBe(1);
    expect(limiter4.size).toBe(2);
    await f.tick(1000);
    await Promise.all([p1, p2, p3, p4, p5]);
    expect(f.calls.map((c) => c.result)).toEqual(['A', 'B', 'C', 'D', 1, 3, 4, 5, 2]);
    const t3 = f.calls.find((c) => c.result === 3)?.time as number;
    const t4 = f.calls.find((c) => c.result === 4)?.time as number;
    expect(Math.abs(t3 - t4)).toBeLessThan(15);
    // tokenpace: the waiting workers ask again every `pollInterval` (20 ms): 3 and 4 start within one poll of 50 ms.
    expect(t3 - start).toBeLessThanOrEqual(50 + 20 + 50);
    await Promise.all(limiters.map((l) => l.close()));
  });
});
