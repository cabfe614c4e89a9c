/**
 * Memory a settled job leaves behind: none, even with a long-lived signal (a
 * process-wide shutdown signal) and a timeout, measured on the real heap after
 * forced collections (the local form only). Waiting jobs share one abort
 * listener per signal, and so do running ones (no MaxListeners warning at a
 * concurrency above 10), in every form. A waiting job holds no more than a
 * hand-written pool's waiting call does.
 */

import { EventEmitter } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { heapAfterGc } from '../helpers/heap.js';
import { forms } from '../helpers/scheduler-forms.js';

describe('retained memory', () => {
  it('a settled job with a long-lived signal and a timeout retains nothing on the signal', async () => {
    const shutdown = new AbortController();
    const scheduler = new Scheduler({ concurrency: 64, maxQueue: 100_000, timeout: '1h' });
    // In rounds of 500, as requests arrive.
    const run = async (n: number) => {
      for (let done = 0; done < n; done += 500) {
        const jobs: Promise<unknown>[] = [];
        for (let i = 0; i < 500; i++) {
          jobs.push(scheduler.schedule(async ({ signal }) => signal?.aborted, { signal: shutdown.signal }));
        }
        await Promise.all(jobs);
      }
    };
    await run(5_000); // warm up
    const before = await heapAfterGc();
    const n = 50_000;
    await run(n);
    const after = await heapAfterGc();
    const perJob = (after - before) / n;
    expect(perJob).toBeLessThan(10);
    // The forwarding still works: an abort reaches a running job's signal.
    let seen: unknown;
    const job = scheduler.schedule(
      ({ signal }) =>
        new Promise((resolve) => {
          signal?.addEventListener('abort', () => {
            seen = signal.reason;
            resolve(undefined);
          });
        }),
      { signal: shutdown.signal },
    );
    const reason = new Error('shutdown');
    shutdown.abort(reason);
    await expect(job).rejects.toBe(reason);
    expect(seen).toBe(reason);
  }, 30_000);
});

describe('a waiting job', () => {
  /** Heap held per waiting call while `n` calls wait behind `concurrency` running ones that never end. */
  async function heldPerWaiting(submit: (fn: () => Promise<unknown>) => Promise<unknown>, n: number): Promise<number> {
    const never = new Promise<unknown>(() => {});
    const running: Promise<unknown>[] = [];
    for (let i = 0; i < 4; i++) running.push(submit(() => never));
    const before = await heapAfterGc();
    const waiting: Promise<unknown>[] = [];
    for (let i = 0; i < n; i++) waiting.push(submit(async () => i));
    const perJob = ((await heapAfterGc()) - before) / n;
    expect(waiting).toHaveLength(n); // held until here; they never start, so they never settle
    return perJob;
  }

  it('holds no more than a bare pool of 16 lines holds for a waiting call', async () => {
    // The floor: a closure per waiting call and its promise's two settlers (bench/scheduler.ts's pool).
    const pool = (concurrency: number) => {
      const queue: (() => void)[] = [];
      let running = 0;
      const next = () => {
        running--;
        queue.shift()?.();
      };
      return (fn: () => Promise<unknown>) =>
        new Promise((resolve, reject) => {
          const run = () => {
            running++;
            fn().then(
              (v) => {
                resolve(v);
                next();
              },
              (e: unknown) => {
                reject(e);
                next();
              },
            );
          };
          if (running < concurrency) run();
          else queue.push(run);
        });
    };
    const n = 50_000;
    const bare = await heldPerWaiting(pool(4), n);
    const scheduler = new Scheduler({ concurrency: 4, maxQueue: n });
    const ours = await heldPerWaiting((fn) => scheduler.schedule(fn), n);
    expect(ours).toBeLessThan(bare);
    // With a maxWait a job is linked in arrival order too, and still holds no more than the pool's call.
    const timed = new Scheduler({ concurrency: 4, maxQueue: n, maxWait: '1h' });
    expect(await heldPerWaiting((fn) => timed.schedule(fn), n)).toBeLessThan(bare);
  }, 30_000);
});

describe.each(forms)('many jobs waiting on one signal ($name)', (form) => {
  it('hold one abort listener in all, removed when the last leaves; an abort rejects every one', async () => {
    const shutdown = new AbortController();
    const scheduler = form.scheduler({ concurrency: 1, maxQueue: 10_000, autoStart: false });
    const jobs = Array.from({ length: 5_000 }, (_, i) =>
      scheduler.schedule(() => i, { signal: shutdown.signal }).catch((e: unknown) => e),
    );
    expect(EventEmitter.getEventListeners(shutdown.signal, 'abort')).toHaveLength(1); // not 5,000 (and no MaxListeners warning)
    const reason = new Error('shutdown');
    shutdown.abort(reason);
    for (const outcome of await Promise.all(jobs)) expect(outcome).toBe(reason);
    expect(scheduler.size).toBe(0);

    const other = new AbortController();
    const started = Array.from({ length: 3 }, () => scheduler.schedule(() => 1, { signal: other.signal }));
    expect(EventEmitter.getEventListeners(other.signal, 'abort')).toHaveLength(1);
    scheduler.resume();
    await Promise.all(started);
    expect(EventEmitter.getEventListeners(other.signal, 'abort')).toHaveLength(0);
  });
});

describe.each(forms)('many jobs running on one signal ($name)', (form) => {
  it('hold one abort listener in all while they run, none after; an abort reaches every one', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const shutdown = new AbortController();
      const scheduler = form.scheduler({ concurrency: 64, maxQueue: 1_000 });
      const finish: (() => void)[] = [];
      // Running, with their signal held (a signal of their own when they have a timeout).
      const plain = Array.from({ length: 32 }, () =>
        scheduler.schedule(() => new Promise<void>((resolve) => finish.push(resolve)), { signal: shutdown.signal }),
      );
      const timed = Array.from({ length: 32 }, () =>
        scheduler.schedule(({ signal }) => new Promise((resolve) => signal?.addEventListener('abort', resolve)), {
          signal: shutdown.signal,
          timeout: '1h',
        }),
      );
      await vi.waitFor(() => expect(scheduler.pending).toBe(64)); // a fleet's start takes a round trip
      expect(EventEmitter.getEventListeners(shutdown.signal, 'abort')).toHaveLength(1); // not 64
      for (const resolve of finish) resolve();
      await Promise.all(plain);
      expect(EventEmitter.getEventListeners(shutdown.signal, 'abort')).toHaveLength(1); // the timed ones still run
      const reason = new Error('shutdown');
      shutdown.abort(reason);
      for (const outcome of await Promise.allSettled(timed)) expect(outcome).toEqual({ status: 'rejected', reason });
      expect(EventEmitter.getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((warning) => warning.name)).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });
});
