/**
 * Retry hints a client can follow: `retryAfterMs` on `QueueFullError` and
 * `WaitTooLongError` is whole milliseconds, includes the margin by which
 * Node's timers fire early, is the real wait with `maxQueue: 0` and under a
 * concurrency, and spreads callers refused together so that they do not
 * come back as one stampede.
 *
 * Two real-time tests (few, tolerant): a client that waits its hint with
 * `setTimeout` is admitted, and 1000 callers that follow their hints need
 * about two attempts each.
 */

import { setTimeout as sleepReal } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { isTokenpaceError, Scheduler, type SchedulerOptions, TokenBucket } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

const retryOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'admitted',
    (error: unknown) => (error as { retryAfterMs: number }).retryAfterMs,
  );

describe.each(forms)('retry hints, fake clock ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);
  describe('retryAfterMs', () => {
    // A fleet's hint is the wait predicted from the store's bucket as last reported (at least the poll interval while the
    // shared concurrency is full): with maxQueue 0 every job is rejected, and a burst is not spread.
    it.skipIf(form.fleet)('maxQueue 0 under a rate: the wait for the tokens, not 0', async () => {
      const { scheduler } = setup({ rate: 10, maxQueue: 0 });
      await scheduler.schedule(() => 0);
      expect(await retryOf(scheduler.schedule(() => 0))).toBe(102); // 100 ms at 10/s, + 2 ms margin
    });

    // A fleet's hint is the wait predicted from the store's bucket as last reported (at least the poll interval while the
    // shared concurrency is full): with maxQueue 0 every job is rejected, and a burst is not spread.
    it.skipIf(form.fleet)('maxQueue 0 under a concurrency: an estimate from how fast slots free, not 0', async () => {
      const { scheduler, timers, sleep } = setup({ concurrency: 1, maxQueue: 0 });
      const job = () => sleep(50);
      const first = scheduler.schedule(job);
      await timers.tickAsync(20);
      // Nothing finished yet: as long again as the running job has run (20 ms).
      expect(await retryOf(scheduler.schedule(job))).toBe(22);
      await timers.tickAsync(30);
      await first;
      const second = scheduler.schedule(job);
      await timers.tickAsync(10);
      expect(await retryOf(scheduler.schedule(job))).toBe(12); // still no gap between finishes: as long again (10 ms)
      await timers.tickAsync(40);
      await second;
      const third = scheduler.schedule(job);
      await timers.tickAsync(5);
      // Finishes at 50 and 100: 50 ms apart, so the slot frees at 150 (45 ms from now).
      expect(await retryOf(scheduler.schedule(job))).toBe(47);
      await timers.runAllAsync();
      await third;
    });

    it('WaitTooLongError.retryAfterMs means the same in TokenBucket.take and Scheduler: wait - maxWait', async () => {
      const { clock } = fakeClock();
      const bucket = new TokenBucket({ rate: 1, burst: 1, clock });
      await bucket.take();
      const fromBucket = await bucket.take(1, { maxWait: 500 }).catch((e: unknown) => e);
      const { scheduler } = setup({ rate: 1, maxWait: 500 });
      await scheduler.schedule(() => 0);
      const fromScheduler = await scheduler.schedule(() => 0).catch((e: unknown) => e);
      for (const error of [fromBucket, fromScheduler]) {
        expect(error).toMatchObject({ code: 'ERR_WAIT_TOO_LONG', waitMs: 1000, maxWaitMs: 500, retryAfterMs: 502 });
      }
    });

    // A fleet's hint is the wait predicted from the store's bucket as last reported (at least the poll interval while the
    // shared concurrency is full): with maxQueue 0 every job is rejected, and a burst is not spread.
    it.skipIf(form.fleet)(
      'a burst of refusals is spread: the k-th is told when there is room for the k-th',
      async () => {
        const { scheduler } = setup({ rate: 100, burst: 1, maxQueue: 5 });
        const jobs = Array.from({ length: 6 }, () => scheduler.schedule(() => 0)); // 1 runs, 5 wait
        const hints = await Promise.all(Array.from({ length: 4 }, () => retryOf(scheduler.schedule(() => 0))));
        expect(hints).toEqual([12, 22, 32, 42]); // the head starts at 10 ms, then one every 10 ms
        await Promise.all(jobs.slice(0, 1));
      },
    );
  });
});

// Local only: the hints spread callers rejected together, and a fleet's do not (see above).
describe('retry hints (real time)', () => {
  it('60 clients that wait their hint with setTimeout are all admitted', async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 60 }, async () => {
        const scheduler = new Scheduler({ rate: 50, maxQueue: 0 });
        await scheduler.schedule(() => 0);
        const error = await scheduler.schedule(() => 0).catch((e: unknown) => e);
        if (!isTokenpaceError(error, 'ERR_QUEUE_FULL')) return 'not refused';
        await sleepReal(error.retryAfterMs);
        return scheduler.schedule(() => 'admitted').catch(() => 'refused again');
      }),
    );
    expect(outcomes.filter((o) => o !== 'admitted')).toEqual([]);

    const bucket = new TokenBucket({ rate: 50, burst: 1 });
    let refusedAgain = 0;
    for (let i = 0; i < 20; i++) {
      const error = await bucket.take(1, { maxWait: 0 }).catch((e: unknown) => e);
      if (isTokenpaceError(error, 'ERR_WAIT_TOO_LONG')) {
        await sleepReal(error.retryAfterMs);
        if (!bucket.tryTake()) refusedAgain++;
      }
    }
    expect(refusedAgain).toBe(0);
  });

  it("1000 callers refused in one burst follow the README's pattern in about two attempts each", async () => {
    const scheduler = new Scheduler({ rate: 1000, burst: 10, maxQueue: 10 });
    let attempts = 0;
    let done = 0;
    await Promise.all(
      Array.from({ length: 1000 }, async () => {
        for (;;) {
          attempts++;
          try {
            await scheduler.schedule(() => done++);
            return;
          } catch (error) {
            if (!isTokenpaceError(error, 'ERR_QUEUE_FULL')) throw error;
            await sleepReal(error.retryAfterMs);
          }
        }
      }),
    );
    expect(done).toBe(1000);
    // One refusal and one admission each: each caller is told when there is room for it, not all the same instant.
    expect(attempts / 1000).toBeLessThan(4);
  }, 20_000);
});
