/**
 * Memory a settled job leaves behind: none. A job with a long-lived signal
 * (a process-wide shutdown signal) and a timeout used to leave ~61 bytes on
 * that signal per job (AbortSignal.any's bookkeeping), ~58 MiB per million
 * jobs. Measured on the real heap after forced collections.
 */

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

async function heapAfterGc(): Promise<number> {
  for (let i = 0; i < 4; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  return process.memoryUsage().heapUsed;
}

describe('retained memory', () => {
  it('a settled job with a long-lived signal and a timeout retains nothing on the signal', async () => {
    const shutdown = new AbortController();
    const scheduler = new Scheduler({ concurrency: 64, maxQueue: 100_000, timeout: '1h' });
    // In rounds of 500, so few jobs wait at once (each waiting job is a listener on the shared signal).
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
    expect(perJob).toBeLessThan(10); // was ~61 bytes per job
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
