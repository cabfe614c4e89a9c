/**
 * The Scheduler on a fake clock: every start time is exact, and no test sleeps.
 * Each case runs on the three forms (test/helpers/scheduler-forms.ts): local,
 * a fleet on a MemoryFleetStore, a fleet on a RedisFleetStore. Where the fleet
 * differs on purpose the case is skipped for the fleet forms, with the reason
 * (the list is in docs/internals/scheduler.md).
 */

import { describe, expect, it, vi } from 'vitest';
import type { Clock } from '../../src/clock.js';
import {
  AbortError,
  CostExceedsCapacityError,
  isTokenpaceError,
  JobTimeoutError,
  QueueFullError,
  Scheduler,
  type SchedulerOptions,
  WaitTooLongError,
} from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

/** Lets promise continuations run (each await is a microtask turn). */
async function flush(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await Promise.resolve();
}

/** Settles to 'ok: value' or the error's code/name, so outcomes compare as plain data. */
function outcome(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    (value) => `ok:${String(value)}`,
    (error: unknown) => (isTokenpaceError(error) ? error.code : error instanceof Error ? error.name : String(error)),
  );
}

interface JobSpec {
  /** When it is submitted, ms. */
  at: number;
  cost?: number;
  priority?: number;
  /** How long it runs, ms. */
  runMs?: number;
}

interface StartCase {
  name: string;
  /** Why a fleet starts these jobs differently, on purpose (the case is not run for the fleet forms). */
  fleetDiffers?: string;
  options: Omit<SchedulerOptions, 'clock'>;
  jobs: JobSpec[];
  starts: number[];
}

const startCases: StartCase[] = [
  {
    name: 'rate 10/s, burst 1: one job every 100 ms',
    options: { rate: 10 },
    jobs: [{ at: 0 }, { at: 0 }, { at: 0 }, { at: 0 }],
    starts: [0, 100, 200, 300],
  },
  {
    name: 'rate 10/s, burst 5: costs draw tokens',
    options: { rate: 10, burst: 5 },
    jobs: [{ at: 0, cost: 5 }, { at: 0, cost: 2 }, { at: 0, cost: 3 }, { at: 0 }],
    starts: [0, 200, 500, 600],
  },
  {
    name: 'a burst passes at once, then the rate',
    options: { rate: 100, burst: 3 },
    jobs: [{ at: 0 }, { at: 0 }, { at: 0 }, { at: 0 }, { at: 0 }],
    starts: [0, 0, 0, 10, 20],
  },
  {
    name: 'priorities: higher first, FIFO within one',
    fleetDiffers:
      'a fleet reserves the next start in the store before its time: a higher priority that arrives after that reservation goes next but one',
    options: { rate: 10 },
    jobs: [{ at: 0 }, { at: 0 }, { at: 0, priority: 5 }, { at: 50, priority: 5 }, { at: 60, priority: -1 }],
    starts: [0, 300, 100, 200, 400],
  },
  {
    name: 'a fractional spacing keeps the long-run rate exact (3/s)',
    options: { rate: 3 },
    jobs: [{ at: 0 }, { at: 0 }, { at: 0 }, { at: 0 }, { at: 0 }, { at: 0 }, { at: 0 }],
    starts: [0, 334, 667, 1000, 1334, 1667, 2000],
  },
  {
    name: 'a job that arrives after an idle spell starts at once',
    options: { rate: 10 },
    jobs: [{ at: 0 }, { at: 0 }, { at: 450 }, { at: 460 }],
    starts: [0, 100, 450, 550],
  },
  {
    name: 'concurrency and rate together: a job waits for both',
    options: { rate: 100, burst: 3, concurrency: 2 },
    jobs: [
      { at: 0, cost: 2, runMs: 50 },
      { at: 0, cost: 1, runMs: 10 },
      { at: 0, cost: 2, runMs: 10 },
    ],
    starts: [0, 50, 60],
  },
  {
    name: 'concurrency only: FIFO, the head is not overtaken by a smaller job',
    options: { concurrency: 3 },
    jobs: [
      { at: 0, cost: 2, runMs: 100 },
      { at: 0, cost: 2, runMs: 100 },
      { at: 0, cost: 1, runMs: 100 },
      { at: 0, cost: 1, runMs: 100 },
    ],
    starts: [0, 100, 100, 200],
  },
  {
    name: 'freed concurrency counts from when it frees, not from when the tokens came',
    options: { rate: 1000, burst: 1, concurrency: 1 },
    jobs: [
      { at: 0, runMs: 50 },
      { at: 0, runMs: 50 },
      { at: 0, runMs: 0 },
    ],
    starts: [0, 50, 100],
  },
];

describe.each(forms)('Scheduler ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  describe('Scheduler start times', () => {
    it.each(startCases.filter((c) => !(form.fleet && c.fleetDiffers)))('$name', async ({ options, jobs, starts }) => {
      const { scheduler, timers, clock, sleep, pending } = setup(options);
      const started: number[] = [];
      const done: Promise<unknown>[] = [];
      const order = jobs.map((job, id) => ({ ...job, id })).sort((a, b) => a.at - b.at);
      for (const job of order) {
        if (job.at > timers.now) await timers.tickAsync(job.at - timers.now);
        done.push(
          scheduler.schedule(
            () => {
              started[job.id] = clock.now();
              return job.runMs ? sleep(job.runMs) : undefined;
            },
            { cost: job.cost, priority: job.priority },
          ),
        );
      }
      await timers.tickAsync(5000);
      await Promise.all(done);
      expect(started).toEqual(starts);
      expect(pending()).toBe(0);
    });
  });

  describe('weighted concurrency', () => {
    it('never runs more cost at once than the concurrency, and runs every job', async () => {
      const { scheduler, timers, sleep } = setup({ concurrency: 10, maxQueue: 10_000 });
      let seed = 42;
      const random = () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      };
      let running = 0;
      let most = 0;
      const done: Promise<unknown>[] = [];
      for (let i = 0; i < 500; i++) {
        const cost = 1 + Math.floor(random() * 10);
        const runMs = 1 + Math.floor(random() * 50);
        done.push(
          scheduler.schedule(
            async () => {
              running += cost;
              most = Math.max(most, running);
              expect(scheduler.pendingCost).toBe(running);
              await sleep(runMs);
              running -= cost;
            },
            { cost, priority: Math.floor(random() * 3) },
          ),
        );
        if (i % 50 === 0) await timers.tickAsync(7);
      }
      await timers.runAllAsync();
      await Promise.all(done);
      expect(most).toBe(10);
      expect(scheduler.counters.completed).toBe(500);
      expect(scheduler.pendingCost).toBe(0);
    });

    it('fractional costs add up without drifting past the limit', async () => {
      const { scheduler, timers, sleep, settle } = setup({ concurrency: 1 });
      const done = Array.from({ length: 30 }, () => scheduler.schedule(() => sleep(10), { cost: 0.1 }));
      await settle();
      expect(scheduler.pending).toBe(10);
      await timers.tickAsync(10);
      expect(scheduler.pending).toBe(10);
      await timers.runAllAsync();
      await Promise.all(done);
      expect(scheduler.pendingCost).toBe(0);
    });
  });

  describe('maxWait', () => {
    it('predicts the start exactly and refuses a job that would wait longer, with retryAfterMs', async () => {
      const { scheduler, timers, clock } = setup({ rate: 10, maxWait: 250 });
      const started: number[] = [];
      const job = () => started.push(clock.now());
      const first = [scheduler.schedule(job), scheduler.schedule(job), scheduler.schedule(job)];
      const fourth = scheduler.schedule(job);
      const error = await fourth.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WaitTooLongError);
      // retryAfterMs: wait - maxWait = 50, whole ms up, + 2 ms for timers that fire early
      expect(error).toMatchObject({ code: 'ERR_WAIT_TOO_LONG', waitMs: 300, maxWaitMs: 250, retryAfterMs: 52 });
      expect((error as Error).message).toContain('predicted wait of 300 ms exceeds maxWait of 250 ms');

      await timers.tickAsync(49);
      await expect(scheduler.schedule(job)).rejects.toMatchObject({ waitMs: 251 });
      await timers.tickAsync(1); // now a job waits exactly 250 ms: accepted
      const last = scheduler.schedule(job);
      await timers.tickAsync(1000);
      await Promise.all([...first, last]);
      expect(started).toEqual([0, 100, 200, 300]);
      expect(scheduler.counters.rejected.waitTooLong).toBe(2);
    });

    it('counts only the cost at or above the new job priority', async () => {
      const { scheduler, timers } = setup({ rate: 10, burst: 1, maxWait: 150 });
      // The first starts at 0, the second would wait 100 ms, the third 200 ms: refused at once.
      const jobs = [scheduler.schedule(() => 0), scheduler.schedule(() => 0), scheduler.schedule(() => 0)].map(outcome);
      // A high-priority job waits only for the tokens, not behind the low one: 100 ms, accepted.
      const high = scheduler.schedule(() => 'high', { priority: 1 });
      await timers.tickAsync(100);
      await expect(high).resolves.toBe('high');
      // The overtaken low job would now start at 200: it is rejected at its deadline, 150.
      await timers.tickAsync(50);
      expect(await Promise.all(jobs)).toEqual(['ok:0', 'ERR_WAIT_TOO_LONG', 'ERR_WAIT_TOO_LONG']);
      expect(timers.now).toBe(150);
    });

    // A fleet asks the store about the head with what is left of its maxWait, and the store rejects it as soon
    // as its reservation would start past its deadline (here at 200, not at its deadline, 250).
    it.skipIf(form.fleet)('rejects at its deadline a job that higher priorities overtook', async () => {
      const { scheduler, timers, pending } = setup({ rate: 10, maxWait: 250 });
      await scheduler.schedule(() => 0); // empties the bucket at 0
      const low = outcome(scheduler.schedule(() => 'low')); // due 100
      const high = [1, 2].map((i) => scheduler.schedule(() => i, { priority: 1 })); // at 100 and 200
      let settledAt = -1;
      void low.then(() => {
        settledAt = timers.now;
      });
      await timers.tickAsync(1000);
      expect(await low).toBe('ERR_WAIT_TOO_LONG');
      expect(settledAt).toBe(250);
      expect(await Promise.all(high)).toEqual([1, 2]);
      expect(pending()).toBe(0);
    });

    // In a fleet, a job that waited for the shared concurrency leaves its claim in the store until the claim
    // lapses (5 poll intervals, at least 100 ms): the next job waits that much longer, so that small jobs of other
    // workers cannot starve a large one.
    it.skipIf(form.fleet)(
      'rejects at its deadline a job held back by the concurrency, and then starts the next',
      async () => {
        const { scheduler, timers, sleep, clock } = setup({ concurrency: 2, maxWait: 100 });
        void scheduler.schedule(() => sleep(1000), { cost: 1 });
        const big = outcome(scheduler.schedule(() => 'big', { cost: 2 }));
        let smallAt = -1;
        const small = scheduler.schedule(
          () => {
            smallAt = clock.now();
          },
          { cost: 1 },
        );
        await timers.tickAsync(100);
        expect(await big).toBe('ERR_WAIT_TOO_LONG');
        await small;
        expect(smallAt).toBe(100);
        expect(scheduler.size).toBe(0);
        await timers.runAllAsync();
      },
    );

    it('maxWait 0: a job starts now or not at all', async () => {
      const { scheduler } = setup({ rate: 10, maxWait: 0 });
      await expect(scheduler.schedule(() => 1)).resolves.toBe(1);
      await expect(scheduler.schedule(() => 2)).rejects.toMatchObject({ code: 'ERR_WAIT_TOO_LONG', retryAfterMs: 102 });
    });
  });

  describe('abort', () => {
    it('before start: rejects with the reason and never runs', async () => {
      const { scheduler } = setup({ concurrency: 1 });
      const controller = new AbortController();
      const reason = new Error('no longer needed');
      controller.abort(reason);
      let ran = false;
      await expect(
        scheduler.schedule(
          () => {
            ran = true;
          },
          { signal: controller.signal },
        ),
      ).rejects.toBe(reason);
      expect(ran).toBe(false);
      expect(scheduler.counters.rejected.aborted).toBe(1);
      expect(scheduler.counters.admitted).toBe(0);
    });

    it('while waiting: removes the job at once, frees its slot, and the next moves up', async () => {
      const { scheduler, timers, clock, pending } = setup({ rate: 10, maxQueue: 2 });
      const started: string[] = [];
      const job = (name: string) => () => {
        started.push(`${name}@${clock.now()}`);
      };
      await scheduler.schedule(job('a'));
      const controller = new AbortController();
      const b = scheduler.schedule(job('b'), { signal: controller.signal });
      const c = scheduler.schedule(job('c'));
      expect(scheduler.size).toBe(2);
      await expect(scheduler.schedule(job('x'))).rejects.toBeInstanceOf(QueueFullError);
      await timers.tickAsync(50);
      controller.abort();
      expect(scheduler.size).toBe(1);
      await expect(b).rejects.toMatchObject({ name: 'AbortError' }); // the signal's own reason (a DOMException)
      const d = scheduler.schedule(job('d')); // the freed slot is usable at once
      await timers.tickAsync(1000);
      await Promise.all([c, d]);
      expect(started).toEqual(['a@0', 'c@100', 'd@200']);
      expect(pending()).toBe(0);
    });

    it('while waiting as the only job: no timer is left', async () => {
      const { scheduler, pending, settle } = setup({ rate: 1 });
      await scheduler.schedule(() => 0);
      const controller = new AbortController();
      const waiting = scheduler.schedule(() => 0, { signal: controller.signal });
      await settle(); // a fleet's job waits for its reservation's time
      expect(pending()).toBe(form.fleet ? 2 : 1); // a fleet's reservation renews its lease too
      controller.abort(new Error('stop'));
      await expect(waiting).rejects.toThrow('stop');
      expect(pending()).toBe(0);
      await scheduler.onIdle();
    });

    it('while running: the promise rejects at once, fn sees the signal, the concurrency is held until fn settles', async () => {
      const { scheduler, timers, sleep } = setup({ concurrency: 1 });
      const controller = new AbortController();
      let seen: AbortSignal | undefined;
      const running = scheduler.schedule(
        async ({ signal }) => {
          seen = signal;
          await sleep(100);
          return 'late';
        },
        { signal: controller.signal },
      );
      const next = scheduler.schedule(() => 'next');
      await timers.tickAsync(10);
      controller.abort(new Error('cancelled'));
      await expect(running).rejects.toThrow('cancelled');
      expect(seen?.aborted).toBe(true);
      expect(scheduler.pending).toBe(1);
      expect(scheduler.size).toBe(1);
      await timers.tickAsync(90);
      await expect(next).resolves.toBe('next');
    });
  });

  describe('timeout', () => {
    it("onTimeout 'hold': rejects a running job that overruns with JobTimeoutError, aborts its signal, keeps the slot", async () => {
      const { scheduler, timers, sleep, pending } = setup({ concurrency: 1, timeout: 50, onTimeout: 'hold' });
      let seen: AbortSignal | undefined;
      const job = scheduler.schedule(async ({ signal }) => {
        seen = signal;
        await sleep(80);
        return 'done';
      });
      let rejectedAt = -1;
      job.catch(() => {
        rejectedAt = timers.now;
      });
      await timers.tickAsync(50);
      const error = await job.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(JobTimeoutError);
      expect(error).toMatchObject({ code: 'ERR_JOB_TIMEOUT', timeoutMs: 50 });
      expect(rejectedAt).toBe(50);
      expect(seen?.reason).toBe(error);
      expect(scheduler.pending).toBe(1); // fn ignored its signal: still running
      await timers.tickAsync(30);
      expect(scheduler.pending).toBe(0);
      expect(scheduler.counters.timedOut).toBe(1);
      expect(pending()).toBe(0);
    });

    it("onTimeout 'release' (the default): the slot frees at the timeout, so a function that never settles cannot hold it", async () => {
      const { scheduler, timers, clock } = setup({ concurrency: 1, timeout: 50 });
      const never = scheduler.schedule(() => new Promise(() => {}));
      const neverOutcome = never.catch((e: unknown) => e);
      let nextStartedAt = -1;
      const next = scheduler.schedule(() => {
        nextStartedAt = clock.now();
        return 'next';
      });
      let idle = false;
      void scheduler.onIdle().then(() => {
        idle = true;
      });
      await timers.tickAsync(50);
      expect(await neverOutcome).toBeInstanceOf(JobTimeoutError);
      await expect(next).resolves.toBe('next');
      expect(nextStartedAt).toBe(50);
      expect(scheduler.pending).toBe(0);
      await timers.tickAsync(0);
      expect(idle).toBe(true);
      expect(() => form.scheduler({ concurrency: 1, onTimeout: 'keep' as never })).toThrow(/'release' or 'hold'/);
    });

    it('a job that finishes in time clears its timeout; a per-job timeout overrides', async () => {
      const { scheduler, timers, sleep, pending } = setup({ concurrency: 2, timeout: 50 });
      const quick = scheduler.schedule(() => sleep(10).then(() => 'quick'));
      const long = scheduler.schedule(() => sleep(100).then(() => 'long'), { timeout: '200ms' });
      await timers.tickAsync(10);
      await expect(quick).resolves.toBe('quick');
      await timers.tickAsync(90);
      await expect(long).resolves.toBe('long');
      expect(pending()).toBe(0);
    });

    it('combines the caller signal and the timeout in the signal fn receives', async () => {
      const { scheduler, timers, sleep, settle } = setup({ concurrency: 1 });
      const controller = new AbortController();
      let seen: AbortSignal | undefined;
      const job = scheduler.schedule(
        ({ signal }) => {
          seen = signal;
          return sleep(100);
        },
        { signal: controller.signal, timeout: 1000 },
      );
      await settle(); // a fleet's job starts once the store answers
      controller.abort(new Error('user'));
      await expect(job).rejects.toThrow('user');
      expect(seen?.aborted).toBe(true);
      await timers.runAllAsync();
    });

    it('a queued job with a timeout starts guarded too', async () => {
      const { scheduler, timers, sleep } = setup({ concurrency: 1 });
      const first = scheduler.schedule(() => sleep(10));
      const second = outcome(scheduler.schedule(() => sleep(100), { timeout: 20 }));
      await timers.tickAsync(30);
      await first;
      expect(await second).toBe('ERR_JOB_TIMEOUT');
      await timers.runAllAsync();
    });
  });

  describe('failures', () => {
    it('a listener that throws does not strand a job: it settles, and the error surfaces on its own', async () => {
      const surfaced: unknown[] = [];
      const spy = vi.spyOn(globalThis, 'queueMicrotask').mockImplementation((fn) => {
        try {
          fn();
        } catch (error) {
          surfaced.push(error);
        }
      });
      try {
        const { scheduler, timers } = setup({ concurrency: 1 });
        const boom = new Error('listener');
        scheduler.on('active', () => {
          throw boom;
        });
        scheduler.on('completed', () => {
          throw boom;
        });
        const results = [scheduler.schedule(() => 1), scheduler.schedule(() => 2)].map(outcome);
        await timers.runAllAsync();
        expect(await Promise.all(results)).toEqual(['ok:1', 'ok:2']);
        await scheduler.onIdle();
        expect(scheduler.pending).toBe(0);
        expect(surfaced).toEqual([boom, boom, boom, boom]);
      } finally {
        spy.mockRestore();
      }
    });

    it('a failing job rejects only its own promise', async () => {
      const { scheduler, timers } = setup({ concurrency: 1 });
      const results = [
        scheduler.schedule(() => 1),
        scheduler.schedule(() => {
          throw new Error('sync');
        }),
        scheduler.schedule(() => Promise.reject(new Error('async'))),
        scheduler.schedule(async () => 4),
      ].map(outcome);
      await timers.runAllAsync();
      expect(await Promise.all(results)).toEqual(['ok:1', 'Error', 'Error', 'ok:4']);
      expect(scheduler.counters).toMatchObject({ started: 4, completed: 2, failed: 2 });
    });

    it('a job of cost above the burst or the concurrency is refused at once', async () => {
      const { scheduler } = setup({ rate: 10, burst: 5, concurrency: 3 });
      const overBurst = await scheduler.schedule(() => 0, { cost: 6 }).catch((e: unknown) => e);
      expect(overBurst).toBeInstanceOf(CostExceedsCapacityError);
      expect(overBurst).toMatchObject({ cost: 6, capacity: 5 });
      const overConcurrency = await scheduler.schedule(() => 0, { cost: 4 }).catch((e: unknown) => e);
      expect(overConcurrency).toMatchObject({ code: 'ERR_COST_EXCEEDS_CAPACITY', cost: 4, capacity: 3 });
      expect((overConcurrency as Error).message).toContain("the scheduler's concurrency of 3");
      await expect(scheduler.schedule(() => 0, { cost: Number.NaN })).rejects.toMatchObject({
        code: 'ERR_INVALID_SIZE',
      });
      await expect(scheduler.schedule(() => 0, { cost: -1 })).rejects.toMatchObject({ code: 'ERR_INVALID_SIZE' });
      await expect(scheduler.schedule(() => 0, { priority: Number.NaN })).rejects.toMatchObject({
        code: 'ERR_INVALID_OPTION',
      });
      expect(scheduler.counters.rejected.costExceedsCapacity).toBe(2);
    });

    it('a bad per-job timeout rejects the promise like the other options, it does not throw', async () => {
      const { scheduler } = setup({ concurrency: 1 });
      // Each call's promise is kept and awaited: calling it only to see that it does not throw
      // would leave a rejection nobody handles.
      let promise: Promise<unknown> | undefined;
      expect(() => {
        promise = scheduler.schedule(() => 0, { timeout: 0 });
      }).not.toThrow();
      await expect(promise).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
      expect(() => {
        promise = scheduler.wrap(() => 0, { timeout: 'soon' })();
      }).not.toThrow();
      await expect(promise).rejects.toMatchObject({ code: 'ERR_INVALID_DURATION' });
      expect(scheduler.size + scheduler.pending).toBe(0);
    });

    // A job of cost 0 holds nothing of a fleet's concurrency (a lease of 0 units): it starts at once.
    it.skipIf(form.fleet)(
      'a cost of 0 needs no tokens but still counts as running: concurrency 1 means one at a time',
      async () => {
        const { scheduler, sleep, timers, clock } = setup({ rate: 1, concurrency: 1 });
        void scheduler.schedule(() => sleep(100));
        let startedAt = -1;
        const free = scheduler.schedule(
          () => {
            startedAt = clock.now();
            return 'free';
          },
          { cost: 0 },
        );
        expect(scheduler.size).toBe(1); // waits for the slot, not for tokens
        await timers.tickAsync(100);
        await expect(free).resolves.toBe('free');
        expect(startedAt).toBe(100);
        await timers.runAllAsync();
      },
    );
  });

  describe('options', () => {
    it.each([
      [{}, 'a Scheduler needs at least one finite limit'],
      [{ concurrency: 0 }, 'Expected `concurrency` to be a number > 0'],
      [{ concurrency: Number.POSITIVE_INFINITY }, 'a Scheduler needs at least one finite limit'],
      [{ burst: 5, concurrency: 1 }, '`burst` needs a `rate`'],
      [{ rate: 10, maxQueue: Number.POSITIVE_INFINITY }, 'the queue is bounded on purpose'],
      [{ rate: 10, maxQueue: -1 }, 'Expected `maxQueue` to be a finite integer >= 0'],
      [{ rate: 10, timeout: 0 }, 'Expected `timeout` to be a duration > 0'],
      [{ rate: 0 }, 'rate'],
      [{ rate: 10, maxWait: -1 }, 'duration'],
    ] as [Omit<SchedulerOptions, 'clock'>, string][])('refuses %j', (options, message) => {
      expect(() => form.scheduler(options)).toThrow(message);
    });

    it('has a finite default maxQueue and reads its limits back', () => {
      const scheduler = form.scheduler({ rate: '100/s', burst: 10, concurrency: 4 });
      expect(scheduler.maxQueue).toBe(1000);
      expect([scheduler.rate, scheduler.burst, scheduler.concurrency]).toEqual([100, 10, 4]);
      const concurrencyOnly = form.scheduler({ concurrency: 2 });
      expect([concurrencyOnly.rate, concurrencyOnly.burst]).toEqual([Infinity, Infinity]);
    });
  });

  describe('bounded queue', () => {
    it('a flood against a full queue rejects at once, holds nothing, and counts', async () => {
      const { scheduler, sleep, timers, settle } = setup({ concurrency: 1, maxQueue: 10 });
      void scheduler.schedule(() => sleep(1000));
      await settle(); // started (in a fleet, once the store answers)
      const queued = Array.from({ length: 10 }, () => scheduler.schedule(() => 0));
      let rejected = 0;
      let last: unknown;
      for (let i = 0; i < 100_000; i++) {
        scheduler
          .schedule(() => 0)
          .catch((error: unknown) => {
            rejected++;
            last = error;
          });
      }
      expect(scheduler.size).toBe(10);
      await flush(3);
      expect(rejected).toBe(100_000);
      expect(last).toBeInstanceOf(QueueFullError);
      expect(last).toMatchObject({ code: 'ERR_QUEUE_FULL', maxQueue: 10 });
      expect((last as Error).stack).toMatch(/\n\s+at /);
      expect(scheduler.counters.rejected.queueFull).toBe(100_000);
      expect(scheduler.counters.admitted).toBe(11);
      await timers.runAllAsync();
      await Promise.all(queued);
    });

    // A fleet's hint is the wait predicted from the store's bucket as last reported (at least the poll interval while the
    // shared concurrency is full), the same for callers rejected together: no spreading, no finish-gap estimate.
    it.skipIf(form.fleet)(
      'jobs turned away in one burst are told when there is room for each: spread, not one instant',
      async () => {
        const { scheduler, timers } = setup({ rate: 10, maxQueue: 1 });
        await scheduler.schedule(() => 0);
        void scheduler.schedule(() => 0).catch(() => {});
        const first = scheduler.schedule(() => 0);
        const second = scheduler.schedule(() => 0);
        expect(first).not.toBe(second);
        const [a, b] = await Promise.all([first.catch((e: unknown) => e), second.catch((e: unknown) => e)]);
        expect(a).toBeInstanceOf(QueueFullError);
        // The head starts at 100 (room for one); a job later at 200 (room for the next). Each + 2 ms margin.
        expect(a).toMatchObject({ retryAfterMs: 102 });
        expect(b).toMatchObject({ retryAfterMs: 202 });
        await timers.tickAsync(40);
        const later = await scheduler.schedule(() => 0).catch((e: unknown) => e);
        expect(later).toMatchObject({ retryAfterMs: 262 }); // behind the two told before it: 300 - 40
        await timers.runAllAsync();
      },
    );

    // A fleet's hint is the wait predicted from the store's bucket as last reported (at least the poll interval while the
    // shared concurrency is full), the same for callers rejected together: no spreading, no finish-gap estimate.
    it.skipIf(form.fleet)('retryAfterMs is when the head will start under a rate', async () => {
      const { scheduler, timers } = setup({ rate: 10, maxQueue: 1 });
      await scheduler.schedule(() => 0);
      const waiting = scheduler.schedule(() => 0);
      await timers.tickAsync(30);
      await expect(scheduler.schedule(() => 0)).rejects.toMatchObject({ retryAfterMs: 72 });
      await timers.runAllAsync();
      await waiting;
    });

    // A fleet's hint is the wait predicted from the store's bucket as last reported (at least the poll interval while the
    // shared concurrency is full), the same for callers rejected together: no spreading, no finish-gap estimate.
    it.skipIf(form.fleet)('retryAfterMs follows the gap between finishes under a concurrency', async () => {
      const { scheduler, timers, sleep } = setup({ concurrency: 1, maxQueue: 2 });
      const job = () => sleep(40);
      const jobs = [scheduler.schedule(job), scheduler.schedule(job), scheduler.schedule(job)];
      // Nothing known yet: as long again as the running job has run (0 ms), at least 1 ms, + 2 ms margin.
      await expect(scheduler.schedule(job)).rejects.toMatchObject({ retryAfterMs: 3 });
      await timers.tickAsync(40); // the first finishes
      jobs.push(scheduler.schedule(job));
      await timers.tickAsync(40); // the second finishes, 40 ms after the first
      jobs.push(scheduler.schedule(job));
      await timers.tickAsync(10);
      await expect(scheduler.schedule(job)).rejects.toMatchObject({ retryAfterMs: 32 });
      await timers.runAllAsync();
      await Promise.all(jobs);
    });

    // A fleet's job that could start waits for the store's answer on trial, outside maxQueue: the same outcome.
    it('maxQueue 0 starts a job now or rejects it', async () => {
      const { scheduler, settle } = setup({ concurrency: 1, maxQueue: 0 });
      let started = false;
      const first = scheduler.schedule(
        () =>
          new Promise(() => {
            started = true;
          }),
      );
      await expect(scheduler.schedule(() => 0)).rejects.toBeInstanceOf(QueueFullError);
      await settle();
      expect(started).toBe(true);
      expect(scheduler.size).toBe(0);
      void first;
    });
  });

  describe('pause, resume, clear', () => {
    it('autoStart false queues until resume; resume charges from now', async () => {
      const { scheduler, timers, clock, pending } = setup({ rate: 10, burst: 2, autoStart: false });
      const started: number[] = [];
      const jobs = Array.from({ length: 4 }, () => scheduler.schedule(() => started.push(clock.now())));
      expect(scheduler.isPaused).toBe(true);
      expect(pending()).toBe(0); // no timer while paused
      await timers.tickAsync(1000);
      expect(started).toEqual([]);
      scheduler.resume();
      await timers.tickAsync(1000);
      await Promise.all(jobs);
      expect(started).toEqual([1000, 1000, 1100, 1200]);
    });

    // In a fleet a job that holds a reservation when the scheduler pauses still starts at its time.
    it.skipIf(form.fleet)('pause holds new starts and drops the token timer; running jobs go on', async () => {
      const { scheduler, timers, clock, pending } = setup({ rate: 10 });
      const started: number[] = [];
      const job = () => started.push(clock.now());
      const jobs = [scheduler.schedule(job), scheduler.schedule(job), scheduler.schedule(job)];
      await timers.tickAsync(150);
      scheduler.pause();
      scheduler.pause(); // twice is harmless
      expect(pending()).toBe(0);
      await timers.tickAsync(500);
      scheduler.resume();
      scheduler.resume();
      await timers.tickAsync(500);
      await Promise.all(jobs);
      expect(started).toEqual([0, 100, 650]);
    });

    // In a fleet the jobs granted in one exchange all start, whatever the first of them does.
    it.skipIf(form.fleet)('a job that pauses the scheduler as it starts holds back the jobs due with it', async () => {
      const { scheduler, timers, clock, pending } = setup({ rate: 10, burst: 3, concurrency: 3, autoStart: false });
      const started: number[] = [];
      const jobs = [0, 1, 2].map((i) =>
        scheduler.schedule(() => {
          started.push(i);
          if (i === 0) scheduler.pause();
          return clock.now();
        }),
      );
      scheduler.resume();
      expect(started).toEqual([0]);
      expect(scheduler.size).toBe(2);
      expect(pending()).toBe(0);
      await timers.tickAsync(1000);
      expect(started).toEqual([0]);
      scheduler.resume();
      await expect(Promise.all(jobs)).resolves.toEqual([0, 1000, 1000]);
      expect(started).toEqual([0, 1, 2]);
    });

    it('clear rejects waiting jobs with AbortError, keeps running ones, and leaves no timer', async () => {
      const { scheduler, timers, sleep, pending, settle } = setup({ rate: 10, concurrency: 1 });
      const running = scheduler.schedule(() => sleep(50).then(() => 'ran'));
      await settle(); // started (in a fleet, once the store answers)
      const waiting = [scheduler.schedule(() => 0), scheduler.schedule(() => 0)];
      scheduler.clear();
      scheduler.clear(); // empty: nothing happens
      for (const job of waiting) {
        const error = await job.catch((e: unknown) => e);
        expect(error).toBeInstanceOf(AbortError);
        expect(isTokenpaceError(error, 'ABORT_ERR')).toBe(true);
      }
      expect(scheduler.size).toBe(0);
      await timers.tickAsync(50);
      await expect(running).resolves.toBe('ran');
      expect(pending()).toBe(0);
      expect(scheduler.counters.rejected.cleared).toBe(2);
    });
  });

  describe('live reconfiguration', () => {
    // In a fleet the next start, reserved before the change, keeps its time.
    it.skipIf(form.fleet)('setRate changes the spacing from now on', async () => {
      const { scheduler, timers, clock } = setup({ rate: 10 });
      const started: number[] = [];
      const jobs = Array.from({ length: 5 }, () => scheduler.schedule(() => started.push(clock.now())));
      await timers.tickAsync(150);
      scheduler.setRate('20/s'); // tokens at 150: 0.5; one token more takes 25 ms at 20/s
      await timers.tickAsync(1000);
      await Promise.all(jobs);
      expect(started).toEqual([0, 100, 175, 225, 275]);
      expect(scheduler.rate).toBe(20);
    });

    it('setRate adds a bucket to a concurrency-only scheduler', async () => {
      const { scheduler, timers, clock } = setup({ concurrency: 5 });
      scheduler.setRate(10);
      const started: number[] = [];
      const jobs = Array.from({ length: 3 }, () => scheduler.schedule(() => started.push(clock.now())));
      await timers.tickAsync(1000);
      await Promise.all(jobs);
      expect(started).toEqual([0, 100, 200]);
    });

    it('setBurst rejects waiting jobs that can never fit, and refuses without a rate', async () => {
      const { scheduler, timers } = setup({ rate: 10, burst: 4 });
      await scheduler.schedule(() => 0, { cost: 4 });
      const big = outcome(scheduler.schedule(() => 'big', { cost: 3 }));
      const small = outcome(scheduler.schedule(() => 'small', { cost: 1 }));
      scheduler.setBurst(2);
      expect(await big).toBe('ERR_COST_EXCEEDS_CAPACITY');
      await timers.tickAsync(1000);
      expect(await small).toBe('ok:small');
      expect(scheduler.burst).toBe(2);
      expect(() => setup({ concurrency: 1 }).scheduler.setBurst(5)).toThrow('call `setRate` first');
    });

    it('setConcurrency up starts blocked jobs now; down holds new starts; too-big waiters are rejected', async () => {
      const { scheduler, timers, clock, sleep, settle } = setup({ concurrency: 2 });
      const started: string[] = [];
      const job = (name: string, ms: number) => () => {
        started.push(`${name}@${clock.now()}`);
        return sleep(ms);
      };
      const jobs = [
        scheduler.schedule(job('a', 100), { cost: 2 }),
        scheduler.schedule(job('b', 100), { cost: 2 }),
        scheduler.schedule(job('c', 100), { cost: 1 }),
      ];
      await timers.tickAsync(10);
      scheduler.setConcurrency(5);
      await settle(); // a fleet's change applies once the store answers
      expect(started).toEqual(['a@0', 'b@10', 'c@10']);
      scheduler.setConcurrency(1);
      await settle();
      const d = scheduler.schedule(job('d', 10), { cost: 1 });
      const e = outcome(scheduler.schedule(job('e', 10), { cost: 1 }));
      await timers.tickAsync(90); // a finished at 100: 3 still running > 1
      expect(started).toHaveLength(3);
      await timers.tickAsync(10); // b and c finished at 110
      expect(started).toEqual(['a@0', 'b@10', 'c@10', 'd@110']);
      scheduler.setConcurrency(0.5);
      expect(await e).toBe('ERR_COST_EXCEEDS_CAPACITY');
      await timers.runAllAsync();
      await Promise.all([...jobs, d]);
      expect(() => scheduler.setConcurrency(-1)).toThrow('Expected `concurrency`');
    });
  });

  describe('timers', () => {
    it('one timer for the head, armed for the exact shortfall, none when idle', async () => {
      const { scheduler, timers, pending, settle } = setup({ rate: 4, burst: 1, maxQueue: 100 });
      const jobs = Array.from({ length: 20 }, () => scheduler.schedule(() => 0));
      await settle();
      // A fleet's timers: the next start, reserved in the store, and its lease's renewal.
      const armed = form.fleet ? 2 : 1;
      expect(pending()).toBe(armed);
      await timers.tickAsync(249);
      expect(scheduler.size).toBe(19);
      await timers.tickAsync(1);
      expect(scheduler.size).toBe(18);
      expect(pending()).toBe(armed);
      await timers.runAllAsync();
      await Promise.all(jobs);
      expect(pending()).toBe(0);
      await scheduler.onIdle();
    });
  });

  describe("waits beyond Node's 24.8-day timer limit", () => {
    const DAY = 24 * 3600 * 1000;

    /** A fake clock that counts the timers armed. */
    function counting() {
      const fake = fakeClock();
      let armed = 0;
      const clock: Clock = {
        ...fake.clock,
        setTimeout: (fn, ms) => {
          armed++;
          return fake.clock.setTimeout(fn, ms);
        },
      };
      return { ...fake, clock, armed: () => armed };
    }

    // On Redis, a month of fake time is some 780,000 lease renewals (every third of the lease), each a round trip;
    // in memory they are timers, and the two month-long cases get 30 s.
    it.skipIf(form.redis)(
      "timeout: '30d' does not reject at once, and rejects after 30 days",
      async () => {
        const { clock, timers } = counting();
        const scheduler = form.scheduler({ concurrency: 1, clock });
        const job = outcome(scheduler.schedule(() => new Promise(() => {}), { timeout: '30d' }));
        let settled: string | undefined;
        void job.then((o) => {
          settled = o;
        });
        await timers.tickAsync(1000);
        expect(settled).toBeUndefined();
        await timers.tickAsync(30 * DAY - 1001);
        expect(settled).toBeUndefined();
        await timers.tickAsync(1);
        expect(settled).toBe('ERR_JOB_TIMEOUT');
      },
      30_000,
    );

    it("maxWait: '30d' holds one timer, not a 1 ms timer re-armed a thousand times a second", async () => {
      const { clock, timers, armed, pending } = counting();
      const scheduler = form.scheduler({ concurrency: 1, maxWait: '30d', autoStart: false, clock });
      const job = outcome(scheduler.schedule(() => 'ran'));
      await timers.tickAsync(1000);
      expect(armed()).toBe(1);
      expect(pending()).toBe(1);
      await timers.tickAsync(30 * DAY - 1000);
      expect(await job).toBe('ERR_WAIT_TOO_LONG');
      expect(armed()).toBe(2); // a step of 2^31 - 1 ms, then the rest
    });

    // On Redis, a month of fake time is some 780,000 lease renewals (every third of the lease), each a round trip.
    it.skipIf(form.redis)(
      'a monthly rate waits the month for the next token',
      async () => {
        const { clock, timers } = counting();
        const scheduler = form.scheduler({ rate: '1/30d', clock });
        const starts: number[] = [];
        await scheduler.schedule(() => starts.push(clock.now()));
        const second = scheduler.schedule(() => starts.push(clock.now()));
        await timers.tickAsync(DAY);
        expect(starts).toEqual([0]);
        await timers.tickAsync(29 * DAY);
        await second;
        expect(starts).toEqual([0, 30 * DAY]);
      },
      30_000,
    );
  });

  describe('promises, events and wrap', () => {
    it('onEmpty, onIdle and onSizeLessThan resolve at their moments', async () => {
      const { scheduler, timers, sleep } = setup({ concurrency: 1 });
      await scheduler.onIdle();
      await scheduler.onEmpty();
      await scheduler.onSizeLessThan(1);
      const log: string[] = [];
      const jobs = Array.from({ length: 4 }, () => scheduler.schedule(() => sleep(10)));
      void scheduler.onSizeLessThan(2).then(() => log.push(`size<2@${timers.now}`));
      void scheduler.onEmpty().then(() => log.push(`empty@${timers.now}`));
      void scheduler.onIdle().then(() => log.push(`idle@${timers.now}`));
      await timers.tickAsync(100);
      await Promise.all(jobs);
      await flush();
      expect(log).toEqual(['size<2@20', 'empty@40', 'idle@40']); // p-queue 9: empty once a job's end finds the queue empty
    });

    // No job starts within schedule() in a fleet: the first waits in the queue for the store's answer (so it
    // counts against maxQueue), and the events and counts come in another order.
    it.skipIf(form.fleet)('emits active, completed, error, empty, idle and rejected', async () => {
      const { scheduler, timers } = setup({ rate: 10, maxQueue: 1 });
      const events: string[] = [];
      const onActive = (job: { cost: number; waitedMs: number }) => events.push(`active:${job.cost}:${job.waitedMs}`);
      scheduler
        .on('active', onActive)
        .on('completed', (result) => events.push(`completed:${String(result)}`))
        .on('error', (error) => events.push(`error:${(error as Error).message}`))
        .on('empty', () => events.push('empty'))
        .on('idle', () => events.push('idle'))
        .on('rejected', (job) => events.push(`rejected:${job.reason}`))
        .once('idle', () => events.push('first idle only'));
      const a = scheduler.schedule(() => 'a', { cost: 1 });
      const b = scheduler.schedule(() => Promise.reject(new Error('b'))).catch(() => {});
      const c = scheduler.schedule(() => 'c');
      await expect(c).rejects.toBeInstanceOf(QueueFullError);
      await timers.tickAsync(100);
      await a;
      await b;
      await flush();
      scheduler.off('active', onActive);
      const later = scheduler.schedule(() => 'later', { cost: 1 });
      await timers.tickAsync(200);
      await later;
      await flush();
      expect(events).toEqual([
        'active:1:0',
        'rejected:queueFull',
        'completed:a',
        'active:1:100',
        'empty',
        'error:b',
        'idle',
        'first idle only',
        'empty',
        'completed:later',
        'idle',
      ]);
    });

    it('wrap returns a throttled function whose cost may depend on its arguments', async () => {
      const { scheduler, timers, clock } = setup({ rate: 10, burst: 5 });
      const calls: string[] = [];
      const fetchPages = scheduler.wrap(
        (name: string, pages: number) => {
          calls.push(`${name}@${clock.now()}`);
          return pages * 10;
        },
        { cost: (_name, pages) => pages },
      );
      const results = [fetchPages('a', 5), fetchPages('b', 2), fetchPages('c', 1)];
      await timers.tickAsync(1000);
      expect(await Promise.all(results)).toEqual([50, 20, 10]);
      expect(calls).toEqual(['a@0', 'b@200', 'c@300']);
      const failingCost = scheduler.wrap(() => 0, {
        cost: () => {
          throw new Error('bad cost');
        },
      });
      await expect(failingCost()).rejects.toThrow('bad cost');
      const plain = scheduler.wrap(async (x: number) => x + 1);
      const plainResult = plain(1);
      await timers.tickAsync(1000);
      await expect(plainResult).resolves.toBe(2);
    });

    // No job starts within schedule() in a fleet: the first waits in the queue for the store's answer (so it
    // counts against maxQueue), and the events and counts come in another order.
    it.skipIf(form.fleet)('counts admitted, started, rejected by reason and the time waited', async () => {
      const { scheduler, timers } = setup({ rate: 10, maxQueue: 2 });
      const jobs = [scheduler.schedule(() => 0), scheduler.schedule(() => 0), scheduler.schedule(() => 0)];
      await scheduler.schedule(() => 0).catch(() => {});
      await timers.tickAsync(1000);
      await Promise.all(jobs);
      expect(scheduler.counters).toEqual({
        admitted: 3,
        started: 3,
        completed: 3,
        failed: 0,
        timedOut: 0,
        rejected: { queueFull: 1, waitTooLong: 0, costExceedsCapacity: 0, aborted: 0, cleared: 0, tooManyKeys: 0 },
        waitedMs: 300,
      });
      expect(scheduler.sizeBy({ priority: 0 })).toBe(0);
    });
  });
});

// Local only: theoretical start times and the catch-up allowance are the local admission's. A fleet
// charges a start when the store reserves it, in the store's time, so timer lateness loses no rate
// there and `catchUp` is refused (see docs/internals/scheduler.md).
describe('Scheduler (local): late timers', () => {
  it('late timers start every job that came due and keep the long-run rate exact', async () => {
    // Every timer fires 1 ms late, as Node's fire about 1.15 ms late.
    const fake = fakeClock();
    const lateClock: Clock = {
      now: fake.clock.now,
      setTimeout: (fn, ms) => fake.clock.setTimeout(fn, ms + 1),
      clearTimeout: fake.clock.clearTimeout,
    };
    const scheduler = new Scheduler({ rate: 1000, burst: 1, maxQueue: 5000, clock: lateClock });
    const starts: number[] = [];
    for (let i = 0; i < 3000; i++) void scheduler.schedule(() => starts.push(fake.clock.now()));
    await fake.timers.tickAsync(1000);
    // A scheduler that charged on waking would start one job every 2 ms here: ~500.
    expect(starts.filter((t) => t <= 1000)).toHaveLength(1001);
    await fake.timers.tickAsync(2000);
    expect(starts).toHaveLength(3000);
    // Any window of T sees at most burst + rate * (T + lateness): 1 + (T + 1) jobs per ms.
    for (const windowMs of [1, 10, 100]) {
      let most = 0;
      for (let i = 0, j = 0; i < starts.length; i++) {
        while ((starts[i] as number) - (starts[j] as number) >= windowMs) j++;
        most = Math.max(most, i - j + 1);
      }
      expect(most).toBeLessThanOrEqual(1 + windowMs + 1);
    }
  });

  it.each([1, 4, 8, 12])(
    'with a burst of 10 at 1000/s and timers %i ms late, windows keep the strict bound',
    async (latenessMs) => {
      const fake = fakeClock();
      const lateClock: Clock = {
        now: fake.clock.now,
        setTimeout: (fn, ms) => fake.clock.setTimeout(fn, ms + latenessMs),
        clearTimeout: fake.clock.clearTimeout,
      };
      const scheduler = new Scheduler({ rate: 1000, burst: 10, maxQueue: 5000, clock: lateClock });
      const starts: number[] = [];
      for (let i = 0; i < 3000; i++) void scheduler.schedule(() => starts.push(fake.clock.now()));
      await fake.timers.tickAsync(1000);
      // The bucket covers (burst - cost) / rate = 9 ms of lateness, more than catchUp (5 ms): so nothing
      // is charged in the past, and up to 9 ms late the rate stays exact; later than that, time is lost.
      const inFirstSecond = starts.filter((t) => t <= 1000).length;
      if (latenessMs <= 9) expect(inFirstSecond).toBeGreaterThanOrEqual(1010 - latenessMs);
      else expect(inFirstSecond).toBeLessThan(1000);
      await fake.timers.tickAsync(2000);
      for (const windowMs of [1, 10, 100, 1000]) {
        let most = 0;
        for (let i = 0, j = 0; i < starts.length; i++) {
          while ((starts[i] as number) - (starts[j] as number) >= windowMs) j++;
          most = Math.max(most, i - j + 1);
        }
        expect(most).toBeLessThanOrEqual(10 + windowMs);
      }
    },
  );

  it.each([
    // [catchUp, jobs started when the late timer fires]
    [undefined, 1],
    [0, 1],
    ['100ms', 10],
  ] as const)('a clock that jumps (a blocked event loop) makes up at most catchUp %s', async (catchUp, inJump) => {
    const fake = fakeClock();
    let lagMs = 0;
    const clock: Clock = { ...fake.clock, now: () => fake.timers.now + lagMs };
    const scheduler = new Scheduler({ rate: 100, burst: 1, maxQueue: 1000, clock, catchUp });
    const starts: number[] = [];
    for (let i = 0; i < 200; i++) void scheduler.schedule(() => starts.push(clock.now()));
    await flush();
    expect(starts).toEqual([0]);
    lagMs = 95; // the loop was blocked: the timer for 10 ms runs when now() is 105
    await fake.timers.tickAsync(10);
    expect(starts).toHaveLength(1 + inJump); // due at 10, 20, ..., 100: those within catchUp start at 105
    // From there the rate holds: one more every 10 ms.
    await fake.timers.tickAsync(100);
    expect(starts).toHaveLength(1 + inJump + 10);
    expect(scheduler.size).toBe(200 - starts.length);
  });
});

describe('Scheduler (local): the hint of a job rejected at its deadline', () => {
  it('is its wait were it to come back now, without its own place in the queue', async () => {
    const { clock, timers } = fakeClock();
    const scheduler = new Scheduler({ rate: 10, burst: 5, maxWait: 600, clock });
    await scheduler.schedule(() => 0, { cost: 5 }); // empties the bucket at 0
    const low = scheduler.schedule(() => 'low', { cost: 5 }).catch((e: unknown) => e); // due at 500
    const high = scheduler.schedule(() => 'high', { cost: 5, priority: 1 }); // overtakes it: starts at 500
    await timers.tickAsync(600);
    await expect(high).resolves.toBe('high');
    // At 600 the bucket holds 1: a job of 5 would wait 400 ms, within maxWait, so retry at once.
    expect(await low).toMatchObject({ code: 'ERR_WAIT_TOO_LONG', waitMs: 600, retryAfterMs: 0 });
    expect(clock.now()).toBe(600);
  });
});

describe('the catch-up allowance follows the lateness policy', () => {
  it('with punctual timers a stall seen first by a finishing job is made up for 2 ms, not the whole catchUp', async () => {
    const fake = fakeClock();
    let stalledMs = 0;
    const clock: Clock = { ...fake.clock, now: () => fake.timers.now + stalledMs };
    const scheduler = new Scheduler({ rate: 1000, burst: 1, maxQueue: 100, clock });
    let release!: () => void;
    const long = scheduler.schedule(() => new Promise<void>((resolve) => (release = resolve)));
    const starts: number[] = [];
    const jobs = Array.from({ length: 20 }, () => scheduler.schedule(() => starts.push(clock.now())));
    await fake.timers.tickAsync(2);
    expect(starts).toEqual([1, 2]); // the timers so far were punctual: the lateness estimate is 0
    stalledMs = 6; // the event loop was blocked: the clock reads 8, the head was due at 3
    release(); // the long job's end is the first to see it
    await long;
    await flush();
    // The allowance is the timer's 1 ms step plus 1 ms (nothing was seen late): jobs are charged at 6, 7
    // and 8, not back to 3 as a fixed 5 ms would (3, 4, 5, 6, 7, 8: six at once).
    expect(starts).toEqual([1, 2, 8, 8, 8]);
    scheduler.clear();
    const results = await Promise.allSettled(jobs);
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(15); // cleared
  });
});
