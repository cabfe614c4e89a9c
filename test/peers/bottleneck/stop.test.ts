/**
 * bottleneck's own tests, from test/stop.js of SGrondin/bottleneck at v2.19.5 (MIT License, (c) Simon
 * Grondin), on tokenpace's Scheduler in each of its forms (see ./general.test.ts). `stop()` is
 * `close({ drain: false })` (waiting jobs rejected with ClosedError) and `stop({ dropWaitingJobs: false })`
 * is `close()`; its `dropped` event is `rejected` (reason `cleared`). There are no per-job statuses
 * (`counts()`): the Scheduler's `size`, `pending` and `counters` say as much.
 */

import { beforeAll, describe, expect, it } from 'vitest';
import { ClosedError } from '../../../src/errors.js';
import { forms } from '../../helpers/scheduler-forms.js';
import { makeTest, warmUp } from './harness.js';

describe.each(forms)('Stop ($name)', (form) => {
  beforeAll(() => warmUp(form));

  it('Should stop and drop the queue', async () => {
    const c = makeTest(form, { maxConcurrent: 2, minTime: 100 });
    let dropped = 0;
    c.scheduler.on('rejected', (job) => {
      expect(job.reason).toBe('cleared');
      dropped++;
    });
    const kept = [
      c.pNoErrVal(c.schedule({}, c.promise, null, 0), 0),
      c.pNoErrVal(c.schedule({}, c.slowPromise, 100, null, 1), 1),
    ];
    const droppedJobs = [c.schedule({}, c.promise, null, 2), c.schedule({}, c.promise, null, 3)].map((p) =>
      p.catch((err: unknown) => err),
    );
    await c.wait(125);
    // bottleneck: DONE 1, EXECUTING 1, RUNNING 1 (job 2, due at 200 ms), QUEUED 1. tokenpace: job 0 completed,
    // job 1 runs, jobs 2 and 3 wait (in a fleet job 2 holds a reservation).
    expect(c.scheduler.counters.completed).toBe(1);
    expect(c.scheduler.pending).toBe(1);
    expect(c.scheduler.size).toBe(2);
    let stopped = false;
    const stopping = c.scheduler.close({ drain: false }).then(() => {
      stopped = true;
    });
    const submit = c.scheduler.schedule(() => true).catch((err: unknown) => err);
    // tokenpace: ClosedError (ERR_CLOSED) where bottleneck rejects with the messages given to stop().
    expect(await submit).toBeInstanceOf(ClosedError);
    for (const err of await Promise.all(droppedJobs)) expect(err).toBeInstanceOf(ClosedError);
    expect(stopped).toBe(false); // job 1 still runs
    await c.last();
    await stopping;
    await Promise.all(kept);
    expect(dropped).toBe(2);
    expect(c.scheduler.size).toBe(0);
    expect(c.scheduler.pending).toBe(0);
    expect(c.scheduler.counters.completed).toBe(2);
    c.checkResultsOrder([[0], [1]]);
  });

  it('Should stop and let the queue finish', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    let dropped = 0;
    c.scheduler.on('rejected', () => dropped++);
    const jobs = [
      c.pNoErrVal(c.schedule({}, c.promise, null, 1), 1),
      c.pNoErrVal(c.schedule({}, c.promise, null, 2), 2),
      c.pNoErrVal(c.schedule({}, c.slowPromise, 100, null, 3), 3),
    ];
    await c.wait(75);
    expect(c.scheduler.counters.completed).toBe(1);
    expect(c.scheduler.size).toBe(2);
    const stopping = c.scheduler.close();
    const submit = c.scheduler.schedule(() => true).catch((err: unknown) => err);
    expect(await submit).toBeInstanceOf(ClosedError);
    await c.last();
    await stopping;
    await Promise.all(jobs);
    expect(dropped).toBe(0);
    expect(c.scheduler.size).toBe(0);
    expect(c.scheduler.pending).toBe(0);
    expect(c.scheduler.counters.completed).toBe(3);
    c.checkResultsOrder([[1], [2], [3]]);
  });

  it('Should still resolve when rejectOnDrop is false', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    const jobs = [
      c.schedule({}, c.promise, null, 1),
      c.schedule({}, c.promise, null, 2),
      c.schedule({}, c.slowPromise, 100, null, 3),
    ].map((p) => p.catch(() => undefined));
    const first = c.scheduler.close({ drain: false });
    await c.last();
    await first;
    // tokenpace: closing again is harmless and resolves (bottleneck: "stop() has already been called").
    await expect(c.scheduler.close({ drain: false })).resolves.toBeUndefined();
    await Promise.all(jobs);
  });

  it('Should not allow calling stop() twice when dropWaitingJobs=true', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    const outcomes = [
      c.schedule({}, c.promise, null, 1),
      c.schedule({}, c.promise, null, 2),
      c.schedule({}, c.slowPromise, 100, null, 3),
    ].map((p) =>
      p.then(
        () => 'ran',
        (err: unknown) => (err instanceof ClosedError ? 'closed' : String(err)),
      ),
    );
    const first = c.scheduler.close({ drain: false });
    await c.last();
    await first;
    await expect(c.scheduler.close({ drain: false })).resolves.toBeUndefined();
    // tokenpace: job 1 had started (schedule() starts a job at once when it may); bottleneck drops all 3,
    // its schedule() being asynchronous.
    expect(await Promise.all(outcomes)).toEqual(['ran', 'closed', 'closed']);
  });

  it('Should not allow calling stop() twice when dropWaitingJobs=false', async () => {
    const c = makeTest(form, { maxConcurrent: 1, minTime: 100 });
    const jobs = [
      c.pNoErrVal(c.schedule({}, c.promise, null, 1), 1),
      c.pNoErrVal(c.schedule({}, c.promise, null, 2), 2),
      c.pNoErrVal(c.schedule({}, c.slowPromise, 100, null, 3), 3),
    ];
    const first = c.scheduler.close();
    await c.last();
    await first;
    await expect(c.scheduler.close()).resolves.toBeUndefined();
    await Promise.all(jobs);
    c.checkResultsOrder([[1], [2], [3]]);
  });
});
