/**
 * Jobs on trial: a fleet's job that the local form would have started at once waits for the store's
 * first answer (src/scheduler/waiting.ts). Until that answer it is treated as the local form treats a
 * job it started: no later job goes before it, `clear()` and `close({ drain: false })` leave it to its
 * answer, pausing does not hold it back, and it owes no `empty`. Each case runs on the three forms and
 * expects what the local form does; the cases with two workers on one store are a fleet's only.
 */

import { describe, expect, it } from 'vitest';
import { MemoryFleetStore } from '../../src/fleet/store.js';
import { Scheduler, type SchedulerOptions } from '../../src/scheduler/scheduler.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

/** 'ran', or the error's code. */
function outcome(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => 'ran',
    (error: unknown) => (error as { code?: string }).code ?? String(error),
  );
}

describe.each(forms)('jobs on trial ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  it('a later job of a higher priority does not go before a job on trial', async () => {
    const { scheduler, timers, clock } = setup({ rate: 10, concurrency: 1 });
    const starts: [string, number][] = [];
    const job = (name: string) => () => {
      starts.push([name, clock.now()]);
    };
    const jobs = [
      scheduler.schedule(job('first')),
      scheduler.schedule(job('second')),
      scheduler.schedule(job('urgent'), { priority: 5 }),
    ];
    await timers.runAllAsync();
    await Promise.all(jobs);
    expect(starts).toEqual([
      ['first', 0],
      ['urgent', 100],
      ['second', 200],
    ]);
  });

  it('close({ drain: false }) lets a job on trial run and rejects the jobs that wait', async () => {
    const { scheduler, timers } = setup({ rate: 10, concurrency: 1 });
    const outcomes = [scheduler.schedule(() => 1), scheduler.schedule(() => 2), scheduler.schedule(() => 3)].map(
      outcome,
    );
    const closing = scheduler.close({ drain: false });
    await timers.runAllAsync();
    await closing;
    expect(await Promise.all(outcomes)).toEqual(['ran', 'ERR_CLOSED', 'ERR_CLOSED']);
    expect(scheduler.size).toBe(0);
  });

  it('clear() lets a job on trial run', async () => {
    const { scheduler, timers } = setup({ concurrency: 1 });
    const first = outcome(scheduler.schedule(() => 1));
    const second = outcome(scheduler.schedule(() => 2));
    scheduler.clear();
    await timers.runAllAsync();
    expect([await first, await second]).toEqual(['ran', 'ABORT_ERR']);
  });

  it('a job on trial starts although the scheduler is paused right after it was scheduled', async () => {
    const { scheduler, timers } = setup({ concurrency: 1 });
    let ran = false;
    const job = scheduler.schedule(() => {
      ran = true;
    });
    scheduler.pause();
    await timers.tickAsync(0);
    expect(ran).toBe(true);
    await job;
  });

  it("a full queue's onFull gives up a waiting job, never one on trial", async () => {
    const { scheduler, timers } = setup({ concurrency: 1, maxQueue: 1, onFull: 'evict-lower' });
    const first = outcome(scheduler.schedule(() => 1));
    const second = outcome(scheduler.schedule(() => 2));
    const urgent = outcome(scheduler.schedule(() => 3, { priority: 5 }));
    await timers.runAllAsync();
    expect([await first, await second, await urgent]).toEqual(['ran', 'ERR_QUEUE_FULL', 'ran']);
  });

  it('a job that starts at once owes no `empty`; the last waiting job emits it when it starts', async () => {
    const { scheduler, timers, clock, sleep } = setup({ rate: 10, concurrency: 1 });
    const empties: number[] = [];
    scheduler.on('empty', () => empties.push(clock.now()));
    const one = scheduler.schedule(() => sleep(50));
    await timers.tickAsync(50);
    await one;
    expect(empties).toEqual([]);
    // Job 2 runs from 100 to 150; job 3 waits for its token until 200 (with a reservation, in a fleet):
    // it empties the queue when it starts, not at the next look after job 2's end.
    const two = scheduler.schedule(() => sleep(50));
    const three = scheduler.schedule(() => sleep(50));
    await timers.runAllAsync();
    await Promise.all([two, three]);
    expect(empties).toEqual([200]);
  });
});

/** Two workers on one MemoryFleetStore: the first one's jobs make the second one's last report stale. */
function twoWorkers(options: Omit<SchedulerOptions, 'store' | 'key' | 'clock'>) {
  const { clock, timers } = fakeClock(1000);
  const store = new MemoryFleetStore({ clock });
  const make = () => new Scheduler({ store, key: 'api', clock, ...options });
  return { clock, timers, store, pending: () => timers.countTimers(), a: make(), b: make() };
}

const RATE_ONLY = { ratePerSecond: 10, burst: 1, concurrency: Number.POSITIVE_INFINITY };
const CONCURRENCY_ONLY = { ratePerSecond: Number.POSITIVE_INFINITY, burst: 1, concurrency: 1 };

describe('a job on trial that close({ drain: false }) left to its answer (two workers on one store)', () => {
  it('admitted: it runs, and its lease goes back once', async () => {
    const { timers, store, b } = twoWorkers({ concurrency: 1 });
    const job = outcome(b.schedule(() => 0));
    const closing = b.close({ drain: false });
    await timers.tickAsync(0);
    await closing;
    expect(await job).toBe('ran');
    expect((await store.inspect('api', CONCURRENCY_ONLY)).inFlight).toBe(0);
  });

  it('granted with a delay: the reservation is given back, and the job rejects with ClosedError', async () => {
    const { timers, store, a, b, pending } = twoWorkers({ rate: 10 });
    await a.schedule(() => 0); // the token b last saw is spent
    let ran = false;
    const job = outcome(
      b.schedule(() => {
        ran = true;
      }),
    );
    const closing = b.close({ drain: false });
    await timers.tickAsync(0);
    await closing;
    expect(await job).toBe('ERR_CLOSED');
    expect(ran).toBe(false);
    // Refunded by the cancel rule: 0 tokens, not the -1 of a reservation kept.
    const snapshot = await store.inspect('api', RATE_ONLY);
    expect(snapshot.tokens).toBe(0);
    expect(snapshot.inFlight).toBe(0);
    await a.close();
    expect(pending()).toBe(0);
  });

  it('a refusal for the concurrency rejects it with ClosedError and leaves the units to the others', async () => {
    const { timers, store, a, b } = twoWorkers({ concurrency: 1 });
    await b.schedule(() => 0); // b last saw the unit free
    let finish = () => {};
    const running = a.schedule(() => new Promise<void>((resolve) => (finish = resolve)));
    await timers.tickAsync(0);
    const job = outcome(b.schedule(() => 0));
    const closing = b.close({ drain: false });
    await timers.tickAsync(0);
    expect(await job).toBe('ERR_CLOSED');
    finish();
    await running;
    await closing;
    await a.close();
    expect((await store.inspect('api', CONCURRENCY_ONLY)).inFlight).toBe(0);
  });
});
