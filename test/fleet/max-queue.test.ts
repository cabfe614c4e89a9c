/**
 * `maxQueue` in a fleet counts what the local form counts: a job that the
 * local form would start at once waits for the store's first answer without
 * counting against `maxQueue`, and counts once the answer says it must wait.
 * Run on the three forms (local, MemoryFleetStore, RedisFleetStore), on a fake
 * clock; each case expects the local outcome.
 */

import { beforeAll, describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/index.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

/** 'ran', or the error's code. */
function outcome(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => 'ran',
    (error: unknown) => (isTokenpaceError(error) ? error.code : String(error)),
  );
}

describe.each(forms)('maxQueue ($name)', (form) => {
  // The first call opens the Redis connection: done here, so that no case's first answer is a timeout's.
  beforeAll(async () => {
    if (!form.redis) return;
    const { scheduler, timers } = setupForm(form, { concurrency: 1 });
    const done = scheduler.schedule(() => 0);
    await timers.runAllAsync();
    await done;
    await scheduler.close();
  });

  it('maxQueue 0 on an idle scheduler runs the job', async () => {
    const { scheduler, timers } = setupForm(form, { concurrency: 1, maxQueue: 0 });
    const result = outcome(scheduler.schedule(() => 'x'));
    await timers.runAllAsync();
    expect(await result).toBe('ran');
    await scheduler.close();
  });

  it('maxQueue 1, concurrency 1: two jobs both run', async () => {
    const { scheduler, timers, sleep } = setupForm(form, { concurrency: 1, maxQueue: 1 });
    const results = [scheduler.schedule(() => sleep(10)), scheduler.schedule(() => sleep(10))].map(outcome);
    await timers.runAllAsync();
    expect(await Promise.all(results)).toEqual(['ran', 'ran']);
    await scheduler.close();
  });

  it('maxQueue 0, concurrency 1: the second of two jobs is turned away', async () => {
    const { scheduler, timers, sleep } = setupForm(form, { concurrency: 1, maxQueue: 0 });
    const results = [scheduler.schedule(() => sleep(10)), scheduler.schedule(() => sleep(10))].map(outcome);
    await timers.runAllAsync();
    expect(await Promise.all(results)).toEqual(['ran', 'ERR_QUEUE_FULL']);
    await scheduler.close();
  });

  it('maxQueue 1 under a rate with burst 2: two start, one waits, the rest are turned away', async () => {
    const { scheduler, timers } = setupForm(form, { rate: 10, burst: 2, maxQueue: 1 });
    const results = Array.from({ length: 5 }, () => outcome(scheduler.schedule(() => 0)));
    await timers.runAllAsync();
    expect(await Promise.all(results)).toEqual(['ran', 'ran', 'ran', 'ERR_QUEUE_FULL', 'ERR_QUEUE_FULL']);
    await scheduler.close();
  });

  it('a flood holds no more than the local form: what could start, plus maxQueue', async () => {
    const { scheduler, timers, sleep } = setupForm(form, { concurrency: 2, maxQueue: 10 });
    const results = Array.from({ length: 1000 }, () => outcome(scheduler.schedule(() => sleep(10))));
    expect(scheduler.size + scheduler.pending).toBeLessThanOrEqual(12);
    await timers.runAllAsync();
    const outcomes = await Promise.all(results);
    expect(outcomes.filter((o) => o === 'ran')).toHaveLength(12);
    expect(outcomes.filter((o) => o === 'ERR_QUEUE_FULL')).toHaveLength(988);
    await scheduler.close();
  });
});
