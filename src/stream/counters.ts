/**
 * Progress counters for a throttled stream: what a progress bar reads.
 *
 * Bytes passed and time spent waiting are plain sums. Every piece the
 * stream passes at a clock read (a lone stream's run of chunks counts as
 * one, see throttle.ts) and every read of the counters leaves a sample
 * (time, bytes so far), at most one per 100 ms (a newer one moves the newest
 * up), in a ring of 32. The current
 * rate is the bytes since the newest sample at least a second old, over the
 * time since it: exact bytes over exact time, whatever the chunk sizes. The
 * average rate is all bytes over the time from the first byte written to now
 * (or to the end of the stream).
 */

/** `tokenpace:stream:wait`: a Throttle or a ThrottleGroup ran short of tokens and sleeps until they are there (once per wait, never per chunk). */
export interface StreamWaitMessage {
  /** The Throttle, or the ThrottleGroup for the group's own bucket. */
  readonly stream: object;
  /** How long it sleeps, ms. */
  readonly waitMs: number;
}

/** A snapshot of a throttled stream's progress. */
export interface ThrottleCounters {
  /** Bytes passed through so far. */
  bytes: number;
  /** Milliseconds during which the stream held data it could not pass yet because of the cap. */
  waitedMs: number;
  /**
   * Bytes per second over about the last second (from the newest sample at
   * least 1 s old, or from the start if the stream is younger). 0 before the first byte.
   */
  currentBytesPerSecond: number;
  /** Bytes per second from the first byte written to now, or to the end of the stream once it has ended. */
  averageBytesPerSecond: number;
  /** Milliseconds from the first byte written to now (or to the end). 0 before the first byte. */
  elapsedMs: number;
}

const SAMPLES = 32;
const SAMPLE_SPACING_MS = 100;
const CURRENT_WINDOW_MS = 1000;

/** The mutable counters behind {@link ThrottleCounters}. Time comes from the caller. */
export class Progress {
  bytes = 0;
  waitedMs = 0;
  startedAtMs: number | undefined;
  endedAtMs: number | undefined;
  #waitingSinceMs: number | undefined;
  readonly #sampleMs = new Float64Array(SAMPLES);
  readonly #sampleBytes = new Float64Array(SAMPLES);
  /** Samples taken so far (the newest is at (count - 1) % SAMPLES). */
  #sampleCount = 0;

  /** Marks the first byte's arrival (no-op after the first call). */
  start(nowMs: number): void {
    if (this.startedAtMs !== undefined) return;
    this.startedAtMs = nowMs;
    this.sample(nowMs);
  }

  /**
   * Leaves a (time, bytes so far) sample. If the newest sample is less than
   * 100 ms old it is moved up to now instead, so samples stay 100 ms apart
   * and the newest is always the latest clock read.
   */
  sample(nowMs: number): void {
    let count = this.#sampleCount;
    if (count > 0) {
      const newestMs = this.#sampleMs[(count - 1) % SAMPLES] as number;
      if (nowMs < newestMs) return; // a clock that went back
      const previousMs = count > 1 ? (this.#sampleMs[(count - 2) % SAMPLES] as number) : Number.NEGATIVE_INFINITY;
      if (newestMs - previousMs < SAMPLE_SPACING_MS) count--; // overwrite the newest
    }
    this.#sampleMs[count % SAMPLES] = nowMs;
    this.#sampleBytes[count % SAMPLES] = this.bytes;
    this.#sampleCount = count + 1;
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
    this.sample(nowMs);
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
    // The newest sample at least a second old, or else the oldest one kept.
    const count = this.#sampleCount;
    const oldest = Math.max(0, count - SAMPLES);
    let pick = oldest;
    for (let k = count - 1; k >= oldest; k--) {
      if (nowMs - (this.#sampleMs[k % SAMPLES] as number) >= CURRENT_WINDOW_MS) {
        pick = k;
        break;
      }
    }
    const sinceMs = nowMs - (this.#sampleMs[pick % SAMPLES] as number);
    const sinceBytes = this.bytes - (this.#sampleBytes[pick % SAMPLES] as number);
    this.sample(nowMs);
    return {
      bytes: this.bytes,
      waitedMs,
      currentBytesPerSecond: sinceMs > 0 ? (sinceBytes * 1000) / sinceMs : 0,
      averageBytesPerSecond: elapsedMs > 0 ? (this.bytes * 1000) / elapsedMs : 0,
      elapsedMs,
    };
  }
}
