/**
 * What bottleneck's own tests use (test/context.js of SGrondin/bottleneck at v2.19.5), over tokenpace's
 * Scheduler in one of its three forms (test/helpers/scheduler-forms.ts: local, MemoryFleetStore,
 * RedisFleetStore), on a fake clock: each case of ./*.test.ts runs on every form and expects the same.
 *
 * bottleneck's options map to the Scheduler's (docs/peer-suites.md):
 * - `maxConcurrent` is `concurrency`, a job's `weight` its `cost`;
 * - `minTime: t` is `rate: 1000 / t, burst: 1` (a start every t ms, the first at once);
 * - `highWater` is `maxQueue` (bottleneck's OVERFLOW: the new job is turned away), and its `strategy`
 *   `OVERFLOW_PRIORITY` is `onFull: 'evict-lower'`, `LEAK` is `onFull: 'drop-oldest'`;
 * - `expiration` is `timeout`;
 * - a priority p of 0..9, lower first, default 5, is the Scheduler's `5 - p` (higher first, default 0);
 * - a limiter with no limit (bottleneck's default) is `concurrency: 1000`: a Scheduler needs one.
 *
 * `c.promise`/`c.slowPromise` record each call with its time (ms since the test's start, on the fake
 * clock) as bottleneck's do; `c.last()` runs the fake time until nothing is left and returns the
 * record. bottleneck's `last()` schedules one more job to wait for the others; here the time runs
 * out instead, which changes no recorded call.
 */

import { expect, it } from 'vitest';
import type { Scheduler, SchedulerOptions } from '../../../src/scheduler/scheduler.js';
import { type Form, type FormSetup, setupForm } from '../../helpers/scheduler-forms.js';

export interface BottleneckOptions {
  maxConcurrent?: number;
  minTime?: number;
  highWater?: number;
  strategy?: 'OVERFLOW_PRIORITY' | 'LEAK';
  /** A token bucket where bottleneck has a reservoir: `reservoir` X refreshed or increased by X each `interval` ms. */
  bucket?: { amount: number; intervalMs: number };
}

export interface JobOptions {
  priority?: number;
  weight?: number;
  expiration?: number;
}

export interface Call {
  err: unknown;
  result: unknown[];
  time: number;
}

/** bottleneck's options as the Scheduler's (see the opening comment). */
export function schedulerOptions(options: BottleneckOptions): Omit<SchedulerOptions, 'clock'> {
  const out: Omit<SchedulerOptions, 'clock'> = {};
  if (options.maxConcurrent !== undefined) out.concurrency = options.maxConcurrent;
  if (options.minTime !== undefined && options.minTime > 0) {
    out.rate = 1000 / options.minTime;
    out.burst = 1;
  }
  if (options.bucket !== undefined) {
    out.rate = (options.bucket.amount * 1000) / options.bucket.intervalMs;
    out.burst = options.bucket.amount;
  }
  if (options.highWater !== undefined) out.maxQueue = options.highWater;
  if (options.strategy !== undefined) out.onFull = options.strategy === 'LEAK' ? 'drop-oldest' : 'evict-lower';
  if (out.concurrency === undefined && out.rate === undefined) out.concurrency = 1000;
  return out;
}

/** A job's options as the Scheduler's. */
export function jobOptions(options: JobOptions): { priority?: number; cost?: number; timeout?: number } {
  return {
    ...(options.priority === undefined ? {} : { priority: 5 - options.priority }),
    ...(options.weight === undefined ? {} : { cost: options.weight }),
    ...(options.expiration === undefined ? {} : { timeout: options.expiration }),
  };
}

export interface Context {
  readonly scheduler: Scheduler;
  readonly setup: FormSetup;
  readonly calls: Call[];
  /** `limiter.schedule(options, fn, ...args)`. */
  schedule<A extends unknown[], R>(
    options: JobOptions,
    fn: (...args: A) => R | PromiseLike<R>,
    ...args: A
  ): Promise<Awaited<R>>;
  /** Resolves (or rejects with `err`) at once, recording the call. */
  promise(err: unknown, ...result: unknown[]): Promise<unknown[]>;
  /** Resolves (or rejects with `err`) `duration` ms later, recording the call then. */
  slowPromise(duration: number, err: unknown, ...result: unknown[]): Promise<unknown[]>;
  /** bottleneck's `pNoErrVal`: the promise resolves to `expected`. */
  pNoErrVal(promise: Promise<unknown>, ...expected: unknown[]): Promise<void>;
  /** Moves the fake time by `ms` (bottleneck's `c.wait`). */
  wait(ms: number): Promise<void>;
  /** Runs the fake time until nothing is left; the record of calls. */
  last(): Promise<{ calls: Call[]; callsDuration: number | null }>;
  checkResultsOrder(order: unknown[][]): void;
  /** The last call's time. bottleneck allows 10 ms less to 50 ms more of real time; on a fake clock it is exact. */
  checkDuration(shouldBe: number): void;
}

export function makeTest(form: Form, options: BottleneckOptions = {}): Context {
  const setup = setupForm(form, schedulerOptions(options));
  const { scheduler, clock, timers } = setup;
  const start = clock.now();
  const calls: Call[] = [];
  const record = (err: unknown, result: unknown[]) => calls.push({ err, result, time: clock.now() - start });
  const settleWith = (err: unknown, result: unknown[]) =>
    err === null ? Promise.resolve(result) : Promise.reject(err);
  const context: Context = {
    scheduler,
    setup,
    calls,
    schedule(options, fn, ...args) {
      return scheduler.schedule(() => fn(...args), jobOptions(options)) as never;
    },
    promise(err, ...result) {
      record(err, result);
      return settleWith(err, result);
    },
    slowPromise(duration, err, ...result) {
      return setup.sleep(duration).then(() => {
        record(err, result);
        return settleWith(err, result);
      });
    },
    async pNoErrVal(promise, ...expected) {
      expect(await promise).toEqual(expected);
    },
    wait: (ms) => timers.tickAsync(ms),
    async last() {
      await timers.runAllAsync();
      return { calls, callsDuration: calls.length > 0 ? (calls.at(-1) as Call).time : null };
    },
    checkResultsOrder(order) {
      expect(calls.map((call) => call.result)).toEqual(order);
    },
    checkDuration(shouldBe) {
      expect(calls.length > 0 ? (calls.at(-1) as Call).time : null).toBe(shouldBe);
    },
  };
  return context;
}

/** 'ok', or the error's code (its message when it has none). */
export function outcome(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => 'ok',
    (error: unknown) => (error as { code?: string }).code ?? (error as Error).message,
  );
}

/** Opens the Redis connection before a file's first case, so that no case's first answer waits for it. */
export async function warmUp(form: Form): Promise<void> {
  if (!form.redis) return;
  const { scheduler, timers } = setupForm(form, { concurrency: 1 });
  const done = scheduler.schedule(() => 0);
  await timers.runAllAsync();
  await done;
  await scheduler.close();
}

/**
 * `it` for a case, or `it.fails` on the forms listed: a case that one form fails today, kept with its
 * assertions so that it turns red (and is moved back to `it`) once that form is fixed. Each use names
 * the bug in docs/peer-suites.md.
 */
export function itOn(form: Form, failsOn: readonly Form['name'][]): typeof it {
  return failsOn.includes(form.name) ? (it.fails as unknown as typeof it) : it;
}

/** The two fleet forms. */
export const FLEETS: readonly Form['name'][] = ['memory fleet', 'redis fleet'];
