/** `close()`: no new jobs; waiting ones drained (default) or rejected; resolves when idle, no timer left. */

import { describe, expect, it } from 'vitest';
import { ClosedError, isTokenpaceError, type SchedulerOptions } from '../../src/index.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

describe.each(forms)('close ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  describe('close()', () => {
    it('drains what waits by default, refuses new jobs, resolves when idle with no timer left', async () => {
      const { scheduler, timers, pending } = setup({ rate: 10 });
      const jobs = [1, 2, 3].map((n) => scheduler.schedule(() => n));
      let closed = false;
      const closing = scheduler.close().then(() => {
        closed = true;
      });
      expect(scheduler.isClosed).toBe(true);
      const late = await scheduler.schedule(() => 4).catch((e: unknown) => e);
      expect(late).toBeInstanceOf(ClosedError);
      expect(isTokenpaceError(late, 'ERR_CLOSED')).toBe(true);
      await timers.tickAsync(199);
      expect(closed).toBe(false);
      await timers.tickAsync(1);
      await closing;
      await expect(Promise.all(jobs)).resolves.toEqual([1, 2, 3]);
      expect(pending()).toBe(0);
    });

    it('{ drain: false } rejects what waits at once; running jobs go on; no timer left', async () => {
      const { scheduler, timers, pending, sleep, settle } = setup({ rate: 10, concurrency: 1, maxWait: '1h' });
      const running = scheduler.schedule(() => sleep(30).then(() => 'ran'));
      await settle(); // started (in a fleet, once the store answers)
      const waiting = [scheduler.schedule(() => 2), scheduler.schedule(() => 3)].map((p) => p.catch((e: unknown) => e));
      const closing = scheduler.close({ drain: false });
      for (const outcome of await Promise.all(waiting)) expect(outcome).toBeInstanceOf(ClosedError);
      await timers.tickAsync(30);
      await expect(running).resolves.toBe('ran');
      await closing;
      expect(pending()).toBe(0);
    });

    it('a paused scheduler is resumed to drain; bad options reject', async () => {
      const { scheduler, timers } = setup({ concurrency: 1, autoStart: false });
      const job = scheduler.schedule(() => 'x');
      const closing = scheduler.close();
      await timers.tickAsync(0);
      await expect(job).resolves.toBe('x');
      await closing;
      await expect(scheduler.close({ drain: 'no' as never })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
    });

    it('Symbol.asyncDispose closes it', async () => {
      const { scheduler } = setup({ concurrency: 1 });
      const dispose = (scheduler as unknown as Record<symbol, () => Promise<void>>)[
        (Symbol as unknown as { asyncDispose: symbol }).asyncDispose
      ];
      expect(typeof dispose).toBe('function');
      await dispose?.call(scheduler);
      expect(scheduler.isClosed).toBe(true);
    });
  });
});
