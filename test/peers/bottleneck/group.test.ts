/**
 * bottleneck's own tests, from test/group.js of SGrondin/bottleneck at v2.19.5 (MIT License, (c) Simon
 * Grondin), on tokenpace's KeyedScheduler, bottleneck's `Group`: `group.key(k).schedule(fn)` is
 * `keyed.schedule(k, fn)`. The options map as in ./harness.ts (`maxConcurrent` is `concurrency`,
 * `minTime: t` is `rate: 1000 / t, burst: 1`), on a fake clock. The cases with no equivalent, and the
 * deliberate differences, are listed in docs/peer-suites.md.
 */

import { describe, expect, it } from 'vitest';
import { KeyedScheduler } from '../../../src/scheduler/keyed-scheduler.js';
import { fakeClock } from '../../helpers/fake-clock.js';
import { schedulerOptions } from './harness.js';

function makeGroup(options: { maxConcurrent?: number; minTime?: number }) {
  const fake = fakeClock();
  const group = new KeyedScheduler({ ...schedulerOptions(options), clock: fake.clock });
  const results: unknown[][] = [];
  /** bottleneck's `job`: records its arguments, then resolves 50 ms later. */
  const job =
    (...result: unknown[]) =>
    () => {
      results.push(result);
      return new Promise<void>((resolve) => fake.timers.setTimeout(() => resolve(), 50));
    };
  return { ...fake, group, results, job };
}

describe('Group', () => {
  it('Should create limiters', async () => {
    const { group, results, job, timers } = makeGroup({ maxConcurrent: 1, minTime: 100 });
    void group.schedule('A', job(1, 2));
    void group.schedule('A', job(3));
    void group.schedule('A', job(4));
    timers.setTimeout(() => void group.schedule('B', job(5)), 20);
    timers.setTimeout(() => {
      void group.schedule('C', job(6));
      void group.schedule('C', job(7));
    }, 40);
    await timers.runAllAsync();
    expect(results).toEqual([[1, 2], [5], [6], [3], [7], [4]]);
  });

  it('Should pass error on failure', async () => {
    const failureMessage = 'SOMETHING BLEW UP!!';
    const { group, results, job, timers } = makeGroup({ maxConcurrent: 1, minTime: 100 });
    expect(group.keys()).toEqual([]); // bottleneck: Object.keys(group.limiters)
    void group.schedule('A', job(1, 2));
    void group.schedule('A', job(3));
    void group.schedule('A', job(4));
    group
      .schedule('B', () => Promise.reject(new Error(failureMessage)))
      .catch((err: Error) => results.push(['CAUGHT', err.message]));
    timers.setTimeout(() => {
      void group.schedule('C', job(6));
      void group.schedule('C', job(7));
    }, 40);
    await timers.runAllAsync();
    expect(results).toEqual([[1, 2], ['CAUGHT', failureMessage], [6], [3], [7], [4]]);
  });

  it('Should support keys(), limiters(), deleteKey()', async () => {
    // tokenpace: `scheduler(key)` is a key's Scheduler (bottleneck's limiters()); there is no
    // deleteKey(): a key goes by itself once it is idle and equals a new one (the next case).
    const { group, timers } = makeGroup({ maxConcurrent: 1 });
    const KEY_A = 'AAA';
    const KEY_B = 'BBB';
    const slow = () => new Promise<void>((resolve) => timers.setTimeout(() => resolve(), 10));
    const a = group.schedule(KEY_A, slow);
    const b = group.schedule(KEY_B, slow);
    const keys = group.keys();
    expect(keys).toEqual([KEY_A, KEY_B]);
    for (const key of keys) expect(group.scheduler(key)?.pending).toBe(1);
    await timers.runAllAsync();
    await Promise.all([a, b]);
  });

  it('Should call autocleanup', async () => {
    // tokenpace: no idle timeout and no timer per key. The table looks at keys when a new key comes;
    // a key it has seen idle is dropped once its bucket is full again (burst / rate later, 50 ms here).
    const KEY = 'test-key';
    const { group, timers } = makeGroup({ maxConcurrent: 1, minTime: 50 });
    await group.schedule(KEY, () => Promise.resolve());
    expect(group.keys()).toContain(KEY);
    await timers.tickAsync(100);
    await group.schedule('another key', () => Promise.resolve()); // sees it idle
    await timers.tickAsync(100);
    await group.schedule('a third key', () => Promise.resolve());
    expect(group.keys()).not.toContain(KEY);
  });
});
