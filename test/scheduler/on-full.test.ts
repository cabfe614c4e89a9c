/**
 * What a full queue gives up (`onFull`), on the local form and on both fleet forms: the new job
 * (`'reject'`, the default), the oldest waiting job of a lower priority (`'evict-lower'`, bottleneck's
 * OVERFLOW_PRIORITY), or the oldest of the lowest priority (`'drop-oldest'`, bottleneck's LEAK).
 * Whoever is given up rejects with `QueueFullError` and its reason; the queue never holds more than
 * `maxQueue`.
 */

import { describe, expect, it } from 'vitest';
import { QueueFullError, type SchedulerOptions } from '../../src/index.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

/** What became of each job, by name. */
function outcomes() {
  const seen: Record<string, string> = {};
  const track = (name: string, promise: Promise<unknown>) =>
    promise.then(
      () => {
        seen[name] = 'ran';
      },
      (error: unknown) => {
        seen[name] = error instanceof QueueFullError ? error.reason : String(error);
      },
    );
  return { seen, track };
}

describe.each(forms)('onFull ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  /** A scheduler whose one concurrency slot is held, so that every later job waits. */
  async function busy(options: Omit<SchedulerOptions, 'clock'>) {
    const s = setup({ concurrency: 1, maxQueue: 2, ...options });
    let release!: () => void;
    const blocker = s.scheduler.schedule(() => new Promise<void>((resolve) => (release = resolve)));
    await s.timers.tickAsync(0);
    await form.settle();
    return { ...s, blocker, release: () => release() };
  }

  it("'reject' (the default) turns the new job away", async () => {
    const { scheduler, timers, release, blocker } = await busy({});
    const { seen, track } = outcomes();
    const all = [
      track(
        'a',
        scheduler.schedule(() => 'a', { priority: 0 }),
      ),
      track(
        'b',
        scheduler.schedule(() => 'b', { priority: 0 }),
      ),
      track(
        'c',
        scheduler.schedule(() => 'c', { priority: 5 }),
      ),
    ];
    await timers.tickAsync(0);
    expect(seen).toEqual({ c: 'full' });
    release();
    await blocker;
    await timers.runAllAsync();
    await Promise.all(all);
    expect(seen).toEqual({ a: 'ran', b: 'ran', c: 'full' });
  });

  it("'evict-lower' evicts the oldest job of a lower priority, never one of the same or higher", async () => {
    const { scheduler, timers, release, blocker } = await busy({ onFull: 'evict-lower' });
    const { seen, track } = outcomes();
    const all = [
      track(
        'low-1',
        scheduler.schedule(() => 0, { priority: 0 }),
      ),
      track(
        'low-2',
        scheduler.schedule(() => 0, { priority: 0 }),
      ),
      track(
        'high-1',
        scheduler.schedule(() => 0, { priority: 5 }),
      ), // evicts low-1
      track(
        'low-3',
        scheduler.schedule(() => 0, { priority: 0 }),
      ), // nothing lower: turned away
      track(
        'high-2',
        scheduler.schedule(() => 0, { priority: 5 }),
      ), // evicts low-2
      track(
        'high-3',
        scheduler.schedule(() => 0, { priority: 5 }),
      ), // nothing lower: turned away
    ];
    await timers.tickAsync(0);
    expect(seen).toEqual({ 'low-1': 'evicted', 'low-3': 'full', 'low-2': 'evicted', 'high-3': 'full' });
    expect(scheduler.size).toBe(2);
    expect(scheduler.counters.rejected.queueFull).toBe(4);
    release();
    await blocker;
    await timers.runAllAsync();
    await Promise.all(all);
    expect(seen['high-1']).toBe('ran');
    expect(seen['high-2']).toBe('ran');
  });

  it("'drop-oldest' drops the oldest of the lowest priority for a newer job, unless the newer is lower still", async () => {
    const { scheduler, timers, release, blocker } = await busy({ onFull: 'drop-oldest', maxQueue: 3 });
    const { seen, track } = outcomes();
    const all = [
      track(
        'p1-a',
        scheduler.schedule(() => 0, { priority: 1 }),
      ),
      track(
        'p0-a',
        scheduler.schedule(() => 0, { priority: 0 }),
      ),
      track(
        'p0-b',
        scheduler.schedule(() => 0, { priority: 0 }),
      ),
      track(
        'p0-c',
        scheduler.schedule(() => 0, { priority: 0 }),
      ), // drops p0-a, the oldest of the lowest
      track(
        'p1-b',
        scheduler.schedule(() => 0, { priority: 1 }),
      ), // drops p0-b
      track(
        'p-1',
        scheduler.schedule(() => 0, { priority: -1 }),
      ), // lower than all: turned away
    ];
    await timers.tickAsync(0);
    expect(seen).toEqual({ 'p0-a': 'dropped', 'p0-b': 'dropped', 'p-1': 'full' });
    release();
    await blocker;
    await timers.runAllAsync();
    await Promise.all(all);
    expect(seen).toMatchObject({ 'p1-a': 'ran', 'p1-b': 'ran', 'p0-c': 'ran' });
  });

  it('an evicted job carries a retry hint, and memory stays flat under a flood', async () => {
    const { scheduler, timers, release, blocker } = await busy({ onFull: 'drop-oldest', maxQueue: 100 });
    const errors: QueueFullError[] = [];
    const jobs: Promise<unknown>[] = [];
    for (let i = 0; i < 20_000; i++) {
      jobs.push(
        scheduler
          .schedule(() => i)
          .catch((error: QueueFullError) => {
            errors.push(error);
          }),
      );
    }
    await timers.tickAsync(0);
    expect(scheduler.size).toBe(100);
    expect(errors).toHaveLength(19_900);
    expect(errors[0]).toMatchObject({ code: 'ERR_QUEUE_FULL', reason: 'dropped', maxQueue: 100 });
    expect(errors[0]?.retryAfterMs).toBeGreaterThanOrEqual(0);
    expect(errors[0]?.message).toMatch(/dropped from a full queue/);
    release();
    await blocker;
    await timers.runAllAsync();
    await Promise.all(jobs);
  });

  it("refuses an unknown onFull, and answers bottleneck's `strategy` with ours", () => {
    expect(() => setup({ concurrency: 1, onFull: 'leak' as never })).toThrow(/Expected `onFull` to be 'reject'/);
    expect(() => setup({ concurrency: 1, strategy: 1 } as never)).toThrow(/onFull/);
  });
});
