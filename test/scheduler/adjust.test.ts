/** A running job adjusts its charge once its real cost is known: `ctx.adjust(delta)`, within the bucket's rules. */

import { describe, expect, it } from 'vitest';
import { CostExceedsCapacityError, type SchedulerOptions } from '../../src/index.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

describe.each(forms)('ctx.adjust ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  describe('the bill', () => {
    it('adding cost makes later jobs wait for it; giving it back lets them start sooner', async () => {
      const { scheduler, timers, clock } = setup({ rate: 10, burst: 10 });
      // Charged 1 at the start, the job reports a real cost of 8: 7 more.
      await scheduler.schedule(({ adjust }) => adjust(7));
      const starts: number[] = [];
      // 2 tokens left: a job of cost 5 waits for 3 more, 300 ms.
      const next = scheduler.schedule(() => starts.push(clock.now()), { cost: 5 });
      await timers.tickAsync(300);
      await next;
      expect(starts).toEqual([300]);

      // Charged 5, the job used 1: 4 come back, so the next job of 4 starts at once.
      await timers.tickAsync(1000); // full again (10)
      await scheduler.schedule(({ adjust }) => adjust(-4), { cost: 5 }); // 10 - 5 + 4 = 9
      await scheduler.schedule(() => starts.push(clock.now()), { cost: 9 });
      expect(starts).toEqual([300, 1300]);
    });

    it('never gives back more than was charged, never above the burst; a total above the burst throws', async () => {
      const { scheduler, timers, clock } = setup({ rate: 10, burst: 10 });
      const starts: number[] = [];
      await scheduler.schedule(({ adjust }) => {
        adjust(-100); // charged 1: gives back 1, not 100
        adjust(10); // total 0 + 10 = 10: the burst, allowed
        adjust(-10);
        expect(() => adjust(11)).toThrow(CostExceedsCapacityError);
        expect(() => adjust(Number.NaN)).toThrow(/finite number/);
      });
      // The bucket is full again (10), not more: a job of 10 starts, the next waits a second.
      await scheduler.schedule(() => starts.push(clock.now()), { cost: 10 });
      const later = scheduler.schedule(() => starts.push(clock.now()), { cost: 10 });
      await timers.tickAsync(1000);
      await later;
      expect(starts).toEqual([0, 1000]);
    });

    it('works for a job with a signal and a timeout, and does nothing without a rate', async () => {
      const { scheduler, timers, clock } = setup({ rate: 10, burst: 10, timeout: '1s' });
      await scheduler.schedule(({ adjust }) => adjust(9), { signal: new AbortController().signal }); // all 10 taken
      const next = scheduler.schedule(() => clock.now());
      await timers.tickAsync(100);
      await expect(next).resolves.toBe(100);
      const { scheduler: pool } = setup({ concurrency: 1 });
      await expect(pool.schedule(({ adjust }) => adjust(5))).resolves.toBeUndefined();
    });
  });
});
