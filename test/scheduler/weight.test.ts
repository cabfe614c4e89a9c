/**
 * Two costs: a job's `cost` (tokens from the bucket) apart from its `weight` (units of the
 * concurrency it holds while it runs), on the local form and on both fleet forms. The weight is the
 * cost unless told.
 */

import { describe, expect, it } from 'vitest';
import { CostExceedsCapacityError, type SchedulerOptions } from '../../src/index.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

describe.each(forms)('cost and weight ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  it('under rate with burst 1, a job weighing 2 against the concurrency runs, one token each', async () => {
    const { scheduler, timers, clock } = setup({ rate: 10, burst: 1, concurrency: 4 });
    const starts: number[] = [];
    const ends: Array<() => void> = [];
    const job = () =>
      scheduler.schedule(
        () =>
          new Promise<void>((resolve) => {
            starts.push(clock.now());
            ends.push(resolve);
          }),
        { weight: 2 },
      );
    const runs = [job(), job(), job()];
    await timers.tickAsync(500);
    // One token each (10/s, burst 1): the first at 0, the second at 100 ms; the third waits for
    // the concurrency (4 units, two jobs of weight 2 hold them), not for tokens.
    expect(starts).toEqual([0, 100]);
    expect(scheduler.pendingCost).toBe(4);
    ends[0]?.();
    await timers.tickAsync(1);
    expect(starts).toHaveLength(3);
    expect(starts[2]).toBeGreaterThanOrEqual(500);
    for (const end of ends) end();
    await timers.tickAsync(1);
    await Promise.all(runs);
    expect(scheduler.pendingCost).toBe(0);
  });

  it('the weight is the cost unless told; weight 0 holds the least, as cost 0 does', async () => {
    const { scheduler, timers } = setup({ rate: 100, burst: 10, concurrency: 5 });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const first = scheduler.schedule(() => held, { cost: 3 });
    await timers.tickAsync(0);
    expect(scheduler.pendingCost).toBe(3);
    const second = scheduler.schedule(() => held, { cost: 4, weight: 1 });
    await timers.tickAsync(0);
    expect(scheduler.pendingCost).toBe(4);
    release();
    await Promise.all([first, second]);
  });

  it('a weight above the concurrency is refused at once, naming it; a cost above the burst as before', async () => {
    const { scheduler } = setup({ rate: 10, burst: 2, concurrency: 3 });
    const heavy = scheduler.schedule(() => 1, { cost: 1, weight: 4 });
    await expect(heavy).rejects.toBeInstanceOf(CostExceedsCapacityError);
    await expect(heavy).rejects.toThrow(/weight/);
    await expect(scheduler.schedule(() => 1, { cost: 3, weight: 1 })).rejects.toMatchObject({
      code: 'ERR_COST_EXCEEDS_CAPACITY',
      capacity: 2,
    });
    await expect(scheduler.schedule(() => 1, { weight: -1 })).rejects.toMatchObject({ code: 'ERR_INVALID_SIZE' });
    expect(await scheduler.schedule(() => 'ok', { cost: 2, weight: 3 })).toBe('ok');
  });

  it('wrap takes a weight, or a function of the arguments that returns it', async () => {
    const { scheduler, timers } = setup({ rate: 100, burst: 1, concurrency: 10 });
    const releases: Array<() => void> = [];
    const report = scheduler.wrap(
      (pages: number) => new Promise<number>((resolve) => releases.push(() => resolve(pages))),
      {
        weight: (pages: number) => pages,
      },
    );
    const done = Promise.all([report(6), report(6)]);
    for (let i = 0; i < 10 && releases.length === 0; i++) {
      await timers.tickAsync(20);
      await form.settle();
    }
    await timers.tickAsync(50);
    await form.settle();
    expect(releases).toHaveLength(1); // the second waits: 6 + 6 > 10
    expect(scheduler.pendingCost).toBe(6);
    releases[0]?.();
    for (let i = 0; i < 10 && releases.length === 1; i++) {
      await timers.tickAsync(20);
      await form.settle();
    }
    releases[1]?.();
    expect(await done).toEqual([6, 6]);
  });
});
