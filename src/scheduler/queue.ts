/**
 * The wait queue: a bounded FIFO per priority, higher priorities first.
 *
 * Waiting jobs are intrusive nodes: each carries its own links, so the queue
 * allocates nothing per job beyond the job itself, and every operation the
 * scheduler needs is O(1) or O(distinct priorities):
 *
 * - `push` appends to its priority's FIFO (a doubly linked list);
 * - `peek` / `shift` read the head of the highest priority;
 * - `remove` unlinks any node at once (an aborted or expired job frees its
 *   slot immediately: no tombstones that would let memory grow);
 * - the oldest waiter (the one whose `maxWait` deadline comes first, since
 *   every job gets the same `maxWait`) is the oldest of the levels' heads,
 *   since each level is in arrival order: no second list to keep;
 * - each level keeps the total cost it holds, so the scheduler can predict
 *   when a new job would start: it waits for the cost of every job at its
 *   priority or above.
 *
 * Priorities are few in practice (a handful of levels), so the levels are an
 * array kept sorted from high to low; an emptied level is dropped, so the
 * array never holds more levels than there are waiting jobs.
 *
 * The bound itself (`maxQueue`) is the scheduler's to enforce: it knows what
 * to say when the queue is full.
 */

/** The links a waiting job carries. Managed by {@link WaitQueue}; read-only elsewhere. */
export interface Waiter<J extends Waiter<J>> {
  readonly priority: number;
  readonly cost: number;
  /** The level it waits in; `undefined` when not queued. */
  level: Level<J> | undefined;
  /** When it was queued: orders the levels' heads for {@link WaitQueue.oldest}. */
  readonly enqueuedAtMs: number;
  prev: J | undefined;
  next: J | undefined;
}

/** One priority's FIFO. */
export interface Level<J extends Waiter<J>> {
  readonly priority: number;
  head: J | undefined;
  tail: J | undefined;
  count: number;
  /** The sum of the costs waiting here. */
  cost: number;
}

/** A FIFO per priority with O(1) removal. */
export class WaitQueue<J extends Waiter<J>> {
  /** Non-empty levels, highest priority first. */
  readonly #levels: Level<J>[] = [];
  #size = 0;

  /** Jobs waiting. */
  get size(): number {
    return this.#size;
  }

  /** The job that runs next: the oldest of the highest priority. */
  peek(): J | undefined {
    return this.#levels[0]?.head;
  }

  /** The job that has waited longest, whatever its priority (the earliest of the levels' heads). */
  oldest(): J | undefined {
    let oldest: J | undefined;
    for (const level of this.#levels) {
      const head = level.head as J;
      if (oldest === undefined || head.enqueuedAtMs < oldest.enqueuedAtMs) oldest = head;
    }
    return oldest;
  }

  /** Appends `job` to its priority's FIFO. */
  push(job: J): void {
    const level = this.#levelFor(job.priority);
    job.level = level;
    job.next = undefined;
    job.prev = level.tail;
    if (level.tail) level.tail.next = job;
    else level.head = job;
    level.tail = job;
    level.count++;
    level.cost += job.cost;
    this.#size++;
  }

  /** Removes and returns the head. */
  shift(): J | undefined {
    const job = this.#levels[0]?.head;
    if (job) this.remove(job);
    return job;
  }

  /** Unlinks `job` wherever it is. Returns false if it was not queued. */
  remove(job: J): boolean {
    const level = job.level;
    if (!level) return false;
    if (job.prev) job.prev.next = job.next;
    else level.head = job.next;
    if (job.next) job.next.prev = job.prev;
    else level.tail = job.prev;
    level.count--;
    if (level.count === 0) {
      level.cost = 0; // exact again, whatever rounding the sums picked up
      this.#levels.splice(this.#levels.indexOf(level), 1);
    } else {
      level.cost -= job.cost;
    }
    job.level = undefined;
    job.prev = job.next = undefined;
    this.#size--;
    return true;
  }

  /** The cost waiting at `priority` or above: what a new job of that priority waits behind. */
  costAtOrAbove(priority: number): number {
    let cost = 0;
    for (const level of this.#levels) {
      if (level.priority < priority) break;
      cost += level.cost;
    }
    return cost;
  }

  /** Jobs waiting at exactly `priority`. */
  sizeAt(priority: number): number {
    for (const level of this.#levels) if (level.priority === priority) return level.count;
    return 0;
  }

  /** The jobs in the order they would run. */
  *[Symbol.iterator](): IterableIterator<J> {
    for (const level of [...this.#levels]) {
      for (let job = level.head; job; ) {
        const next = job.next;
        yield job;
        job = next;
      }
    }
  }

  #levelFor(priority: number): Level<J> {
    const levels = this.#levels;
    let i = 0;
    while (i < levels.length && (levels[i] as Level<J>).priority > priority) i++;
    const found = levels[i];
    if (found?.priority === priority) return found;
    const level: Level<J> = { priority, head: undefined, tail: undefined, count: 0, cost: 0 };
    levels.splice(i, 0, level);
    return level;
  }
}
