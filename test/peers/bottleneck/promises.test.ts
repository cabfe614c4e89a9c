/**
 * bottleneck's own tests, from test/promises.js of SGrondin/bottleneck at v2.19.5 (MIT License, (c) Simon
 * Grondin), on tokenpace's Scheduler in each of its forms (see ./general.test.ts). bottleneck's
 * callback form (`submit`) is `schedule` here.
 */

import { beforeAll, describe, expect, it } from 'vitest';
import { QueueFullError } from '../../../src/errors.js';
import { forms } from '../../helpers/scheduler-forms.js';
import { makeTest, warmUp } from './harness.js';

describe.each(forms)('Promises ($name)', (form) => {
  beforeAll(() => warmUp(form));

  it('Should support promises', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    const jobs = [
      c.pNoErrVal(c.schedule({}, c.promise, null, 1, 9), 1, 9),
      c.pNoErrVal(c.schedule({}, c.promise, null, 2), 2),
      c.pNoErrVal(c.schedule({}, c.promise, null, 3), 3),
      c.pNoErrVal(c.schedule({}, c.promise, null, 4, 5), 4, 5),
    ];
    await c.last();
    await Promise.all(jobs);
    c.checkResultsOrder([[1, 9], [2], [3], [4, 5]]);
    c.checkDuration(300);
  });

  it('Should pass error on failure', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    const job = c.schedule({}, c.promise, new Error('failed')).catch((err: Error) => err.message);
    await c.last();
    expect(await job).toBe('failed');
  });

  it('Should allow non-Promise returns', async () => {
    const c = makeTest(form);
    const job = c.scheduler.schedule(() => 'This is a string');
    await c.last();
    expect(await job).toBe('This is a string');
  });

  it('Should get rejected when rejectOnDrop is true', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 0, highWater: 1 });
    let dropped = 0;
    c.scheduler.on('rejected', () => dropped++);
    const p1 = c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 1), 1);
    const p2 = c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 2), 2);
    const p3 = c.schedule({}, c.slowPromise, 50, null, 3).catch((err: unknown) => err);
    await c.last();
    await Promise.all([p1, p2]);
    // tokenpace: QueueFullError (ERR_QUEUE_FULL, with retryAfterMs), not BottleneckError's 'This job has been dropped'.
    expect(await p3).toBeInstanceOf(QueueFullError);
    c.checkResultsOrder([[1], [2]]);
    c.checkDuration(100);
    expect(dropped).toBe(1);
  });

  it('Should automatically wrap an exception in a rejected promise - schedule()', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    const job = c.scheduler
      .schedule(() => {
        throw new Error('I will reject');
      })
      .then(
        () => 'resolved',
        (err: Error) => err.message,
      );
    await c.last();
    expect(await job).toBe('I will reject');
  });

  describe('Wrap', () => {
    it('Should wrap', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      const jobs = [1, 2, 3].map((n) => c.pNoErrVal(c.schedule({}, c.promise, null, n), n));
      const wrapped = c.scheduler.wrap(c.promise);
      jobs.push(c.pNoErrVal(wrapped(null, 4), 4));
      await c.last();
      await Promise.all(jobs);
      c.checkResultsOrder([[1], [2], [3], [4]]);
      c.checkDuration(300);
    });

    it('Should automatically wrap a returned value in a resolved promise', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      const fn = c.scheduler.wrap(() => 7);
      const result = fn();
      await c.last();
      expect(await result).toBe(7);
    });

    it('Should automatically wrap an exception in a rejected promise', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      const fn = c.scheduler.wrap(() => {
        throw new Error('I will reject');
      });
      const result = fn().catch((err: Error) => err.message);
      await c.last();
      expect(await result).toBe('I will reject');
    });

    it('Should inherit the original target for wrapped methods', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      const object = {
        fn: c.scheduler.wrap(function (this: unknown) {
          return this;
        }),
      };
      const result = object.fn();
      await c.last();
      expect(await result).toBe(object);
    });

    it('Should inherit the original target on prototype methods', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      class Animal {
        constructor(readonly name: string) {}
        getName(): string | Promise<string> {
          return this.name;
        }
      }
      Animal.prototype.getName = c.scheduler.wrap(Animal.prototype.getName);
      const elephant = new Animal('Dumbo');
      const result = elephant.getName();
      await c.last();
      expect(await result).toBe('Dumbo');
    });

    it('Should pass errors back', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
      const wrapped = c.scheduler.wrap(c.promise);
      const jobs = [c.pNoErrVal(wrapped(null, 1), 1), c.pNoErrVal(wrapped(null, 2), 2)];
      const failed = wrapped(new Error('BLEW UP!!!'), 3).catch((err: Error) => err.message);
      await c.last();
      await Promise.all(jobs);
      expect(await failed).toBe('BLEW UP!!!');
      c.checkResultsOrder([[1], [2], [3]]);
      c.checkDuration(200);
    });

    it('Should allow passing options', async () => {
      const c = makeTest(form, { maxConcurrent: 1, minTime: 50 });
      const wrapped = c.scheduler.wrap(c.promise);
      // tokenpace: a wrapped function's options are given to wrap (bottleneck's `wrapped.withOptions(options, ...args)`).
      const urgent = c.scheduler.wrap(c.promise, { priority: 5 - 1 });
      const jobs = [1, 2, 3, 4].map((n) => c.pNoErrVal(wrapped(null, n), n));
      jobs.push(c.pNoErrVal(urgent(null, 5), 5));
      const failed = urgent(new Error('BLEW UP!!!'), 6).catch((err: Error) => err.message);
      await c.last();
      await Promise.all(jobs);
      expect(await failed).toBe('BLEW UP!!!');
      // tokenpace: job 2 waits in the queue for its start (50 ms), where jobs 5 and 6, of a higher priority,
      // overtake it; bottleneck takes the next job out of its queue as soon as one ends (its RUNNING
      // state) and holds it there for minTime: [1], [2], [5], [6], [3], [4].
      c.checkResultsOrder([[1], [5], [6], [2], [3], [4]]);
      c.checkDuration(250);
    });
  });
});
