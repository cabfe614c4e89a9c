/**
 * What p-queue's own tests import, for running them against tokenpace's `PQueue` (test/p-queue/*.test.ts):
 * `PQueue` (tokenpace/p-queue's, on a fake clock), and stand-ins for the small packages they use
 * (`delay`, `p-defer`, `time-span`, `random-int`).
 *
 * Time is fake and moves by itself: {@link useVirtualTime} installs @sinonjs/fake-timers for each
 * test (`setTimeout`, `setInterval`, `Date`) and, whenever every microtask has run, fires the next
 * timer. p-queue's tests sleep for real (`await delay(100)`); here the same lines run in no real
 * time, with exact timings, the same on every run.
 */

import FakeTimers from '@sinonjs/fake-timers';
import { afterEach, beforeEach } from 'vitest';
import type { Clock } from '../../src/clock.js';
import { type Options, PQueue as TokenpaceQueue } from '../../src/scheduler/p-queue.js';

/** The instant the fake time starts at: a wall-clock time, as p-queue's tests read `Date.now()`. */
const START_MS = Date.UTC(2025, 0, 1);
const realSetImmediate = globalThis.setImmediate;

type Timers = ReturnType<typeof FakeTimers.install>;
let timers: Timers | undefined;

/** The clock every {@link PQueue} of a test runs on: the test's fake time. */
const clock: Clock = {
  now: () => (timers as Timers).now,
  setTimeout: (fn, ms) => (timers as Timers).setTimeout(fn, ms),
  clearTimeout: (handle) => (timers as Timers).clearTimeout(handle as FakeTimers.TimerId),
};

/** Installs the fake time for each test of the calling file, and advances it whenever nothing else can run. */
export function useVirtualTime(): void {
  let running = false;
  beforeEach(() => {
    timers = FakeTimers.install({
      now: START_MS,
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
    running = true;
    const advance = (): void => {
      if (!running) return;
      if (timers !== undefined && timers.countTimers() > 0) timers.next();
      realSetImmediate(advance);
    };
    realSetImmediate(advance);
  });
  afterEach(() => {
    running = false;
    timers?.uninstall();
    timers = undefined;
  });
}

/** tokenpace's PQueue on the test's fake time: p-queue's tests construct it as they construct p-queue's. */
export class PQueue extends TokenpaceQueue {
  constructor(options: Options = {}) {
    super({ clock, ...options });
  }
}

/** `delay` (the package): resolves after `ms`, with `value`. */
export function delay<T = void>(ms: number, options?: { value?: T }): Promise<T> {
  return new Promise((resolve) => setTimeout(() => resolve(options?.value as T), ms));
}

/** `p-defer`. */
export function pDefer<T = void>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (reason: unknown) => void;
} {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** `time-span`: a function that returns the ms elapsed since it was made. */
export function timeSpan(): () => number {
  const start = Date.now();
  return () => Date.now() - start;
}

let seed = 1;
/** `random-int`: an integer in [min, max], from a fixed sequence (the same run every time). */
export function randomInt(min: number, max: number): number {
  seed = (seed * 48_271) % 2_147_483_647;
  return min + (seed % (max - min + 1));
}
