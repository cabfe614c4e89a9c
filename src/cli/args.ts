/**
 * Flag parsing on node:util's parseArgs, with one-line errors that name the
 * flag and say what it expects. Rates and sizes are the library's (parseRate,
 * parseSize); `pipe`'s byte flags also take pv's short form (`10m`), which the
 * library refuses as ambiguous, since elsewhere `10m` could be read as 10 per
 * minute or 10 megabits.
 */

import { parseArgs } from 'node:util';
import { isTokenpaceError } from '../errors.js';
import { parseRate, parseSize } from '../units.js';
import { UsageError } from './io.js';

/** A flag's definition, as parseArgs takes it. */
export type FlagSpec = Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: false }>;

/** The parsed flags (strings and booleans) and positional arguments. */
export interface Parsed {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/** Parses `argv` strictly; unknown flags and missing values become a {@link UsageError}. */
export function parseFlags(argv: string[], options: FlagSpec, allowPositionals: boolean): Parsed {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals,
      strict: true,
    });
    return { values: values as Parsed['values'], positionals };
  } catch (error) {
    const code = (error as { code?: string }).code;
    const message = (error as Error).message;
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const flag = /'([^']+)'/.exec(message)?.[1] ?? '';
      throw new UsageError(`unknown option ${flag}`);
    }
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && message.includes('does not take an argument')) {
      const flag = /'(-[^']*)'/.exec(message)?.[1] ?? 'this option';
      throw new UsageError(`option ${flag} takes no value`);
    }
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      const flag = /'(-[^']*)'/.exec(message)?.[1] ?? /Option '([^']+)'/.exec(message)?.[1] ?? 'an option';
      throw new UsageError(`option ${flag.split(' ')[0]} needs a value`);
    }
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      const arg = /'([^']+)'/.exec(message)?.[1] ?? '';
      throw new UsageError(`unexpected argument ${arg}`);
    }
    throw new UsageError(message.split('\n')[0] ?? message);
  }
}

/** A string flag's value, or a {@link UsageError} if it is required and missing. */
export function stringFlag(parsed: Parsed, name: string, required: true): string;
export function stringFlag(parsed: Parsed, name: string, required?: false): string | undefined;
export function stringFlag(parsed: Parsed, name: string, required = false): string | undefined {
  const value = parsed.values[name];
  if (typeof value === 'string') {
    if (value.trim() === '') throw new UsageError(`option --${name} needs a value`);
    return value;
  }
  if (required) throw new UsageError(`missing --${name}`);
  return undefined;
}

/** Turns a library validation error into a {@link UsageError} naming the flag. */
function asUsage<T>(flag: string, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    if (isTokenpaceError(error)) {
      // "invalid rate "x": expected ..." -> "--rate: invalid value "x": expected ..."
      throw new UsageError(`--${flag}: ${error.message.replace(/^invalid \w+ /, 'invalid value ')}`);
    }
    throw error;
  }
}

/** `--rate` style flag: tokens per second. */
export function rateFlag(parsed: Parsed, name: string, required: true): number;
export function rateFlag(parsed: Parsed, name: string, required?: false): number | undefined;
export function rateFlag(parsed: Parsed, name: string, required = false): number | undefined {
  const text = required ? stringFlag(parsed, name, true) : stringFlag(parsed, name);
  return text === undefined ? undefined : asUsage(name, () => parseRate(text));
}

/** `--burst` style flag: a size. */
export function sizeFlag(parsed: Parsed, name: string, required: true): number;
export function sizeFlag(parsed: Parsed, name: string, required?: false): number | undefined;
export function sizeFlag(parsed: Parsed, name: string, required = false): number | undefined {
  const text = required ? stringFlag(parsed, name, true) : stringFlag(parsed, name);
  return text === undefined ? undefined : asUsage(name, () => parseSize(text));
}

/** pv's sizes and rates (`pv -L 10m`, `pv -B 64k`): a number and k, m, g or t in either case, powers of 1024. */
const PV_BYTES = /^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt])\s*$/i;
const PV_FACTOR: Record<string, number> = { k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** A byte count written as pv writes it, or undefined if `text` is not in pv's form. */
export function pvBytes(text: string): number | undefined {
  const match = PV_BYTES.exec(text);
  if (!match) return undefined;
  return Number(match[1]) * (PV_FACTOR[(match[2] ?? '').toLowerCase()] ?? Number.NaN);
}

function bytesFlag(name: string, text: string, parse: (text: string) => number): number {
  const bytes = pvBytes(text);
  if (bytes === undefined) return asUsage(name, () => parse(text));
  if (!(Number.isFinite(bytes) && bytes > 0)) {
    throw new UsageError(`--${name}: invalid value ${JSON.stringify(text)}: it must be positive and finite`);
  }
  return bytes;
}

/** A byte rate flag (`pipe --rate`): what {@link rateFlag} takes, or pv's `10m` (10 MiB/s). */
export function byteRateFlag(parsed: Parsed, name: string, required: true): number;
export function byteRateFlag(parsed: Parsed, name: string, required?: false): number | undefined;
export function byteRateFlag(parsed: Parsed, name: string, required = false): number | undefined {
  const text = required ? stringFlag(parsed, name, true) : stringFlag(parsed, name);
  return text === undefined ? undefined : bytesFlag(name, text, parseRate);
}

/** A byte size flag (`pipe --burst`): what {@link sizeFlag} takes, or pv's `64k` (64 KiB). */
export function byteSizeFlag(parsed: Parsed, name: string): number | undefined {
  const text = stringFlag(parsed, name);
  return text === undefined ? undefined : bytesFlag(name, text, parseSize);
}

/** A whole-number flag within [min, max]. */
export function integerFlag(parsed: Parsed, name: string, min: number, max: number): number | undefined {
  const text = stringFlag(parsed, name);
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!(/^\s*[0-9]+\s*$/.test(text) && Number.isSafeInteger(value) && value >= min && value <= max)) {
    throw new UsageError(
      `--${name}: invalid value ${JSON.stringify(text)}: expected a whole number from ${min} to ${max}`,
    );
  }
  return value;
}
