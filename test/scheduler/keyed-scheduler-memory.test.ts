/**
 * KeyedScheduler's memory, on the real heap after forced collections: an idle key that is kept (its
 * bucket not yet full) costs about what its Scheduler does, and a key whose bucket is full again
 * costs nothing once a new key comes (the table drops it).
 */

import { describe, expect, it } from 'vitest';
import { KeyedScheduler } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { heapAfterGc } from '../helpers/heap.js';

const KEYS = 5000;

async function runOneJobEach(keyed: KeyedScheduler, prefix: string): Promise<void> {
  for (let done = 0; done < KEYS; done += 500) {
    const jobs: Promise<unknown>[] = [];
    for (let i = done; i < done + 500; i++) jobs.push(keyed.schedule(`${prefix}${i}`, () => i));
    await Promise.all(jobs);
  }
}

describe('KeyedScheduler: memory per key', () => {
  it('an idle key kept costs a few KB (its Scheduler), with or without a global limit', async () => {
    for (const global of [undefined, { rate: 1e9, burst: 1e9 }]) {
      const { clock } = fakeClock();
      const keyed = new KeyedScheduler({ rate: 1, burst: 10, concurrency: 4, maxKeys: 2 * KEYS, global, clock });
      await runOneJobEach(keyed, 'warm:');
      const before = await heapAfterGc();
      await runOneJobEach(keyed, 'tenant:');
      const perKey = ((await heapAfterGc()) - before) / KEYS;
      expect(keyed.keyCount).toBe(2 * KEYS);
      expect(perKey).toBeGreaterThan(100); // a Scheduler each: the figure is real
      expect(perKey).toBeLessThan(8 * 1024);
    }
  }, 60_000);

  it('keys whose buckets are full again are dropped as new keys come: memory stays flat', async () => {
    const { clock, timers } = fakeClock();
    const keyed = new KeyedScheduler({ rate: 1000, burst: 1, concurrency: 4, clock });
    await runOneJobEach(keyed, 'first:');
    await timers.tickAsync(10);
    await runOneJobEach(keyed, 'second:'); // sees the first ones idle
    await timers.tickAsync(10);
    const before = await heapAfterGc();
    for (let round = 0; round < 5; round++) {
      await runOneJobEach(keyed, `round${round}:`);
      await timers.tickAsync(10);
    }
    const after = await heapAfterGc();
    expect(keyed.keyCount).toBeLessThanOrEqual(2 * KEYS); // one round kept, the one before being dropped
    expect((after - before) / (5 * KEYS)).toBeLessThan(200);
  }, 60_000);
});
