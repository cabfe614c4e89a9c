/**
 * Pacing rules shared by `Throttle` and `ThrottleGroup`: how big a burst must
 * be for Node's timers to sustain a rate, the default burst, the piece a
 * waiting stream wakes up for, and the byte meter (TBF's two buckets).
 *
 * Why a burst can be too small. Refill is lazy (see meters/token-bucket.ts),
 * so a timer that fires late costs nothing: the tokens earned in the extra
 * time are still in the bucket when the stream wakes up, and the next piece is
 * that much larger. The one way to lose rate is for the bucket to fill up
 * while the stream sleeps: tokens above the capacity are dropped. A stream
 * that waits for a piece of P bytes and wakes L ms late finds P + rate * L
 * tokens, so nothing is lost as long as
 *
 *   P + rate * L <= burst.
 *
 * Node's timers have a resolution of 1 ms and fire about 1-2 ms late, more
 * under load; we allow L = {@link TIMER_SLACK_MS} (5 ms) at the least. A
 * waiting stream wakes for P = the burst less 10 ms of the rate
 * ({@link LATE_TOLERANCE_MS}), and for no less than half the burst, so the
 * rule for the smallest burst becomes
 *
 *   burst >= 2 * rate * 5 ms = rate * 10 ms        ({@link minBurstBytes})
 *
 * the same rule as TBF's `burst >= rate / HZ`, with our timers' lateness as
 * the tick. An explicit burst below it is refused with `BurstTooSmallError`.
 *
 * The default burst is 50 ms of the rate, and at least 1 KiB
 * ({@link defaultBurstBytes}): 1 MiB/s gets 51.2 KiB, 1 GiB/s 51.2 MiB, 1 KiB/s
 * 1 KiB. A waiting stream then wakes every 40 ms (25 times a second: each
 * wake-up costs the process about 0.2 ms of CPU on a small VM, so fewer is
 * better) and tolerates timers 10 ms late without losing rate (more once it
 * has seen them fire later: {@link Lateness}); no window of
 * 100 ms carries more than 1.5x the rate's share. With a larger explicit burst
 * the stream still wakes for pieces no larger than with the default burst
 * ({@link wakePieceBytes}), so the burst stays a reserve and the output stays
 * smooth; and a piece is never more than 250 ms of the rate, so low rates,
 * whose default burst is the 1 KiB floor, still pass one four times a second.
 */

import type { Clock } from '../clock.js';
import { BurstTooSmallError } from '../errors.js';
import { advance, type BucketParams, type BucketState, msUntil, slackFor } from '../meters/token-bucket.js';
import { formatSize } from '../units.js';

/** How late we assume a timer may fire, ms: the 1 ms resolution plus Node's usual lateness, with margin. */
export const TIMER_SLACK_MS = 5;
/** How late a timer may fire without costing rate, for bursts of at least 20 ms of the rate. */
export const LATE_TOLERANCE_MS = 10;
/** The default burst, in ms of the rate. */
export const DEFAULT_BURST_MS = 50;
/** The smallest default burst, bytes: below it pieces are too small to be worth a wake-up. */
export const DEFAULT_BURST_FLOOR_BYTES = 1024;
/** The group's default round-robin quantum, in ms of the group's rate (and at least 1 KiB). */
export const DEFAULT_QUANTUM_MS = 5;
/** The longest a busy stream sleeps between pieces, ms: at low rates the 1 KiB burst floor would make pieces seconds apart. */
export const MAX_WAKE_MS = 250;

/** The smallest burst that sustains `ratePerSecond` (bytes/s): twice the bytes earned in {@link TIMER_SLACK_MS}. */
export function minBurstBytes(ratePerSecond: number): number {
  return Math.max(1, Math.ceil((ratePerSecond * 2 * TIMER_SLACK_MS) / 1000));
}

/** The default burst for `ratePerSecond`: 50 ms of the rate, at least 1 KiB. */
export function defaultBurstBytes(ratePerSecond: number): number {
  return Math.max(DEFAULT_BURST_FLOOR_BYTES, Math.ceil((ratePerSecond * DEFAULT_BURST_MS) / 1000));
}

/**
 * The piece a waiting stream wakes up for (whole bytes): the burst less
 * 10 ms of the rate, and at least half the burst, so a late timer finds
 * room in the bucket for what it earned meanwhile. When timers have been
 * seen firing later than that, the margin grows to 1.5 times the lateness
 * seen (`lateMs`, see {@link Lateness}), down to half the burst. A burst above
 * the default counts as the default, so a large burst does not make the
 * output lumpy, and a piece is at most 250 ms of the rate ({@link MAX_WAKE_MS}):
 * 1 KiB/s passes 256 bytes four times a second, not 1 KiB once.
 *
 * @example wakePieceBytes(1000, 100) === 90; wakePieceBytes(1000, 12) === 6; wakePieceBytes(1000, 100, 20) === 70
 */
export function wakePieceBytes(ratePerSecond: number, burstBytes: number, lateMs = 0): number {
  const burst = Math.min(burstBytes, defaultBurstBytes(ratePerSecond));
  const toleranceMs = Math.max(LATE_TOLERANCE_MS, 1.5 * lateMs);
  const piece = Math.max(burst / 2, burst - (ratePerSecond * toleranceMs) / 1000);
  return Math.max(1, Math.floor(Math.min(piece, (ratePerSecond * MAX_WAKE_MS) / 1000)));
}

/** How fast the lateness estimate forgets, ms: it halves in this long without late timers. */
export const LATENESS_HALF_LIFE_MS = 1000;

/**
 * How late this stream's timers have been firing lately: the largest
 * lateness seen, halving every second ({@link LATENESS_HALF_LIFE_MS}). A GC
 * pause or a busy event loop makes the next wake pieces smaller (more room
 * for lateness); punctual timers make them grow back. The decay is by time,
 * not by wake-up, so an event loop blocked periodically (say 25 ms every
 * 200 ms) keeps the wider margin between its blocks instead of losing rate
 * at every one.
 */
export class Lateness {
  /** The estimate as last reported (what the wake pieces were computed from). */
  #ms = 0;
  /** The estimate now, decaying between reports. */
  #currentMs = 0;
  #atMs = Number.NaN;

  /** The estimate as last reported by {@link observe} (changes only by 0.5 ms or more). */
  get ms(): number {
    return this.#ms;
  }

  /**
   * Records one wake-up at `nowMs`, `lateMs` after it was due; returns true
   * if the estimate moved 0.5 ms or more from the one last reported.
   */
  observe(lateMs: number, nowMs: number): boolean {
    const elapsedMs = Number.isNaN(this.#atMs) ? 0 : Math.max(0, nowMs - this.#atMs);
    this.#atMs = nowMs;
    const decayed = this.#currentMs * 0.5 ** (elapsedMs / LATENESS_HALF_LIFE_MS);
    const next = Math.max(0, lateMs, decayed);
    this.#currentMs = next < 0.5 ? 0 : next;
    if (Math.abs(this.#currentMs - this.#ms) < 0.5) return false;
    this.#ms = this.#currentMs;
    return true;
  }
}

/**
 * One timer armed for an exact shortfall, like sch_tbf.c's qdisc watchdog:
 * whole milliseconds rounded up (at least 1), never two at once, and an
 * estimate ({@link Lateness}) of how late its wake-ups have been coming.
 * `onWake(latenessChanged)` runs when it fires.
 */
export class Watchdog {
  #timer: unknown = undefined;
  #armed = false;
  #dueMs = 0;
  readonly #lateness = new Lateness();
  readonly #clock: Clock;
  readonly #onWake: (latenessChanged: boolean) => void;

  constructor(clock: Clock, onWake: (latenessChanged: boolean) => void) {
    this.#clock = clock;
    this.#onWake = onWake;
  }

  /** True while a wake-up is pending. */
  get armed(): boolean {
    return this.#armed;
  }

  /** How late wake-ups have been coming lately, ms (0 when punctual). */
  get latenessMs(): number {
    return this.#lateness.ms;
  }

  /**
   * Arms for `delayMs` after `nowMs`. A pending wake-up that is not early
   * for it and less than 1 ms later than it is kept (re-planning from a
   * slightly later `nowMs` does not churn timers); another is replaced.
   */
  arm(nowMs: number, delayMs: number): void {
    const wholeMs = Math.max(1, Math.ceil(delayMs));
    const dueMs = nowMs + wholeMs;
    if (this.#armed) {
      const exactMs = nowMs + Math.max(0, delayMs);
      if (this.#dueMs >= exactMs && this.#dueMs < exactMs + 1) return;
      this.disarm();
    }
    this.#armed = true;
    this.#dueMs = dueMs;
    this.#timer = this.#clock.setTimeout(this.#fire, wholeMs);
  }

  /** Cancels a pending wake-up, if any. */
  disarm(): void {
    if (!this.#armed) return;
    this.#clock.clearTimeout(this.#timer);
    this.#armed = false;
    this.#timer = undefined;
  }

  readonly #fire = (): void => {
    this.#armed = false;
    this.#timer = undefined;
    const nowMs = this.#clock.now();
    this.#onWake(this.#lateness.observe(nowMs - this.#dueMs, nowMs));
  };
}

/**
 * How much room a group keeps in its bucket for members that run dry in the
 * middle of their turn, ms of the rate (see group.ts): the group wakes for
 * this much less than a lone stream's wake piece, and holds a dry member's
 * turn until the bucket reaches the wake piece.
 */
export const GROUP_HOLD_MS = 15;

/**
 * The piece a group sleeps for while members wait: the wake piece less
 * {@link GROUP_HOLD_MS} of the rate, at least half the wake piece and at
 * least the quantum (if that fits the wake piece).
 *
 * @example groupWakePieceBytes(1000, 100, 10) === 75 // wake piece 90, less 15
 */
export function groupWakePieceBytes(
  ratePerSecond: number,
  burstBytes: number,
  quantumBytes: number,
  lateMs = 0,
): number {
  const wake = wakePieceBytes(ratePerSecond, burstBytes, lateMs);
  const piece = Math.max(wake / 2, wake - (ratePerSecond * GROUP_HOLD_MS) / 1000, Math.min(quantumBytes, wake));
  return Math.max(1, Math.floor(piece));
}

/** The group's default DRR quantum: 5 ms of its rate, at least 1 KiB, at most half the burst and at most a wake piece. */
export function defaultQuantumBytes(ratePerSecond: number, burstBytes: number): number {
  const quantum = Math.max(DEFAULT_BURST_FLOOR_BYTES, Math.ceil((ratePerSecond * DEFAULT_QUANTUM_MS) / 1000));
  return Math.max(1, Math.min(quantum, Math.floor(burstBytes / 2), wakePieceBytes(ratePerSecond, burstBytes)));
}

/** Bytes for a message: `'65536 bytes (64 KiB)'`, `'10737419 bytes (~10.24 MiB)'`, `'512 bytes'`. */
export function describeBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  const exact = formatSize(bytes);
  if (/^[0-9.]+ \w+$/.test(exact) && exact.length <= 10) return `${bytes} bytes (${exact})`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let index = 0;
  let scaled = bytes / 1024;
  while (scaled >= 1024 && index < units.length - 1) {
    scaled /= 1024;
    index++;
  }
  return `${bytes} bytes (~${Number(scaled.toPrecision(4))} ${units[index]})`;
}

/** A rate for a message: `'1 GiB/s'`, `'~3.333 MiB/s'`. */
export function describeRate(ratePerSecond: number): string {
  const text = describeBytes(ratePerSecond);
  const paren = /\((.*)\)$/.exec(text);
  return `${paren ? paren[1] : `${ratePerSecond} B`}/s`;
}

/**
 * Refuses a burst the timers cannot sustain `ratePerSecond` with.
 * @param what names the option in the message: `'burst'`, `'peakBurst'`
 */
export function checkBurst(ratePerSecond: number, burstBytes: number, what = 'burst'): void {
  const minBurst = minBurstBytes(ratePerSecond);
  if (burstBytes >= minBurst) return;
  throw new BurstTooSmallError(
    burstBytes,
    minBurst,
    `${what} ${describeBytes(burstBytes)} is too small to sustain ${describeRate(ratePerSecond)}: ` +
      `timers fire up to ~${TIMER_SLACK_MS} ms late, and tokens that arrive while a full bucket waits are lost; ` +
      `use a ${what} of at least ${describeBytes(minBurst)} (rate x ${2 * TIMER_SLACK_MS} ms), ` +
      `or leave it unset for the default of ${describeBytes(defaultBurstBytes(ratePerSecond))} (rate x ${DEFAULT_BURST_MS} ms)`,
  );
}

/**
 * Refuses a peak bucket the timers cannot sustain `peakPerSecond` with: the
 * same rule as for the main bucket ({@link checkBurst}), against the peak
 * rate. A peak bucket too small drains a burst well below the peak rate (a
 * 16 KiB peak bucket at 64 MiB/s passes ~15 MiB/s). The peak bucket must
 * also fit in the main one, so when the smallest that works is above
 * `burstBytes` the message says to raise the burst as well.
 */
export function checkPeakBurst(peakPerSecond: number, peakBurstBytes: number, burstBytes: number): void {
  const minPeak = minBurstBytes(peakPerSecond);
  if (peakBurstBytes >= minPeak) return;
  const alsoBurst =
    minPeak > burstBytes
      ? ` and a burst at least as large (it is ${describeBytes(burstBytes)}), or a lower peakRate`
      : `, or leave it unset for the default of ${describeBytes(Math.min(burstBytes, Math.max(DEFAULT_BURST_FLOOR_BYTES, minPeak)))}`;
  throw new BurstTooSmallError(
    peakBurstBytes,
    minPeak,
    `peakBurst ${describeBytes(peakBurstBytes)} is too small to sustain peakRate ${describeRate(peakPerSecond)}: ` +
      `timers fire up to ~${TIMER_SLACK_MS} ms late, and the peak bucket would drain a burst below its peak rate; ` +
      `use a peakBurst of at least ${describeBytes(minPeak)} (peakRate x ${2 * TIMER_SLACK_MS} ms)${alsoBurst}`,
  );
}

/** One bucket's parameters and variables. */
interface Bucket {
  params: BucketParams;
  state: BucketState;
  slack: number;
}

function bucket(ratePerSecond: number, capacity: number, nowMs: number): Bucket {
  return {
    params: { ratePerSecond, capacity },
    state: { tokens: capacity, updatedAtMs: nowMs },
    slack: slackFor(capacity),
  };
}

/**
 * TBF's two buckets over bytes: the main bucket (rate, burst) and, when a
 * peak rate is set, the peak bucket (peakRate, peakBurst), which caps how
 * fast a burst itself drains. A piece of n bytes conforms when both buckets
 * hold n tokens; it then takes n from each. Both start full.
 *
 * Pure arithmetic over the meters/token-bucket.ts functions: no timers, the
 * caller passes the time.
 *
 * Every piece is charged at the time it passes, as TBF charges a packet when
 * it is dequeued: the refill up to that time is capped at the capacity, then
 * the piece is subtracted. So tokens earned while the stream was passing
 * pieces are kept (not lost as overflow), and the bucket never believes it
 * holds more than a real TBF would; both sides of the bound hold.
 *
 * (An earlier version passed chunks without reading the clock and charged
 * them at the next read, after capping the refill. That dropped the tokens
 * earned while those chunks passed whenever the bucket would have been full
 * in between: a lone stream fed by a socket-like source got 0.82 of its
 * rate. Charging them before the cap instead would overshoot the burst. A
 * clock read costs 60-150 ns here, against ~650 ns for a PassThrough hop, so
 * every piece now reads it.)
 */
export class ByteMeter {
  #main: Bucket;
  #peak: Bucket | undefined;

  constructor(
    ratePerSecond: number,
    burstBytes: number,
    nowMs: number,
    peak?: { ratePerSecond: number; burstBytes: number },
  ) {
    this.#main = bucket(ratePerSecond, burstBytes, nowMs);
    this.#peak = peak && bucket(peak.ratePerSecond, peak.burstBytes, nowMs);
  }

  get ratePerSecond(): number {
    return this.#main.params.ratePerSecond;
  }
  get burstBytes(): number {
    return this.#main.params.capacity;
  }

  /** Brings both buckets up to `nowMs`. */
  #settle(nowMs: number): void {
    advance(this.#main.state, this.#main.params, nowMs);
    if (this.#peak !== undefined) advance(this.#peak.state, this.#peak.params, nowMs);
  }

  /** Takes `bytes` at `nowMs` if both buckets hold them; returns false (taking nothing) otherwise. */
  tryTake(nowMs: number, bytes: number): boolean {
    this.#settle(nowMs);
    const main = this.#main;
    if (main.state.tokens + main.slack < bytes) return false;
    const peak = this.#peak;
    if (peak !== undefined) {
      if (peak.state.tokens + peak.slack < bytes) return false;
      peak.state.tokens -= bytes;
    }
    main.state.tokens -= bytes;
    return true;
  }

  /** The largest piece that conforms now (fractional; compare, then floor). */
  available(nowMs: number): number {
    this.#settle(nowMs);
    const tokens = this.#main.state.tokens + this.#main.slack;
    const peak = this.#peak;
    return peak === undefined ? tokens : Math.min(tokens, peak.state.tokens + peak.slack);
  }

  /** Takes `bytes` from both buckets at `nowMs` (the caller has checked {@link available}). */
  take(nowMs: number, bytes: number): void {
    this.#settle(nowMs);
    this.#main.state.tokens -= bytes;
    if (this.#peak !== undefined) this.#peak.state.tokens -= bytes;
  }

  /** Milliseconds until `bytes` conform in both buckets (0 = now): TBF's max(-toks, -ptoks). */
  msUntil(nowMs: number, bytes: number): number {
    this.#settle(nowMs);
    const main = this.#main;
    const ms = msUntil(main.state.tokens, bytes, main.params);
    const peak = this.#peak;
    return peak === undefined ? ms : Math.max(ms, msUntil(peak.state.tokens, bytes, peak.params));
  }

  /** Changes the main rate from `nowMs` on; tokens earned so far are kept. */
  setRate(nowMs: number, ratePerSecond: number): void {
    this.#settle(nowMs);
    this.#main.params = { ...this.#main.params, ratePerSecond };
  }

  /** Changes the main capacity from `nowMs` on; tokens above it are dropped. */
  setBurst(nowMs: number, burstBytes: number): void {
    this.#settle(nowMs);
    resize(this.#main, burstBytes);
  }

  /** Changes the peak bucket (or adds one) from `nowMs` on; tokens above a smaller capacity are dropped. */
  setPeak(nowMs: number, peak: { ratePerSecond: number; burstBytes: number }): void {
    this.#settle(nowMs);
    if (this.#peak === undefined) {
      this.#peak = bucket(peak.ratePerSecond, peak.burstBytes, nowMs);
      return;
    }
    this.#peak.params = { ...this.#peak.params, ratePerSecond: peak.ratePerSecond };
    resize(this.#peak, peak.burstBytes);
  }
}

function resize(b: Bucket, capacity: number): void {
  b.params = { ...b.params, capacity };
  b.slack = slackFor(capacity);
  if (b.state.tokens > capacity) b.state.tokens = capacity;
}
