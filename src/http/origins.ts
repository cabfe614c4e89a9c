/**
 * The interceptor's table of origins, bounded: at most `maxOrigins` kept,
 * least recently used first out, and an origin that equals a new one is
 * dropped as soon as it is seen to.
 *
 * Model: a Map in use order (a use moves an origin to the end). An origin is
 * busy while requests wait or run for it (or a pause holds them): a busy one
 * is never dropped. An idle one is forgettable once its state equals a new
 * origin's (bucket full, window empty, no pause, nothing learned worth
 * keeping): the same rule as KeyedLimiter's. On each new origin the table
 * drops the oldest forgettable ones it meets (a few per insert, so the cost
 * is constant), then, while it holds more than `maxOrigins`, evicts the least
 * recently used idle origins even if not forgettable: such an origin comes
 * back later as a new one (a full bucket, nothing learned).
 *
 * Invariants: `size <= maxOrigins` unless more than `maxOrigins` are busy;
 * a busy origin's state is never dropped.
 */

/** What the table asks of an origin's state. */
export interface OriginEntry {
  /** Requests wait or run for it: never dropped. */
  busy(): boolean;
  /** Idle, and its state equals a new one's at `nowMs` (or what it learned has expired). */
  forgettable(nowMs: number): boolean;
}

/** The default bound on origins kept (see `maxOrigins`). */
export const DEFAULT_MAX_ORIGINS = 10_000;
/** Oldest entries looked at per new origin for one to drop. */
const SWEEP_PER_INSERT = 2;

/** A bounded table of origins; see the file's opening comment. */
export class OriginTable<S extends OriginEntry> {
  readonly #entries = new Map<string, S>();
  readonly #maxOrigins: number;
  readonly #make: (origin: string) => S;
  /** Origins dropped since the table was made (forgotten or evicted). */
  dropped = 0;

  constructor(maxOrigins: number, make: (origin: string) => S) {
    this.#maxOrigins = maxOrigins;
    this.#make = make;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The state kept for `origin`, without making one or moving it. */
  peek(origin: string): S | undefined {
    return this.#entries.get(origin);
  }

  /** The state of `origin` at `nowMs`, made if there is none; it becomes the most recently used. */
  get(origin: string, nowMs: number): S {
    const entries = this.#entries;
    let state = entries.get(origin);
    if (state !== undefined) {
      // Move to the end only when it is not there already (the common case of one busy origin).
      if (entries.size > 1) {
        entries.delete(origin);
        entries.set(origin, state);
      }
      return state;
    }
    this.#sweep(nowMs);
    state = this.#make(origin);
    entries.set(origin, state);
    return state;
  }

  /** Drops the oldest forgettable origins it meets, then evicts idle ones while over the bound. */
  #sweep(nowMs: number): void {
    const entries = this.#entries;
    let looked = 0;
    for (const [origin, state] of entries) {
      if (looked++ >= SWEEP_PER_INSERT) break;
      if (!state.busy() && state.forgettable(nowMs)) {
        entries.delete(origin);
        this.dropped++;
      }
    }
    if (entries.size < this.#maxOrigins) return;
    for (const [origin, state] of entries) {
      if (entries.size < this.#maxOrigins) return;
      if (state.busy()) continue;
      entries.delete(origin);
      this.dropped++;
    }
  }
}
