/**
 * p-queue's own tests, from test/priority-queue.ts of sindresorhus/p-queue at v9.3.3 (MIT License, (c) Sindre
 * Sorhus), run against tokenpace's PQueue (src/scheduler/p-queue.ts).
 *
 * p-queue's tests drive its `PriorityQueue` class, the default of its `queueClass` option. tokenpace has
 * no queue class to plug in (the queue is the Scheduler's), so the same operations run through a PQueue
 * here ({@link QueueView}): `enqueue` is `add` with a signal, `dequeue` starts the head of a paused queue
 * and says which task it was, `remove` aborts a waiting task, `setPriority` and `size` are PQueue's, and
 * `filter({ priority })` is counted with `sizeBy`. The assertions are p-queue's, through that mapping.
 */

import assert from 'node:assert/strict';
import { test } from 'vitest';
import { PQueue, useVirtualTime } from './harness.js';

useVirtualTime();

type Run = () => Promise<string>;

/** p-queue's PriorityQueue operations, on a PQueue's queue. */
class QueueView {
  readonly #queue = new PQueue({ autoStart: false, concurrency: 1 });
  readonly #waiting: { run: Run; id: string | undefined; controller: AbortController }[] = [];
  #started: Run | undefined;
  #running = 0;

  enqueue(run: Run, options: { priority?: number; id?: string } = {}): void {
    const controller = new AbortController();
    const waiting = { run, id: options.id, controller };
    this.#waiting.push(waiting);
    this.#queue
      .add(
        () => {
          this.#started = run;
          this.#waiting.splice(this.#waiting.indexOf(waiting), 1);
          return new Promise(() => {}); // runs on: every started task holds its place
        },
        { ...options, signal: controller.signal },
      )
      .catch(() => {});
  }

  /** Starts exactly one task, the head, and returns it (undefined when none waits). */
  dequeue(): Run | undefined {
    if (this.#queue.size === 0) return undefined;
    this.#started = undefined;
    this.#queue.concurrency = ++this.#running;
    this.#queue.start();
    this.#queue.pause();
    return this.#started;
  }

  /** Removes the waiting task `run`, or the first waiting task named `id`. */
  remove(idOrRun: string | Run): void {
    const waiting = this.#waiting.find((w) => (typeof idOrRun === 'string' ? w.id === idOrRun : w.run === idOrRun));
    if (waiting === undefined) return;
    this.#waiting.splice(this.#waiting.indexOf(waiting), 1);
    waiting.controller.abort();
  }

  setPriority(id: string, priority: number): void {
    this.#queue.setPriority(id, priority);
  }

  /** How many wait at `priority` (p-queue's `filter` returns them; here they are counted). */
  count(options: { priority: number }): number {
    return this.#queue.sizeBy(options);
  }

  get size(): number {
    return this.#queue.size;
  }
}

const createRun = (value: string) => async () => value;

test('PriorityQueue ignores dequeued items in queue operations', () => {
  const queue = new QueueView();
  const first = createRun('first');
  const second = createRun('second');
  const third = createRun('third');

  queue.enqueue(first, { id: 'same', priority: 0 });
  queue.enqueue(second, { id: 'same', priority: 0 });
  queue.enqueue(third, { id: 'third', priority: 0 });

  assert.equal(queue.dequeue(), first);
  assert.equal(queue.count({ priority: 0 }), 2); // p-queue: filter({priority: 0}) is [second, third]

  queue.setPriority('same', 2);
  queue.remove(third);

  assert.equal(queue.size, 1);
  assert.equal(queue.dequeue(), second);
  assert.equal(queue.dequeue(), undefined);
});

test('PriorityQueue inserts high-priority items correctly after partial dequeue', () => {
  const queue = new QueueView();
  const first = createRun('first');
  const second = createRun('second');
  const third = createRun('third');
  const urgent = createRun('urgent');

  queue.enqueue(first, { priority: 0 });
  queue.enqueue(second, { priority: 0 });
  queue.enqueue(third, { priority: -1 });

  assert.equal(queue.dequeue(), first);

  queue.enqueue(urgent, { priority: 1 });

  assert.equal(queue.size, 3);
  assert.equal(queue.dequeue(), urgent);
  assert.equal(queue.dequeue(), second);
  assert.equal(queue.dequeue(), third);
  assert.equal(queue.dequeue(), undefined);
});

test('PriorityQueue appends same-priority and lower-priority items correctly after partial dequeue', () => {
  const queue = new QueueView();
  const first = createRun('first');
  const second = createRun('second');
  const samePriority = createRun('samePriority');
  const lowerPriority = createRun('lowerPriority');

  queue.enqueue(first, { priority: 0 });
  queue.enqueue(second, { priority: 0 });

  assert.equal(queue.dequeue(), first);

  queue.enqueue(samePriority, { priority: 0 });
  queue.enqueue(lowerPriority, { priority: -1 });

  assert.equal(queue.size, 3);
  assert.equal(queue.dequeue(), second);
  assert.equal(queue.dequeue(), samePriority);
  assert.equal(queue.dequeue(), lowerPriority);
  assert.equal(queue.dequeue(), undefined);
});

test('PriorityQueue removes the live duplicate id after partial dequeue', () => {
  const queue = new QueueView();
  const first = createRun('first');
  const second = createRun('second');
  const third = createRun('third');

  queue.enqueue(first, { id: 'same' });
  queue.enqueue(second, { id: 'same' });
  queue.enqueue(third, { id: 'third' });

  assert.equal(queue.dequeue(), first);

  queue.remove('same');

  assert.equal(queue.size, 1);
  assert.equal(queue.dequeue(), third);
  assert.equal(queue.dequeue(), undefined);
});

test('PriorityQueue removes by run after partial dequeue', () => {
  const queue = new QueueView();
  const first = createRun('first');
  const second = createRun('second');
  const third = createRun('third');

  queue.enqueue(first);
  queue.enqueue(second);
  queue.enqueue(third);

  assert.equal(queue.dequeue(), first);

  queue.remove(second);

  assert.equal(queue.size, 1);
  assert.equal(queue.dequeue(), third);
  assert.equal(queue.dequeue(), undefined);
});

test('PriorityQueue ignores consumed items with no live match', () => {
  const queue = new QueueView();
  const first = createRun('first');
  const second = createRun('second');

  queue.enqueue(first, { id: 'first' });
  queue.enqueue(second, { id: 'second' });

  assert.equal(queue.dequeue(), first);

  assert.throws(
    () => {
      queue.setPriority('first', 1);
    },
    {
      // tokenpace: an InvalidOptionError (code ERR_INVALID_OPTION) where p-queue throws a ReferenceError.
      name: 'InvalidOptionError',
      message: 'No promise function with the id "first" exists in the queue.',
    },
  );

  queue.remove(first);

  assert.equal(queue.size, 1);
  assert.equal(queue.dequeue(), second);
  assert.equal(queue.dequeue(), undefined);
});

test('PriorityQueue stays ordered after cursor compaction', () => {
  const queue = new QueueView();
  const urgent = createRun('urgent');
  const tasks = Array.from({ length: 150 }, (_element, index) => createRun(`task-${index}`));

  for (const task of tasks) {
    queue.enqueue(task);
  }

  // Cross the compaction threshold while leaving queued items behind.
  for (let index = 0; index < 120; index++) {
    assert.equal(queue.dequeue(), tasks[index]);
  }

  queue.enqueue(urgent, { priority: 1 });

  assert.equal(queue.size, 31);
  assert.equal(queue.dequeue(), urgent);

  for (let index = 120; index < tasks.length; index++) {
    assert.equal(queue.dequeue(), tasks[index]);
  }

  assert.equal(queue.dequeue(), undefined);
  assert.equal(queue.size, 0);
});

test('PriorityQueue setPriority works when only one live item remains', () => {
  const queue = new QueueView();
  const first = createRun('first');
  const second = createRun('second');

  queue.enqueue(first, { id: 'first' });
  queue.enqueue(second, { id: 'second' });

  assert.equal(queue.dequeue(), first);

  queue.setPriority('second', 1);

  assert.equal(queue.size, 1);
  assert.equal(queue.dequeue(), second);
  assert.equal(queue.dequeue(), undefined);
});
