/**
 * What a user moving from p-queue expects to find: `add` on every add, `next`
 * after each job, `addAll`, `onPendingZero`, `isSaturated`, `concurrency` and
 * `timeout` as assignable properties, `wrap` forwarding `this` and a signal.
 */

import { describe, expect, it } from 'vitest';
import { JobTimeoutError, type SchedulerOptions } from '../../src/index.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

describe.each(forms)('p-queue parity ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  describe('API', () => {
    it("'add' fires on every add and 'next' after every job, as in p-queue", async () => {
      const { scheduler, timers, sleep } = setup({ concurrency: 1 });
      let adds = 0;
      let nexts = 0;
      scheduler.on('add', () => adds++).on('next', () => nexts++);
      const jobs = [scheduler.add(() => sleep(10)), scheduler.add(() => sleep(10)), scheduler.add(() => 1)];
      expect(adds).toBe(3); // one started at once, two wait
      await timers.tickAsync(20);
      await Promise.all(jobs);
      expect(nexts).toBe(3);
    });

    it('addAll resolves with every result in order', async () => {
      const { scheduler, timers } = setup({ rate: 10, concurrency: 2 });
      const all = scheduler.addAll([() => 'a', async () => 'b', () => 'c']);
      await timers.tickAsync(300);
      await expect(all).resolves.toEqual(['a', 'b', 'c']);
      await expect(scheduler.addAll('x' as never)).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
    });

    it('onPendingZero resolves when nothing runs, though jobs still wait', async () => {
      const { scheduler, timers, sleep, settle } = setup({ concurrency: 1 });
      void scheduler.add(() => sleep(50));
      await settle(); // started (in a fleet, once the store answers)
      scheduler.pause();
      void scheduler.add(() => 0);
      let resolved = false;
      void scheduler.onPendingZero().then(() => {
        resolved = true;
      });
      await timers.tickAsync(49);
      expect(resolved).toBe(false);
      await timers.tickAsync(1);
      expect(resolved).toBe(true);
      expect(scheduler.size).toBe(1);
      scheduler.resume();
      await scheduler.onIdle();
    });

    it('isSaturated is true while jobs wait for the concurrency', async () => {
      const { scheduler, timers, sleep, settle } = setup({ concurrency: 1 });
      void scheduler.add(() => sleep(10));
      await settle();
      expect(scheduler.isSaturated).toBe(false);
      void scheduler.add(() => sleep(10));
      await settle(); // a fleet knows the shared concurrency is full once the store says so
      expect(scheduler.isSaturated).toBe(true);
      await timers.tickAsync(20);
      expect(scheduler.isSaturated).toBe(false);
    });

    it('concurrency and timeout are assignable properties', async () => {
      const { scheduler, timers, sleep, settle } = setup({ concurrency: 1 });
      scheduler.concurrency = 2;
      await settle(); // a fleet's getter shows the store's answer
      expect(scheduler.concurrency).toBe(2);
      const starts: number[] = [];
      const jobs = [1, 2].map(() =>
        scheduler.add(() => {
          starts.push(1);
          return sleep(10);
        }),
      );
      await settle();
      expect(starts.length).toBe(2);
      expect(() => {
        scheduler.concurrency = 0;
      }).toThrow(/Expected `concurrency`/);
      expect(scheduler.timeout).toBe(Number.POSITIVE_INFINITY);
      scheduler.timeout = '5ms';
      expect(scheduler.timeout).toBe(5);
      const slow = scheduler.add(() => sleep(100));
      const caught = slow.catch((e: unknown) => e);
      await timers.tickAsync(10);
      await Promise.all(jobs);
      await timers.tickAsync(10);
      expect(await caught).toBeInstanceOf(JobTimeoutError);
      await timers.runAllAsync();
    });

    it("wrap forwards the call's this, its arguments and a signal", async () => {
      const { scheduler } = setup({ concurrency: 1 });
      const counter = {
        base: 40,
        add(this: { base: number }, n: number) {
          return this.base + n;
        },
      };
      counter.add = scheduler.wrap(counter.add) as unknown as typeof counter.add;
      await expect(counter.add(2)).resolves.toBe(42);
      const controller = new AbortController();
      const reason = new Error('stop');
      controller.abort(reason);
      const guarded = scheduler.wrap((n: number) => n, { signal: controller.signal });
      await expect(guarded(1)).rejects.toBe(reason);
    });
  });
});
