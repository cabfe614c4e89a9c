/**
 * A bounded table of keys and their state, for a KeyedScheduler: at most
 * `maxKeys` kept, least recently used first out, and a key whose state
 * equals a new one's dropped as soon as it is seen to.
 *
 * Model: a Map in use order (a use moves a key to the end). A key is busy
 * while jobs wait or run for it: a busy key is never dropped. An idle key is
 * forgettable once its state equals a new key's (its bucket full again): the
 * same rule as MemoryStore's. On each new key the table drops the oldest
 * forgettable keys it meets (a few per insert, so the cost is constant);
 * then, at the bound, it evicts the least recently used idle key even if not
 * forgettable (it comes back later as a new one, with a full bucket). When
 * every key kept is busy, the new key is refused: {@link KeyTable.get}
 * returns `undefined`, and memory stays bounded.
 *
 * Invariants: `size <= maxKeys`; a busy key's state is never dropped.
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

/** A bounded table of keys; see the file's opening comment. */
export class KeyTable<S extends KeyEntry> {
  readonly #entries = new Map<string, S>();
  readonly #maxKeys: number;
  readonly #dropped: (key: string, state: S) => void;

  /** `dropped(key, state)` is told of each key the table lets go. */
  constructor(maxKeys: number, dropped: (key: string, state: S) => void) {
    this.#maxKeys = maxKeys;
    this.#dropped = dropped;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The state kept for `key`, without making one or moving it. */
  peek(key: string): S | undefined {
    return this.#entries.get(key);
  }

  /** The state of `key`, moved to the most recently used end; `undefined` if it is not kept. */
  use(key: string): S | undefined {
    const entries = this.#entries;
    const state = entries.get(key);
    // Move to the end only when there is something to move past (the common case of one busy key).
    if (state !== undefined && entries.size > 1) {
      entries.delete(key);
      entries.set(key, state);
    }
    return state;
  }

  /** Adds `key` (not kept yet) with the state `make()` returns, after making room; `undefined` if every key kept is busy. */
  add(key: string, nowMs: number, make: () => S): S | undefined {
    if (!this.#makeRoom(nowMs)) return undefined;
    const state = make();
    this.#entries.set(key, state);
    return state;
  }

  keys(): IterableIterator<string> {
    return this.#entries.keys();
  }

  values(): IterableIterator<S> {
    return this.#entries.values();
  }

  /** Drops the oldest forgettable keys it meets, then evicts idle ones while at the bound. False if all are busy. */
  #makeRoom(nowMs: number): boolean {
    const entries = this.#entries;
    let looked = 0;
    for (const [key, state] of entries) {
      if (looked++ >= SWEEP_PER_INSERT) break;
      if (!state.busy() && state.forgettable(nowMs)) this.#drop(key, state);
    }
    if (entries.size < this.#maxKeys) return true;
    for (const [key, state] of entries) {
      if (state.busy()) continue;
      this.#drop(key, state);
      if (entries.size < this.#maxKeys) return true;
    }
    return false;
  }

  #drop(key: string, state: S): void {
    this.#entries.delete(key);
    this.#dropped(key, state);
  }
}
