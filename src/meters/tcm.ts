/**
 * Three-colour markers: `srTCM` (RFC 2697) and `trTCM` (RFC 2698).
 *
 * A marker meters each packet (or request) of size B and colours it green,
 * yellow or red; what a colour means is up to the caller. Colour-blind mode
 * meters an uncoloured stream; colour-aware mode takes each packet's colour
 * from an earlier element and never makes it greener.
 *
 * Tokens arrive whole, as in the RFCs ("incremented by one CIR times per
 * second"): a rate of R a second adds one token at each instant t0 + k / R
 * (k = 1, 2, ...; t0 the marker's creation), whether or not there is room.
 * Time is counted in whole nanoseconds since the creation (rounded from the
 * clock's milliseconds), the rate as the fraction it stands for (100/60 is
 * 5/3), and the way to the next token as an exact integer remainder, so no
 * token is lost or gained however long the run or the idle period.
 * `refill: 'continuous'` instead adds fractions of a token as time passes:
 * not the RFCs' form.
 * Reasoning and the differences from DPDK's rte_meter: docs/internals/tcm.md.
 *
 * srTCM: rate CIR, buckets C (CBS) and E (EBS), both full at the start. A
 * token goes to C; if C is full, to E; if both are full, it is lost.
 *   blind: Tc >= B -> green, Tc -= B; else Te >= B -> yellow, Te -= B; else red
 *   aware: as blind, but only a green packet may use C, a red one nothing.
 * trTCM: P (PBS) at PIR and C (CBS) at CIR, independent, both full at first.
 *   blind: Tp < B -> red; else Tc < B -> yellow, Tp -= B; else green, both -= B
 *   aware: a red packet is red; a yellow one is at best yellow.
 * A red packet takes nothing; a packet is never split across buckets, and one
 * larger than a bucket simply does not fit it (never an error).
 *
 * Worked example (srTCM, CIR 1250/s, CBS 10, EBS 20, blind): 20 B at 0 ms is
 * yellow (Te 0). The token of 0.8 ms finds C full: Te 1. 10 B at 1 ms is green
 * (Tc 0). The tokens of 1.6 and 2.4 ms go to C, so 2 B at 2.5 ms is green.
 */

import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, InvalidOptionError, InvalidSizeError } from '../errors.js';
import { parseRateOption, parseSizeOption, type RateInput, type SizeInput } from '../units.js';

/** A packet's colour. */
export type Color = 'green' | 'yellow' | 'red';

/** `'color-blind'` (the default) or `'color-aware'`. */
export type ColorMode = 'color-blind' | 'color-aware';

/**
 * How a marker's tokens arrive. `'discrete'` (the default): whole tokens, one
 * each 1/rate seconds, as RFC 2697 and RFC 2698 define it. `'continuous'`:
 * fractions of a token as time passes; not the RFCs' form (at fractional
 * times it holds fractional tokens, so it marks more strictly).
 */
export type TcmRefill = 'discrete' | 'continuous';

/** srTCM parameters (RFC 2697, section 2). */
export interface SrTcmParams {
  /** Committed Information Rate, per second. */
  cir: number;
  /** Committed Burst Size. */
  cbs: number;
  /** Excess Burst Size. */
  ebs: number;
}

/** srTCM variables: the two token counts. */
export interface SrTcmState {
  tc: number;
  te: number;
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
}

/** Where a bucket's tokens come from. */
interface Refill {
  /** The tokens that arrived after the last call and by `nowMs`; time that goes backwards brings none. */
  advance(nowMs: number): number;
  /** An independent copy, to look ahead without changing this one. */
  copy(): Refill;
}

const NS_PER_MS = 1e6;
/** Doubles hold every integer up to here. */
const EXACT = Number.MAX_SAFE_INTEGER;

/** A rate as tokens per nanosecond, `num / den` in lowest terms. */
interface TokenRate {
  num: number;
  den: number;
  bigNum: bigint;
  bigDen: bigint;
  /** True if num and 2 * den are exact in doubles; else only the BigInt path runs. */
  fits: boolean;
  /** Steps of up to this many ns keep every integer below 2^53: the doubles' path. */
  fastNs: number;
}

function tokenRate(perSecond: number): TokenRate {
  const [p, q] = simplestFraction(perSecond);
  const divisor = gcd(p, q * 1_000_000_000n);
  const bigNum = p / divisor;
  const bigDen = (q * 1_000_000_000n) / divisor;
  const fits = bigNum <= BigInt(EXACT) && 2n * bigDen <= BigInt(EXACT);
  const num = Number(bigNum);
  const den = Number(bigDen);
  // One less than the quotient, in case the division rounded up to the next integer.
  const fastNs = fits ? Math.floor((EXACT - 2 * den) / num) - 1 : -1;
  return { num, den, bigNum, bigDen, fits, fastNs };
}

/**
 * Whole tokens at discrete times: one each 1e9 / rate ns after the origin.
 * Time is whole ns since the origin, `round((nowMs - originMs) * 1e6)`: a
 * function of `nowMs` alone, so rounding never adds up. Each ns adds `num`
 * units and a token costs `den`; the phase (0 <= phase < den) is what has been
 * paid toward the next one. Exact integers throughout: in doubles while they
 * stay below 2^53, in BigInt beyond.
 */
class WholeTokens implements Refill {
  #atNs = 0;
  #phase = 0;
  #bigPhase = 0n;

  constructor(
    readonly rate: TokenRate,
    readonly originMs: number,
  ) {}

  advance(nowMs: number): number {
    const nowNs = Math.round((nowMs - this.originMs) * NS_PER_MS);
    const elapsedNs = nowNs - this.#atNs;
    if (!(elapsedNs > 0 && elapsedNs < Number.POSITIVE_INFINITY)) return 0;
    this.#atNs = nowNs;
    const rate = this.rate;
    if (elapsedNs > rate.fastNs) return this.#advanceBig(elapsedNs);
    let units = this.#phase + elapsedNs * rate.num;
    let tokens = Math.floor(units / rate.den);
    units -= tokens * rate.den;
    if (units < 0) {
      tokens--;
      units += rate.den;
    } else if (units >= rate.den) {
      tokens++;
      units -= rate.den;
    }
    this.#phase = units;
    return tokens;
  }

  #advanceBig(elapsedNs: number): number {
    const { bigNum, bigDen, fits } = this.rate;
    const units = (fits ? BigInt(this.#phase) : this.#bigPhase) + BigInt(elapsedNs) * bigNum;
    if (fits) this.#phase = Number(units % bigDen);
    else this.#bigPhase = units % bigDen;
    return Number(units / bigDen);
  }

  copy(): WholeTokens {
    const twin = new WholeTokens(this.rate, this.originMs);
    twin.#atNs = this.#atNs;
    twin.#phase = this.#phase;
    twin.#bigPhase = this.#bigPhase;
    return twin;
  }
}

/** Fractions of a token, as time passes (`refill: 'continuous'`). */
class ContinuousTokens implements Refill {
  #atMs: number;

  constructor(
    readonly perSecond: number,
    nowMs: number,
  ) {
    this.#atMs = nowMs;
  }

  advance(nowMs: number): number {
    const elapsedMs = nowMs - this.#atMs;
    if (!(elapsedMs > 0)) return 0;
    this.#atMs = nowMs;
    return (elapsedMs * this.perSecond) / 1000;
  }

  copy(): ContinuousTokens {
    return new ContinuousTokens(this.perSecond, this.#atMs);
  }
}

function refillOf(kind: TcmRefill, perSecond: number, nowMs: number): Refill {
  return kind === 'discrete' ? new WholeTokens(tokenRate(perSecond), nowMs) : new ContinuousTokens(perSecond, nowMs);
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

const bits = new DataView(new ArrayBuffer(8));

/**
 * The fraction p / q with the smallest q that rounds to `x` (finite, > 0; an
 * integer is itself): 1250 is 1250 / 1, 100 / 60 is 5 / 3, 0.1 is 1 / 10.
 */
export function simplestFraction(x: number): [bigint, bigint] {
  if (Number.isInteger(x)) return [BigInt(x), 1n];
  bits.setFloat64(0, x);
  const word = bits.getBigUint64(0);
  const biased = Number(word >> 52n);
  const fraction = word & ((1n << 52n) - 1n);
  // x = m * 2^e exactly (e < 0: x is not an integer). Every real within half
  // the gap to x's nearer neighbour rounds to x: (4m - k) * 2^(e-2) to
  // (4m + k) * 2^(e-2), k = 1 where the gap below x is half the gap above (x a
  // power of two), else 2.
  const m = biased === 0 ? fraction : fraction | (1n << 52n);
  const e = biased === 0 ? -1074 : biased - 1075;
  const k = biased > 1 && fraction === 0n ? 1n : 2n;
  const scale = 1n << BigInt(2 - e);
  return simplestBetween(4n * m - k, scale, 4n * m + k, scale);
}

/** The fraction with the smallest denominator strictly between ln / ld and hn / hd (0 <= lo < hi). */
function simplestBetween(ln: bigint, ld: bigint, hn: bigint, hd: bigint): [bigint, bigint] {
  const whole = ln / ld;
  if ((whole + 1n) * hd < hn) return [whole + 1n, 1n];
  // Both ends share the integer part: x = whole + 1 / y, y between hd / hr and ld / lr.
  const lr = ln - whole * ld;
  const hr = hn - whole * hd;
  if (lr === 0n) {
    const y = hd / hr + 1n;
    return [whole * y + 1n, y];
  }
  const [p, q] = simplestBetween(hd, hr, ld, lr);
  return [whole * p + q, p];
}

/** Adds `tokens` that arrived at CIR: C takes what it has room for, E the overflow, up to EBS. */
export function srTcmFill(state: SrTcmState, params: SrTcmParams, tokens: number): void {
  if (!(tokens > 0)) return;
  const room = params.cbs - state.tc;
  if (tokens <= room) {
    state.tc += tokens;
    return;
  }
  state.tc = params.cbs;
  state.te = Math.min(params.ebs, state.te + (tokens - room));
}

/** Colours a packet of `size` (RFC 2697, section 3) and decrements the bucket it conforms to. */
export function srTcmMark(state: SrTcmState, size: number, preColor?: Color): Color {
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

/** Adds tokens that arrived at PIR to P and at CIR to C, each up to its size. */
export function trTcmFill(state: TrTcmState, params: TrTcmParams, peakTokens: number, tokens: number): void {
  if (peakTokens > 0) state.tp = Math.min(params.pbs, state.tp + peakTokens);
  if (tokens > 0) state.tc = Math.min(params.cbs, state.tc + tokens);
}

/** Colours a packet of `size` (RFC 2698, section 3) and decrements the buckets it conforms to. */
export function trTcmMark(state: TrTcmState, size: number, preColor?: Color): Color {
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

function checkRefill(refill: unknown): TcmRefill {
  if (refill === undefined || refill === 'discrete') return 'discrete';
  if (refill === 'continuous') return 'continuous';
  throw new InvalidOptionError(
    'refill',
    refill,
    `Expected \`refill\` to be 'discrete' (the RFCs' whole tokens) or 'continuous', got ${String(refill)}`,
  );
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
  /** `'discrete'`: whole tokens, as RFC 2697 defines it. `'continuous'` is not the RFC's form. @default 'discrete' */
  refill?: TcmRefill;
  /** The time source. @default systemClock */
  clock?: Clock;
}

const SRTCM_OPTIONS: ReadonlySet<string> = new Set(['cir', 'cbs', 'ebs', 'mode', 'refill', 'clock']);
const TRTCM_OPTIONS: ReadonlySet<string> = new Set(['pir', 'pbs', 'cir', 'cbs', 'mode', 'refill', 'clock']);

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
  readonly #refill: Refill;
  readonly #refillKind: TcmRefill;
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
    checkKnownOptions(options, SRTCM_OPTIONS, 'srTCM options');
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
    this.#refillKind = checkRefill(options.refill);
    this.#params = { cir, cbs, ebs };
    this.#clock = checkClock(options.clock);
    this.#state = { tc: cbs, te: ebs };
    this.#refill = refillOf(this.#refillKind, cir, this.#clock.now());
  }

  /** `'color-blind'` or `'color-aware'`. */
  get mode(): ColorMode {
    return this.#mode;
  }

  /** `'discrete'` (the RFC's whole tokens) or `'continuous'`. */
  get refill(): TcmRefill {
    return this.#refillKind;
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
    srTcmFill(state, this.#params, this.#refill.copy().advance(nowMs));
    return state;
  }

  /** Colours a packet of `size` now. `preColor` is required in colour-aware mode and refused in colour-blind mode. */
  mark(size: number, preColor?: Color): Color {
    return this.markAt(this.#clock.now(), size, preColor);
  }

  /** {@link mark} at an explicit time. */
  markAt(nowMs: number, size: number, preColor?: Color): Color {
    checkSize(size);
    const pre = checkPreColor(this.#mode, preColor);
    srTcmFill(this.#state, this.#params, this.#refill.advance(nowMs));
    return srTcmMark(this.#state, size, pre);
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
  /** `'discrete'`: whole tokens, as RFC 2698 defines it. `'continuous'` is not the RFC's form. @default 'discrete' */
  refill?: TcmRefill;
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
  readonly #peakRefill: Refill;
  readonly #refill: Refill;
  readonly #refillKind: TcmRefill;
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
    checkKnownOptions(options, TRTCM_OPTIONS, 'trTCM options');
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
    this.#refillKind = checkRefill(options.refill);
    this.#params = { pir, pbs, cir, cbs };
    this.#clock = checkClock(options.clock);
    this.#state = { tp: pbs, tc: cbs };
    const nowMs = this.#clock.now();
    this.#peakRefill = refillOf(this.#refillKind, pir, nowMs);
    this.#refill = refillOf(this.#refillKind, cir, nowMs);
  }

  /** `'color-blind'` or `'color-aware'`. */
  get mode(): ColorMode {
    return this.#mode;
  }

  /** `'discrete'` (the RFC's whole tokens) or `'continuous'`. */
  get refill(): TcmRefill {
    return this.#refillKind;
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
    trTcmFill(state, this.#params, this.#peakRefill.copy().advance(nowMs), this.#refill.copy().advance(nowMs));
    return state;
  }

  /** Colours a packet of `size` now. `preColor` is required in colour-aware mode and refused in colour-blind mode. */
  mark(size: number, preColor?: Color): Color {
    return this.markAt(this.#clock.now(), size, preColor);
  }

  /** {@link mark} at an explicit time. */
  markAt(nowMs: number, size: number, preColor?: Color): Color {
    checkSize(size);
    const pre = checkPreColor(this.#mode, preColor);
    trTcmFill(this.#state, this.#params, this.#peakRefill.advance(nowMs), this.#refill.advance(nowMs));
    return trTcmMark(this.#state, size, pre);
  }
}
