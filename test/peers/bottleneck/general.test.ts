/**
 * bottleneck's own tests, from test/general.js of SGrondin/bottleneck at v2.19.5 (MIT License, (c) Simon
 * Grondin), run against tokenpace's Scheduler in each of its forms (local, MemoryFleetStore,
 * RedisFleetStore) on a fake clock (./harness.ts). Each case keeps its assertions where the Scheduler
 * has the feature; lines marked `tokenpace:` state the Scheduler's behaviour where it differs on
 * purpose. docs/peer-suites.md lists every case, and the ones with no equivalent.
 */

import { beforeAll, describe, expect, it } from 'vitest';
import { CostExceedsCapacityError, JobTimeoutError } from '../../../src/errors.js';
import { forms } from '../../helpers/scheduler-forms.js';
import { makeTest, outcome, warmUp } from './harness.js';

describe.each(forms)('General ($name)', (form) => {
  beforeAll(() => warmUp(form));

  it('Should keep scope', async () => {
    const c = makeTest(form, { maxConcurrent: 1 });
    class Job {
      value = 5;
      action(x: number) {
        return this.value + x;
      }
    }
    const job = new Job();
    const first = c.scheduler.schedule(() => job.action.bind(job)(1));
    await c.setup.timers.runAllAsync();
    expect(await first).toBe(6);
    const second = c.scheduler.wrap(job.action.bind(job))(2);
    await c.setup.timers.runAllAsync();
    expect(await second).toBe(7);
  });

  describe('Counts and statuses', () => {
    it('Should check() and return the queued count with and without a priority value', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      // tokenpace: no check() (would a job start now?) and no clusterQueued() (each worker of a fleet has its own queue).
      const { settle } = c.setup;
      expect(c.scheduler.size).toBe(0);
      const jobs = [c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 1), 1)];
      await settle();
      expect(c.scheduler.size).toBe(0); // It's already running
      jobs.push(c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 2), 2));
      await settle();
      expect(c.scheduler.size).toBe(1);
      expect(c.scheduler.sizeBy({ priority: 5 - 1 })).toBe(0);
      expect(c.scheduler.sizeBy({ priority: 5 - 5 })).toBe(1);
      jobs.push(c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 3), 3));
      await settle();
      expect(c.scheduler.size).toBe(2);
      expect(c.scheduler.sizeBy({ priority: 5 - 1 })).toBe(0);
      expect(c.scheduler.sizeBy({ priority: 5 - 5 })).toBe(2);
      jobs.push(c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 4), 4));
      await settle();
      expect(c.scheduler.size).toBe(3);
      jobs.push(c.pNoErrVal(c.schedule({ priority: 1 }, c.promise, null, 5), 5));
      await settle();
      expect(c.scheduler.size).toBe(4);
      expect(c.scheduler.sizeBy({ priority: 5 - 1 })).toBe(1);
      expect(c.scheduler.sizeBy({ priority: 5 - 5 })).toBe(3);
      await c.last();
      await Promise.all(jobs);
      expect(c.scheduler.size).toBe(0);
      c.checkResultsOrder([[1], [5], [2], [3], [4]]);
      c.checkDuration(450);
    });

    it('Should return the running and done counts', async () => {
      const c = makeTest(form, { maxConcurrent: 5, minTime: 0 });
      // tokenpace: running() is `pendingCost` (the cost running); done() counts weights, where
      // `counters.completed` counts jobs (the weight-0 job is one of them).
      expect(c.scheduler.pendingCost).toBe(0);
      expect(c.scheduler.counters.completed).toBe(0);
      const jobs = [
        c.pNoErrVal(c.schedule({ weight: 1 }, c.slowPromise, 100, null, 1), 1),
        c.pNoErrVal(c.schedule({ weight: 3 }, c.slowPromise, 200, null, 2), 2),
        c.pNoErrVal(c.schedule({ weight: 1 }, c.slowPromise, 100, null, 3), 3),
      ];
      const zero = c.schedule({ weight: 0 }, c.promise, null);
      await c.wait(0);
      expect(c.scheduler.pendingCost).toBe(5);
      // tokenpace: a job of cost 0 holds 1 unit of concurrency while it runs (docs/jobs.md), so it waits
      // for job 1's end at 100 ms; bottleneck runs it at once (a weight of 0 holds nothing).
      expect(c.scheduler.counters.completed).toBe(0);
      await c.wait(125);
      expect(c.scheduler.pendingCost).toBe(3);
      expect(c.scheduler.counters.completed).toBe(3);
      await c.wait(100);
      expect(c.scheduler.pendingCost).toBe(0);
      expect(c.scheduler.counters.completed).toBe(4);
      await c.last();
      await Promise.all([...jobs, zero]);
      c.checkDuration(200);
      c.checkResultsOrder([[1], [], [3], [2]]); // tokenpace: the cost-0 job runs at job 1's end (bottleneck: first)
    });
  });

  describe('Events', () => {
    it('Should return itself', () => {
      const c = makeTest(form);
      const returned = c.scheduler.on('idle', () => {});
      expect(returned).toBe(c.scheduler);
    });

    it('Should fire events on empty queue', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      let calledEmpty = 0;
      let calledIdle = 0;
      c.scheduler.on('empty', () => calledEmpty++);
      c.scheduler.on('idle', () => calledIdle++);
      const first = c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 1), 1);
      await c.wait(50);
      await first;
      // tokenpace: `empty` is emitted when the wait queue becomes empty; a job that starts at once on an
      // idle scheduler never waited in it (bottleneck passes every job through its queue: 1 here).
      expect(calledEmpty).toBe(0);
      expect(calledIdle).toBe(1);
      const both = Promise.all([
        c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 2), 2),
        c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 3), 3),
      ]);
      await c.wait(200);
      await both;
      // bottleneck's `submit` resolves once the job is queued; the job then waits for minTime (until 300 ms).
      const fourth = c.schedule({}, c.slowPromise, 50, null, 4);
      await c.wait(0);
      c.checkDuration(250);
      c.checkResultsOrder([[1], [2], [3]]);
      expect(calledEmpty).toBe(1); // tokenpace: job 3 left the queue at 200 ms (bottleneck: 3, counting jobs 1 and 4)
      expect(calledIdle).toBe(2);
      await c.wait(50);
      expect(calledEmpty).toBe(2); // job 4 left the queue at 300 ms
      await c.last();
      await fourth;
    });

    it('Should fire events once', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      let calledEmptyOnce = 0;
      let calledIdleOnce = 0;
      let calledEmpty = 0;
      let calledIdle = 0;
      c.scheduler.once('empty', () => calledEmptyOnce++);
      c.scheduler.once('idle', () => calledIdleOnce++);
      c.scheduler.on('empty', () => calledEmpty++);
      c.scheduler.on('idle', () => calledIdle++);
      const first = c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 1), 1);
      const second = c.pNoErrVal(c.schedule({}, c.promise, null, 2), 2);
      await c.wait(100);
      await second;
      await first;
      expect(calledEmptyOnce).toBe(1);
      expect(calledIdleOnce).toBe(1);
      expect(calledEmpty).toBe(1);
      expect(calledIdle).toBe(1);
      const third = c.pNoErrVal(c.schedule({}, c.promise, null, 3), 3);
      await c.last();
      await third;
      c.checkDuration(200);
      c.checkResultsOrder([[1], [2], [3]]);
      expect(calledEmptyOnce).toBe(1);
      expect(calledIdleOnce).toBe(1);
      expect(calledEmpty).toBe(2);
      expect(calledIdle).toBe(2);
    });

    it('Should support faulty event listeners', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      const errors: unknown[] = [];
      c.scheduler.on('error', (err) => errors.push(err));
      // tokenpace: on `idle`, where bottleneck's is on `empty`, which a job that starts at once does not emit here.
      c.scheduler.on('idle', () => {
        throw new Error('Oh noes!');
      });
      const job = c.pNoErrVal(c.schedule({}, c.promise, null, 1), 1);
      await c.last();
      await job;
      expect((errors[0] as Error).message).toBe('Oh noes!');
    });

    it('Should wait for async event listeners', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      const errors: unknown[] = [];
      c.scheduler.on('error', (err) => errors.push(err));
      // tokenpace: on `idle` (see the case above).
      c.scheduler.on('idle', async () => {
        const x = await c.slowPromise(100, null, 1, 2);
        expect(x).toEqual([1, 2]);
        throw new Error('It broke!');
      });
      const job = c.pNoErrVal(c.schedule({}, c.promise, null, 1), 1);
      await c.last();
      await job;
      // tokenpace: an async listener is not awaited (nothing waits for it); its rejection reaches `error` all the same.
      expect(errors.map((e) => (e as Error).message)).toEqual(['It broke!']);
    });
  });

  describe('High water limit', () => {
    it('Should support highWater set to 0', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 0, highWater: 0 });
      const first = c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 1), 1);
      // tokenpace: a job turned away is rejected with QueueFullError, as bottleneck's rejectOnDrop: true does
      // (with rejectOnDrop: false bottleneck leaves its promise pending for ever).
      const dropped = [2, 3, 4].map((n) => outcome(c.schedule({}, c.slowPromise, 50, null, n)));
      await c.last();
      await first;
      expect(await Promise.all(dropped)).toEqual(['ERR_QUEUE_FULL', 'ERR_QUEUE_FULL', 'ERR_QUEUE_FULL']);
      c.checkDuration(50);
      c.checkResultsOrder([[1]]);
    });

    it('Should support highWater set to 1', async () => {
      // bottleneck's default strategy is LEAK: `onFull: 'drop-oldest'` (a Scheduler's default is 'reject').
      const c = makeTest(form, { maxConcurrent: 1, minTime: 0, highWater: 1, strategy: 'LEAK' });
      const first = c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 1), 1);
      const dropped = [2, 3].map((n) => outcome(c.schedule({}, c.slowPromise, 50, null, n)));
      const last = c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 4), 4);
      await c.last();
      await Promise.all([first, last]);
      expect(await Promise.all(dropped)).toEqual(['ERR_QUEUE_FULL', 'ERR_QUEUE_FULL']);
      c.checkDuration(100);
      c.checkResultsOrder([[1], [4]]);
    });
  });

  describe('Weight', () => {
    it('Should not add jobs with a weight above the maxConcurrent', async () => {
      const c = makeTest(form, { maxConcurrent: 2 });
      const jobs = [
        c.pNoErrVal(c.schedule({ weight: 1 }, c.promise, null, 1), 1),
        c.pNoErrVal(c.schedule({ weight: 2 }, c.promise, null, 2), 2),
      ];
      const err = await c.schedule({ weight: 3 }, c.promise, null, 3).catch((e: unknown) => e);
      // tokenpace: CostExceedsCapacityError, its message naming both numbers.
      expect(err).toBeInstanceOf(CostExceedsCapacityError);
      expect((err as Error).message).toMatch(/cost 3 exceeds the scheduler's concurrency of 2/);
      await c.last();
      await Promise.all(jobs);
      c.checkDuration(0);
      c.checkResultsOrder([[1], [2]]);
    });

    it('Should support custom job weights', async () => {
      const c = makeTest(form, { maxConcurrent: 2 });
      const jobs = [
        c.pNoErrVal(c.schedule({ weight: 1 }, c.slowPromise, 100, null, 1), 1),
        c.pNoErrVal(c.schedule({ weight: 2 }, c.slowPromise, 200, null, 2), 2),
        c.pNoErrVal(c.schedule({ weight: 1 }, c.slowPromise, 100, null, 3), 3),
        c.pNoErrVal(c.schedule({ weight: 1 }, c.slowPromise, 100, null, 4), 4),
        c.pNoErrVal(c.schedule({ weight: 0 }, c.slowPromise, 100, null, 5), 5),
      ];
      await c.last();
      await Promise.all(jobs);
      // tokenpace: job 5 (cost 0) holds 1 unit, so it starts when 3 and 4 end, at 400 ms, not beside them at 300.
      c.checkDuration(500);
      c.checkResultsOrder([[1], [2], [3], [4], [5]]);
    });
  });

  describe('Expiration', () => {
    it('Should cancel jobs', async () => {
      const c = makeTest(form, { maxConcurrent: 2 });
      const slow = c.pNoErrVal(c.schedule({}, c.slowPromise, 150, null, 1), 1);
      const expiring = c.schedule({ expiration: 50 }, c.slowPromise, 75, null, 2).catch((e: unknown) => e);
      await c.wait(50);
      const err = await expiring;
      // tokenpace: JobTimeoutError (ERR_JOB_TIMEOUT), "job ran longer than its timeout of 50 ms; ...".
      expect(err).toBeInstanceOf(JobTimeoutError);
      expect((err as Error).message).toMatch(/timeout of 50 ms/);
      expect(c.scheduler.pending).toBe(1);
      // tokenpace: done() counts the expired job; `counters` counts it as timed out, not completed.
      expect(c.scheduler.counters.timedOut).toBe(1);
      await c.wait(100);
      await slow;
      expect(c.setup.clock.now()).toBe(150);
      expect(c.scheduler.pending).toBe(0);
      // The expired job's function fulfilled at 75 ms: `completed` counts it.
      expect(c.scheduler.counters.completed).toBe(2);
    });
  });

  describe('Reservoir Refresh', () => {
    it('Should allow staggered X by Y type usage', async () => {
      // tokenpace: a reservoir of 2 refreshed to 2 every 150 ms is a bucket of 2 refilled at 2 per 150 ms.
      const c = makeTest(form, { bucket: { amount: 2, intervalMs: 150 } });
      const jobs = [1, 2, 3, 4].map((n) => c.pNoErrVal(c.schedule({}, c.promise, null, n), n));
      await c.last();
      await Promise.all(jobs);
      c.checkResultsOrder([[1], [2], [3], [4]]);
      c.checkDuration(150);
      // tokenpace: the bucket refills continuously, so the third starts at 75 ms, not with the fourth at 150.
      expect(c.calls.map((call) => call.time)).toEqual([0, 0, 75, 150]);
    });
  });

  describe('Reservoir Increase', () => {
    it('Should allow staggered X by Y type usage', async () => {
      const c = makeTest(form, { bucket: { amount: 2, intervalMs: 150 } });
      const jobs = [1, 2, 3, 4].map((n) => c.pNoErrVal(c.schedule({}, c.promise, null, n), n));
      await c.last();
      await Promise.all(jobs);
      c.checkResultsOrder([[1], [2], [3], [4]]);
      c.checkDuration(150);
    });
  });
});
