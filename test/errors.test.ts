import { describe, expect, it } from 'vitest';
import { describeValue } from '../src/errors.js';
import {
  AbortError,
  BurstTooSmallError,
  CostExceedsCapacityError,
  InvalidDurationError,
  InvalidOptionError,
  InvalidRateError,
  InvalidSizeError,
  isTokenpaceError,
  JobTimeoutError,
  QueueFullError,
  StoreUnavailableError,
  TokenpaceError,
  WaitTooLongError,
} from '../src/index.js';

describe('errors', () => {
  it.each([
    [new InvalidRateError(-1, 'bad rate'), 'ERR_INVALID_RATE', 'InvalidRateError'],
    [new InvalidSizeError(0, 'bad size'), 'ERR_INVALID_SIZE', 'InvalidSizeError'],
    [new InvalidDurationError(-1, 'bad duration'), 'ERR_INVALID_DURATION', 'InvalidDurationError'],
    [new InvalidOptionError('maxQueue', -1, 'bad option'), 'ERR_INVALID_OPTION', 'InvalidOptionError'],
    [new CostExceedsCapacityError(300, 200), 'ERR_COST_EXCEEDS_CAPACITY', 'CostExceedsCapacityError'],
    [new BurstTooSmallError(10, 100, 'too small'), 'ERR_BURST_TOO_SMALL', 'BurstTooSmallError'],
    [new QueueFullError(1000, 250), 'ERR_QUEUE_FULL', 'QueueFullError'],
    [new WaitTooLongError(1500, 1000, 1500), 'ERR_WAIT_TOO_LONG', 'WaitTooLongError'],
    [new JobTimeoutError(5000), 'ERR_JOB_TIMEOUT', 'JobTimeoutError'],
    [new StoreUnavailableError('redis down'), 'ERR_STORE_UNAVAILABLE', 'StoreUnavailableError'],
    [new AbortError(), 'ABORT_ERR', 'AbortError'],
  ])('%s has code %s and name %s', (error, code, name) => {
    expect(error).toBeInstanceOf(TokenpaceError);
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe(code);
    expect(error.name).toBe(name);
    expect(isTokenpaceError(error)).toBe(true);
    expect(isTokenpaceError(error, error.code)).toBe(true);
    expect(isTokenpaceError(error, code === 'ABORT_ERR' ? 'ERR_QUEUE_FULL' : 'ABORT_ERR')).toBe(false);
  });

  it('messages carry the numbers and say what to change', () => {
    expect(new CostExceedsCapacityError(300, 200).message).toBe(
      "cost 300 exceeds the bucket's capacity (burst) of 200: a request that large can never conform; " +
        'raise the limit to at least 300 or split the request',
    );
    expect(new CostExceedsCapacityError(12, 8, 'the concurrency').message).toMatch(/exceeds the concurrency of 8/);
    expect(new QueueFullError(1000, 249.2).message).toMatch(/maxQueue 1000.*retry in about 250 ms/);
    expect(new WaitTooLongError(1500, 1000, 1500).message).toMatch(/1500 ms exceeds maxWait of 1000 ms/);
    expect(new WaitTooLongError(1, 2, 3, 'custom').message).toBe('custom');
    expect(new JobTimeoutError(5000).message).toMatch(/timeout of 5000 ms/);
    expect(new AbortError().message).toBe('the operation was aborted');
  });

  it('keeps context fields', () => {
    expect(new QueueFullError(10, 5)).toMatchObject({ maxQueue: 10, retryAfterMs: 5 });
    expect(new WaitTooLongError(1500, 1000, 1200)).toMatchObject({ waitMs: 1500, maxWaitMs: 1000, retryAfterMs: 1200 });
    expect(new BurstTooSmallError(10, 100, 'x')).toMatchObject({ burst: 10, minBurst: 100 });
    expect(new InvalidOptionError('maxQueue', -1, 'x')).toMatchObject({ option: 'maxQueue', value: -1 });
    const cause = new Error('ECONNREFUSED');
    expect(new StoreUnavailableError('down', { cause }).cause).toBe(cause);
  });

  it('recognises errors from another copy of the package by their brand, and nothing else', () => {
    const foreign = Object.assign(new Error('x'), { code: 'ERR_QUEUE_FULL' });
    Object.defineProperty(foreign, Symbol.for('tokenpace.error'), { value: true });
    expect(isTokenpaceError(foreign, 'ERR_QUEUE_FULL')).toBe(true);
    expect(isTokenpaceError(Object.assign(new Error('x'), { code: 'ERR_QUEUE_FULL' }))).toBe(false);
    expect(isTokenpaceError(null)).toBe(false);
    expect(isTokenpaceError('ERR_QUEUE_FULL')).toBe(false);
  });

  it.each([
    ['4', '"4"'],
    [4, '4'],
    ['', '""'],
    ['say "hi"', '"say \\"hi\\""'],
    [Number.NaN, 'NaN'],
    [-1, '-1'],
    [10n, '10n'],
    [true, 'a value of type boolean'],
    [undefined, 'a value of type undefined'],
    [null, 'a value of type null'],
    [{}, 'a value of type object'],
    [Object.create(null), 'a value of type object'],
    [[1, 2], 'a value of type object (Array)'],
    [new AbortController(), 'a value of type object (AbortController)'],
    [() => 1, 'a value of type function'],
    [Symbol('x'), 'a value of type symbol'],
  ])('describeValue(%s) is %s: strings quoted, so "4" and 4 differ in a message', (value, expected) => {
    expect(describeValue(value)).toBe(expected);
  });

  it('describeValue cuts long strings and says how long they were', () => {
    const text = describeValue('x'.repeat(1000));
    expect(text).toBe(`"${'x'.repeat(60)}..." (1000 characters)`);
  });
});
