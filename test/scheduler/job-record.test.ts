/**
 * The plain job (cost 1, no options), the queued burst's case: each guarantee pinned on it
 * (priority order, clear, counters, events, `adjust` and `signal` from the context); a default
 * timeout is the one in force when the job was scheduled.
 */

import { describe, expect, it } from 'vitest';
import { isTokenpaceError, Scheduler } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';

async function flush(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await Promise.resolve();
}

/** A job that runs until `release()` is called. */
function gate(): { job: () => Promise<void>; release: () => void } {
  let release!: () => void;
  const done = new Promise<void>((resolve) => (release = resolve));
  return { job: () => done, release };
}

describe('a plain job (cost 1, no options)', () => {
  it('waits in priority order, is counted and told, and its context has no signal and a working adjust', async () => {
    const { clock, timers } = fakeClock();
    const scheduler = new Scheduler({ concurrency: 1, rate: 1000, burst: 10, clock, maxQueue: 10 });
    const events: string[] = [];
    scheduler.on('active', ({ waitedMs }) => events.push(`active:${waitedMs}`));
    scheduler.on('completed', (value) => events.push(`completed:${String(value)}`));
    const first = gate();
    const running = scheduler.schedule(first.job);
    const order: string[] = [];
    const low = scheduler.schedule(() => order.push('low'));
    const high = scheduler.schedule(
      ({ signal, adjust }) => {
        order.push(`high:${String(signal)}`);
        adjust(2); // destructured: bound to its job
      },
      { priority: 1 },
    );
    timers.tick(5);
    first.release();
    await Promise.all([running, low, high]);
    expect(order).toEqual(['high:undefined', 'low']);
    expect(events).toEqual([
      'active:0',
      'completed:undefined',
      'active:5',
      'completed:undefined',
      'active:5',
      'completed:2',
    ]);
    expect(scheduler.counters).toMatchObject({ started: 3, completed: 3, waitedMs: 10 });
    await expect(scheduler.schedule(({ adjust }) => adjust(Number.NaN))).rejects.toThrow(/finite number/);
  });

  it('a plain job in the queue is removed by clear(), and counted as cleared', async () => {
    const { clock } = fakeClock();
    const scheduler = new Scheduler({ concurrency: 1, clock, maxQueue: 10 });
    const first = gate();
    const running = scheduler.schedule(first.job);
    const waiting = scheduler.schedule(() => 'never');
    scheduler.clear();
    await expect(waiting).rejects.toMatchObject({ code: 'ABORT_ERR' });
    first.release();
    await running;
    expect(scheduler.counters).toMatchObject({ started: 1, rejected: { cleared: 1 } });
  });

  it('the context of a job with a signal or a timeout is its signal (its own with a timeout)', async () => {
    const { clock, timers } = fakeClock();
    const scheduler = new Scheduler({ concurrency: 1, clock, maxQueue: 10 });
    const controller = new AbortController();
    const seen: (AbortSignal | undefined)[] = [];
    await scheduler.schedule(({ signal }) => seen.push(signal), { signal: controller.signal });
    const timedOut = scheduler.schedule(
      ({ signal }) => {
        seen.push(signal);
        return new Promise(() => {});
      },
      { timeout: 10 },
    );
    timers.tick(10);
    await expect(timedOut).rejects.toMatchObject({ code: 'ERR_JOB_TIMEOUT' });
    expect(seen[0]).toBe(controller.signal);
    expect(seen[1]).toBeInstanceOf(AbortSignal);
    expect(seen[1]?.aborted).toBe(true);
  });
});

describe('a default timeout', () => {
  it('is the one in force when the job was scheduled, not when it starts (as in p-queue)', async () => {
    const { clock, timers } = fakeClock();
    const scheduler = new Scheduler({ concurrency: 1, clock, maxQueue: 10, timeout: 100 });
    const first = gate();
    const running = scheduler.schedule(first.job);
    const waiting = scheduler.schedule(() => new Promise(() => {}));
    scheduler.timeout = 10_000;
    first.release();
    await running;
    await flush();
    timers.tick(100);
    const error = await waiting.catch((e: unknown) => e);
    expect(isTokenpaceError(error) && error.code).toBe('ERR_JOB_TIMEOUT');
  });
});

describe('arrival times', () => {
  it('waitedMs and maxWait deadlines stay exact at a wall-clock-like origin, over an hour', async () => {
    const { clock, timers } = fakeClock(1_700_000_000_000); // a wall-clock-like origin
    const scheduler = new Scheduler({ concurrency: 1, clock, maxQueue: 10, maxWait: '1h' });
    const first = gate();
    const running = scheduler.schedule(first.job);
    const a = scheduler.schedule(() => 'a');
    timers.tick(30 * 60_000);
    const b = scheduler.schedule(() => 'b');
    timers.tick(20 * 60_000);
    first.release();
    await expect(Promise.all([running, a, b])).resolves.toEqual([undefined, 'a', 'b']);
    expect(scheduler.counters.waitedMs).toBe(50 * 60_000 + 20 * 60_000);
    const second = gate();
    const blocker = scheduler.schedule(second.job);
    const late = scheduler.schedule(() => 'late');
    timers.tick(60 * 60_000 - 1);
    await flush();
    expect(scheduler.size).toBe(1);
    timers.tick(1);
    await expect(late).rejects.toMatchObject({ code: 'ERR_WAIT_TOO_LONG' });
    second.release();
    await blocker;
  });
});
