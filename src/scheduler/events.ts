/**
 * The Scheduler's events: listeners, and the promise forms (`onEmpty`,
 * `onIdle`, `onSizeLessThan`) built on the same listeners, as p-queue builds
 * them on one `#onEvent`: a promise form is a listener that resolves its
 * promise the first time the event comes with its condition true, and then
 * removes itself.
 *
 * A throwing listener must not stop the scheduler half-way through a change
 * of state (a job counted as running whose promise never settles, a drain
 * left undone). Its exception goes to the `error` listeners, as p-queue's
 * does, if there are any; otherwise (or if an `error` listener throws) it
 * surfaces on its own, as an uncaught exception on the next microtask, like
 * a throwing timer callback's. A listener that returns a promise (an `async`
 * one) is not awaited; its rejection takes the same way as a throw, never
 * that of an unhandled rejection.
 */

import { schedulerRejectedChannel, schedulerStartChannel } from '../diagnostics.js';
import type { ActiveJob, RejectedJob, SchedulerEvents } from './options.js';

/** `tokenpace:scheduler:start`: a Scheduler started a job (its `active` event). */
export interface SchedulerStartMessage {
  /** The Scheduler that started it. */
  readonly scheduler: object;
  readonly job: ActiveJob;
}

/** `tokenpace:scheduler:rejected`: a Scheduler turned a job away or removed it before it started (its `rejected` event). */
export interface SchedulerRejectedMessage {
  readonly scheduler: object;
  /** `reason` is `queueFull`, `waitTooLong`, `costExceedsCapacity`, `aborted` or `cleared`; `error` carries `retryAfterMs` where one is known. */
  readonly job: RejectedJob;
}

/** The public events, and `changed`: the queue or the jobs running may have changed (for the promise forms; not public). */
export type Events = SchedulerEvents & { changed: [] };

/** A listener; what it returns is looked at only for a promise (an `async` listener's), whose rejection is an error. */
type Listener<E extends keyof Events> = ((...args: Events[E]) => unknown) & { original?: unknown };

/** @internal */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== undefined &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function' &&
    (typeof value === 'object' || typeof value === 'function')
  );
}

/** Listeners per event; an event with none costs one property read to emit. */
export class Emitter {
  readonly #lists: { [E in keyof Events]?: Listener<E>[] } = {};
  /** The Scheduler whose `active` and `rejected` events also go to the diagnostics channels. */
  readonly #source: object | undefined;

  constructor(source?: object) {
    this.#source = source;
  }

  /** Events with at least one listener: while it is 0 (the usual case), {@link has} reads no list. */
  #listened = 0;

  /**
   * True if `event` has a listener, or a channel subscriber (so its arguments are worth building). Called
   * several times per job, so a scheduler nobody listens to answers from one field.
   */
  has(event: keyof Events): boolean {
    if (this.#listened !== 0 && this.#lists[event] !== undefined) return true;
    if (event === 'active') return this.#source !== undefined && schedulerStartChannel.hasSubscribers;
    if (event === 'rejected') return this.#source !== undefined && schedulerRejectedChannel.hasSubscribers;
    return false;
  }

  on<E extends keyof Events>(event: E, listener: Listener<E>): void {
    const lists = this.#lists as Record<E, Listener<E>[] | undefined>;
    const list = lists[event];
    if (list === undefined) this.#listened++;
    lists[event] = [...(list ?? []), listener];
  }

  /** Removes `listener`, or the {@link once} wrapper made for it. */
  off<E extends keyof Events>(event: E, listener: Listener<E>): void {
    const lists = this.#lists as Record<E, Listener<E>[] | undefined>;
    const list = lists[event];
    if (list === undefined) return;
    const rest = list.filter((l) => l !== listener && l.original !== listener);
    lists[event] = rest.length ? rest : undefined;
    if (rest.length === 0) this.#listened--;
  }

  once<E extends keyof Events>(event: E, listener: Listener<E>): void {
    const wrapped: Listener<E> = Object.assign(
      (...args: Events[E]): unknown => {
        this.off(event, wrapped);
        return listener(...args);
      },
      { original: listener },
    );
    this.on(event, wrapped);
  }

  /** A promise that resolves the first time `event` comes with `condition()` true. */
  when(event: keyof Events, condition?: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const listener = (): void => {
        if (condition !== undefined && !condition()) return;
        this.off(event, listener);
        resolve();
      };
      this.on(event, listener);
    });
  }

  emit<E extends keyof Events>(event: E, ...args: Events[E]): void {
    const source = this.#source;
    if (source !== undefined) {
      if (event === 'active' && schedulerStartChannel.hasSubscribers) {
        schedulerStartChannel.publish({ scheduler: source, job: args[0] });
      } else if (event === 'rejected' && schedulerRejectedChannel.hasSubscribers) {
        schedulerRejectedChannel.publish({ scheduler: source, job: args[0] });
      }
    }
    const list = (this.#lists as Record<E, Listener<E>[] | undefined>)[event];
    if (list === undefined) return;
    for (const listener of list) {
      try {
        const result: unknown = listener(...args);
        if (isThenable(result)) result.then(undefined, (error: unknown) => this.#failed(event, error));
      } catch (error) {
        this.#failed(event, error);
      }
    }
  }

  /** A listener of `event` threw `error` (or its promise rejected with it). */
  #failed(event: keyof Events, error: unknown): void {
    if (event !== 'error' && this.has('error')) {
      this.emit('error', error);
    } else {
      queueMicrotask(() => {
        throw error;
      });
    }
  }
}

/**
 * When `empty` is due, on p-queue 9's schedule: once per time the queue empties, when a look for the next
 * job finds it empty. A start that a job's end set off and that takes the last queued job leaves `empty` to
 * the next look (p-queue looks once per end: the next end, an abort or `clear()`); a start by the timer or
 * `resume` emits it at once (p-queue's loop looks again right away).
 */
export class EmptyEvent {
  /** Something was queued since the last `empty`. */
  #owed = false;
  /** The latest look was set off by a job's end. */
  #afterEnd = false;
  /** That look started the last queued job: the next look emits. */
  #deferred = false;

  queued(): void {
    this.#owed = true;
    this.#deferred = false;
  }

  /** A job's end: the look it sets off is p-queue's single look. */
  ended(): void {
    this.#afterEnd = true;
  }

  /** The timer or `resume` looks (p-queue's loop). */
  looked(): void {
    this.#afterEnd = false;
  }

  /** A queued job started, leaving `left` waiting. */
  started(left: number): void {
    if (left === 0) this.#deferred = this.#afterEnd;
  }

  /** The queue is empty at a look: true if `empty` is to be emitted now. */
  due(): boolean {
    if (!this.#owed) return false;
    if (this.#deferred) {
      this.#deferred = false;
      return false;
    }
    this.#owed = false;
    return true;
  }
}
