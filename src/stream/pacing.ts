/**
 * Pacing rules shared by `Throttle` and `ThrottleGroup`, pure functions of
 * (rate, burst, timer lateness): the smallest burst Node's timers can sustain
 * a rate with, the default burst, the piece a waiting stream wakes up for,
 * and a group's quantum. (The byte meter is meters/byte-meter.ts; the timer,
 * timer.ts.)
 *
 * The wake-piece rule: refill is lazy, so a stream that sleeps for a piece P
 * and wakes L ms late loses no rate as long as P + rate * L <= burst. With P
 * at least half the burst and L at least {@link TIMER_SLACK_MS}, a burst must
 * hold rate x 10 ms ({@link minBurstBytes}; TBF's burst >= rate / HZ). The
 * default burst is 100 ms of the rate, at least two 64 KiB chunks where that
 * is at most 250 ms of it, and at least 1 KiB ({@link defaultBurstBytes}); a
 * group's is 50 ms ({@link defaultGroupBurstBytes}). Every size returned is
 * whole bytes, at least 1, and a wake piece is never above the burst.
 * docs/internals/streams.md gives the reasoning and the measurements.
 */

import { BurstTooSmallError, InvalidRateError, InvalidSizeError } from '../errors.js';
import { MAX_BURST, MAX_RATE } from '../meters/bucket.js';
import { expectedLatenessMs } from '../timer.js';
import { describeBytes, describeRate } from '../units.js';

/** How late we assume a timer may fire, ms: the 1 ms resolution plus Node's usual lateness, with margin. */
export const TIMER_SLACK_MS = 5;
/** How late a timer may fire without costing rate, for bursts of at least 20 ms of the rate. */
export const LATE_TOLERANCE_MS = 10;
/** A lone stream's default burst, in ms of the rate (docs/internals/streams.md says why 100). */
export const DEFAULT_BURST_MS = 100;
/** A group's default burst, in ms of its rate ({@link defaultGroupBurstBytes}). */
export const GROUP_DEFAULT_BURST_MS = 50;
/** The default burst holds at least this many bytes, two 64 KiB chunks, where that is at most {@link MAX_WAKE_MS} of the rate. */
export const DEFAULT_BURST_CHUNK_BYTES = 2 * 64 * 1024;
/** The smallest default burst, bytes: below it pieces are too small to be worth a wake-up. */
export const DEFAULT_BURST_FLOOR_BYTES = 1024;
/**
 * How much before the instant its piece conforms a lone stream lets its
 * timer wake it, ms. Node's timers fire up to about a millisecond early by
 * `performance.now()` (they start from the event loop's cached time), and the
 * watchdog (timer.ts) never calls back early: it would arm again for the
 * rest, a second wake-up for the same piece (one wake-up in ten at 1 MiB/s,
 * measured). A stream woken a little early passes what has conformed by then,
 * at most this much of the rate short of its wake piece; less than one
 * millisecond, so a wait of whole milliseconds on a fake clock is exact.
 */
export const EARLY_WAKE_MS = 0.9;
/** The group's default round-robin quantum, in ms of the group's rate (and at least 1 KiB). */
export const DEFAULT_QUANTUM_MS = 5;
/** The longest a busy stream sleeps between pieces, ms: at low rates the 1 KiB burst floor would make pieces seconds apart. */
export const MAX_WAKE_MS = 250;

/*
 * The largest rate (bytes per second) and burst (bytes) a stream or group
 * supports are meters/bucket.ts's MAX_RATE and MAX_BURST, 2^53 (8 PiB/s), the
 * same limit as `TokenBucket` and `Scheduler`. Up to it every whole count of
 * bytes is exact in a double; beyond it (1e308, say) the default burst is
 * infinite and a wait of one byte rounds to no time.
 */
export { MAX_BURST, MAX_RATE };

/** Throws `InvalidRateError` for a rate above {@link MAX_RATE}; `what` names the option. */
export function checkRateLimit(ratePerSecond: number, input: unknown, what = 'rate'): void {
  if (ratePerSecond <= MAX_RATE) return;
  throw new InvalidRateError(
    input,
    `invalid ${what} ${describeRate(ratePerSecond)}: the largest supported is 2^53 (${MAX_RATE}) bytes per second`,
  );
}

/** Throws `InvalidSizeError` for a burst above {@link MAX_BURST}; `what` names the option. */
export function checkBurstLimit(bytes: number, input: unknown, what = 'burst'): void {
  if (bytes <= MAX_BURST) return;
  throw new InvalidSizeError(
    input,
    `invalid ${what} ${describeBytes(bytes)}: the largest supported is 2^53 (${MAX_BURST}) bytes`,
  );
}

/** The smallest burst that sustains `ratePerSecond` (bytes/s): twice the bytes earned in {@link TIMER_SLACK_MS}. */
export function minBurstBytes(ratePerSecond: number): number {
  return Math.max(1, Math.ceil((ratePerSecond * 2 * TIMER_SLACK_MS) / 1000));
}

/**
 * The default burst for `ratePerSecond`: 100 ms of the rate, at least two
 * 64 KiB chunks if that is at most 250 ms of the rate, and at least 1 KiB
 * (docs/internals/streams.md says why).
 *
 * @example defaultBurstBytes(10 * 2 ** 20) === 1048576; defaultBurstBytes(2 ** 20) === 131072; defaultBurstBytes(2 ** 18) === 65536
 */
export function defaultBurstBytes(ratePerSecond: number): number {
  const timeBytes = Math.ceil((ratePerSecond * DEFAULT_BURST_MS) / 1000);
  const chunkBytes = Math.min(DEFAULT_BURST_CHUNK_BYTES, Math.ceil((ratePerSecond * MAX_WAKE_MS) / 1000));
  return Math.max(DEFAULT_BURST_FLOOR_BYTES, timeBytes, chunkBytes);
}

/**
 * The piece a waiting stream wakes up for, whole bytes, by the wake-piece
 * rule (this file's opening comment); `lateMs` is the lateness estimate, and
 * `defaultBytes` the default burst a larger burst counts as (a group's is
 * {@link defaultGroupBurstBytes}).
 *
 * @example wakePieceBytes(1000, 100) === 90; wakePieceBytes(1000, 12) === 6; wakePieceBytes(1000, 100, 20) === 70
 */
export function wakePieceBytes(
  ratePerSecond: number,
  capacityBytes: number,
  lateMs = 0,
  defaultBytes = defaultBurstBytes(ratePerSecond),
): number {
  const capacity = Math.min(capacityBytes, defaultBytes);
  const toleranceMs = expectedLatenessMs(lateMs, LATE_TOLERANCE_MS);
  const piece = Math.max(capacity / 2, capacity - (ratePerSecond * toleranceMs) / 1000);
  return Math.max(1, Math.floor(Math.min(piece, (ratePerSecond * MAX_WAKE_MS) / 1000)));
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
  capacityBytes: number,
  quantumBytes: number,
  lateMs = 0,
): number {
  const wake = wakePieceBytes(ratePerSecond, capacityBytes, lateMs, defaultGroupBurstBytes(ratePerSecond));
  const piece = Math.max(wake / 2, wake - (ratePerSecond * GROUP_HOLD_MS) / 1000, Math.min(quantumBytes, wake));
  return Math.max(1, Math.floor(piece));
}

/**
 * The longest a group sleeps while children with guaranteed rates wait, ms
 * of its rate (and a subgroup with a guarantee, on its own rate). A window
 * of 100 ms may hold one wake-up fewer than the next: it misses at most this
 * much (and 1 ms of the timer's rounding) of a child's share, so a child
 * whose share is 1.1 times its guarantee or more passes its guarantee in
 * every such window.
 */
export const GUARANTEE_WAKE_MS = 8;

/**
 * The piece a group sleeps for while children with guaranteed rates wait:
 * {@link GUARANTEE_WAKE_MS} of its rate, at most `wakeBytes` (its wake piece),
 * whole bytes, at least 1.
 *
 * @example guaranteeWakePieceBytes(1000, 75) === 8
 */
export function guaranteeWakePieceBytes(ratePerSecond: number, wakeBytes: number): number {
  return Math.max(1, Math.min(wakeBytes, Math.floor((ratePerSecond * GUARANTEE_WAKE_MS) / 1000)));
}

/**
 * With default quanta, the longest a round of a group's deficit round robin
 * lasts, ms: once its members' quanta add up to more than this much of the
 * rate, every turn shrinks in proportion, so that each member is served at
 * least this often however many there are (with 1,000 members a round of 5 ms
 * quanta took 5 s). Linux's DRR keeps a round short the same way, with a
 * quantum of about one MTU.
 */
export const MAX_ROUND_MS = 125;
/** A turn shrunk to keep a round short is still at least this many bytes (or the quantum, if smaller): pieces smaller cost more CPU than they are worth. */
export const MIN_TURN_BYTES = 1024;

/**
 * The most one visit of a group's ring passes, ms of the root's rate: a child
 * that holds its whole turn ready (large buffers) then still passes it in
 * pieces all through the round, as a child that holds one chunk does, and
 * no 100 ms window sees a lump of it.
 */
export const VISIT_MS = 1;

/**
 * The most one visit passes: {@link VISIT_MS} of `ratePerSecond`, at least {@link MIN_TURN_BYTES}.
 *
 * @example visitLimitBytes(8 * 1048576) === 8389
 */
export function visitLimitBytes(ratePerSecond: number): number {
  return Math.max(MIN_TURN_BYTES, Math.ceil((ratePerSecond * VISIT_MS) / 1000));
}

/** A round of a class's deficit round robin: how long it lasts and the bytes its turns share beyond the guaranteed rates. */
export interface RoundPlan {
  roundMs: number;
  excessBytes: number;
}

/**
 * The round of a group of `ratePerSecond` whose waiting members weigh
 * `weight` together and are guaranteed `guaranteedPerSecond` together: a
 * quantum of the rate left beyond the guarantees per unit of weight, and with
 * the default quantum (`explicit` false) at most {@link MAX_ROUND_MS} of it.
 *
 * @example roundPlan(1000, 3, 0, 50, true) // { roundMs: 150, excessBytes: 150 }
 */
export function roundPlan(
  ratePerSecond: number,
  weight: number,
  guaranteedPerSecond: number,
  quantumBytes: number,
  explicit: boolean,
): RoundPlan {
  const excessPerSecond = Math.max(0, ratePerSecond - guaranteedPerSecond);
  const excessBytes = quantumBytes * weight;
  const roundMs = excessPerSecond > 0 ? (excessBytes * 1000) / excessPerSecond : MAX_ROUND_MS;
  if (explicit || roundMs <= MAX_ROUND_MS) return { roundMs, excessBytes };
  return { roundMs: MAX_ROUND_MS, excessBytes: (excessPerSecond * MAX_ROUND_MS) / 1000 };
}

/**
 * The turn of a member of `weight` and `guaranteedPerSecond` in a round of
 * `plan` among members weighing `totalWeight`: its weight's part of the
 * round's excess (at least `floorBytes` per unit of weight, so that small
 * rounds keep the weights' proportions), plus its guaranteed rate for
 * `guaranteeMs` (the length of the last round, measured, so that what a
 * member leaves of its turn shortens the next round for the guarantees too,
 * and is shared by weight); whole bytes, at least 1.
 *
 * @example turnBytes({ roundMs: 100, excessBytes: 2200 }, 11, 1, 8000, 100, 1) === 1000 // 800 + 2200 / 11
 */
export function turnBytes(
  plan: RoundPlan,
  totalWeight: number,
  weight: number,
  guaranteedPerSecond: number,
  guaranteeMs: number,
  floorBytes: number,
): number {
  const perWeight = Math.max(floorBytes, totalWeight > 0 ? plan.excessBytes / totalWeight : plan.excessBytes);
  return Math.max(1, Math.floor((guaranteedPerSecond * guaranteeMs) / 1000 + perWeight * weight));
}

/** The group's default DRR quantum: 5 ms of its rate, at least 1 KiB, at most half the burst and at most a wake piece. */
export function defaultQuantumBytes(ratePerSecond: number, capacityBytes: number): number {
  const quantum = Math.max(DEFAULT_BURST_FLOOR_BYTES, Math.ceil((ratePerSecond * DEFAULT_QUANTUM_MS) / 1000));
  const wake = wakePieceBytes(ratePerSecond, capacityBytes, 0, defaultGroupBurstBytes(ratePerSecond));
  return Math.max(1, Math.min(quantum, Math.floor(capacityBytes / 2), wake));
}

/**
 * A group's default burst: 50 ms of its rate, at least 1 KiB, without the
 * chunk floor of {@link defaultBurstBytes}. A group wakes for a piece of its
 * own burst and serves members in turns; a member with a cap of its own
 * waits for the group's wake-up with its own bucket full, so the group must
 * wake well within a member's burst (a group burst of 250 ms would make a
 * member capped at 50 kB/s lose a sixth of its rate).
 */
export function defaultGroupBurstBytes(ratePerSecond: number): number {
  return Math.max(DEFAULT_BURST_FLOOR_BYTES, Math.ceil((ratePerSecond * GROUP_DEFAULT_BURST_MS) / 1000));
}

/** The peak bucket's default capacity before the cap at the burst: 10 ms of the peak rate, at least 1 KiB. */
export function defaultPeakBurstBytes(peakPerSecond: number): number {
  return Math.max(DEFAULT_BURST_FLOOR_BYTES, Math.ceil(peakPerSecond / 100));
}

/** The default burst and where it comes from: `'1 MiB (rate x 100 ms)'`, `'128 KiB (two 64 KiB chunks)'`. */
export function describeDefaultBurst(ratePerSecond: number): string {
  const bytes = defaultBurstBytes(ratePerSecond);
  const why =
    bytes === DEFAULT_BURST_CHUNK_BYTES && bytes > Math.ceil((ratePerSecond * DEFAULT_BURST_MS) / 1000)
      ? 'two 64 KiB chunks'
      : bytes === DEFAULT_BURST_FLOOR_BYTES
        ? 'the 1 KiB floor'
        : bytes === Math.ceil((ratePerSecond * DEFAULT_BURST_MS) / 1000)
          ? `rate x ${DEFAULT_BURST_MS} ms`
          : `rate x ${MAX_WAKE_MS} ms`;
  return `${describeBytes(bytes)} (${why})`;
}

/**
 * Throws `BurstTooSmallError` for a burst the timers cannot sustain `ratePerSecond` with.
 * @param what names the option in the message: `'burst'`, `'peakBurst'`
 */
export function checkBurst(ratePerSecond: number, capacityBytes: number, what = 'burst'): void {
  const minBurst = minBurstBytes(ratePerSecond);
  if (capacityBytes >= minBurst) return;
  throw new BurstTooSmallError(
    capacityBytes,
    minBurst,
    `${what} ${describeBytes(capacityBytes)} is too small to sustain ${describeRate(ratePerSecond)}: ` +
      `timers fire up to ~${TIMER_SLACK_MS} ms late, and tokens that arrive while a full bucket waits are lost; ` +
      `use a ${what} of at least ${describeBytes(minBurst)} (rate x ${2 * TIMER_SLACK_MS} ms), ` +
      `or leave it unset for the default of ${describeDefaultBurst(ratePerSecond)}`,
  );
}

/**
 * Throws `BurstTooSmallError` for a peak bucket the timers cannot sustain `peakPerSecond` with: the
 * same rule as for the main bucket ({@link checkBurst}), against the peak
 * rate. A peak bucket too small drains a burst well below the peak rate (a
 * 16 KiB peak bucket at 64 MiB/s passes ~15 MiB/s). The peak bucket must
 * also fit in the main one, so when the smallest that works is above
 * `capacityBytes` the message says to raise the burst as well.
 */
export function checkPeakBurst(peakPerSecond: number, peakCapacityBytes: number, capacityBytes: number): void {
  const minPeak = minBurstBytes(peakPerSecond);
  if (peakCapacityBytes >= minPeak) return;
  const alsoBurst =
    minPeak > capacityBytes
      ? ` and a burst at least as large (it is ${describeBytes(capacityBytes)}), or a lower peakRate`
      : `, or leave it unset for the default of ${describeBytes(Math.min(capacityBytes, defaultPeakBurstBytes(peakPerSecond)))}`;
  throw new BurstTooSmallError(
    peakCapacityBytes,
    minPeak,
    `peakBurst ${describeBytes(peakCapacityBytes)} is too small to sustain peakRate ${describeRate(peakPerSecond)}: ` +
      `timers fire up to ~${TIMER_SLACK_MS} ms late, and the peak bucket would drain a burst below its peak rate; ` +
      `use a peakBurst of at least ${describeBytes(minPeak)} (peakRate x ${2 * TIMER_SLACK_MS} ms)${alsoBurst}`,
  );
}
