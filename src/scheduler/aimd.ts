/**
 * Learning a downstream's sustainable rate from its answers: additive
 * increase, multiplicative decrease (AIMD, as TCP's congestion control), with
 * a slow start and a gentle probe. Numbers only: the caller feeds it answers
 * and applies `rate` (a Scheduler's `setRate`); it keeps no timer.
 *
 * - Slow start: until the first pushback the rate doubles every second that
 *   demand fills it (jobs wait for it).
 * - Pushback (a 429, a 503, `RateLimit` with r=0, or a job's own report):
 *   the rate that failed is remembered and the rate is cut to `BETA` times
 *   the lesser of the rate and the answers that succeeded in the last second
 *   (what the downstream really allowed), so one cut lands below a limit
 *   that fell by half.
 * - Recovery, hold and probe: back up to `PLATEAU` of the failed rate within
 *   a fraction of a second, held there until `HOLD_MS` after the pushback,
 *   then a probe whose slope (6 % of the failed rate per second) doubles
 *   every 0.75 s until the next pushback. A server counting a window answers
 *   late (the window integrates the rate over its length), so the probe
 *   starts slow. Against a limit that does not move this costs one pushback
 *   (and its pause) per ~7.5 s; a limit that moved up is found within ~10 s
 *   of the last pushback, one that moved down at the next answer.
 * - An advertised policy (quota q per window w) pins the rate: no probing.
 *   At q / w when the caller also limits each window to q (`windowed`);
 *   else at (q - 1) / w with burst 1, which alone starts at most q in any
 *   window of w.
 *
 * Invariants: `min <= rate <= max`; it rises only on success with demand
 * (jobs wait for the rate); docs/calling-apis.md gives the reasoning and the
 * measurements.
 */

/** The bounds of a learned rate, per second. */
export interface AimdBounds {
  readonly min: number;
  readonly max: number;
  readonly initial: number;
}

/** The factor of a cut. */
export const BETA = 0.9;
/** Recovery goes back to this share of the failed rate quickly, then probes slowly. */
export const PLATEAU = 0.985;
/** How long the rate stays at the plateau after a pushback before it probes, ms. */
export const HOLD_MS = 6000;
/** The probe's first slope, a share of the failed rate per second. */
const PROBE_SLOPE = 0.06;
/** The probe's slope doubles every this many ms without pushback. */
const PROBE_DOUBLING_MS = 750;
/** Successes remembered (their times), to count those of the last second. */
const RING = 64;

/** Why the rate changed. */
export type RateChange = 'increase' | 'pushback' | 'policy';

/** An AIMD controller; see the file's opening comment. */
export class Aimd {
  rate: number;
  readonly #min: number;
  readonly #max: number;
  /** The rate that last failed (NaN: slow start). */
  #failedAt = Number.NaN;
  /** The advertised pace (NaN: none). */
  #policyRate = Number.NaN;
  #lastMs: number;
  /** When the last pushback came. */
  #pushbackMs = Number.NaN;
  /** The times of the last RING successes (a ring; `#okCount` written so far). */
  readonly #ok = new Float64Array(RING);
  #okCount = 0;

  constructor(bounds: AimdBounds, nowMs: number) {
    this.#min = bounds.min;
    this.#max = bounds.max;
    this.rate = clamp(bounds.initial, bounds.min, bounds.max);
    this.#lastMs = nowMs;
  }

  /** A policy was advertised. */
  get policyKnown(): boolean {
    return !Number.isNaN(this.#policyRate);
  }

  /** The rate that last failed (NaN before any pushback). */
  get failedAt(): number {
    return this.#failedAt;
  }

  /** Successes in the last second (beyond RING of them, their rate over the time they took). */
  okLastSecond(nowMs: number): number {
    const count = Math.min(this.#okCount, RING);
    for (let k = 1; k <= count; k++) {
      const atMs = this.#ok[(this.#okCount - k) % RING] as number;
      if (atMs <= nowMs - 1000) return k - 1;
    }
    if (count < RING) return count;
    const oldest = this.#ok[this.#okCount % RING] as number;
    return nowMs > oldest ? (RING * 1000) / (nowMs - oldest) : RING;
  }

  /** An answer without pushback at `nowMs`; `demand`: jobs wait for the rate. True if the rate changed. */
  succeeded(nowMs: number, demand: boolean): boolean {
    this.#ok[this.#okCount % RING] = nowMs;
    this.#okCount++;
    const dtMs = Math.min(1000, nowMs - this.#lastMs);
    if (dtMs < 50) return false;
    this.#lastMs = nowMs;
    if (!demand) return false;
    const before = this.rate;
    const s = dtMs / 1000;
    const failed = this.#failedAt;
    let next: number;
    if (!Number.isNaN(this.#policyRate)) next = Math.min(this.#policyRate, before * 2 ** s);
    else if (Number.isNaN(failed))
      next = before * 2 ** s; // slow start
    else if (before < PLATEAU * failed) next = Math.min(PLATEAU * failed, before + 0.25 * failed * s);
    else if (nowMs - this.#pushbackMs < HOLD_MS) next = before;
    else {
      const probingMs = nowMs - this.#pushbackMs - HOLD_MS;
      next = before + PROBE_SLOPE * failed * 2 ** (probingMs / PROBE_DOUBLING_MS) * s;
    }
    this.rate = clamp(next, this.#min, this.#max);
    return this.rate !== before;
  }

  /** A pushback at `nowMs`: the multiplicative cut. True if the rate changed. */
  pushedBack(nowMs: number): boolean {
    const before = this.rate;
    // A server counting a window refuses once it has admitted its limit in it: the answers that
    // succeeded in the last second are the best measure of that limit.
    const allowed = this.okLastSecond(nowMs);
    const base = allowed > 0 ? Math.min(before, allowed) : before;
    this.#failedAt = Number.isNaN(this.#policyRate) ? base : this.#policyRate;
    this.#pushbackMs = nowMs;
    this.#lastMs = nowMs;
    this.rate = clamp(BETA * base, this.#min, this.#max);
    return this.rate !== before;
  }

  /**
   * The downstream advertises `quota` per `windowMs`: pace at `quota` per window if each window is
   * also limited to it (`windowed`), else at quota - 1. True if the rate changed.
   */
  advertised(quota: number, windowMs: number, windowed: boolean): boolean {
    const paced = ((windowed ? quota : Math.max(quota - 1, quota / 2)) * 1000) / windowMs;
    if (paced === this.#policyRate) return false;
    this.#policyRate = paced;
    this.#failedAt = paced;
    const before = this.rate;
    this.rate = clamp(paced, this.#min, this.#max);
    return this.rate !== before;
  }
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
