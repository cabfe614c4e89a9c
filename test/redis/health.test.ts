/**
 * StoreHealth's probe and eviction check (src/stores/health.ts), and
 * readMaxmemory (src/redis/eviction.ts), on fake clients and a fake clock:
 *
 * - a probe that fails keeps the store degraded, however often it runs: one
 *   `degraded`, a `failure` per probe, and one `recovered` at the first probe
 *   that succeeds (a Redis that answers PING but refuses decisions must not
 *   make a store flap);
 * - the first call reads the eviction policy, each recovery reads it again,
 *   and a policy that may evict is an `eviction` event each time it is read;
 * - the policy is read by CONFIG GET, or from INFO memory when CONFIG is
 *   refused, from either client's reply shapes; unknown when both fail.
 */

import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { mayEvict, readMaxmemory } from '../../src/redis/eviction.js';
import { type MaxmemorySettings, type StoreEvents, StoreHealth } from '../../src/stores/health.js';
import { fakeClock } from '../helpers/fake-clock.js';

const flush = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

function health(probe: () => Promise<unknown>, read?: () => Promise<MaxmemorySettings | undefined>) {
  const fake = fakeClock(1000);
  const owner = new EventEmitter<StoreEvents>();
  const events: string[] = [];
  owner.on('degraded', () => events.push('degraded'));
  owner.on('recovered', ({ downMs }) => events.push(`recovered after ${downMs}`));
  owner.on('failure', ({ error, operations }) => events.push(`failure (${operations}): ${error.message}`));
  owner.on('eviction', ({ policy }) => events.push(`eviction: ${policy}`));
  const h = new StoreHealth({
    owner,
    failure: { policy: 'deny', timeoutMs: 100, probeIntervalMs: 50 },
    clock: fake.clock,
    probe,
    stats: { failures: 0 },
    backend: 'Redis',
    eviction: read === undefined ? undefined : { read, mayEvict },
  });
  return { h, events, ...fake };
}

describe('StoreHealth probes', () => {
  it('stays degraded while the probe fails (a replica, a full Redis), and recovers once at the first success', async () => {
    let refuse = true;
    const { h, events, timers } = health(() =>
      refuse
        ? Promise.reject(new Error("READONLY You can't write against a read only replica."))
        : Promise.resolve(['1']),
    );
    h.failed(new Error("READONLY You can't write against a read only replica."), 1);
    for (let i = 0; i < 10; i++) {
      await timers.tickAsync(50);
      await flush();
    }
    expect(h.healthy).toBe(false);
    expect(events.filter((e) => e === 'degraded')).toHaveLength(1);
    expect(events.filter((e) => e.startsWith('recovered'))).toHaveLength(0);
    expect(events.filter((e) => e.startsWith('failure (0): READONLY'))).toHaveLength(10);
    refuse = false;
    await timers.tickAsync(50);
    await flush();
    expect(h.healthy).toBe(true);
    expect(events.at(-1)).toBe('recovered after 550');
  });
});

describe('StoreHealth eviction check', () => {
  it('reads the policy at the first call and after each recovery; each read of an evicting one is an event', async () => {
    const policies = ['noeviction', 'volatile-lru', 'allkeys-lru'];
    let reads = 0;
    const { h, events, timers } = health(
      () => Promise.resolve(['1']),
      () => Promise.resolve({ policy: policies[reads++] as string, maxmemoryBytes: 0 }),
    );
    expect(h.maxmemory).toBeUndefined();
    await h.withTimeout(Promise.resolve(1));
    await h.withTimeout(Promise.resolve(2));
    await flush();
    expect(reads).toBe(1);
    expect(h.maxmemory).toEqual({ policy: 'noeviction', maxmemoryBytes: 0 });
    expect(events).toEqual([]);
    for (const policy of ['volatile-lru', 'allkeys-lru']) {
      h.failed(new Error('down'), 1);
      await timers.tickAsync(50);
      await flush();
      expect(h.maxmemory?.policy).toBe(policy);
      expect(events.at(-1)).toBe(`eviction: ${policy}`);
    }
    expect(reads).toBe(3);
  });

  it('an answer later than the timeout leaves the policy unknown, with no event and no failure', async () => {
    const { h, events, timers } = health(
      () => Promise.resolve(['1']),
      () => new Promise(() => {}),
    );
    await h.withTimeout(Promise.resolve(1));
    await timers.tickAsync(150);
    await flush();
    expect(h.maxmemory).toBeUndefined();
    expect(events).toEqual([]);
    expect(h.healthy).toBe(true);
  });
});

describe('readMaxmemory', () => {
  const info =
    '# Memory\r\nused_memory:1000\r\nmaxmemory:3145728\r\nmaxmemory_human:3.00M\r\nmaxmemory_policy:allkeys-lru\r\n';
  const lru = { policy: 'allkeys-lru', maxmemoryBytes: 3145728 };

  it("reads ioredis's CONFIG GET reply (a flat array)", async () => {
    const sent: unknown[][] = [];
    const client = {
      config: (...args: unknown[]) => {
        sent.push(args);
        return Promise.resolve(['maxmemory', '3145728', 'maxmemory-policy', 'allkeys-lru', 'maxmemory-samples', '5']);
      },
    };
    expect(await readMaxmemory(client as never, false)).toEqual(lru);
    expect(sent).toEqual([['GET', 'maxmemory*']]);
  });

  it("reads node-redis's CONFIG GET reply (an object, or a Map)", async () => {
    const object = { configGet: () => Promise.resolve({ maxmemory: '0', 'maxmemory-policy': 'noeviction' }) };
    expect(await readMaxmemory(object as never, true)).toEqual({ policy: 'noeviction', maxmemoryBytes: 0 });
    const map = { configGet: () => Promise.resolve(new Map([['maxmemory-policy', 'volatile-ttl']])) };
    expect(await readMaxmemory(map as never, true)).toEqual({ policy: 'volatile-ttl', maxmemoryBytes: undefined });
  });

  it('falls back to INFO memory when CONFIG is refused (an ACL, a renamed command) or absent', async () => {
    const refused = {
      config: () =>
        Promise.reject(new Error("NOPERM User noconfig has no permissions to run the 'config|get' command")),
      info: (section: string) => Promise.resolve(section === 'memory' ? info : ''),
    };
    expect(await readMaxmemory(refused as never, false)).toEqual(lru);
    const absent = { info: () => Promise.resolve(Buffer.from(info)) };
    expect(await readMaxmemory(absent as never, true)).toEqual(lru);
  });

  it('is undefined when neither answers, and never rejects', async () => {
    const neither = {
      config: () => Promise.reject(new Error('NOPERM')),
      info: () => Promise.reject(new Error('NOPERM')),
    };
    expect(await readMaxmemory(neither as never, false)).toBeUndefined();
    expect(await readMaxmemory({} as never, false)).toBeUndefined();
    const throws = {
      configGet: () => {
        throw new Error('closed');
      },
      info: () => Promise.resolve('nothing'),
    };
    expect(await readMaxmemory(throws as never, true)).toBeUndefined();
  });

  it('says which policies may evict: all but noeviction', () => {
    expect(mayEvict('noeviction')).toBe(false);
    for (const policy of [
      'allkeys-lru',
      'allkeys-lfu',
      'allkeys-random',
      'volatile-lru',
      'volatile-lfu',
      'volatile-random',
      'volatile-ttl',
    ]) {
      expect(mayEvict(policy)).toBe(true);
    }
  });
});
