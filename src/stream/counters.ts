/**
 * Progress counters for a throttled stream: what a progress bar reads.
 *
 * Bytes passed and time spent waiting are plain sums. The current rate is the
 * bytes of the last second over the time they took: bytes are added to ten
 * slots of 100 ms each (slot k holds the bytes passed during
 * [k * 100, (k + 1) * 100) ms), so recording a piece is one division and one
 * addition, and reading sums ten numbers. The average rate is all bytes over
 * the time from the first byte written to now (or to the end of the stream).
 */

/** A snapshot of a throttled stream's progress. */
export interface ThrottleCounters {
  /** Bytes passed through so far. */
  bytes: number;
  /** Milliseconds during which the stream held data it could not pass yet because of the cap. */
  waitedMs: number;
  /** Bytes per second over the last second (or since the start, if that is shorter). 0 before the first byte. */
  currentBytesPerSecond: number;
  /** Bytes per second from the first byte written to now, or to the end of the stream once it has ended. */
  averageBytesPerSecond: number;
  /** Milliseconds from the first byte written to now (or to the end). 0 before the first byte. */
  elapsedMs: number;
}

const SLOT_MS = 100;
const SLOTS = 10;
const index = (slot: number): number => ((slot % SLOTS) + SLOTS) % SLOTS;

/** The mutable counters behind {@link ThrottleCounters}. Time comes from the caller. */
export class Progress {
  bytes = 0;
  waitedMs = 0;
  startedAtMs: number | undefined;
  endedAtMs: number | undefined;
  #waitingSinceMs: number | undefined;
  readonly #slotBytes = new Float64Array(SLOTS);
  #slot = Number.NEGATIVE_INFINITY;

  /** Marks the first byte's arrival (no-op after the first call). */
  start(nowMs: number): void {
    if (this.startedAtMs === undefined) this.startedAtMs = nowMs;
  }

  /** The stream holds data it cannot pass yet; waiting time runs from now until the next {@link record}. */
  waiting(nowMs: number): void {
    if (this.#waitingSinceMs === undefined) this.#waitingSinceMs = nowMs;
  }

  /** Stops the waiting clock without passing anything (destroy, end). */
  stopWaiting(nowMs: number): void {
    if (this.#waitingSinceMs === undefined) return;
    this.waitedMs += Math.max(0, nowMs - this.#waitingSinceMs);
    this.#waitingSinceMs = undefined;
  }

  /** Counts `bytes` passed at `nowMs`. */
  record(nowMs: number, bytes: number): void {
    if (this.#waitingSinceMs !== undefined) this.stopWaiting(nowMs);
    this.bytes += bytes;
    const slot = Math.floor(nowMs / SLOT_MS);
    if (slot !== this.#slot) this.#roll(slot);
    this.#slotBytes[index(slot)] = (this.#slotBytes[index(slot)] as number) + bytes;
  }

  /** Moves the window to end at `slot`, clearing the slots it skips. */
  #roll(slot: number): void {
    if (slot < this.#slot) return; // time never moves back here; ignore a clock that does
    const from = Math.max(this.#slot + 1, slot - SLOTS + 1);
    for (let k = from; k <= slot; k++) this.#slotBytes[index(k)] = 0;
    this.#slot = slot;
  }

  snapshot(nowMs: number): ThrottleCounters {
    const started = this.startedAtMs;
    if (started === undefined) {
      return { bytes: 0, waitedMs: 0, currentBytesPerSecond: 0, averageBytesPerSecond: 0, elapsedMs: 0 };
    }
    const end = this.endedAtMs ?? nowMs;
    const elapsedMs = Math.max(0, end - started);
    const waitedMs =
      this.waitedMs + (this.#waitingSinceMs === undefined ? 0 : Math.max(0, nowMs - this.#waitingSinceMs));
    const slot = Math.floor(nowMs / SLOT_MS);
    let recent = 0;
    for (let k = Math.max(slot - SLOTS + 1, this.#slot - SLOTS + 1); k <= Math.min(slot, this.#slot); k++) {
      recent += this.#slotBytes[index(k)] as number;
    }
    const windowStartMs = Math.max((slot - SLOTS + 1) * SLOT_MS, started);
    const windowMs = Math.max(nowMs - windowStartMs, 1);
    return {
      bytes: this.bytes,
      waitedMs,
      currentBytesPerSecond: (recent * 1000) / windowMs,
      averageBytesPerSecond: elapsedMs > 0 ? (this.bytes * 1000) / elapsedMs : 0,
      elapsedMs,
    };
  }
}
