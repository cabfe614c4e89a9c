/**
 * TBF's two buckets over bytes, as the streams use them: the main bucket
 * (rate, burst) and, when a peak rate is set, the peak bucket (peakRate,
 * peakBurst), which caps how fast a burst itself drains. A piece of n bytes
 * conforms when both buckets hold n tokens; it then takes n from each. Both
 * start full.
 *
 * Built on the steps of ./bucket.ts and nothing else: the same refill, the
 * same charge, the same tolerance rule ({@link conforms}), the same "first
 * instant the tokens are there" ({@link readyAt}). No timers: the caller
 * passes the time.
 *
 * Every piece is charged at the time it passes, as TBF charges a packet when
 * it is dequeued: the refill up to that time is capped at the capacity, then
 * the piece is subtracted. So tokens earned while a stream was passing
 * pieces are kept (not lost as overflow), and the bucket never believes it
 * holds more than a real TBF would: both sides of burst + rate * T hold.
 * (Charging pieces that passed without a clock read at the next read, after
 * the cap, drops the tokens earned meanwhile whenever the bucket would have
 * been full in between; charging them before the cap overshoots the burst.)
 *
 * Passing a piece takes time: the reader gets it at some instant between the
 * clock read that decided it and the end of `push()`. A piece is taken at the
 * first ({@link take}) and done at a clock read after the second
 * ({@link done}): the refill in between counts only as far as it leaves room
 * for the piece, as if it had been charged at the end. So whenever in that
 * span a reader sees it, no window of T carries more than burst + rate * T.
 */

import {
  advance,
  type BucketParams,
  type BucketState,
  charge,
  clampToCapacity,
  conforms,
  largestConforming,
  readyAt,
  reconfigure,
  tokensAt,
} from './bucket.js';

/** A bucket's rate and capacity, in bytes. */
export interface ByteBucketParams {
  ratePerSecond: number;
  burstBytes: number;
}

/** One bucket's parameters and variables. */
interface Bucket {
  params: BucketParams;
  state: BucketState;
}

function bucket(ratePerSecond: number, burst: number, nowMs: number): Bucket {
  return { params: { ratePerSecond, burst }, state: { tokens: burst, updatedAtMs: nowMs } };
}

/**
 * `bytes` taken from `b` finished passing at `nowMs`: the refill up to then
 * stops at the capacity less `bytes`. Below that the bucket is left as it is
 * (its lazy refill gives the same tokens at every later read).
 */
function finish(b: Bucket, nowMs: number, bytes: number): void {
  const room = { ratePerSecond: b.params.ratePerSecond, burst: b.params.burst - bytes };
  if (tokensAt(b.state, b.params, nowMs) <= room.burst) return;
  advance(b.state, room, nowMs);
  clampToCapacity(b.state, room);
}

/** The largest piece `b` lets pass now (fractional): every n up to it conforms by the one tolerance rule. */
function room(b: Bucket): number {
  return largestConforming(b.state.tokens, b.params.burst);
}

/** TBF's two buckets over bytes; see the file's opening comment. */
export class ByteMeter {
  #main: Bucket;
  #peak: Bucket | undefined;

  constructor(ratePerSecond: number, burstBytes: number, nowMs: number, peak?: ByteBucketParams) {
    this.#main = bucket(ratePerSecond, burstBytes, nowMs);
    this.#peak = peak && bucket(peak.ratePerSecond, peak.burstBytes, nowMs);
  }

  get ratePerSecond(): number {
    return this.#main.params.ratePerSecond;
  }
  get burstBytes(): number {
    return this.#main.params.burst;
  }

  /** Brings both buckets up to `nowMs` (refill, capped at each capacity). */
  #settle(nowMs: number): void {
    advance(this.#main.state, this.#main.params, nowMs);
    if (this.#peak !== undefined) advance(this.#peak.state, this.#peak.params, nowMs);
  }

  /** Takes `bytes` at `nowMs` if both buckets hold them; returns false (taking nothing) otherwise. */
  tryTake(nowMs: number, bytes: number): boolean {
    this.#settle(nowMs);
    const main = this.#main;
    if (!conforms(main.state.tokens, bytes, main.params.burst)) return false;
    const peak = this.#peak;
    if (peak !== undefined) {
      if (!conforms(peak.state.tokens, bytes, peak.params.burst)) return false;
      charge(peak.state, peak.params, nowMs, bytes);
    }
    charge(main.state, main.params, nowMs, bytes);
    return true;
  }

  /** The largest piece that conforms now (fractional; compare, then floor). */
  available(nowMs: number): number {
    this.#settle(nowMs);
    const peak = this.#peak;
    return peak === undefined ? room(this.#main) : Math.min(room(this.#main), room(peak));
  }

  /** Takes `bytes` from both buckets at `nowMs` (the caller has checked {@link available}). */
  take(nowMs: number, bytes: number): void {
    charge(this.#main.state, this.#main.params, nowMs, bytes);
    if (this.#peak !== undefined) charge(this.#peak.state, this.#peak.params, nowMs, bytes);
  }

  /**
   * `bytes` taken earlier ({@link take}, {@link tryTake}) finished passing at
   * `nowMs`, a clock read after the reader had them: both buckets refill up
   * to `nowMs`, but only to their capacity less `bytes`, so the piece counts
   * as charged at `nowMs` (see the file's opening comment).
   */
  done(nowMs: number, bytes: number): void {
    finish(this.#main, nowMs, bytes);
    if (this.#peak !== undefined) finish(this.#peak, nowMs, bytes);
  }

  /**
   * The first instant at or after `nowMs` at which `bytes` conform in both
   * buckets (`nowMs` itself if they do now): TBF's max(-toks, -ptoks), by the
   * bucket's own rule, so a wake-up at that instant finds them.
   */
  readyAt(nowMs: number, bytes: number): number {
    this.#settle(nowMs);
    const main = this.#main;
    const mainMs = readyAt(main.state, main.params, bytes);
    const peak = this.#peak;
    const ms = peak === undefined ? mainMs : Math.max(mainMs, readyAt(peak.state, peak.params, bytes));
    return Math.max(nowMs, ms);
  }

  /** Milliseconds from `nowMs` until `bytes` conform in both buckets (0 = now); see {@link readyAt}. */
  msUntil(nowMs: number, bytes: number): number {
    return this.readyAt(nowMs, bytes) - nowMs;
  }

  /**
   * New main rate and burst from `nowMs` on: tokens earned so far are kept,
   * capped at the new burst (see {@link reconfigure}; TBF's `tbf_change`
   * refills the bucket instead, we hand out no burst on a change).
   */
  reconfigure(nowMs: number, main: ByteBucketParams): void {
    const next = { ratePerSecond: main.ratePerSecond, burst: main.burstBytes };
    reconfigure(this.#main.state, this.#main.params, nowMs, next);
    this.#main.params = next;
  }

  /** New peak bucket (or a first one, full) from `nowMs` on; as {@link reconfigure}. */
  reconfigurePeak(nowMs: number, peak: ByteBucketParams): void {
    const next = { ratePerSecond: peak.ratePerSecond, burst: peak.burstBytes };
    if (this.#peak === undefined) {
      this.#peak = bucket(next.ratePerSecond, next.burst, nowMs);
      return;
    }
    reconfigure(this.#peak.state, this.#peak.params, nowMs, next);
    this.#peak.params = next;
  }
}
