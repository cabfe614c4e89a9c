/**
 * Units: rates, sizes and durations as people write them, and back.
 *
 * Every option that is a rate, a size or a duration accepts a number (tokens
 * per second, tokens, milliseconds) or a string:
 *
 *   parseRate('100/s')        -> 100          parseSize('64KiB')   -> 65536
 *   parseRate('6000/min')     -> 100          parseSize('1.5 MB')  -> 1500000
 *   parseRate('20 per second')-> 20           parseSize('1mbit')   -> 125000
 *   parseRate('10MiB/s')      -> 10485760     parseDuration('250ms') -> 250
 *   parseRate('8mbit')        -> 1000000      parseDuration('2 min') -> 120000
 *   parseRate('100Mbps')      -> 12500000
 *
 * Bytes: `B`; decimal `kB/KB, MB, GB, TB` (powers of 1000); binary `KiB, MiB,
 * GiB, TiB` (powers of 1024). Bits are written the way `tc` writes them
 * (`bit, kbit, mbit, gbit, tbit`, binary `kibit, mibit, gibit`) or as `Mbit/s`
 * and `Mbps`, and are converted to bytes (8 bits each). Note that `tc` itself
 * reads `mbps` as megaBYTES per second; here `bps` always means bits, as it
 * does everywhere outside `tc`. Ambiguous spellings (`kb`, `Mb`, `k`) are
 * refused with a hint rather than guessed.
 *
 * Periods: `ms`, `s/sec/second`, `min/minute`, `h/hr/hour`, `d/day`, each
 * optionally with a count (`'100/10s'`). A rate without a period is per second,
 * as in `tc`. Zero, negative, NaN and infinite values are refused wherever they
 * make no sense.
 */

import {
  describeValue as describe,
  InvalidDurationError,
  InvalidOptionError,
  InvalidRateError,
  InvalidSizeError,
} from './errors.js';

/** A rate: tokens (or bytes) per second as a number, or a string such as `'10MiB/s'` or `'100/min'`. */
export type RateInput = number | string;
/** A size: tokens (or bytes) as a number, or a string such as `'64KiB'`. */
export type SizeInput = number | string;
/** A duration: milliseconds as a number, or a string such as `'250ms'` or `'2s'`. */
export type DurationInput = number | string;

const NUMBER = '([0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:[eE]([+-]?[0-9]+))?';
const QUANTITY = new RegExp(`^${NUMBER}\\s*([A-Za-z]*)$`);
const PERIOD = /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)?\s*([A-Za-zµ]+)$/;

const PREFIX: Record<string, [decimal: number, binary: number]> = {
  '': [1, 1],
  k: [1e3, 1024],
  m: [1e6, 1024 ** 2],
  g: [1e9, 1024 ** 3],
  t: [1e12, 1024 ** 4],
};

const COUNT_WORDS = new Set([
  '',
  'token',
  'tokens',
  'req',
  'reqs',
  'request',
  'requests',
  'call',
  'calls',
  'job',
  'jobs',
  'op',
  'ops',
]);

const SECONDS_PER: Record<string, number> = {
  ms: 1e-3,
  msec: 1e-3,
  millisecond: 1e-3,
  milliseconds: 1e-3,
  s: 1,
  sec: 1,
  secs: 1,
  second: 1,
  seconds: 1,
  m: 60,
  min: 60,
  mins: 60,
  minute: 60,
  minutes: 60,
  h: 3600,
  hr: 3600,
  hrs: 3600,
  hour: 3600,
  hours: 3600,
  d: 86400,
  day: 86400,
  days: 86400,
};

const MS_PER: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ...Object.fromEntries(Object.entries(SECONDS_PER).map(([unit, seconds]) => [unit, seconds * 1000])),
};

/**
 * The number of tokens one `unit` stands for: 1 for counts and bytes, 1/8 for
 * a bit, 1000 for kB, 1024 for KiB, ... Returns undefined for unknown units and
 * a hint string for ambiguous ones.
 */
function unitFactor(unit: string): number | string | undefined {
  if (COUNT_WORDS.has(unit.toLowerCase()) || /^bytes?$/i.test(unit)) return 1;
  // Bytes: the unit ends in a capital B (`KB`, `MiB`, `kB`, `B`).
  let match = /^([kKmMgGtT]?)(i?)B$/.exec(unit);
  if (match) return scaled(match[1] ?? '', match[2] === 'i', 1);
  // Bits, tc style: `bit`, `kbit`, `Mbit`, `kibit`, `Gbits`.
  match = /^([kmgt]?)(i?)bits?$/i.exec(unit);
  if (match) return scaled(match[1] ?? '', match[2]?.toLowerCase() === 'i', 1 / 8);
  if (/^[kmgt]i?b?$/i.test(unit)) {
    const prefix = unit[0]?.toLowerCase() ?? '';
    const upper = prefix.toUpperCase();
    return `"${unit}" is ambiguous: write ${prefix === 'k' ? 'kB' : `${upper}B`} or ${upper}iB for bytes, or ${prefix}bit for bits`;
  }
  return undefined;
}

function scaled(prefix: string, binary: boolean, base: number): number | undefined {
  const factors = PREFIX[prefix.toLowerCase()];
  if (!factors) return undefined;
  return factors[binary ? 1 : 0] * base;
}

function parseNumber(mantissa: string, exponent: string | undefined): number {
  return Number(exponent === undefined ? mantissa : `${mantissa}e${exponent}`);
}

/**
 * How a parse error opens: `invalid rate "fast"`, `invalid burst -1`, `invalid burst (a value of
 * type null)`, and `missing burst` for undefined (an option left out), so the sentence reads.
 */
function invalid(option: string, input: unknown): string {
  if (input === undefined) return `missing ${option}`;
  if (typeof input === 'string' || typeof input === 'number') return `invalid ${option} ${describe(input)}`;
  return `invalid ${option} (${describe(input)})`;
}

/**
 * Parses a rate into tokens (or bytes) per second.
 *
 * @example parseRate('10MiB/s') === 10485760; parseRate('100/min') === 100 / 60
 * @throws InvalidRateError (`ERR_INVALID_RATE`) for anything that is not a positive finite rate.
 */
export function parseRate(input: RateInput): number {
  return parseRateOption(input, 'rate');
}

/**
 * {@link parseRate} for a named option: the error message says "invalid peakRate ..."
 * instead of "invalid rate ...", so it names what to change.
 * @internal
 */
export function parseRateOption(input: RateInput, option: string): number {
  const expected =
    'expected a positive number of tokens per second or a string like "100/s", "6000/min", "10MiB/s" or "8mbit"';
  if (typeof input === 'number') {
    if (Number.isFinite(input) && input > 0) return input;
    throw new InvalidRateError(input, `${invalid(option, input)}: ${expected}`);
  }
  if (typeof input !== 'string') throw new InvalidRateError(input, `${invalid(option, input)}: ${expected}`);

  let text = input.trim();
  let periodText = 's';
  // `Mbps`, `kbps`, `MBps`: a unit with the period glued on.
  const glued = /^(.*[0-9.\s])([kKmMgGtT]?)(b|B)ps$/.exec(text);
  if (glued) {
    text = `${glued[1]}${glued[2]}${glued[3] === 'b' ? 'bit' : 'B'}`;
  } else {
    const split = /^(.*?)\s*(?:\/|\bper\b)\s*(.*)$/i.exec(text);
    if (split) {
      text = split[1] ?? '';
      periodText = split[2] ?? '';
    }
  }

  const quantity = QUANTITY.exec(text.trim());
  const period = PERIOD.exec(periodText.trim());
  if (!quantity || !period) throw new InvalidRateError(input, `${invalid(option, input)}: ${expected}`);

  const amount = parseNumber(quantity[1] ?? '', quantity[2]);
  const factor = unitFactor(quantity[3] ?? '');
  if (typeof factor === 'string') throw new InvalidRateError(input, `${invalid(option, input)}: ${factor}`);
  if (factor === undefined) {
    throw new InvalidRateError(
      input,
      `${invalid(option, input)}: unknown unit "${quantity[3]}"; use a count, B, kB/MB/GB, KiB/MiB/GiB or kbit/mbit/gbit`,
    );
  }
  const periodCount = period[1] === undefined ? 1 : Number(period[1]);
  const periodSeconds = SECONDS_PER[(period[2] ?? '').toLowerCase()];
  if (periodSeconds === undefined) {
    throw new InvalidRateError(
      input,
      `${invalid(option, input)}: unknown period "${period[2]}"; use ms, s, min, h or d`,
    );
  }
  const perSecond = (amount * factor) / (periodCount * periodSeconds);
  if (!(Number.isFinite(perSecond) && perSecond > 0)) {
    throw new InvalidRateError(input, `${invalid(option, input)}: the rate must be positive and finite`);
  }
  return perSecond;
}

/**
 * Parses a size into tokens (or bytes). Plain numbers are token counts.
 *
 * @example parseSize('64KiB') === 65536; parseSize(200) === 200
 * @throws InvalidSizeError (`ERR_INVALID_SIZE`) for anything that is not a positive finite size.
 */
export function parseSize(input: SizeInput): number {
  return parseSizeOption(input, 'size');
}

/**
 * {@link parseSize} for a named option: the error message says "invalid burst ..."
 * instead of "invalid size ...", so it names what to change.
 * @internal
 */
export function parseSizeOption(input: SizeInput, option: string): number {
  const expected = 'expected a positive number or a string like "200", "64KiB", "1.5MB" or "512kbit"';
  if (typeof input === 'number') {
    if (Number.isFinite(input) && input > 0) return input;
    throw new InvalidSizeError(input, `${invalid(option, input)}: ${expected}`);
  }
  if (typeof input !== 'string') throw new InvalidSizeError(input, `${invalid(option, input)}: ${expected}`);
  const quantity = QUANTITY.exec(input.trim());
  if (!quantity) throw new InvalidSizeError(input, `${invalid(option, input)}: ${expected}`);
  const factor = unitFactor(quantity[3] ?? '');
  if (typeof factor === 'string') throw new InvalidSizeError(input, `${invalid(option, input)}: ${factor}`);
  if (factor === undefined) {
    throw new InvalidSizeError(
      input,
      `${invalid(option, input)}: unknown unit "${quantity[3]}"; use a count, B, kB/MB/GB, KiB/MiB/GiB or kbit/mbit`,
    );
  }
  const size = parseNumber(quantity[1] ?? '', quantity[2]) * factor;
  if (!(Number.isFinite(size) && size > 0)) {
    throw new InvalidSizeError(input, `${invalid(option, input)}: the size must be positive and finite`);
  }
  return size;
}

/**
 * Parses a duration into milliseconds. Plain numbers are milliseconds; zero is
 * allowed, and so is `Infinity` ("no limit") as a number.
 *
 * @example parseDuration('250ms') === 250; parseDuration('1.5s') === 1500
 * @throws InvalidDurationError (`ERR_INVALID_DURATION`) for negative, NaN or unparsable values.
 */
export function parseDuration(input: DurationInput): number {
  const expected = 'expected milliseconds >= 0 or a string like "250ms", "2s", "1.5min" or "1h"';
  if (typeof input === 'number') {
    if (input >= 0) return input; // NaN fails this comparison too
    throw new InvalidDurationError(input, `${invalid('duration', input)}: ${expected}`);
  }
  if (typeof input !== 'string') {
    throw new InvalidDurationError(input, `${invalid('duration', input)}: ${expected}`);
  }
  const match = new RegExp(`^${NUMBER}\\s*([A-Za-zµ]*)$`).exec(input.trim());
  if (!match) throw new InvalidDurationError(input, `${invalid('duration', input)}: ${expected}`);
  const unit = match[3] ?? '';
  const factor = unit === '' ? 1 : MS_PER[unit.toLowerCase()];
  if (factor === undefined) {
    throw new InvalidDurationError(
      input,
      `${invalid('duration', input)}: unknown unit "${unit}"; use ns, us, ms, s, min, h or d`,
    );
  }
  const ms = parseNumber(match[1] ?? '', match[2]) * factor;
  if (!Number.isFinite(ms)) throw new InvalidDurationError(input, `${invalid('duration', input)}: too large`);
  return ms;
}

const BINARY_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;
const DECIMAL_UNITS = ['B', 'kB', 'MB', 'GB', 'TB'] as const;

/** Significant digits {@link formatSize} and {@link formatDuration} show; the whole part of a number is never cut. */
const DIGITS = 3;

/**
 * `bytes` in the largest of `units` (steps of `base`) that keeps the number at least 1, rounded to
 * {@link DIGITS} significant digits (`1023 KiB` keeps its four), and whether that is exact.
 */
function inUnits(bytes: number, base: number, units: readonly string[]): { text: string; exact: boolean } {
  let index = 0;
  while (index < units.length - 1 && Math.abs(bytes) >= base ** (index + 1)) index++;
  let rounded = roundTo(bytes / base ** index);
  if (Math.abs(rounded) >= base && index < units.length - 1) {
    index++; // 1023.9 KiB rounds to 1024 KiB: write it as 1 MiB
    rounded = roundTo(bytes / base ** index);
  }
  return { text: `${rounded} ${units[index]}`, exact: rounded * base ** index === bytes };
}

function roundTo(value: number): number {
  const wholeDigits = Math.abs(value) < 1 ? 1 : Math.floor(Math.log10(Math.abs(value))) + 1;
  return Number(value.toPrecision(Math.min(100, Math.max(DIGITS, wholeDigits))));
}

/**
 * Formats bytes for people, in three significant digits: `65536 -> '64 KiB'`,
 * `1500000 -> '1.5 MB'`, `2102617 -> '~2.01 MiB'`, `512 -> '512 B'`.
 *
 * - A binary unit (`KiB`, `MiB`, ...), or a decimal one (`kB`, `MB`, ...) when that one is exact
 *   and the binary one is not.
 * - Three significant digits; the whole part is never cut (`1023 KiB`, `1000 B`).
 * - A `~` in front when the number was rounded, so an exact-looking figure is exact:
 *   `parseSize(formatSize(n)) === n` whenever there is no `~`.
 *
 * @throws InvalidSizeError (`ERR_INVALID_SIZE`) for anything but a finite number (negative sizes
 *   are fine: `'-1 KiB'`).
 */
export function formatSize(bytes: number): string {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes)) {
    throw new InvalidSizeError(bytes, `formatSize expects a finite number of bytes, got ${describe(bytes)}`);
  }
  const binary = inUnits(bytes, 1024, BINARY_UNITS);
  if (binary.exact) return binary.text;
  const decimal = inUnits(bytes, 1000, DECIMAL_UNITS);
  return decimal.exact ? decimal.text : `~${binary.text}`;
}

/**
 * Formats a rate for people.
 *
 * - `kind: 'count'` (the default): tokens, requests or jobs, in the period in which they are whole:
 *   `100 -> '100/s'`, `100 / 60 -> '100/min'`, `1 / 3600 -> '1/h'`; otherwise per second in six
 *   significant digits (`1 / 7 -> '0.142857/s'`).
 * - `kind: 'bytes'`: bytes per second, written as {@link formatSize} writes sizes, plus `/s`:
 *   `1048576 -> '1 MiB/s'`, `1500000 -> '1.5 MB/s'`, `2102617 -> '~2.01 MiB/s'`.
 *
 * {@link parseRate} reads every result without a `~` back to the same number (counts: to six
 * significant digits).
 *
 * @throws InvalidRateError (`ERR_INVALID_RATE`) for anything but a finite number;
 *   InvalidOptionError (`ERR_INVALID_OPTION`) for a `kind` other than `'count'` or `'bytes'`.
 */
export function formatRate(perSecond: number, kind: 'count' | 'bytes' = 'count'): string {
  if (typeof perSecond !== 'number' || !Number.isFinite(perSecond)) {
    throw new InvalidRateError(perSecond, `formatRate expects a finite number per second, got ${describe(perSecond)}`);
  }
  if (kind === 'bytes') return `${formatSize(perSecond)}/s`;
  if (kind !== 'count') {
    throw new InvalidOptionError('kind', kind, `Expected \`kind\` to be "count" or "bytes", got ${describe(kind)}`);
  }
  for (const [period, seconds] of [
    ['s', 1],
    ['min', 60],
    ['h', 3600],
  ] as const) {
    const amount = perSecond * seconds;
    const whole = Math.round(amount);
    if (whole >= 1 && Math.abs(amount - whole) <= 1e-9 * whole) return `${whole}/${period}`;
  }
  return `${Number(perSecond.toPrecision(6))}/s`; // six significant digits: for people, not for round trips
}

/** {@link formatDuration}'s units, smallest first: milliseconds in each, and how many make the next. */
const DURATION_UNITS = [
  ['ms', 1, 1000],
  ['s', 1000, 60],
  ['min', 60_000, 60],
  ['h', 3_600_000, Number.POSITIVE_INFINITY],
] as const;

/**
 * Formats milliseconds for people, the way {@link formatSize} writes bytes: `250 -> '250 ms'`,
 * `2000 -> '2 s'`, `90000 -> '1.5 min'`, `1000 / 7 -> '~143 ms'`, `0.9765625 -> '~0.977 ms'`,
 * `Infinity -> 'forever'`.
 *
 * - The largest of `ms`, `s`, `min`, `h` that keeps the number at least 1 (`ms` below 1 ms).
 * - Three significant digits; the whole part is never cut (`2778 h`).
 * - A `~` in front when the number was rounded: `parseDuration(formatDuration(ms)) === ms`
 *   whenever there is no `~`.
 *
 * @throws InvalidDurationError (`ERR_INVALID_DURATION`) for NaN, `-Infinity` and anything but a number.
 */
export function formatDuration(ms: number): string {
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms === Number.NEGATIVE_INFINITY) {
    throw new InvalidDurationError(ms, `formatDuration expects a number of milliseconds, got ${describe(ms)}`);
  }
  if (ms === Number.POSITIVE_INFINITY) return 'forever';
  let index = 0;
  while (index < DURATION_UNITS.length - 1 && Math.abs(ms) >= (DURATION_UNITS[index + 1]?.[1] ?? 0)) index++;
  let [unit, msPer, next] = DURATION_UNITS[index] ?? DURATION_UNITS[0];
  let rounded = roundTo(ms / msPer);
  if (Math.abs(rounded) >= next) {
    [unit, msPer, next] = DURATION_UNITS[index + 1] ?? DURATION_UNITS[0]; // 59.99 s rounds to 60 s: write it as 1 min
    rounded = roundTo(ms / msPer);
  }
  // parseDuration multiplies by the same factor, so "exact" here means it reads back the same number.
  return `${rounded * msPer === ms ? '' : '~'}${rounded} ${unit}`;
}

/**
 * Bytes for an error message: the exact count, then {@link formatSize}'s
 * form when it says more: `'512 bytes'`, `'65536 bytes (64 KiB)'`,
 * `'10737419 bytes (~10.2 MiB)'`.
 */
export function describeBytes(bytes: number): string {
  const count = Number.isInteger(bytes) ? `${bytes}` : `${Number(bytes.toPrecision(6))}`;
  return Math.abs(bytes) < 1024 ? `${count} bytes` : `${count} bytes (${formatSize(bytes)})`;
}

/**
 * A byte rate for an error message, in bytes per second: `'100 bytes per
 * second'`, `'1073741824 bytes per second (1 GiB/s)'`.
 */
export function describeRate(bytesPerSecond: number): string {
  const count = Number.isInteger(bytesPerSecond) ? `${bytesPerSecond}` : `${Number(bytesPerSecond.toPrecision(6))}`;
  return Math.abs(bytesPerSecond) < 1024
    ? `${count} bytes per second`
    : `${count} bytes per second (${formatSize(bytesPerSecond)}/s)`;
}
