/**
 * The Scheduler's option checks (src/scheduler/options.ts): what each accepts,
 * and a message that says what to change for what it refuses.
 */

import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_QUEUE,
  parseConcurrency,
  parseMaxQueue,
  parseOptionalDuration,
  parseTimeout,
} from '../../src/scheduler/options.js';

describe('option checks', () => {
  it.each([
    // [value, hasRate, expected or error pattern]
    [4, false, 4],
    [0.5, false, 0.5],
    [Number.POSITIVE_INFINITY, true, Number.POSITIVE_INFINITY],
    [Number.POSITIVE_INFINITY, false, /or give a `rate`/],
    [0, true, /Expected `concurrency` to be a number > 0 or Infinity, got 0/],
    ['4', true, /got "4"/],
  ] as const)('parseConcurrency(%s, hasRate %s)', (value, hasRate, expected) => {
    if (expected instanceof RegExp) {
      expect(() => parseConcurrency(value, hasRate)).toThrow(expect.objectContaining({ option: 'concurrency' }));
      expect(() => parseConcurrency(value, hasRate)).toThrow(expected);
    } else {
      expect(parseConcurrency(value, hasRate)).toBe(expected);
    }
  });

  it.each([
    [undefined, DEFAULT_MAX_QUEUE],
    [0, 0],
    [5, 5],
  ])('parseMaxQueue(%s) = %d', (value, expected) => {
    expect(parseMaxQueue(value)).toBe(expected);
  });

  it.each([Number.POSITIVE_INFINITY, -1, 1.5, Number.NaN])(
    'parseMaxQueue(%s) is refused: the queue is bounded',
    (value) => {
      expect(() => parseMaxQueue(value)).toThrow(/bounded on purpose/);
    },
  );

  it('parseTimeout: absent is Infinity, 0 is refused, durations parse', () => {
    expect(parseTimeout(undefined)).toBe(Number.POSITIVE_INFINITY);
    expect(parseTimeout('30d')).toBe(30 * 24 * 3600 * 1000);
    expect(parseTimeout(250)).toBe(250);
    expect(() => parseTimeout(0)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'timeout' }));
    expect(() => parseTimeout('soon')).toThrow(expect.objectContaining({ code: 'ERR_INVALID_DURATION' }));
  });

  it('parseOptionalDuration: the fallback when absent', () => {
    expect(parseOptionalDuration(undefined, 5)).toBe(5);
    expect(parseOptionalDuration('2s', 5)).toBe(2000);
  });
});
