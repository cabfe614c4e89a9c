/**
 * The Scheduler's window limit (`limit`, `window`): no window of that length sees more than `limit`
 * of cost started, with the bucket and the concurrency holding too; p-queue's `strict` maps to it.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTokenpaceError, MemoryFleetStore, Scheduler, type SchedulerOptions } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';

function setup(options: Omit<SchedulerOptions, 'clock'>) {
  const fake = fakeClock(0);
  return { ...fake, scheduler: new Scheduler({ ...options, clock: fake.clock }) };
}

/** The most starts in any window of `windowMs` (a start at t counts in [t, t + windowMs)). */
function worstWindow(starts: number[], windowMs: number): number {
  let worst = 0;
  for (let i = 0, j = 0; j < starts.length; j++) {
    while ((starts[i] as number) + windowMs <= (starts[j] as number)) i++;
    worst = Math.max(worst, j - i + 1);
  }
  return worst;
}

describe('Scheduler window limit', () => {
  it('starts at most `limit` in any window, then one per slot as the oldest slide out', async () => {
    const { scheduler, timers, clock } = setup({ limit: 3, window: '1s', windowMargin: 0 });
    const starts: number[] = [];
    const jobs = Array.from({ length: 9 }, () => scheduler.schedule(() => starts.push(clock.now())));
    await timers.tickAsync(3000);
    await Promise.all(jobs);
    expect(starts).toEqual([0, 0, 0, 1000, 1000, 1000, 2000, 2000, 2000]);
  });

  it("windowCounts: 'start' adds the margin to the window (default 10 ms)", async () => {
    const { scheduler, timers, clock } = setup({ limit: 2, window: 1000, windowCounts: 'start' });
    const starts: number[] = [];
    const jobs = Array.from({ length: 4 }, () => scheduler.schedule(() => starts.push(clock.now())));
    await timers.tickAsync(2000);
    await Promise.all(jobs);
    expect(starts).toEqual([0, 0, 1010, 1010]);
  });

  it('combines with a rate and a concurrency: all hold', async () => {
    const { scheduler, timers, clock } = setup({
      rate: 10,
      burst: 10,
      concurrency: 2,
      limit: 5,
      window: 1000,
      windowMargin: 0,
    });
    const starts: number[] = [];
    const jobs = Array.from({ length: 20 }, () =>
      scheduler.schedule(async () => {
        starts.push(clock.now());
        await new Promise<void>((resolve) => clock.setTimeout(resolve, 50));
      }),
    );
    await timers.tickAsync(10_000);
    await Promise.all(jobs);
    expect(worstWindow(starts, 1000)).toBeLessThanOrEqual(5);
    expect(starts.length).toBe(20);
    // Never more than 2 running: starts 50 ms apart at least in each pair.
    for (let i = 2; i < starts.length; i++)
      expect((starts[i] as number) - (starts[i - 2] as number)).toBeGreaterThanOrEqual(50);
  });

  it('under load from random arrivals no window sees more than the limit, and the limit is used', async () => {
    const { scheduler, timers, clock } = setup({ limit: 50, window: 1000, windowMargin: 0, maxQueue: 10_000 });
    const starts: number[] = [];
    const jobs: Promise<unknown>[] = [];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let t = 0; t < 10_000; t += Math.floor(random() * 30)) {
      timers.setTimeout(() => jobs.push(scheduler.schedule(() => starts.push(clock.now()), { cost: 1 })), t);
    }
    await timers.tickAsync(30_000);
    await Promise.all(jobs);
    expect(worstWindow(starts, 1000)).toBe(50);
  });

  it('refuses a cost above the limit with a coded error naming the window', async () => {
    const { scheduler } = setup({ limit: 3, window: '1s' });
    const error = await scheduler.schedule(() => 1, { cost: 4 }).catch((e: unknown) => e);
    expect(isTokenpaceError(error, 'ERR_COST_EXCEEDS_CAPACITY')).toBe(true);
    expect(String((error as Error).message)).toMatch(/window limit of 3/);
  });

  it('refuses half a window, a bad margin, and a window on a fleet with coded errors', () => {
    const code = (options: SchedulerOptions) => {
      try {
        new Scheduler(options);
      } catch (error) {
        return isTokenpaceError(error) ? error.code : String(error);
      }
      return 'no error';
    };
    expect(code({ limit: 3 })).toBe('ERR_INVALID_OPTION');
    expect(code({ window: '1s' })).toBe('ERR_INVALID_OPTION');
    expect(code({ limit: 0, window: '1s' })).toBe('ERR_INVALID_OPTION');
    expect(code({ rate: 1, windowMargin: 5 })).toBe('ERR_INVALID_OPTION');
    expect(code({ limit: 3, window: '1s', store: new MemoryFleetStore(), key: 'k' })).toBe('ERR_NOT_SUPPORTED');
  });

  it("by default ('finish') a job counts until the window after it finishes, with no margin", async () => {
    const { scheduler, timers, clock } = setup({ limit: 2, window: 1000 });
    const starts: number[] = [];
    const jobs = Array.from({ length: 4 }, () =>
      scheduler.schedule(async () => {
        starts.push(clock.now());
        await new Promise<void>((resolve) => clock.setTimeout(resolve, 300));
      }),
    );
    await timers.tickAsync(3000);
    await Promise.all(jobs);
    expect(starts).toEqual([0, 0, 1300, 1300]);
    expect(scheduler.counters.started).toBe(4);
    const error = (() => {
      try {
        new Scheduler({ limit: 2, window: 1000, windowCounts: 'end' as 'start' });
      } catch (e) {
        return e;
      }
    })();
    expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
  });
});

describe('Scheduler window limit, counted until finish (the default)', () => {
  it('starts within schedule() when the window has room, and maxQueue 0 runs the job', async () => {
    const { scheduler, timers, clock } = setup({ limit: 2, window: 1000, maxQueue: 0 });
    const starts: number[] = [];
    const job = () => scheduler.schedule(() => starts.push(clock.now()));
    const first = job();
    expect(starts).toEqual([0]); // started within schedule(), as without a window
    const second = job();
    const third = job().catch((e: unknown) => e);
    expect(await third).toMatchObject({ code: 'ERR_QUEUE_FULL' });
    await timers.tickAsync(2000);
    await Promise.all([first, second]);
    expect(starts).toEqual([0, 0]);
    expect(scheduler.windowRemaining).toBe(2); // both finished at 0 and slid out at 1000
  });

  it('a full window that only running jobs can free: no up-front maxWait refusal, a finite retry hint', async () => {
    const { scheduler, timers, clock } = setup({ limit: 1, window: 100, maxQueue: 1, maxWait: 1000 });
    const starts: number[] = [];
    const long = (ms: number) =>
      scheduler.schedule(async () => {
        starts.push(clock.now());
        await new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
      });
    const first = long(200); // counts until 300
    const second = long(0); // waits: nothing predicts when the first finishes
    const third = long(0).catch((e: unknown) => e);
    const error = await third;
    expect(error).toMatchObject({ code: 'ERR_QUEUE_FULL' });
    expect((error as { retryAfterMs: number }).retryAfterMs).toBeLessThan(Number.POSITIVE_INFINITY);
    await timers.tickAsync(1000);
    await Promise.all([first, second]);
    expect(starts).toEqual([0, 300]);
  });
});

describe('Scheduler.setWindow', () => {
  const codeOf = (fn: () => void): string => {
    try {
      fn();
    } catch (error) {
      return isTokenpaceError(error) ? error.code : String(error);
    }
    return 'no error';
  };

  it('adds a window to a scheduler made without one, and the getters show it', async () => {
    const { scheduler, timers, clock } = setup({ concurrency: 4 });
    expect([scheduler.limit, scheduler.window]).toEqual([Number.POSITIVE_INFINITY, 0]);
    scheduler.setWindow({ limit: 2, window: '1s', windowMargin: 0 });
    expect([scheduler.limit, scheduler.window]).toEqual([2, 1000]);
    const starts: number[] = [];
    const jobs = Array.from({ length: 5 }, () => scheduler.schedule(() => starts.push(clock.now())));
    await timers.tickAsync(3000);
    await Promise.all(jobs);
    expect(starts).toEqual([0, 0, 1000, 1000, 2000]);
  });

  it('keeps the starts counted so far: a lower limit holds the next start until they slide out', async () => {
    const { scheduler, timers, clock } = setup({ limit: 4, window: 1000, windowMargin: 0 });
    const starts: number[] = [];
    const run = () => scheduler.schedule(() => starts.push(clock.now()));
    const first = [run(), run(), run()]; // 3 counted at 0
    await timers.tickAsync(400);
    scheduler.setWindow({ limit: 2, window: 1000 }); // the margin stays 0
    const later = [run(), run()];
    await timers.tickAsync(3000);
    await Promise.all([...first, ...later]);
    // 3 counted at 0 (over the new limit): nothing until they slide out at 1000, then 2.
    expect(starts).toEqual([0, 0, 0, 1000, 1000]);
    expect(worstWindow(starts.slice(3), 1000)).toBeLessThanOrEqual(2);
  });

  it('a higher limit or a shorter window lets waiting jobs start at once', async () => {
    const { scheduler, timers, clock } = setup({ limit: 1, window: 10_000, windowMargin: 0 });
    const starts: number[] = [];
    const jobs = Array.from({ length: 4 }, () => scheduler.schedule(() => starts.push(clock.now())));
    await timers.tickAsync(100);
    expect(starts).toEqual([0]);
    scheduler.setWindow({ limit: 3, window: 10_000 });
    await timers.tickAsync(0);
    expect(starts).toEqual([0, 100, 100]);
    scheduler.setWindow({ limit: 3, window: 50 }); // the three starts slid out of a 50 ms window
    await timers.tickAsync(0);
    await Promise.all(jobs);
    expect(starts).toEqual([0, 100, 100, 100]);
  });

  it('a longer window counts the starts made under the shorter one (no window of the new length sees more)', async () => {
    const { scheduler, timers, clock } = setup({ limit: 5, window: 50, windowMargin: 0 });
    const starts: number[] = [];
    const run = () => scheduler.schedule(() => starts.push(clock.now()));
    const jobs = Array.from({ length: 5 }, run); // 5 at 0
    await timers.tickAsync(50);
    jobs.push(run(), run()); // 2 at 50: the 5 at 0 slid out of 50 ms
    await timers.tickAsync(10);
    scheduler.setWindow({ limit: 5, window: 1000 });
    expect(scheduler.windowRemaining).toBe(0); // 7 started in the last 1000 ms
    jobs.push(run(), run(), run());
    await timers.tickAsync(3000);
    await Promise.all(jobs);
    // The 5 at 0 are inside 1000 ms of 60: the next three wait until they slide out, at 1000.
    expect(starts).toEqual([0, 0, 0, 0, 0, 50, 50, 1000, 1000, 1000]);
    expect(worstWindow(starts.slice(5), 1000)).toBeLessThanOrEqual(5);
  });

  it('rejects waiting jobs that cost more than the new limit, naming the window', async () => {
    const { scheduler, timers } = setup({ limit: 5, window: 1000, windowMargin: 0 });
    const ran: number[] = [];
    const first = scheduler.schedule(() => ran.push(5), { cost: 5 });
    const big = scheduler.schedule(() => ran.push(4), { cost: 4 }).catch((e: unknown) => e);
    const small = scheduler.schedule(() => ran.push(2), { cost: 2 });
    scheduler.setWindow({ limit: 3, window: 1000 });
    const error = await big;
    expect(isTokenpaceError(error, 'ERR_COST_EXCEEDS_CAPACITY')).toBe(true);
    expect(String((error as Error).message)).toMatch(/window limit of 3/);
    await timers.tickAsync(2000);
    await Promise.all([first, small]);
    expect(ran).toEqual([5, 2]);
  });

  it("keeps a 'finish' window counting until finish; changing how a live window counts is refused", async () => {
    const { scheduler, timers, clock } = setup({ limit: 2, window: 1000, windowCounts: 'finish' });
    const starts: number[] = [];
    const job = () =>
      scheduler.schedule(async () => {
        starts.push(clock.now());
        await new Promise<void>((resolve) => clock.setTimeout(resolve, 300));
      });
    const jobs = [job(), job()];
    scheduler.setWindow({ limit: 1, window: 500 });
    jobs.push(job());
    await timers.tickAsync(3000);
    await Promise.all(jobs);
    expect(starts).toEqual([0, 0, 800]); // both finished at 300 count until 800
    expect(codeOf(() => scheduler.setWindow({ limit: 1, window: 500, windowCounts: 'start' }))).toBe(
      'ERR_INVALID_OPTION',
    );
  });

  it('refuses bad input with coded errors, and a fleet with ERR_NOT_SUPPORTED', () => {
    const { scheduler } = setup({ concurrency: 1 });
    const set = (options: unknown) => () => scheduler.setWindow(options as { limit: number });
    expect(codeOf(set(undefined))).toBe('ERR_INVALID_OPTION');
    expect(codeOf(set({ limit: 3 }))).toBe('ERR_INVALID_OPTION');
    expect(codeOf(set({ limit: -1, window: '1s' }))).toBe('ERR_INVALID_OPTION');
    expect(codeOf(set({ limit: 3, window: '1s', rate: 5 }))).toBe('ERR_INVALID_OPTION');
    expect(codeOf(set({ limit: 3, window: '1s', windowCounts: 'end' }))).toBe('ERR_INVALID_OPTION');
    expect([scheduler.limit, scheduler.window]).toEqual([Number.POSITIVE_INFINITY, 0]);
    const fleet = new Scheduler({ concurrency: 1, store: new MemoryFleetStore(), key: 'k' });
    expect(codeOf(() => fleet.setWindow({ limit: 3, window: '1s' }))).toBe('ERR_NOT_SUPPORTED');
  });
});

describe('Scheduler.setWindow, properties', () => {
  it('after any change, no window of the new length ending at a later start holds more than the new limit', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 80 }), // arrival gaps, ms
        fc.array(
          fc.record({
            atMs: fc.integer({ min: 0, max: 2000 }),
            limit: fc.integer({ min: 1, max: 8 }),
            windowMs: fc.integer({ min: 10, max: 3000 }),
          }),
          { maxLength: 4 },
        ),
        async (gaps, changes) => {
          const { scheduler, timers, clock } = setup({ limit: 5, window: 400, windowMargin: 0, maxQueue: 1000 });
          const starts: number[] = [];
          const jobs: Promise<unknown>[] = [];
          let t = 0;
          for (const gap of gaps) {
            t += gap;
            timers.setTimeout(() => jobs.push(scheduler.schedule(() => starts.push(clock.now()))), t);
          }
          // Changes may make the window longer or shorter, the limit higher or lower.
          // The timeline records starts and changes in the order they happened.
          const timeline: Array<{ startMs: number } | { limit: number; windowMs: number }> = [];
          for (const change of [...changes].sort((a, b) => a.atMs - b.atMs)) {
            const windowMs = change.windowMs;
            timers.setTimeout(() => {
              timeline.push({ limit: change.limit, windowMs }); // before: jobs may start inside setWindow
              scheduler.setWindow({ limit: change.limit, window: windowMs });
            }, change.atMs);
          }
          scheduler.on('active', () => timeline.push({ startMs: clock.now() }));
          await timers.tickAsync(t + 5001);
          await timers.runAllAsync();
          await Promise.all(jobs);
          expect(starts.length).toBe(gaps.length);
          let limit = 5;
          let windowMs = 400;
          for (const entry of timeline) {
            if (!('startMs' in entry)) {
              ({ limit, windowMs } = entry);
              continue;
            }
            const start = entry.startMs;
            const inWindow = starts.filter((s) => s > start - windowMs && s <= start).length;
            expect(inWindow).toBeLessThanOrEqual(limit);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
