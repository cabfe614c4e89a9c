/**
 * The options and public types of tokenpace/p-queue's `PQueue` (./p-queue.ts): p-queue 9's, as
 * that class takes and reports them, with what each means here.
 */

import type { Clock } from '../clock.js';

/** Options of `PQueue`: p-queue 9's, and a `clock`. */
export interface Options {
  /**
   * The most tasks running at once. Minimum: 1.
   * @default Infinity
   */
  readonly concurrency?: number;
  /**
   * Start tasks as soon as they may; with false, the queue is paused until `start()`.
   * @default true
   */
  readonly autoStart?: boolean;
  /**
   * The most tasks that start in any `interval` (a sliding window). Minimum: 1.
   * @default Infinity (no rate limit)
   */
  readonly intervalCap?: number;
  /**
   * The window of `intervalCap`, ms: a finite number >= 0 (0: no rate limit).
   * @default 0
   */
  readonly interval?: number;
  /**
   * A task counts in the rate limit from its start until `interval` after it ends, rather than only
   * at its start. No effect with `strict`.
   * @default false
   */
  readonly carryoverIntervalCount?: boolean;
  /**
   * p-queue's sliding window. The rate limit here is always one (see ./p-queue.ts's opening comment), so
   * `strict` only adds p-queue's checks: it needs `interval > 0` and a finite `intervalCap`.
   * @default false
   */
  readonly strict?: boolean;
  /**
   * The longest a task may run, ms, a positive finite number; past it the task's promise rejects
   * with `TimeoutError` (tokenpace's `JobTimeoutError`) and its concurrency is free. Also settable
   * as `PQueue.timeout` and per task.
   * @default undefined (no timeout)
   */
  readonly timeout?: number;
  /** The time source (tokenpace's; p-queue reads the system's). @default systemClock */
  readonly clock?: Clock;
}

/** Options of `PQueue.add`. */
export interface QueueAddOptions {
  /**
   * Higher runs first; equal priorities in the order they were added.
   * @default 0
   */
  readonly priority?: number;
  /** A name for the task, for `setPriority` and `runningTasks`. */
  readonly id?: string;
  /** Aborting it removes the task while it waits, and rejects its promise with the signal's reason. */
  readonly signal?: AbortSignal | undefined;
  /** The task's own timeout, ms (see {@link Options.timeout}). */
  readonly timeout?: number | undefined;
}

/** What a task receives. */
export interface TaskOptions {
  /** The task's signal: the one given to `add`, aborted at the task's timeout too when it has one. */
  readonly signal?: AbortSignal | undefined;
}

/** A task: a function that returns a value or a promise of one. */
export type Task<R> = (options: TaskOptions) => PromiseLike<R> | R;

/** A running task, as `runningTasks` describes it. */
export interface RunningTask {
  readonly id?: string;
  readonly priority: number;
  /** When it started, ms on the queue's clock. */
  readonly startTime: number;
  /** Its timeout, ms, if it has one. */
  readonly timeout?: number;
  /** The ms left before its timeout, if it has one. */
  readonly timeoutRemaining?: number;
}

/** Each event's listener arguments. */
export interface PQueueEvents {
  /** A task started. */
  active: [];
  /** Nothing waits and nothing runs. */
  idle: [];
  /** Nothing waits (tasks may still run). */
  empty: [];
  /** A task was added. */
  add: [];
  /** A task ended (or left the queue without starting): the next may start. */
  next: [];
  /** A task's function fulfilled. */
  completed: [result: unknown];
  /** A task's function threw or rejected, or the task timed out or was aborted while running. */
  error: [error: unknown];
  /** No task runs. */
  pendingZero: [];
  /** The rate limit holds tasks back. */
  rateLimit: [];
  /** The rate limit no longer holds tasks back. */
  rateLimitCleared: [];
}

/** The names of {@link PQueueEvents}. */
export type EventName = keyof PQueueEvents;

/** Every option a PQueue reads; any other name is refused. @internal */
export const OPTIONS: ReadonlySet<string> = new Set([
  'concurrency',
  'autoStart',
  'intervalCap',
  'interval',
  'carryoverIntervalCount',
  'strict',
  'timeout',
  'clock',
]);
/** p-queue's options that PQueue does not take, with what to write instead. @internal */
export const PEER_OPTIONS: Readonly<Record<string, string>> = {
  queueClass: "the queue is the Scheduler's (bounded, by priority); remove it",
  carryoverConcurrencyCount: 'write `carryoverIntervalCount` (its name since p-queue 8)',
};
