/**
 * A bounded table of keys and their state (a KeyedScheduler's keys, the
 * undici interceptor's origins): at most `maxKeys` kept, least recently used
 * first out, and a key whose state equals a new one's dropped as soon as it
 * is seen to.
 *
 * Model: a Map from key to a node, and the nodes in a list in use order
 * (intrusive links: a use moves a node to the newest end in O(1), without
 * deleting and re-inserting the key in the Map). A key is busy
 * while jobs wait or run for it: a busy key is never dropped. An idle key is
 * forgettable once its state equals a new key's (its bucket full again): the
 * same rule as MemoryStore's. On each new key the table drops the oldest
 * forgettable keys it meets (a few per insert, so the cost is constant);
 * then, at the bound, it evicts the least recently used idle key even if not
 * forgettable (it comes back later as a new one, with a full bucket). When
 * every key kept is busy, `whenAllBusy` decides: `'refuse'` the new key
 * ({@link KeyTable.add} returns `undefined`), or `'keep'` it beyond the bound
 * (each busy key's own queue is bounded, and the table is back within the
 * bound as they go idle).
 *
 * Invariants: `size <= maxKeys` (with `'keep'`, unless more than `maxKeys`
 * are busy); a busy key's state is never dropped.
 */

/** What the table asks of a key's state. */
export interface KeyEntry {
  /** Jobs wait or run for it: never dropped. */
  busy(): boolean;
  /** Idle, and its state equals a new one's at `nowMs`. */
  forgettable(nowMs: number): boolean;
}

/** Oldest entries looked at per new key for one to drop. */
const SWEEP_PER_INSERT = 2;

/** A key kept, linked in use order. */
interface Node<S> {
  readonly key: string;
  readonly state: S;
  /** The next more recently used node (`undefined`: this is the newest). */
  newer: Node<S> | undefined;
  /** The next less recently used node (`undefined`: this is the oldest). */
  older: Node<S> | undefined;
}

/** What a {@link KeyTable} is made with. */
export interface KeyTableOptions<S> {
  /** The most keys kept (Infinity: no bound). */
  readonly maxKeys: number;
  /** A new key when every key kept is busy: refused, or kept beyond the bound. */
  readonly whenAllBusy: 'refuse' | 'keep';
  /** Told of each key the table lets go. */
  readonly dropped?: (key: string, state: S) => void;
}

/** A bounded table of keys; see the file's opening comment. */
export class KeyTable<S extends KeyEntry> {
  readonly #nodes = new Map<string, Node<S>>();
  #oldest: Node<S> | undefined = undefined;
  #newest: Node<S> | undefined = undefined;
  readonly #maxKeys: number;
  readonly #refuse: boolean;
  readonly #dropped: ((key: string, state: S) => void) | undefined;

  constructor(options: KeyTableOptions<S>) {
    this.#maxKeys = options.maxKeys;
    this.#refuse = options.whenAllBusy === 'refuse';
    this.#dropped = options.dropped;
  }

  get size(): number {
    return this.#nodes.size;
  }

  /** The state kept for `key`, without making one or moving it. */
  peek(key: string): S | undefined {
    return this.#nodes.get(key)?.state;
  }

  /** The state of `key`, moved to the most recently used end; `undefined` if it is not kept. */
  use(key: string): S | undefined {
    const node = this.#nodes.get(key);
    if (node === undefined) return undefined;
    if (node !== this.#newest) {
      this.#unlink(node);
      this.#link(node);
    }
    return node.state;
  }

  /**
   * Adds `key` (not kept yet) with the state `make()` returns, after making room at `nowMs`;
   * `undefined` if every key kept is busy and the table refuses then.
   */
  add(key: string, nowMs: number, make: () => S): S | undefined {
    if (!this.#makeRoom(nowMs) && this.#refuse) return undefined;
    const node: Node<S> = { key, state: make(), newer: undefined, older: undefined };
    this.#nodes.set(key, node);
    this.#link(node);
    return node.state;
  }

  /** The keys kept, least recently used first. */
  *keys(): IterableIterator<string> {
    for (let node = this.#oldest; node !== undefined; node = node.newer) yield node.key;
  }

  /** The states kept, least recently used first. */
  *values(): IterableIterator<S> {
    for (let node = this.#oldest; node !== undefined; node = node.newer) yield node.state;
  }

  /** Drops the oldest forgettable keys it meets, then evicts idle ones while at the bound. False if all are busy. */
  #makeRoom(nowMs: number): boolean {
    let node = this.#oldest;
    for (let looked = 0; node !== undefined && looked < SWEEP_PER_INSERT; looked++) {
      const next = node.newer;
      if (!node.state.busy() && node.state.forgettable(nowMs)) this.#drop(node);
      node = next;
    }
    if (this.#nodes.size < this.#maxKeys) return true;
    for (node = this.#oldest; node !== undefined; ) {
      const next = node.newer;
      if (!node.state.busy()) {
        this.#drop(node);
        if (this.#nodes.size < this.#maxKeys) return true;
      }
      node = next;
    }
    return false;
  }

  /** Links `node` (linked nowhere) as the newest. */
  #link(node: Node<S>): void {
    node.older = this.#newest;
    node.newer = undefined;
    if (this.#newest === undefined) this.#oldest = node;
    else this.#newest.newer = node;
    this.#newest = node;
  }

  #unlink(node: Node<S>): void {
    const { older, newer } = node;
    if (older === undefined) this.#oldest = newer;
    else older.newer = newer;
    if (newer === undefined) this.#newest = older;
    else newer.older = older;
  }

  #drop(node: Node<S>): void {
    this.#unlink(node);
    this.#nodes.delete(node.key);
    this.#dropped?.(node.key, node.state);
  }
}
