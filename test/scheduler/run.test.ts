/**
 * Running a job (src/scheduler/run.ts): the concurrency is held until the
 * function really settles, a timeout rejects early (and aborts the job's
 * signal) without freeing it, and a timeout of any length is exact.
 */

import { describe, expect, it } from 'vitest';
import { Emitter } from '../../src/scheduler/events.js';
import { zeroCounters } from '../../src/scheduler/options.js';
import { NO_SIGNAL, Runner } from '../../src/scheduler/run.js';
import { fakeClock } from '../helpers/fake-clock.js';

function setup() {
  const fake = fakeClock();
  const counters = zeroCounters();
  let finishes = 0;
  const runner = new Runner(fake.clock, counters, new Emitter(), () => finishes++);
  return { ...fake, counters, runner, finishes: () => finishes };
}

describe('Runner', () => {
  it('holds the cost while the function runs and counts the outcome', async () => {
    const { runner, counters, finishes } = setup();
    let release!: (value: string) => void;
    const result = runner.invoke(() => new Promise<string>((r) => (release = r)), NO_SIGNAL, 3, 0, 7);
    expect([runner.pending, runner.runningCost]).toEqual([1, 3]);
    release('done');
    await expect(result).resolves.toBe('done');
    expect([runner.pending, runner.runningCost, finishes()]).toEqual([0, 0, 1]);
    expect(counters).toMatchObject({ started: 1, completed: 1, waitedMs: 7 });
    await expect(
      runner.invoke(
        () => {
          throw new Error('sync');
        },
        NO_SIGNAL,
        1,
        0,
        0,
      ),
    ).rejects.toThrow('sync');
    expect(counters.failed).toBe(1);
  });

  it("a timeout of 30 days rejects after 30 days, aborts the job's signal, and keeps the slot until fn settles", async () => {
    const { runner, timers, counters } = setup();
    const day = 24 * 3600 * 1000;
    let seen: AbortSignal | undefined;
    let release!: () => void;
    let outcome: unknown;
    runner.invokeGuarded(
      ({ signal }) => {
        seen = signal;
        return new Promise<void>((r) => (release = r));
      },
      2,
      0,
      undefined,
      30 * day,
      0,
      (value) => (outcome = { value }),
      (error) => (outcome = error),
    );
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
});
