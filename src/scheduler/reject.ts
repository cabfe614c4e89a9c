/**
 * Rejecting jobs: a cost that can never start, a full queue, a wait past
 * `maxWait`, an abort, `clear()`. Each rejection is counted by reason, told to
 * `rejected` listeners, and rejects the job's promise.
 *
 * The flood path. A full queue is flow control, not a bug: a flood produces
 * millions of rejections, so this one is cheap. Each gets its own
 * `QueueFullError` (without a stack trace: capturing one costs more than
 * everything else a rejection does), with its own `retryAfterMs`: the time at
 * which the queue will have room for *that* caller, so callers rejected
 * together and following their hints come back spread out, not as one
 * stampede (see the admissions' retry hints). The rejections of one
 * synchronous burst are made together in one microtask, once the callers have
 * attached their handlers, so Node never has to track a rejection that has no
 * handler yet.
 */

import {
  CostExceedsCapacityError,
  describeValue,
  InvalidOptionError,
  InvalidSizeError,
  QueueFullError,
  WaitTooLongError,
} from '../errors.js';
import type { Emitter } from './events.js';
import type { RejectReason, SchedulerCounters } from './options.js';
import type { Job } from './run.js';

/**
 * A queue-full error for the flood path: a `QueueFullError` (its prototype, so `instanceof`,
 * `code`, `isTokenpaceError` and every field hold) made without running Error's native
 * constructor, which was three quarters of a rejection's cost. It has no stack trace (a
 * rejection from a full queue is flow control, not a bug) and its message is built when read.
 */
function queueFullError(maxQueue: number, retryAfterMs: number): QueueFullError {
  const error = Object.create(QueueFullError.prototype) as {
    -readonly [K in keyof QueueFullError]: QueueFullError[K];
  };
  error.code = 'ERR_QUEUE_FULL';
  error.maxQueue = maxQueue;
  error.retryAfterMs = retryAfterMs;
  return error as QueueFullError;
}

/** Why a cost can never start: above the burst, or above the concurrency. */
export function costError(
  cost: number,
  burst: number,
  concurrency: number,
  windowLimit = Number.POSITIVE_INFINITY,
): CostExceedsCapacityError {
  if (cost > burst) return new CostExceedsCapacityError(cost, burst);
  if (cost > windowLimit) return new CostExceedsCapacityError(cost, windowLimit, "the scheduler's window limit");
  return new CostExceedsCapacityError(cost, concurrency, "the scheduler's concurrency");
}

/** A job rejected at its deadline: it waited `waitedMs`, past `maxWaitMs`, because of `why`. */
export function deadlineError(
  waitedMs: number,
  maxWaitMs: number,
  retryAfterMs: number,
  why: string,
): WaitTooLongError {
  const message =
    `waited ${Math.ceil(waitedMs)} ms without starting, past maxWait of ${maxWaitMs} ms (${why}); ` +
    'retry later, raise maxWait, or lower the load';
  return new WaitTooLongError(waitedMs, maxWaitMs, retryAfterMs, message);
}

/** A priority that is not a finite number: rejected, and the promise says so (nothing is counted). */
export function rejectPriority(priority: unknown): Promise<never> {
  return Promise.reject(
    new InvalidOptionError(
      'priority',
      priority,
      `Expected \`priority\` to be a finite number, got ${describeValue(priority)}`,
    ),
  );
}

/** An argument that is not `expected` (a phrase: 'a number >= 0'): a coded rejection. */
export function rejectOption(option: string, value: unknown, expected: string): Promise<never> {
  return Promise.reject(
    new InvalidOptionError(option, value, `Expected \`${option}\` to be ${expected}, got ${describeValue(value)}`),
  );
}

/**
 * A call to `schedule` with something other than a function and an options object: a coded
 * rejection (nothing is counted).
 */
export function rejectCall(fn: unknown, options: unknown): Promise<never> {
  if (typeof fn !== 'function') {
    return Promise.reject(
      new InvalidOptionError('fn', fn, `Expected the job to be a function, got ${describeValue(fn)}`),
    );
  }
  return Promise.reject(
    new InvalidOptionError(
      'options',
      options,
      `Expected the job's options to be an object or undefined, got ${describeValue(options)}`,
    ),
  );
}

/** A scheduler's rejections: counted by reason, told to `rejected` listeners (see the file's opening comment). */
export class Rejections {
  readonly #counters: SchedulerCounters;
  readonly #events: Emitter;
  readonly #maxQueue: number;
  /**
   * The rejections of the current synchronous burst, as (reject, error) pairs: settled together in
   * one microtask, once the callers have attached their handlers.
   */
  #burst: unknown[] | undefined;

  constructor(counters: SchedulerCounters, events: Emitter, maxQueue: number) {
    this.#counters = counters;
    this.#events = events;
    this.#maxQueue = maxQueue;
  }

  /** Rejects a new job: counted, told, and its promise rejected. */
  reject(reason: RejectReason, error: unknown, cost: number, priority: number): Promise<never> {
    this.#counters.rejected[reason]++;
    if (this.#events.has('rejected')) this.#events.emit('rejected', { reason, error, cost, priority });
    return Promise.reject(error);
  }

  /** Rejects a new job for its cost: not a number >= 0, or one that can never start. */
  rejectCost(
    cost: unknown,
    priority: number,
    burst: number,
    concurrency: number,
    windowLimit?: number,
  ): Promise<never> {
    if (typeof cost !== 'number' || !(cost >= 0)) {
      return Promise.reject(
        new InvalidSizeError(cost, `invalid cost ${describeValue(cost)}: expected a finite number >= 0`),
      );
    }
    return this.reject('costExceedsCapacity', costError(cost, burst, concurrency, windowLimit), cost, priority);
  }

  /** Rejects a job that was waiting (the caller has taken it out of the queue). */
  rejectWaiting(job: Job, reason: RejectReason, error: unknown): void {
    this.#counters.rejected[reason]++;
    job.reject(error);
    if (this.#events.has('rejected')) {
      this.#events.emit('rejected', { reason, error, cost: job.cost, priority: job.priority });
    }
  }

  /**
   * Rejects a new job at a full queue, telling it to retry in `retryAfterMs`: the flood path (see
   * the file's opening comment).
   */
  queueFull(cost: number, priority: number, retryAfterMs: number): Promise<never> {
    this.#counters.rejected.queueFull++;
    const error = queueFullError(this.#maxQueue, retryAfterMs);
    let burst = this.#burst;
    if (burst === undefined) {
      burst = this.#burst = [];
      queueMicrotask(this.#rejectBurst);
    }
    if (this.#events.has('rejected')) {
      this.#events.emit('rejected', { reason: 'queueFull', error, cost, priority });
    }
    return new Promise<never>((_resolve, reject) => {
      (burst as unknown[]).push(reject, error);
    });
  }

  /** Settles the rejections of one burst (a reject function is cheaper than a throw in a reaction). */
  readonly #rejectBurst = (): void => {
    const burst = this.#burst as unknown[];
    this.#burst = undefined;
    for (let i = 0; i < burst.length; i += 2) (burst[i] as (reason: unknown) => void)(burst[i + 1]);
  };
}
