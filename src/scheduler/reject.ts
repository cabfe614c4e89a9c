/**
 * Rejecting jobs: a cost that can never start, a full queue, a wait past
 * `maxWait`, an abort, `clear()`. Each rejection is counted by reason, told to
 * `rejected` listeners, and rejects the job's promise with an error of its own.
 *
 * A job turned away from a full queue gets a `QueueFullError` with its own
 * `retryAfterMs`: the time at which the queue will have room for *that*
 * caller, so callers rejected together and following their hints come back
 * spread out, not as one stampede (see the admissions' retry hints).
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

/** Why a cost can never start: above the burst, or above the concurrency. */
export function costError({
  cost,
  burst,
  concurrency = Number.POSITIVE_INFINITY,
  windowLimit = Number.POSITIVE_INFINITY,
}: {
  cost: number;
  burst: number;
  concurrency?: number;
  windowLimit?: number;
}): CostExceedsCapacityError {
  if (cost > burst) return new CostExceedsCapacityError({ cost, capacity: burst });
  if (cost > windowLimit) {
    return new CostExceedsCapacityError({ cost, capacity: windowLimit, capacityName: "the scheduler's window limit" });
  }
  return new CostExceedsCapacityError({ cost, capacity: concurrency, capacityName: "the scheduler's concurrency" });
}

/** A job whose weight is above the concurrency: it could never start. */
export function weightError({
  weight,
  concurrency,
  cost,
}: {
  weight: number;
  concurrency: number;
  cost: number;
}): CostExceedsCapacityError {
  return new CostExceedsCapacityError({
    cost: weight,
    capacity: concurrency,
    capacityName: "the scheduler's concurrency",
    quantity: weight === cost ? 'cost' : 'weight',
  });
}

/** A job rejected at its deadline: it waited `waitedMs`, past `maxWaitMs`, because of `why`. */
export function deadlineError({
  waitedMs,
  maxWaitMs,
  retryAfterMs,
  why,
}: {
  waitedMs: number;
  maxWaitMs: number;
  retryAfterMs: number;
  why: string;
}): WaitTooLongError {
  const message =
    `waited ${Math.ceil(waitedMs)} ms without starting, past maxWait of ${maxWaitMs} ms (${why}); ` +
    'retry later, raise maxWait, or lower the load';
  return new WaitTooLongError({ waitMs: waitedMs, maxWaitMs, retryAfterMs, message });
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

  /** Rejects a new job for its cost: not a number >= 0, or one that can never start (see {@link costError}). */
  rejectCost({
    cost,
    priority,
    ...limits
  }: {
    cost: unknown;
    priority: number;
    burst: number;
    concurrency?: number;
    windowLimit?: number;
  }): Promise<never> {
    if (typeof cost !== 'number' || !(cost >= 0)) {
      return Promise.reject(
        new InvalidSizeError(cost, `invalid cost ${describeValue(cost)}: expected a finite number >= 0`),
      );
    }
    return this.reject('costExceedsCapacity', costError({ cost, ...limits }), cost, priority);
  }

  /** Rejects a new job for its weight: not a number >= 0 (`InvalidSizeError`), or above the concurrency. */
  rejectWeight({
    weight,
    cost,
    priority,
    concurrency,
  }: {
    weight: unknown;
    cost: number;
    priority: number;
    concurrency: number;
  }): Promise<never> {
    if (typeof weight !== 'number' || !(weight >= 0)) {
      return Promise.reject(
        new InvalidSizeError(weight, `invalid weight ${describeValue(weight)}: expected a finite number >= 0`),
      );
    }
    return this.reject('costExceedsCapacity', weightError({ weight, concurrency, cost }), cost, priority);
  }

  /** Rejects a job that was waiting (the caller has taken it out of the queue). */
  rejectWaiting(job: Job, reason: RejectReason, error: unknown): void {
    this.#counters.rejected[reason]++;
    job.reject(error);
    if (this.#events.has('rejected')) {
      this.#events.emit('rejected', { reason, error, cost: job.cost, priority: job.priority });
    }
  }

  /** Rejects a new job at a full queue, telling it to retry in `retryAfterMs`. */
  queueFull(cost: number, priority: number, retryAfterMs: number): Promise<never> {
    return this.reject('queueFull', new QueueFullError({ maxQueue: this.#maxQueue, retryAfterMs }), cost, priority);
  }
}
