/**
 * Three-colour markers: `srTCM` (RFC 2697) and `trTCM` (RFC 2698).
 *
 * A marker meters each packet (or request) of size B and colours it green,
 * yellow or red; what a colour means (forward, forward at a lower priority,
 * drop) is up to the caller. Both run in one of two modes: colour-blind (the
 * stream is uncoloured) or colour-aware (each packet arrives pre-coloured by
 * some earlier element, and a marker never makes a packet greener).
 *
 * srTCM, RFC 2697. One rate, CIR, and two buckets, C of size CBS and E of
 * size EBS, both full at the start. The RFC updates them CIR times a second:
 * if Tc < CBS, Tc is incremented by one, else if Te < EBS, Te is incremented
 * by one, else neither. So E fills only with what overflows C. Here the same
 * refill is computed lazily from the elapsed time: C takes what it can hold,
 * and the overflow goes to E. On a packet of size B at time t:
 *
 *   colour-blind:  Tc - B >= 0 -> green, Tc -= B
 *                  else Te - B >= 0 -> yellow, Te -= B
 *                  else red (nothing is decremented)
 *   colour-aware:  pre-green and Tc - B >= 0 -> green, Tc -= B
 *                  else (pre-green or pre-yellow) and Te - B >= 0 -> yellow, Te -= B
 *                  else red
 *
 * trTCM, RFC 2698. Two rates, PIR >= CIR, and two independent buckets, P of
 * size PBS refilled at PIR and C of size CBS refilled at CIR, both full at
 * the start. On a packet of size B at time t:
 *
 *   colour-blind:  Tp - B < 0 -> red
 *                  else Tc - B < 0 -> yellow, Tp -= B
 *                  else green, Tp -= B and Tc -= B
 *   colour-aware:  pre-red or Tp - B < 0 -> red
 *                  else pre-yellow or Tc - B < 0 -> yellow, Tp -= B
 *                  else green, Tp -= B and Tc -= B
 *
 * Worked example (srTCM, CIR 1000 B/s, CBS 1500, EBS 3000, colour-blind):
 * packets of 1000 B at t = 0, 0, 0, 0: green (Tc 500), yellow (Te 2000),
 * yellow (Te 1000), yellow (Te 0); a fifth at 0 is red. At t = 1 s, 1000
 * tokens have come: C takes them all (Tc 1500, it held 500), none overflow
 * into E, so a packet of 1000 is green and the next is red (Tc 500, Te 0).
 *
 * Sizes are in bytes in the RFCs; any cost unit works (requests, for 1 each).
 * A packet larger than a bucket simply does not fit it (RFC 2697 recommends
 * CBS and EBS at least the largest packet), so it is never an error here, only
 * yellow or red. Rates are per second; time that goes backwards counts as no
 * time at all.
 */

import { type Clock, systemClock } from '../clock.js';
import { InvalidOptionError, InvalidSizeError } from '../errors.js';
import { parseRateOption, parseSizeOption, type RateInput, type SizeInput } from '../units.js';

/** A packet's colour. */
export type Color = 'green' | 'yellow' | 'red';

/** `'color-blind'` (the default) or `'color-aware'`. */
export type ColorMode = 'color-blind' | 'color-aware';

/** srTCM parameters (RFC 2697, section 2). */
export interface SrTcmParams {
  /** Committed Information Rate, per second. */
  cir: number;
  /** Committed Burst Size. */
  cbs: number;
  /** Excess Burst Size. */
  ebs: number;
}

/** srTCM variables: the two token counts and when they were last brought up to date. */
export interface SrTcmState {
  tc: number;
  te: number;
  updatedAtMs: number;
}

/** trTCM parameters (RFC 2698, section 2). */
export interface TrTcmParams {
  /** Peak Information Rate, per second (>= cir). */
  pir: number;
  /** Peak Burst Size. */
  pbs: number;
  /** Committed Information Rate, per second. */
  cir: number;
  /** Committed Burst Size. */
  cbs: number;
}

/** trTCM variables. */
export interface TrTcmState {
  tp: number;
  tc: number;
  updatedAtMs: number;
}

/** Brings an srTCM's buckets up to `nowMs`: C fills first, its overflow goes to E. */
export function srTcmAdvance(state: SrTcmState, params: SrTcmParams, nowMs: number): void {
  const elapsedMs = nowMs - state.updatedAtMs;
  if (!(elapsedMs > 0)) return;
  state.updatedAtMs = nowMs;
  const earned = (elapsedMs * params.cir) / 1000;
  const room = params.cbs - state.tc;
  if (earned <= room) {
    state.tc += earned;
    return;
  }
  state.tc = params.cbs;
  state.te = Math.min(params.ebs, state.te + (earned - room));
}

/** Colours a packet of `size` at `nowMs` (RFC 2697, section 3) and decrements the bucket it conforms to. */
export function srTcmMark(
  state: SrTcmState,
  params: SrTcmParams,
  nowMs: number,
  size: number,
  preColor?: Color,
): Color {
  srTcmAdvance(state, params, nowMs);
  const blind = preColor === undefined;
  if ((blind || preColor === 'green') && state.tc - size >= 0) {
    state.tc -= size;
    return 'green';
  }
  if ((blind || preColor === 'green' || preColor === 'yellow') && state.te - size >= 0) {
    state.te -= size;
    return 'yellow';
  }
  return 'red';
}

/** Brings a trTCM's buckets up to `nowMs`: each fills at its own rate. */
export function trTcmAdvance(state: TrTcmState, params: TrTcmParams, nowMs: number): void {
  const elapsedMs = nowMs - state.updatedAtMs;
  if (!(elapsedMs > 0)) return;
  state.updatedAtMs = nowMs;
  state.tp = Math.min(params.pbs, state.tp + (elapsedMs * params.pir) / 1000);
  state.tc = Math.min(params.cbs, state.tc + (elapsedMs * params.cir) / 1000);
}

/** Colours a packet of `size` at `nowMs` (RFC 2698, section 3) and decrements the buckets it conforms to. */
export function trTcmMark(
  state: TrTcmState,
  params: TrTcmParams,
  nowMs: number,
  size: number,
  preColor?: Color,
): Color {
  trTcmAdvance(state, params, nowMs);
  if (preColor === 'red' || state.tp - size < 0) return 'red';
  if (preColor === 'yellow' || state.tc - size < 0) {
    state.tp -= size;
    return 'yellow';
  }
  state.tp -= size;
  state.tc -= size;
  return 'green';
}

const COLORS: readonly string[] = ['green', 'yellow', 'red'];

function checkMode(mode: unknown): ColorMode {
  if (mode === undefined || mode === 'color-blind') return 'color-blind';
  if (mode === 'color-aware') return 'color-aware';
  throw new InvalidOptionError(
    'mode',
    mode,
    `Expected \`mode\` to be 'color-blind' or 'color-aware', got ${String(mode)}`,
  );
}

function checkSize(size: number): void {
  if (!(size >= 0 && Number.isFinite(size))) {
    throw new InvalidSizeError(size, `invalid packet size ${size}: expected a finite number >= 0`);
  }
}

/** The pre-colour to meter with: none in colour-blind mode; required (and valid) in colour-aware mode. */
function checkPreColor(mode: ColorMode, preColor: unknown): Color | undefined {
  if (mode === 'color-blind') {
    if (preColor !== undefined) {
      throw new InvalidOptionError(
        'preColor',
        preColor,
        `a colour-blind marker ignores colours, got preColor ${String(preColor)}: create it with mode: 'color-aware'`,
      );
    }
    return undefined;
  }
  if (typeof preColor === 'string' && COLORS.includes(preColor)) return preColor as Color;
  throw new InvalidOptionError(
    'preColor',
    preColor,
    `a colour-aware marker needs each packet's colour: expected 'green', 'yellow' or 'red', got ${String(preColor)}`,
  );
}

/** A bucket size that may be zero (RFC 2697 lets one of CBS and EBS be 0). */
function sizeOrZero(input: SizeInput | undefined, option: string): number {
  if (input === 0) return 0;
  if (input === undefined) {
    throw new InvalidSizeError(input, `invalid ${option} undefined: expected a number >= 0 or a size such as "64KiB"`);
  }
  return parseSizeOption(input, option);
}

/** Options for {@link srTCM}. */
export interface SrTcmOptions {
  /** Committed Information Rate: per second, or a string such as `'1MiB/s'`, `'8mbit'`. */
  cir: RateInput;
  /** Committed Burst Size (bucket C). At least one of cbs and ebs must be above 0. */
  cbs: SizeInput;
  /** Excess Burst Size (bucket E), filled only by C's overflow. */
  ebs: SizeInput;
  /** @default 'color-blind' */
  mode?: ColorMode;
  /** The time source. @default systemClock */
  clock?: Clock;
}

/**
 * The single rate three colour marker of RFC 2697.
 *
 * @example
 * const m = new srTCM({ cir: '1MiB/s', cbs: '64KiB', ebs: '128KiB' });
 * m.mark(1500); // 'green' | 'yellow' | 'red'
 */
export class srTCM {
  readonly #params: SrTcmParams;
  readonly #state: SrTcmState;
  readonly #clock: Clock;
  readonly #mode: ColorMode;

  constructor(options: SrTcmOptions) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError(
        'options',
        options,
        "expected an options object such as { cir: '1MiB/s', cbs: 1500, ebs: 3000 }",
      );
    }
    const cir = parseRateOption(options.cir, 'cir');
    const cbs = sizeOrZero(options.cbs, 'cbs');
    const ebs = sizeOrZero(options.ebs, 'ebs');
    if (cbs === 0 && ebs === 0) {
      throw new InvalidOptionError(
        'cbs',
        0,
        'cbs and ebs are both 0: at least one must be above 0 (RFC 2697, section 2)',
      );
    }
    this.#mode = checkMode(options.mode);
    this.#params = { cir, cbs, ebs };
    this.#clock = options.clock ?? systemClock;
    this.#state = { tc: cbs, te: ebs, updatedAtMs: this.#clock.now() };
  }

  /** `'color-blind'` or `'color-aware'`. */
  get mode(): ColorMode {
    return this.#mode;
  }

  /** The parameters, in tokens and tokens per second. */
  get params(): Readonly<SrTcmParams> {
    return { ...this.#params };
  }

  /** The token counts now: `{ tc, te }`. */
  get tokens(): { tc: number; te: number } {
    return this.tokensAt(this.#clock.now());
  }

  /** The token counts at `nowMs`, without changing anything. */
  tokensAt(nowMs: number): { tc: number; te: number } {
    const state = { ...this.#state };
    srTcmAdvance(state, this.#params, nowMs);
    return { tc: state.tc, te: state.te };
  }

  /** Colours a packet of `size` now. `preColor` is required in colour-aware mode and refused in colour-blind mode. */
  mark(size: number, preColor?: Color): Color {
    return this.markAt(this.#clock.now(), size, preColor);
  }

  /** {@link mark} at an explicit time. */
  markAt(nowMs: number, size: number, preColor?: Color): Color {
    checkSize(size);
    return srTcmMark(this.#state, this.#params, nowMs, size, checkPreColor(this.#mode, preColor));
  }
}

/** Options for {@link trTCM}. */
export interface TrTcmOptions {
  /** Peak Information Rate, at least `cir`. */
  pir: RateInput;
  /** Peak Burst Size (bucket P), above 0. */
  pbs: SizeInput;
  /** Committed Information Rate. */
  cir: RateInput;
  /** Committed Burst Size (bucket C), above 0. */
  cbs: SizeInput;
  /** @default 'color-blind' */
  mode?: ColorMode;
  /** The time source. @default systemClock */
  clock?: Clock;
}

/**
 * The two rate three colour marker of RFC 2698.
 *
 * @example
 * const m = new trTCM({ pir: '2MiB/s', pbs: '64KiB', cir: '1MiB/s', cbs: '64KiB' });
 * m.mark(1500); // red above the peak rate, yellow above the committed rate, else green
 */
export class trTCM {
  readonly #params: TrTcmParams;
  readonly #state: TrTcmState;
  readonly #clock: Clock;
  readonly #mode: ColorMode;

  constructor(options: TrTcmOptions) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError(
        'options',
        options,
        'expected an options object such as { pir: 2000, pbs: 3000, cir: 1000, cbs: 1500 }',
      );
    }
    const pir = parseRateOption(options.pir, 'pir');
    const cir = parseRateOption(options.cir, 'cir');
    const pbs = parseSizeOption(options.pbs, 'pbs');
    const cbs = parseSizeOption(options.cbs, 'cbs');
    if (pir < cir) {
      throw new InvalidOptionError(
        'pir',
        options.pir,
        `pir (${pir}/s) must be at least cir (${cir}/s) (RFC 2698, section 2)`,
      );
    }
    this.#mode = checkMode(options.mode);
    this.#params = { pir, pbs, cir, cbs };
    this.#clock = options.clock ?? systemClock;
    this.#state = { tp: pbs, tc: cbs, updatedAtMs: this.#clock.now() };
  }

  /** `'color-blind'` or `'color-aware'`. */
  get mode(): ColorMode {
    return this.#mode;
  }

  /** The parameters, in tokens and tokens per second. */
  get params(): Readonly<TrTcmParams> {
    return { ...this.#params };
  }

  /** The token counts now: `{ tp, tc }`. */
  get tokens(): { tp: number; tc: number } {
    return this.tokensAt(this.#clock.now());
  }

  /** The token counts at `nowMs`, without changing anything. */
  tokensAt(nowMs: number): { tp: number; tc: number } {
    const state = { ...this.#state };
    trTcmAdvance(state, this.#params, nowMs);
    return { tp: state.tp, tc: state.tc };
  }

  /** Colours a packet of `size` now. `preColor` is required in colour-aware mode and refused in colour-blind mode. */
  mark(size: number, preColor?: Color): Color {
    return this.markAt(this.#clock.now(), size, preColor);
  }

  /** {@link mark} at an explicit time. */
  markAt(nowMs: number, size: number, preColor?: Color): Color {
    checkSize(size);
    return trTcmMark(this.#state, this.#params, nowMs, size, checkPreColor(this.#mode, preColor));
  }
}
