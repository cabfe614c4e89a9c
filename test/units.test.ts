import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  formatDuration,
  formatRate,
  formatSize,
  isTokenpaceError,
  parseDuration,
  parseRate,
  parseSize,
} from '../src/index.js';

describe('parseRate', () => {
  it.each([
    [100, 100],
    [0.5, 0.5],
    ['100/s', 100],
    ['100 / s', 100],
    ['6000/min', 100],
    ['100/min', 100 / 60],
    ['3600/h', 1],
    ['86400/day', 1],
    ['1/ms', 1000],
    ['100/10s', 10],
    ['20 per second', 20],
    ['20 requests per second', 20],
    ['5 jobs/min', 5 / 60],
    ['100', 100],
    ['1.5e3/s', 1500],
    ['10MiB/s', 10 * 1024 * 1024],
    ['1 KiB/s', 1024],
    ['1GiB/s', 1024 ** 3],
    ['1.5 MB/s', 1.5e6],
    ['64kB/s', 64_000],
    ['10 B/s', 10],
    ['10 bytes/s', 10],
    ['8bit', 1],
    ['8mbit', 1e6],
    ['8 Mbit/s', 1e6],
    ['1gbit', 1.25e8],
    ['1kbit', 125],
    ['8kibit', 1024],
    ['100Mbps', 12.5e6],
    ['100 kbps', 12_500],
    ['1MBps', 1e6],
  ])('%j -> %d per second', (input, expected) => {
    expect(parseRate(input)).toBeCloseTo(expected, 9);
  });

  it.each([
    [0, /must be positive|expected a positive/],
    [-1, /expected a positive/],
    [Number.NaN, /expected a positive/],
    [Number.POSITIVE_INFINITY, /expected a positive/],
    ['0/s', /positive and finite/],
    ['-5/s', /expected/],
    ['fast', /expected/],
    ['10 Mb/s', /ambiguous: write MB or MiB for bytes, or mbit for bits/],
    ['10k/s', /ambiguous: write kB or KiB for bytes, or kbit for bits/],
    ['10 widgets/s', /unknown unit "widgets"/],
    ['10/fortnight', /unknown period "fortnight"/],
    ['10/0s', /positive and finite/],
    ['', /expected/],
  ])('%j is refused with ERR_INVALID_RATE (%s)', (input, message) => {
    let caught: unknown;
    try {
      parseRate(input);
    } catch (error) {
      caught = error;
    }
    expect(isTokenpaceError(caught, 'ERR_INVALID_RATE')).toBe(true);
    expect((caught as Error).message).toMatch(message);
  });

  it('refuses non-numbers and non-strings', () => {
    expect(() => parseRate(null as unknown as number)).toThrow(/a value of type null/);
    expect(() => parseRate({} as unknown as number)).toThrow(/a value of type object/);
  });
});

describe('parseSize', () => {
  it.each([
    [200, 200],
    ['200', 200],
    ['64KiB', 65536],
    ['64 KiB', 65536],
    ['1MiB', 1048576],
    ['1.5 MB', 1.5e6],
    ['1kB', 1000],
    ['1KB', 1000],
    ['2GiB', 2 * 1024 ** 3],
    ['1TB', 1e12],
    ['512kbit', 64_000],
    ['1mbit', 125_000],
    ['10 tokens', 10],
  ])('%j -> %d', (input, expected) => {
    expect(parseSize(input)).toBe(expected);
  });

  it.each([
    [0, /expected a positive/],
    [-3, /expected a positive/],
    [Number.NaN, /expected a positive/],
    [Number.POSITIVE_INFINITY, /expected a positive/],
    ['0KiB', /positive and finite/],
    ['1k', /ambiguous/],
    ['1 furlong', /unknown unit "furlong"/],
    ['many', /expected/],
    [undefined, /^missing size: expected a positive number/],
  ])('%j is refused with ERR_INVALID_SIZE (%s)', (input, message) => {
    expect(() => parseSize(input as number)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_SIZE' }));
    expect(() => parseSize(input as number)).toThrow(message);
  });
});

describe('parseDuration', () => {
  it.each([
    [0, 0],
    [250, 250],
    [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY],
    ['250ms', 250],
    ['250', 250],
    ['2s', 2000],
    ['1.5 sec', 1500],
    ['2 min', 120_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    ['500us', 0.5],
    ['1000000ns', 1],
  ])('%j -> %d ms', (input, expected) => {
    expect(parseDuration(input)).toBeCloseTo(expected, 9);
  });

  it.each([
    [-1, /expected milliseconds >= 0/],
    [Number.NaN, /expected milliseconds >= 0/],
    ['soon', /expected/],
    ['5 weeks', /unknown unit "weeks"/],
    ['1e400s', /too large/],
    [true, /a value of type boolean/],
  ])('%j is refused with ERR_INVALID_DURATION (%s)', (input, message) => {
    expect(() => parseDuration(input as number)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_DURATION' }));
    expect(() => parseDuration(input as number)).toThrow(message);
  });
});

describe('parse errors read as sentences', () => {
  it('name the option, then the value: quoted if a string, its type otherwise, "missing" if left out', async () => {
    const { parseRateOption, parseSizeOption } = await import('../src/units.js');
    const message = (call: () => unknown): string => {
      try {
        call();
      } catch (error) {
        return (error as Error).message;
      }
      return '';
    };
    expect(message(() => parseSizeOption(undefined as unknown as number, 'burst'))).toMatch(
      /^missing burst: expected a positive number or a string like "200"/,
    );
    expect(message(() => parseSizeOption(null as unknown as number, 'global.burst'))).toMatch(
      /^invalid global\.burst \(a value of type null\): expected/,
    );
    expect(message(() => parseSizeOption(-1, 'burst'))).toMatch(/^invalid burst -1: expected/);
    expect(message(() => parseRateOption('fast', 'rate'))).toMatch(/^invalid rate "fast": expected/);
    expect(message(() => parseRateOption({} as unknown as number, 'peakRate'))).toMatch(
      /^invalid peakRate \(a value of type object\): expected/,
    );
    expect(message(() => parseDuration(undefined as unknown as number))).toMatch(/^missing duration: expected/);
  });
});

describe('formatters', () => {
  it.each([
    [formatSize(0), '0 B'],
    [formatSize(512), '512 B'],
    [formatSize(65536), '64 KiB'],
    [formatSize(1.5 * 1024 ** 2), '1.5 MiB'],
    [formatSize(1_500_000), '1.5 MB'],
    [formatSize(1024 ** 4 * 3), '3 TiB'],
    [formatSize(2102617), '~2.01 MiB'],
    [formatSize(10737419), '~10.2 MiB'],
    [formatSize(1000), '1000 B'],
    [formatSize(1023 * 1024), '1023 KiB'],
    [formatSize(1024 * 1024 - 1), '~1 MiB'],
    [formatSize(1179648), '~1.13 MiB'],
    [formatSize(-1024), '-1 KiB'],
    [formatSize(0.5), '0.5 B'],
    [formatSize(0.123456), '~0.123 B'],
    [formatRate(100), '100/s'],
    [formatRate(100 / 60), '100/min'],
    [formatRate(1 / 3600), '1/h'],
    [formatRate(0.5), '30/min'],
    [formatRate(1 / 7), '0.142857/s'],
    [formatRate(1024 ** 2, 'bytes'), '1 MiB/s'],
    [formatRate(1_500_000, 'bytes'), '1.5 MB/s'],
    [formatRate(2102617, 'bytes'), '~2.01 MiB/s'],
    [formatRate(100, 'count'), '100/s'],
    [formatDuration(250), '250 ms'],
    [formatDuration(2000), '2 s'],
    [formatDuration(90_000), '1.5 min'],
    [formatDuration(7_200_000), '2 h'],
    [formatDuration(Number.POSITIVE_INFINITY), 'forever'],
    [formatDuration(0.5), '0.5 ms'],
    [formatDuration((1024 * 1000) / 1024 ** 2), '~0.977 ms'], // 1 KiB at 1 MiB/s
    [formatDuration(1000 / 7), '~143 ms'],
    [formatDuration(1234), '~1.23 s'],
    [formatDuration(999.6), '~1 s'], // rounds up into the next unit
    [formatDuration(59_999), '~1 min'],
    [formatDuration(1e10), '~2778 h'], // the whole part is never cut
  ])('%s === %s', (actual, expected) => {
    expect(actual).toBe(expected);
  });

  it('formatSize shows three significant digits, exact unless marked ~, and parseSize reads it back', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 50 }), (bytes) => {
        const text = formatSize(bytes);
        const [number = '', unit] = text.replace(/^~/, '').split(' ');
        // The whole part is never cut; beyond it, at most three significant digits.
        const digits = number.replace('.', '').replace(/^0+/, '').length;
        expect(digits <= 3 || !number.includes('.')).toBe(true);
        expect(unit).toMatch(/^(B|KiB|MiB|GiB|TiB|kB|MB|GB|TB)$/);
        if (text.startsWith('~')) {
          const parsed = parseSize(text.slice(1));
          expect(parsed).not.toBe(bytes);
          expect(Math.abs(parsed - bytes)).toBeLessThanOrEqual(bytes * 5e-3);
        } else {
          expect(parseSize(text)).toBe(bytes);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('parseRate(formatRate(r)) round-trips within 6 significant digits (counts) and as sizes do (bytes)', () => {
    fc.assert(
      fc.property(fc.double({ min: 1e-3, max: 1e9, noNaN: true }), (perSecond) => {
        expect(Math.abs(parseRate(formatRate(perSecond)) - perSecond)).toBeLessThanOrEqual(perSecond * 5e-6);
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 40 }), (bytesPerSecond) => {
        const text = formatRate(bytesPerSecond, 'bytes');
        expect(text).toBe(`${formatSize(bytesPerSecond)}/s`);
        if (text.startsWith('~')) {
          expect(Math.abs(parseRate(text.slice(1)) - bytesPerSecond)).toBeLessThanOrEqual(bytesPerSecond * 5e-3);
        } else {
          expect(parseRate(text)).toBe(bytesPerSecond);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it.each([
    ['formatSize', () => formatSize('4' as unknown as number), 'ERR_INVALID_SIZE', /got "4"/],
    ['formatSize', () => formatSize(Number.NaN), 'ERR_INVALID_SIZE', /got NaN/],
    ['formatSize', () => formatSize(Number.POSITIVE_INFINITY), 'ERR_INVALID_SIZE', /got Infinity/],
    ['formatSize', () => formatSize(undefined as unknown as number), 'ERR_INVALID_SIZE', /a value of type undefined/],
    ['formatRate', () => formatRate('x' as unknown as number), 'ERR_INVALID_RATE', /got "x"/],
    ['formatRate', () => formatRate(Number.NaN), 'ERR_INVALID_RATE', /got NaN/],
    ['formatRate', () => formatRate(Number.NEGATIVE_INFINITY, 'bytes'), 'ERR_INVALID_RATE', /got -Infinity/],
    ['formatRate', () => formatRate({} as unknown as number), 'ERR_INVALID_RATE', /a value of type object/],
    ['formatRate', () => formatRate(10, 'bits' as 'bytes'), 'ERR_INVALID_OPTION', /`kind`.*got "bits"/],
    ['formatDuration', () => formatDuration('1s' as unknown as number), 'ERR_INVALID_DURATION', /got "1s"/],
    ['formatDuration', () => formatDuration(Number.NaN), 'ERR_INVALID_DURATION', /got NaN/],
    ['formatDuration', () => formatDuration(Number.NEGATIVE_INFINITY), 'ERR_INVALID_DURATION', /got -Infinity/],
  ])('%s refuses bad input with a coded error (%#)', (_name, call, code, message) => {
    let caught: unknown;
    try {
      call();
    } catch (error) {
      caught = error;
    }
    expect(caught).not.toBeInstanceOf(TypeError);
    expect(isTokenpaceError(caught, code as 'ERR_INVALID_SIZE')).toBe(true);
    expect((caught as Error).message).toMatch(message);
  });

  it('formatters accept what they are for: zero, negatives, fractions', () => {
    expect(formatRate(0)).toBe('0/s');
    expect(formatRate(-5)).toBe('-5/s');
    expect(formatDuration(0)).toBe('0 ms');
    expect(formatDuration(-1500)).toBe('-1.5 s');
    expect(formatSize(-1500000)).toBe('-1.5 MB');
  });

  it('formatDuration shows three significant digits, exact unless marked ~, and parseDuration reads it back', () => {
    fc.assert(
      fc.property(fc.oneof(fc.double({ min: 0, max: 1e10, noNaN: true }), fc.integer({ min: 0, max: 1e9 })), (ms) => {
        const text = formatDuration(ms);
        const [number = '', unit] = text.replace(/^~/, '').split(' ');
        expect(unit).toMatch(/^(ms|s|min|h)$/);
        const digits = number.replace('.', '').replace(/^0+/, '').length;
        expect(digits <= 3 || !number.includes('.') || number.includes('e')).toBe(true);
        if (text.startsWith('~')) {
          const parsed = parseDuration(text.slice(1));
          expect(parsed).not.toBe(ms);
          expect(Math.abs(parsed - ms)).toBeLessThanOrEqual(ms * 5e-3);
        } else {
          expect(parseDuration(text)).toBe(ms);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('describeBytes and describeRate (error messages)', () => {
  it('say the exact count, then the short form, in bytes and bytes per second', async () => {
    const { describeBytes, describeRate } = await import('../src/units.js');
    expect(describeBytes(512)).toBe('512 bytes');
    expect(describeBytes(65536)).toBe('65536 bytes (64 KiB)');
    expect(describeBytes(1500000)).toBe('1500000 bytes (1.5 MB)');
    expect(describeBytes(10737419)).toBe('10737419 bytes (~10.2 MiB)');
    expect(describeBytes(512.5)).toBe('512.5 bytes');
    expect(describeRate(1000)).toBe('1000 bytes per second');
    expect(describeRate(1024 ** 3)).toBe('1073741824 bytes per second (1 GiB/s)');
    expect(describeRate(1e7 / 3)).toBe('3333330 bytes per second (~3.18 MiB/s)');
  });
});
