/**
 * Intrusive FIFO queues for the deficit round robin (drr.ts): an entry sits
 * in at most one queue at a time and carries its own links, so pushing,
 * unshifting, shifting and removing it wherever it is are O(1), whatever the
 * number of entries (an array's splice and indexOf made a round of 1,000
 * members cost a million steps).
 *
 * Invariants: `entry.ringQueue` is the queue holding it (undefined: none);
 * `size` is the number of entries linked; iteration order is FIFO.
 */

/** The links a queued entry carries. Owned by the queue it is in. */
export interface RingLinks<T extends RingLinks<T>> {
  ringQueue: Queue<T> | undefined;
  ringPrev: T | undefined;
  ringNext: T | undefined;
}

/** A FIFO queue of entries that link themselves (see the file's opening comment). */
export class Queue<T extends RingLinks<T>> {
  #head: T | undefined;
  #tail: T | undefined;
  #size = 0;

  get head(): T | undefined {
    return this.#head;
  }

  get size(): number {
    return this.#size;
  }

  /** Appends `entry` (which must not be in a queue). */
  push(entry: T): void {
    entry.ringQueue = this;
    entry.ringPrev = this.#tail;
    entry.ringNext = undefined;
    if (this.#tail === undefined) this.#head = entry;
    else this.#tail.ringNext = entry;
    this.#tail = entry;
    this.#size++;
  }

  /** Puts `entry` (which must not be in a queue) first. */
  unshift(entry: T): void {
    entry.ringQueue = this;
    entry.ringPrev = undefined;
    entry.ringNext = this.#head;
    if (this.#head === undefined) this.#tail = entry;
    else this.#head.ringPrev = entry;
    this.#head = entry;
    this.#size++;
  }

  /** Unlinks `entry`, which must be in this queue. */
  remove(entry: T): void {
    const { ringPrev: prev, ringNext: next } = entry;
    if (prev === undefined) this.#head = next;
    else prev.ringNext = next;
    if (next === undefined) this.#tail = prev;
    else next.ringPrev = prev;
    entry.ringQueue = undefined;
    entry.ringPrev = undefined;
    entry.ringNext = undefined;
    this.#size--;
  }

  /** True if `predicate` holds for every entry (stops at the first that fails). */
  every(predicate: (entry: T) => boolean): boolean {
    for (let entry = this.#head; entry !== undefined; entry = entry.ringNext) if (!predicate(entry)) return false;
    return true;
  }

  /** True if `predicate` holds for some entry (stops at the first that does). */
  some(predicate: (entry: T) => boolean): boolean {
    return !this.every((entry) => !predicate(entry));
  }
}
