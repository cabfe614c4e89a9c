/**
 * bottleneck's own tests, from test/priority.js of SGrondin/bottleneck at v2.19.5 (MIT License, (c) Simon
 * Grondin), on tokenpace's Scheduler in each of its forms (see ./general.test.ts). OVERFLOW is `maxQueue`,
 * OVERFLOW_PRIORITY `onFull: 'evict-lower'`, LEAK `onFull: 'drop-oldest'`; BLOCK is not offered
 * (docs/migrating.md says why).
 */

import { beforeAll, describe, expect, it } from 'vitest';
import { forms } from '../../helpers/scheduler-forms.js';
import { makeTest, outcome, warmUp } from './harness.js';

describe.each(forms)('Priority ($name)', (form) => {
  beforeAll(() => warmUp(form));

  it('Should do basic ordering', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    const jobs = [
      c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 1), 1),
      c.pNoErrVal(c.schedule({}, c.promise, null, 2), 2),
      c.pNoErrVal(c.schedule({ priority: 1 }, c.promise, null, 5, 6), 5, 6),
      c.pNoErrVal(c.schedule({}, c.promise, null, 3), 3),
      c.pNoErrVal(c.schedule({}, c.promise, null, 4), 4),
    ];
    await c.last();
    await Promise.all(jobs);
    c.checkResultsOrder([[1], [5, 6], [2], [3], [4]]);
    c.checkDuration(400);
  });

  it('Should support OVERFLOW', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100, highWater: 2 });
    let dropped = 0;
    c.scheduler.on('rejected', (job) => {
      expect(job.reason).toBe('queueFull');
      dropped++;
    });
    const kept = [
      c.pNoErrVal(c.schedule({}, c.slowPromise, 50, null, 1), 1),
      c.pNoErrVal(c.schedule({}, c.promise, null, 2), 2),
      c.pNoErrVal(c.schedule({}, c.promise, null, 3), 3),
    ];
    // tokenpace: the jobs turned away reject with QueueFullError (bottleneck's rejectOnDrop: false leaves them pending).
    const turnedAway = [
      outcome(c.schedule({}, c.promise, null, 4)),
      outcome(c.schedule({ priority: 2 }, c.promise, null, 5)),
      outcome(c.schedule({ priority: 1 }, c.promise, null, 6)),
      outcome(c.schedule({ priority: 9 }, c.promise, null, 7)),
    ];
    await c.last();
    await Promise.all(kept);
    expect(await Promise.all(turnedAway)).toEqual(Array(4).fill('ERR_QUEUE_FULL'));
    c.checkDuration(200);
    c.checkResultsOrder([[1], [2], [3]]);
    expect(dropped).toBe(4);
  });

  /** What became of a job: its results, or the reason its QueueFullError gives. */
  const fate = (promise: Promise<unknown>): Promise<string> =>
    promise.then(
      () => 'ran',
      (error: { code?: string; reason?: string }) => `${error.code}:${error.reason}`,
    );

  it('Should support LEAK', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100, highWater: 3, strategy: 'LEAK' });
    let dropped = 0;
    c.scheduler.on('rejected', (job) => {
      expect(job.reason).toBe('queueFull');
      dropped++;
    });
    const fates = [
      fate(c.schedule({}, c.slowPromise, 50, null, 1)),
      fate(c.schedule({}, c.promise, null, 2)),
      fate(c.schedule({}, c.promise, null, 3)),
      fate(c.schedule({}, c.promise, null, 4)),
      fate(c.schedule({ priority: 2 }, c.promise, null, 5)),
      fate(c.schedule({ priority: 1 }, c.promise, null, 6)),
      fate(c.schedule({ priority: 9 }, c.promise, null, 7)),
    ];
    await c.last();
    // Deliberate difference: bottleneck gives [[1], [6], [5]] in 200 ms, having dropped 4 as well. Its
    // submissions are queued before a later tick starts them, so job 1 still counts against highWater
    // when 2, 3 and 4 arrive; a Scheduler starts job 1 at once and keeps three waiting jobs, as maxQueue
    // says. The rule is bottleneck's: the oldest of the lowest priority goes for a job not below it,
    // and a job below every waiting one is the one turned away (7).
    c.checkResultsOrder([[1], [6], [5], [4]]);
    c.checkDuration(300);
    expect(await Promise.all(fates)).toEqual([
      'ran',
      'ERR_QUEUE_FULL:dropped',
      'ERR_QUEUE_FULL:dropped',
      'ran',
      'ran',
      'ran',
      'ERR_QUEUE_FULL:full',
    ]);
    expect(dropped).toBe(3);
  });

  it('Should support OVERFLOW_PRIORITY', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100, highWater: 2, strategy: 'OVERFLOW_PRIORITY' });
    const fates = [
      fate(c.schedule({}, c.slowPromise, 50, null, 1)),
      fate(c.schedule({}, c.promise, null, 2)),
      fate(c.schedule({}, c.promise, null, 3)),
      fate(c.schedule({}, c.promise, null, 4)),
      fate(c.schedule({ priority: 2 }, c.promise, null, 5)),
      fate(c.schedule({ priority: 2 }, c.promise, null, 6)),
      fate(c.schedule({ priority: 2 }, c.promise, null, 7)),
    ];
    await c.last();
    c.checkDuration(200);
    c.checkResultsOrder([[1], [5], [6]]);
    // tokenpace: the jobs given up reject (bottleneck's rejectOnDrop: false leaves them pending), 2 and 3
    // evicted by jobs of higher priority, 4 and 7 turned away as no waiting job is below them.
    expect(await Promise.all(fates)).toEqual([
      'ran',
      'ERR_QUEUE_FULL:evicted',
      'ERR_QUEUE_FULL:evicted',
      'ERR_QUEUE_FULL:full',
      'ran',
      'ran',
      'ERR_QUEUE_FULL:full',
    ]);
  });

  it('Should have the right priority', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    const jobs = [
      c.pNoErrVal(c.schedule({ priority: 6 }, c.slowPromise, 50, null, 1), 1),
      c.pNoErrVal(c.schedule({ priority: 5 }, c.promise, null, 2), 2),
      c.pNoErrVal(c.schedule({ priority: 4 }, c.promise, null, 3), 3),
      c.pNoErrVal(c.schedule({ priority: 3 }, c.promise, null, 4), 4),
    ];
    await c.last();
    await Promise.all(jobs);
    c.checkDuration(300);
    c.checkResultsOrder([[1], [4], [3], [2]]);
  });
});
