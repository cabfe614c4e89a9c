/**
 * The wait queue: a FIFO per priority, higher priorities first, with every
 * operation the scheduler needs in O(log L) or better (L = distinct
 * priorities waiting, at most the number of waiting jobs).
 *
 * A waiting job carries its level and its slot in that level's FIFO, so the
 * queue keeps one array entry per job beyond the job itself (a level per
 * distinct priority):
 *
 * - `push` appends to its priority's FIFO (an array: see {@link Level}), found
 *   in a `Map` by priority; a new level is inserted into an ordered tree of levels;
 * - `peek` reads the first waiting job of the highest level, kept at hand;
 * - `remove` takes any job out at once (an aborted or expired job is released
 *   immediately; its entry becomes a hole, and a level's array is rebuilt when
 *   its dead entries outnumber its live ones, so it never holds more than
 *   twice its jobs plus 64); an emptied level leaves the tree;
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
  /** Its place in its level's FIFO (see {@link Level}). */
  slot: number;
  /** Neighbours in arrival order across all levels (for {@link WaitQueue.oldest}). */
  older?: J | undefined;
  newer?: J | undefined;
}

/**
 * One priority's FIFO, and its node in the tree of levels. The FIFO is an array of the jobs, not a
 * list linked through them: a job removed from the middle leaves a hole; `first` is the first job
 * still waiting; the array is rebuilt when its dead part outweighs its live one. A job's `slot` is
 * its index plus `base`, so removing it is O(1).
 */
export interface Level<J extends Waiter<J>> {
  readonly priority: number;
  jobs: (J | undefined)[];
  first: number;
  base: number;
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

/**
 * Drops a level's dead slots (those before `first`, and holes) once they are more than its live
 * ones: O(n) each time, after at least n / 2 removals, so O(1) a removal. With only the head taken
 * (the usual drain) it keeps the slots' indices (`base` moves); with holes it renumbers the jobs.
 */
function compact<J extends Waiter<J>>(level: Level<J>): void {
  const jobs = level.jobs;
  if (jobs.length - level.first === level.count) {
    level.jobs = jobs.slice(level.first);
    level.base += level.first;
    level.first = 0;
    return;
  }
  const live: J[] = [];
  for (let i = level.first; i < jobs.length; i++) {
    const job = jobs[i];
    if (job === undefined) continue;
    job.slot = level.base + live.length;
    live.push(job);
  }
  level.jobs = live;
  level.first = 0;
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
    const top = this.#top;
    return top === undefined ? undefined : top.jobs[top.first];
  }

  /**
   * The oldest job of the lowest priority waiting: the first a full queue gives up (`onFull`). O(log L).
   * With `skip`: the first such job that `skip` does not exempt, going up the priorities (O(L) and the
   * jobs exempted; a scheduler exempts only its jobs on trial, a few).
   */
  lowest(skip?: (job: J) => boolean): J | undefined {
    let node = this.#root;
    while (node?.right !== undefined) node = node.right;
    if (node === undefined) return undefined;
    if (skip === undefined) return node.jobs[node.first];
    const levels: TreeLevel<J>[] = [];
    const walk = (at: Tree<J>): void => {
      if (at === undefined) return;
      walk(at.right);
      levels.push(at);
      walk(at.left);
    };
    walk(this.#root);
    for (const level of levels) {
      const jobs = level.jobs;
      for (let i = level.first; i < jobs.length; i++) {
        const job = jobs[i];
        if (job !== undefined && !skip(job)) return job;
      }
    }
    return undefined;
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
    job.slot = level.base + level.jobs.length;
    level.jobs.push(job);
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
    const job = this.peek();
    if (job) this.remove(job);
    return job;
  }

  /** Unlinks `job` wherever it is. Returns false if it was not queued. */
  remove(job: J): boolean {
    const level = job.level as TreeLevel<J> | undefined;
    if (!level) return false;
    const jobs = level.jobs;
    const i = job.slot - level.base;
    jobs[i] = undefined;
    level.count--;
    if (level.count === 0) this.#dropLevel(level);
    else {
      this.#addCost(level, -job.cost);
      if (i === level.first) {
        let first = i + 1;
        while (jobs[first] === undefined) first++;
        level.first = first;
      }
      if (jobs.length > 64 && jobs.length > 2 * level.count) compact(level);
    }
    job.level = undefined;
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
      const jobs = level.jobs;
      for (let i = level.first; i < jobs.length; i++) {
        const job = jobs[i];
        if (job !== undefined) yield job;
      }
    }
  }

  #levelFor(priority: number): TreeLevel<J> {
    const found = this.#byPriority.get(priority);
    if (found !== undefined) return found;
    const level: TreeLevel<J> = {
      priority,
      jobs: [],
      first: 0,
      base: 0,
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
    level.jobs = [];
    level.first = 0;
    level.base = 0;
    level.cost = level.sum = 0; // exact again, whatever rounding the sums picked up
    if (this.#top === level) {
      let top = this.#root;
      while (top?.left !== undefined) top = top.left;
      this.#top = top;
    }
  }
}
