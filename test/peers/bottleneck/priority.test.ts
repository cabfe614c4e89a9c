/**
 * bottleneck's own tests, from test/priority.js of SGrondin/bottleneck at v2.19.5 (MIT License, (c) Simon
 * Grondin), on tokenpace's Scheduler in each of its forms (see ./general.test.ts). The strategies LEAK,
 * OVERFLOW_PRIORITY and BLOCK are issue 36's; OVERFLOW is `maxQueue`.
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
