/**
 * The wait queue: a FIFO per priority, higher priorities first, with every
 * operation the scheduler needs in O(log L) or better (L = distinct
 * priorities waiting, at most the number of waiting jobs).
 *
 * Waiting jobs are intrusive nodes: each carries its own links, so the queue
 * allocates nothing per job beyond the job itself (a level per distinct
 * priority):
 *
 * - `push` appends to its priority's FIFO (a doubly linked list), found in a
 *   `Map` by priority; a new level is inserted into an ordered tree of levels;
 * - `peek` reads the head of the highest level, kept at hand;
 * - `remove` unlinks any node at once (an aborted or expired job frees its
 *   slot immediately: no tombstones that would let memory grow); an emptied
 *   level leaves the tree;
 * - `oldest`: every job gets the same `maxWait`, so the first deadline is the
 *   job that has waited longest, whatever its priority: the head of a second
 *   linked list through all jobs in arrival order. O(1), however many
 *   priorities wait (scanning the levels' heads made a drain with 40,000
 *   distinct priorities quadratic). Kept only by a queue made with
 *   `arrivals` (the default): a scheduler without `maxWait` needs no
 *   deadlines, and its jobs carry no such links;
 * - `costAtOrAbove(p)`: the tree keeps, in each node, the total cost of its
 *   subtree, so the cost waiting at priority p or above (what a new job waits
 *   behind) is one walk from the root.
 *
 * The tree is a treap (a binary search tree by priority, high to low, and a
 * heap by a random weight), so it stays balanced whatever order priorities
 * arrive in: a deadline or a timestamp used as the priority, the usual case
 * for many distinct ones, arrives sorted.
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
  /** When it was queued (the scheduler's deadline is `enqueuedAtMs + maxWait`). */
  readonly enqueuedAtMs: number;
  /** Neighbours in its level's FIFO. */
  prev: J | undefined;
  next: J | undefined;
  /** Neighbours in arrival order across all levels (for {@link WaitQueue.oldest}). */
  older?: J | undefined;
  newer?: J | undefined;
}

/** One priority's FIFO, and its node in the tree of levels. */
export interface Level<J extends Waiter<J>> {
  readonly priority: number;
  head: J | undefined;
  tail: J | undefined;
  count: number;
  /** The sum of the costs waiting here. */
  cost: number;
}

interface TreeLevel<J extends Waiter<J>> extends Level<J> {
  /** Higher priorities. */
  left: TreeLevel<J> | undefined;
  /** Lower priorities. */
  right: TreeLevel<J> | undefined;
  /** The treap's heap key. */
  readonly weight: number;
  /** The cost waiting in this subtree. */
  sum: number;
}

type Tree<J extends Waiter<J>> = TreeLevel<J> | undefined;

function sumOf<J extends Waiter<J>>(node: Tree<J>): number {
  return node === undefined ? 0 : node.sum;
}

function update<J extends Waiter<J>>(node: TreeLevel<J>): TreeLevel<J> {
  node.sum = sumOf(node.left) + node.cost + sumOf(node.right);
  return node;
}

/** Joins two trees, every priority in `high` above every one in `low`. */
function merge<J extends Waiter<J>>(high: Tree<J>, low: Tree<J>): Tree<J> {
  if (high === undefined) return low;
  if (low === undefined) return high;
  if (high.weight > low.weight) {
    high.right = merge(high.right, low);
    return update(high);
  }
  low.left = merge(high, low.left);
  return update(low);
}

/** Splits into the priorities above `priority` and those below it (`priority` itself is not in the tree). */
function split<J extends Waiter<J>>(node: Tree<J>, priority: number): [Tree<J>, Tree<J>] {
  if (node === undefined) return [undefined, undefined];
  if (node.priority > priority) {
    const [high, low] = split(node.right, priority);
    node.right = high;
    return [update(node), low];
  }
  const [high, low] = split(node.left, priority);
  node.left = low;
  return [high, update(node)];
}

/** Removes the level of `priority` (it is in the tree). */
function without<J extends Waiter<J>>(node: TreeLevel<J>, priority: number): Tree<J> {
  if (node.priority === priority) return merge(node.left, node.right);
  if (priority > node.priority) node.left = without(node.left as TreeLevel<J>, priority);
  else node.right = without(node.right as TreeLevel<J>, priority);
  return update(node);
}

/** A FIFO per priority with O(1) removal and O(log L) levels. */
export class WaitQueue<J extends Waiter<J>> {
  readonly #byPriority = new Map<number, TreeLevel<J>>();
  /** Jobs are linked in arrival order too ({@link oldest}). */
  readonly #arrivals: boolean;
  #root: Tree<J>;
  /** The highest level (the tree's leftmost node). */
  #top: TreeLevel<J> | undefined;
  /** All jobs in arrival order: the oldest first. */
  #oldest: J | undefined;
  #newest: J | undefined;
  #size = 0;

  /** With `arrivals: false`, {@link oldest} is not kept (it returns `undefined`), and nodes need no `older`/`newer`. */
  constructor(options: { readonly arrivals?: boolean } = {}) {
    this.#arrivals = options.arrivals ?? true;
  }

  /** Jobs waiting. */
  get size(): number {
    return this.#size;
  }

  /** The job that runs next: the oldest of the highest priority. */
  peek(): J | undefined {
    return this.#top?.head;
  }

  /** The job that has waited longest, whatever its priority (the first to arrive of those still waiting). */
  oldest(): J | undefined {
    return this.#oldest;
  }

  /** Appends `job` to its priority's FIFO. */
  push(job: J): void {
    const top = this.#top; // the usual case, one priority: no map to look in
    const level = top !== undefined && top.priority === job.priority ? top : this.#levelFor(job.priority);
    job.level = level;
    job.next = undefined;
    job.prev = level.tail;
    if (level.tail) level.tail.next = job;
    else level.head = job;
    level.tail = job;
    level.count++;
    this.#addCost(level, job.cost);
    this.#size++;
    if (!this.#arrivals) return;
    job.newer = undefined;
    job.older = this.#newest;
    if (this.#newest) this.#newest.newer = job;
    else this.#oldest = job;
    this.#newest = job;
  }

  /** Removes and returns the head. */
  shift(): J | undefined {
    const job = this.#top?.head;
    if (job) this.remove(job);
    return job;
  }

  /** Unlinks `job` wherever it is. Returns false if it was not queued. */
  remove(job: J): boolean {
    const level = job.level as TreeLevel<J> | undefined;
    if (!level) return false;
    if (job.prev) job.prev.next = job.next;
    else level.head = job.next;
    if (job.next) job.next.prev = job.prev;
    else level.tail = job.prev;
    level.count--;
    if (level.count === 0) this.#dropLevel(level);
    else this.#addCost(level, -job.cost);
    job.level = undefined;
    job.prev = job.next = undefined;
    this.#size--;
    if (this.#arrivals) {
      if (job.older) job.older.newer = job.newer;
      else this.#oldest = job.newer;
      if (job.newer) job.newer.older = job.older;
      else this.#newest = job.older;
      job.older = job.newer = undefined;
    }
    return true;
  }

  /** The cost waiting at `priority` or above: what a new job of that priority waits behind. */
  costAtOrAbove(priority: number): number {
    let cost = 0;
    let node = this.#root;
    while (node !== undefined) {
      if (node.priority >= priority) {
        cost += sumOf(node.left) + node.cost;
        node = node.right;
      } else {
        node = node.left;
      }
    }
    return cost;
  }

  /** Jobs waiting at exactly `priority`. */
  sizeAt(priority: number): number {
    return this.#byPriority.get(priority)?.count ?? 0;
  }

  /** The jobs in the order they would run. */
  *[Symbol.iterator](): IterableIterator<J> {
    const levels: TreeLevel<J>[] = [];
    const walk = (node: Tree<J>): void => {
      if (node === undefined) return;
      walk(node.left);
      levels.push(node);
      walk(node.right);
    };
    walk(this.#root);
    for (const level of levels) {
      for (let job = level.head; job; ) {
        const next = job.next;
        yield job;
        job = next;
      }
    }
  }

  #levelFor(priority: number): TreeLevel<J> {
    const found = this.#byPriority.get(priority);
    if (found !== undefined) return found;
    const level: TreeLevel<J> = {
      priority,
      head: undefined,
      tail: undefined,
      count: 0,
      cost: 0,
      left: undefined,
      right: undefined,
      weight: Math.random(),
      sum: 0,
    };
    this.#byPriority.set(priority, level);
    const [high, low] = split(this.#root, priority);
    this.#root = merge(merge(high, level), low);
    if (this.#top === undefined || priority > this.#top.priority) this.#top = level;
    return level;
  }

  /** Adds `delta` to a level's cost and to the sums on the path from the root to it. */
  #addCost(level: TreeLevel<J>, delta: number): void {
    level.cost += delta;
    const priority = level.priority;
    for (let node = this.#root; node !== undefined; ) {
      node.sum += delta;
      if (node === level) return;
      node = priority > node.priority ? node.left : node.right;
    }
  }

  #dropLevel(level: TreeLevel<J>): void {
    this.#byPriority.delete(level.priority);
    this.#root = without(this.#root as TreeLevel<J>, level.priority);
    level.left = level.right = undefined;
    level.cost = level.sum = 0; // exact again, whatever rounding the sums picked up
    if (this.#top === level) {
      let top = this.#root;
      while (top?.left !== undefined) top = top.left;
      this.#top = top;
    }
  }
}
