/**
 * Running a job (src/scheduler/run.ts): the concurrency is held until the
 * function really settles, a timeout rejects early (and aborts the job's
 * signal) without freeing it, and a timeout of any length is exact. A job's
 * bill (its context) follows `adjust`'s rule whatever the admission.
 */

import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { Emitter } from '../../src/scheduler/events.js';
import { zeroCounters } from '../../src/scheduler/options.js';
import { Bill, Job, Runner } from '../../src/scheduler/run.js';
import { fakeClock } from '../helpers/fake-clock.js';

function setup(releaseOnTimeout = false) {
  const fake = fakeClock();
  const counters = zeroCounters();
  const finished: (Job | undefined)[] = [];
  const runner = new Runner({
    clock: fake.clock,
    counters,
    events: new Emitter(),
    releaseOnTimeout,
    adjuster: () => {},
    onFinish: (job) => finished.push(job),
  });
  return { ...fake, counters, runner, finished };
}

describe('Runner', () => {
  it('holds the cost while the function runs and counts the outcome', async () => {
    const { runner, counters, finished } = setup();
    let release!: (value: string) => void;
    const result = runner.run(() => new Promise<string>((r) => (release = r)), 3, 0, 3);
    expect([runner.pending, runner.runningCost]).toEqual([1, 3]);
    release('done');
    await expect(result).resolves.toBe('done');
    expect([runner.pending, runner.runningCost, finished]).toEqual([0, 0, [undefined]]);
    expect(counters).toMatchObject({ started: 1, completed: 1, waitedMs: 0 });
    await expect(
      runner.run(
        () => {
          throw new Error('sync');
        },
        1,
        0,
        1,
      ),
    ).rejects.toThrow('sync');
    expect(counters.failed).toBe(1);
  });

  it('a job that waited settles through its own settlers, and is told to onFinish', async () => {
    const { runner, counters, finished } = setup();
    const job = new Job(() => 'ok', 2, 2, 0, 0, undefined);
    const outcome = new Promise((resolve, reject) => {
      job.resolve = resolve;
      job.reject = reject;
    });
    runner.runJob(job, 2, 7, Number.POSITIVE_INFINITY);
    await expect(outcome).resolves.toBe('ok');
    expect(finished).toEqual([job]);
    expect(counters).toMatchObject({ started: 1, completed: 1, waitedMs: 7 });
  });

  it("a timeout of 30 days rejects after 30 days, aborts the job's signal, and keeps the slot until fn settles", async () => {
    const { runner, timers, counters } = setup();
    const day = 24 * 3600 * 1000;
    let seen: AbortSignal | undefined;
    let release!: () => void;
    let outcome: unknown;
    const job = new Job(
      ({ signal }) => {
        seen = signal;
        return new Promise<void>((r) => (release = r));
      },
      2,
      2,
      0,
      0,
      undefined,
    );
    job.resolve = (value) => (outcome = { value });
    job.reject = (error) => (outcome = error);
    runner.runJob(job, 2, 0, 30 * day);
    await timers.tickAsync(1);
    expect(outcome).toBeUndefined();
    await timers.tickAsync(30 * day - 2);
    expect(outcome).toBeUndefined();
    await timers.tickAsync(1);
    expect(outcome).toMatchObject({ code: 'ERR_JOB_TIMEOUT' });
    expect(seen?.aborted).toBe(true);
    expect(counters.timedOut).toBe(1);
    expect(runner.runningCost).toBe(2); // still running
    release();
    await timers.tickAsync(0);
    expect(runner.runningCost).toBe(0);
  });

  it('with releaseOnTimeout the slot frees at the timeout, and onFinish is told then, once', async () => {
    const { runner, timers, finished } = setup(true);
    let release!: () => void;
    const job = new Job(() => new Promise<void>((r) => (release = r)), 1, 1, 0, 0, undefined);
    job.resolve = () => {};
    job.reject = () => {};
    runner.runJob(job, 1, 0, 10);
    await timers.tickAsync(10);
    expect([runner.pending, finished]).toEqual([0, [job]]);
    release();
    await timers.tickAsync(0);
    expect(finished).toEqual([job]);
  });
});

describe('Bill', () => {
  it("adjust's rule: a charge past the capacity throws, a refund is at most what was charged", () => {
    const changes: number[] = [];
    const bill = new Bill(undefined, 2, (b, delta) => changes.push(b.amend(delta, 5)));
    bill.adjust(3);
    expect(bill.cost).toBe(5);
    expect(() => bill.adjust(1)).toThrow(expect.objectContaining({ code: 'ERR_COST_EXCEEDS_CAPACITY' }));
    bill.adjust(-10);
    expect([bill.cost, changes]).toEqual([0, [3, -5]]);
    expect(() => bill.adjust(Number.NaN)).toThrow(/finite number/);
  });
});

/**
 * Counts microtask turns: `at()` is the number of turns taken since `start()`. Each turn queues
 * the next, so a reaction that runs in turn n reads n (a settled promise's reaction is one turn).
 */
function microtaskCounter(turns = 10) {
  let turn = 0;
  const step = (left: number): void => {
    if (left === 0) return;
    queueMicrotask(() => {
      turn++;
      step(left - 1);
    });
  };
  return {
    start: () => step(turns),
    at: () => turn,
  };
}

describe('a waiting job settles', () => {
  it('rejected in the same microtask as a fulfilled sibling started with it', async () => {
    const { clock } = fakeClock();
    const scheduler = new Scheduler({ concurrency: 2, autoStart: false, clock });
    const settled: [string, number][] = [];
    const counter = microtaskCounter();
    const failing = scheduler.schedule(() => {
      throw new Error('no');
    });
    const passing = scheduler.schedule(() => 'yes');
    failing.catch(() => settled.push(['rejected', counter.at()]));
    void passing.then(() => settled.push(['fulfilled', counter.at()]));
    counter.start();
    scheduler.resume(); // both start here, in arrival order
    await Promise.allSettled([failing, passing]);
    await new Promise((resolve) => setImmediate(resolve));
    const turn = settled[0]?.[1];
    expect(settled).toEqual([
      ['rejected', turn],
      ['fulfilled', turn],
    ]);
  });

  it('rejected by an abort or clear() in the same microtask as a promise rejected then', async () => {
    const { clock } = fakeClock();
    const scheduler = new Scheduler({ concurrency: 1, autoStart: false, clock });
    const controller = new AbortController();
    const cleared = scheduler.schedule(() => 0);
    const aborted = scheduler.schedule(() => 0, { signal: controller.signal });
    const seen: [string, number][] = [];
    const counter = microtaskCounter();
    aborted.catch(() => seen.push(['aborted', counter.at()]));
    cleared.catch(() => seen.push(['cleared', counter.at()]));
    counter.start();
    controller.abort();
    scheduler.clear();
    // A promise rejected right after them: its handler runs in the same turn as theirs.
    Promise.reject(new Error('reference')).catch(() => seen.push(['reference', counter.at()]));
    await new Promise((resolve) => setImmediate(resolve));
    const turn = seen[0]?.[1];
    expect(seen).toEqual([
      ['aborted', turn],
      ['cleared', turn],
      ['reference', turn],
    ]);
  });
});
