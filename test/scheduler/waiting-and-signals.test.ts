/**
 * Waiting, signals and the promise forms, in every form of the Scheduler:
 * `onPendingZero`, `isSaturated`, `setConcurrency` and `timeout`, `wrap`
 * forwarding `this` and a signal; `empty` on p-queue 9's schedule, and
 * `clear()` leaving no abort listener of a cleared job on a shared signal
 * (cases from p-queue 9.3.3's own tests, written for the Scheduler's names;
 * test/p-queue/ runs p-queue's suite itself against `PQueue`).
 *
 * Where the Scheduler differs from p-queue on purpose (docs/p-queue.md):
 * - one abort listener per signal for all the jobs waiting on it, not one per
 *   job (Node's EventTarget scans its listeners on each add and removal, and
 *   warns past 10): p-queue's listener counts of n waiting jobs are 1 here;
 * - `clear()` rejects the cleared jobs (`AbortError`) where p-queue 9 leaves
 *   their promises pending forever;
 * - `empty` fires once each time the queue empties, not at every job's end
 *   while it stays empty;
 * - `timeout: Infinity` is accepted and means no timeout: it is the default
 *   and what the `timeout` getter reads, so a value read back must be
 *   assignable, and a job needs a way to lift the scheduler's default.
 */

import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { JobTimeoutError, Scheduler, type SchedulerOptions } from '../../src/index.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

describe.each(forms)('waiting, signals and promise forms ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  describe('API', () => {
    it('onPendingZero resolves when nothing runs, though jobs still wait', async () => {
      const { scheduler, timers, sleep, settle } = setup({ concurrency: 1 });
      void scheduler.schedule(() => sleep(50));
      await settle(); // started (in a fleet, once the store answers)
      scheduler.pause();
      void scheduler.schedule(() => 0);
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
      void scheduler.schedule(() => sleep(10));
      await settle();
      expect(scheduler.isSaturated).toBe(false);
      void scheduler.schedule(() => sleep(10));
      await settle(); // a fleet knows the shared concurrency is full once the store says so
      expect(scheduler.isSaturated).toBe(true);
      await timers.tickAsync(20);
      expect(scheduler.isSaturated).toBe(false);
    });

    it('setConcurrency applies at once; timeout is an assignable default for later jobs', async () => {
      const { scheduler, timers, sleep, settle } = setup({ concurrency: 1 });
      scheduler.setConcurrency(2);
      await settle(); // a fleet's getter shows the store's answer
      expect(scheduler.concurrency).toBe(2);
      const starts: number[] = [];
      const jobs = [1, 2].map(() =>
        scheduler.schedule(() => {
          starts.push(1);
          return sleep(10);
        }),
      );
      await settle();
      expect(starts.length).toBe(2);
      expect(() => scheduler.setConcurrency(0)).toThrow(/Expected `concurrency`/);
      expect(scheduler.timeout).toBe(Number.POSITIVE_INFINITY);
      scheduler.timeout = '5ms';
      expect(scheduler.timeout).toBe(5);
      const slow = scheduler.schedule(() => sleep(100));
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
  describe("p-queue 9's own cases", () => {
    const deferred = () => {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      return { promise, resolve };
    };
    const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

    it("'empty' fires once the last queued job has started and the queue is next found empty", async () => {
      const { scheduler, settle } = setup({ concurrency: 1 });
      let empties = 0;
      scheduler.on('empty', () => empties++);
      const first = deferred();
      const second = deferred();
      const job1 = scheduler.schedule(() => first.promise);
      const job2 = scheduler.schedule(() => second.promise);
      await settle();
      expect(scheduler.size).toBe(1);
      expect(scheduler.pending).toBe(1);
      expect(empties).toBe(0);
      first.resolve();
      await job1;
      await settle();
      expect(scheduler.size).toBe(0);
      expect(scheduler.pending).toBe(1);
      expect(empties).toBe(0); // p-queue 9: not yet; the queue is found empty when the next job ends
      second.resolve();
      await job2;
      await settle();
      expect(scheduler.size).toBe(0);
      expect(scheduler.pending).toBe(0);
      expect(empties).toBe(1);
    });

    it("'empty' fires at once when clear() or an abort empties the queue", async () => {
      const { scheduler, settle } = setup({ concurrency: 4, autoStart: false });
      let empties = 0;
      scheduler.on('empty', () => empties++);
      const controller = new AbortController();
      void scheduler.schedule(() => 1, { signal: controller.signal }).catch(() => {});
      controller.abort();
      await settle();
      expect(empties).toBe(1);
      void scheduler.schedule(() => 1).catch(() => {});
      scheduler.clear();
      expect(empties).toBe(2);
    });

    it('clear() removes the abort listener of a queued job', async () => {
      const { scheduler } = setup({ concurrency: 4, autoStart: false });
      const controller = new AbortController();
      const cleared = scheduler.schedule(() => 'result', { signal: controller.signal });
      const caught = cleared.catch((error: unknown) => error);
      expect(listeners(controller.signal)).toBe(1);
      scheduler.clear();
      expect(listeners(controller.signal)).toBe(0);
      controller.abort(new Error('later'));
      expect(await caught).toMatchObject({ code: 'ABORT_ERR' }); // rejected by clear(), not by the later abort
    });

    it('clear() removes queued abort listeners for shared signals', () => {
      const { scheduler } = setup({ concurrency: 4, autoStart: false });
      const controller = new AbortController();
      for (const n of [1, 2, 3]) void scheduler.schedule(() => n, { signal: controller.signal }).catch(() => {});
      expect(listeners(controller.signal)).toBe(1); // p-queue: 3 (one per job); here one per signal
      scheduler.clear();
      expect(listeners(controller.signal)).toBe(0);
    });

    it('clear() keeps the running job abort listener while removing queued ones', async () => {
      const { scheduler, settle } = setup({ concurrency: 1 });
      const controller = new AbortController();
      const running = deferred();
      const first = scheduler.schedule(() => running.promise, { signal: controller.signal });
      const queued = [1, 2].map((n) =>
        scheduler.schedule(() => n, { signal: controller.signal }).catch((e: unknown) => e),
      );
      await settle();
      expect(listeners(controller.signal)).toBe(2); // the running job's, and the queued jobs' one
      scheduler.clear();
      expect(listeners(controller.signal)).toBe(1);
      running.resolve();
      await first;
      expect(listeners(controller.signal)).toBe(0);
      for (const error of await Promise.all(queued)) expect(error).toMatchObject({ code: 'ABORT_ERR' });
    });

    it('clear() only leaves the running job affected when a shared signal aborts later', async () => {
      const { scheduler, settle } = setup({ concurrency: 1 });
      const controller = new AbortController();
      const reason = new Error('later abort');
      const running = scheduler.schedule(
        ({ signal }) =>
          new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(signal.reason))),
        { signal: controller.signal },
      );
      const queued = scheduler.schedule(() => 'queued', { signal: controller.signal }).catch((e: unknown) => e);
      await settle();
      scheduler.clear();
      controller.abort(reason);
      await expect(running).rejects.toBe(reason);
      expect(await queued).toMatchObject({ code: 'ABORT_ERR' });
    });

    it('clear() does not accumulate abort listeners across repeated discard cycles', () => {
      const { scheduler } = setup({ concurrency: 4, autoStart: false });
      const controller = new AbortController();
      for (let round = 0; round < 5; round++) {
        void scheduler.schedule(() => round, { signal: controller.signal }).catch(() => {});
        void scheduler.schedule(() => round, { signal: controller.signal }).catch(() => {});
        expect(listeners(controller.signal)).toBe(1);
        scheduler.clear();
        expect(listeners(controller.signal)).toBe(0);
      }
    });

    it('timeout: Infinity is accepted and means no timeout', async () => {
      const { scheduler, timers, sleep } = setup({ timeout: '5ms', concurrency: 1 });
      const job = scheduler.schedule(() => sleep(50).then(() => 'done'), { timeout: Number.POSITIVE_INFINITY });
      await timers.tickAsync(60);
      await expect(job).resolves.toBe('done');
      scheduler.timeout = Number.POSITIVE_INFINITY;
      expect(scheduler.timeout).toBe(Number.POSITIVE_INFINITY);
      expect(() => new Scheduler({ concurrency: 1, timeout: -1 })).toThrow(/duration/);
      expect(() => new Scheduler({ concurrency: 1, timeout: Number.NaN })).toThrow(/duration|timeout/);
    });
  });
});
