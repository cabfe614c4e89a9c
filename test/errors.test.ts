import { types } from 'node:util';
import { describe, expect, it } from 'vitest';
import * as errorsModule from '../src/errors.js';
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
  Scheduler,
  StoreUnavailableError,
  TokenpaceError,
  WaitTooLongError,
} from '../src/index.js';
import { fakeClock } from './helpers/fake-clock.js';

describe('errors', () => {
  it.each([
    [new InvalidRateError(-1, 'bad rate'), 'ERR_INVALID_RATE', 'InvalidRateError'],
    [new InvalidSizeError(0, 'bad size'), 'ERR_INVALID_SIZE', 'InvalidSizeError'],
    [new InvalidDurationError(-1, 'bad duration'), 'ERR_INVALID_DURATION', 'InvalidDurationError'],
    [new InvalidOptionError('maxQueue', -1, 'bad option'), 'ERR_INVALID_OPTION', 'InvalidOptionError'],
    [
      new CostExceedsCapacityError({ cost: 300, capacity: 200 }),
      'ERR_COST_EXCEEDS_CAPACITY',
      'CostExceedsCapacityError',
    ],
    [new BurstTooSmallError(10, 100, 'too small'), 'ERR_BURST_TOO_SMALL', 'BurstTooSmallError'],
    [new QueueFullError({ maxQueue: 1000, retryAfterMs: 250 }), 'ERR_QUEUE_FULL', 'QueueFullError'],
    [
      new WaitTooLongError({ waitMs: 1500, maxWaitMs: 1000, retryAfterMs: 1500 }),
      'ERR_WAIT_TOO_LONG',
      'WaitTooLongError',
    ],
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
    expect(new CostExceedsCapacityError({ cost: 300, capacity: 200 }).message).toBe(
      "cost 300 exceeds the bucket's capacity (burst) of 200: a request that large can never conform; " +
        'raise the limit to at least 300 or split the request',
    );
    expect(new CostExceedsCapacityError({ cost: 12, capacity: 8, capacityName: 'the concurrency' }).message).toMatch(
      /exceeds the concurrency of 8/,
    );
    expect(new QueueFullError({ maxQueue: 1000, retryAfterMs: 249.2 }).message).toMatch(
      /maxQueue 1000.*retry in about 250 ms/,
    );
    expect(new WaitTooLongError({ waitMs: 1500, maxWaitMs: 1000, retryAfterMs: 1500 }).message).toMatch(
      /1500 ms exceeds maxWait of 1000 ms/,
    );
    expect(new WaitTooLongError({ waitMs: 1, maxWaitMs: 2, retryAfterMs: 3, message: 'custom' }).message).toBe(
      'custom',
    );
    expect(new JobTimeoutError(5000).message).toMatch(/timeout of 5000 ms/);
    expect(new AbortError().message).toBe('the operation was aborted');
  });

  it('keeps context fields', () => {
    expect(new QueueFullError({ maxQueue: 10, retryAfterMs: 5 })).toMatchObject({ maxQueue: 10, retryAfterMs: 5 });
    expect(new WaitTooLongError({ waitMs: 1500, maxWaitMs: 1000, retryAfterMs: 1200 })).toMatchObject({
      waitMs: 1500,
      maxWaitMs: 1000,
      retryAfterMs: 1200,
    });
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

/**
 * Every error class of src/errors.ts is a real Error: made by its constructor (so Node's
 * `util.types.isNativeError` knows it), with a stack that has frames, a stable code, and the brand.
 * The classes are read from the module itself, so a class added later is checked without touching
 * this list; the table below says how to make each one, and the test fails for a class it lacks.
 */
describe('every error class is a real Error', () => {
  type ErrorClass = new (...args: never[]) => Error;
  const classes = (Object.entries(errorsModule) as [string, unknown][]).filter(
    (entry): entry is [string, ErrorClass] =>
      typeof entry[1] === 'function' && (entry[1] as { prototype?: unknown }).prototype instanceof Error,
  );
  const make: Record<string, () => Error> = {
    TokenpaceError: () => new errorsModule.TokenpaceError('ERR_INVALID_OPTION', 'base'),
    InvalidRateError: () => new errorsModule.InvalidRateError(-1, 'bad rate'),
    InvalidSizeError: () => new errorsModule.InvalidSizeError(0, 'bad size'),
    InvalidDurationError: () => new errorsModule.InvalidDurationError(-1, 'bad duration'),
    InvalidOptionError: () => new errorsModule.InvalidOptionError('maxQueue', -1, 'bad option'),
    CostExceedsCapacityError: () => new errorsModule.CostExceedsCapacityError({ cost: 300, capacity: 200 }),
    BurstTooSmallError: () => new errorsModule.BurstTooSmallError(10, 100, 'too small'),
    QueueFullError: () => new errorsModule.QueueFullError({ maxQueue: 1000, retryAfterMs: 250 }),
    WaitTooLongError: () => new errorsModule.WaitTooLongError({ waitMs: 1500, maxWaitMs: 1000, retryAfterMs: 1500 }),
    JobTimeoutError: () => new errorsModule.JobTimeoutError(5000),
    StoreUnavailableError: () => new errorsModule.StoreUnavailableError('redis down'),
    ClosedError: () => new errorsModule.ClosedError(),
    NotSupportedError: () => new errorsModule.NotSupportedError('not here'),
    TooManyKeysError: () => new errorsModule.TooManyKeysError(10, 'tenant-11'),
    AbortError: () => new errorsModule.AbortError(),
  };

  it('the table covers exactly the exported error classes', () => {
    expect(classes.length).toBeGreaterThan(10);
    expect(classes.map(([name]) => name).sort()).toEqual(Object.keys(make).sort());
  });

  it.each(classes)('%s', (name, Class) => {
    const error = (make[name] as () => Error)();
    expectRealError(error, Class);
  });

  it('the errors a Scheduler rejects with are real errors too', async () => {
    const { clock, timers } = fakeClock();
    const caught = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: unknown) => error,
      );
    const never = () => new Promise<never>(() => {});
    // A full queue, a cost above the concurrency, and a waiting job removed by clear().
    const busy = new Scheduler({ concurrency: 1, maxQueue: 1, clock });
    void busy.schedule(never);
    const cleared = caught(busy.schedule(() => 0));
    const full = caught(busy.schedule(() => 0));
    const tooCostly = caught(busy.schedule(() => 0, { cost: 2 }));
    busy.clear();
    // A predicted wait past maxWait (rejected at once), and a wait that reaches its deadline.
    const paced = new Scheduler({ rate: 1, maxWait: 100, clock });
    void paced.schedule(() => 0);
    const predicted = caught(paced.schedule(() => 0));
    const blocked = new Scheduler({ concurrency: 1, maxWait: 100, clock });
    void blocked.schedule(never);
    const expired = caught(blocked.schedule(() => 0));
    // A job past its timeout, and a job given to a closed scheduler.
    const timed = new Scheduler({ concurrency: 1, timeout: 10, clock });
    const timedOut = caught(timed.schedule(never));
    const closed = new Scheduler({ concurrency: 1, clock });
    void closed.close();
    const afterClose = caught(closed.schedule(() => 0));
    await timers.tickAsync(200);
    expectRealError(await full, errorsModule.QueueFullError);
    expectRealError(await tooCostly, errorsModule.CostExceedsCapacityError);
    expectRealError(await cleared, errorsModule.AbortError);
    expectRealError(await predicted, errorsModule.WaitTooLongError);
    expectRealError(await expired, errorsModule.WaitTooLongError);
    expectRealError(await timedOut, errorsModule.JobTimeoutError);
    expectRealError(await afterClose, errorsModule.ClosedError);
  });
});

function expectRealError(error: unknown, Class: new (...args: never[]) => Error): void {
  expect(error).toBeInstanceOf(Class);
  expect(error).toBeInstanceOf(Error);
  expect(types.isNativeError(error)).toBe(true);
  const e = error as errorsModule.TokenpaceError;
  expect(typeof e.stack).toBe('string');
  expect(e.stack).toMatch(/\n\s+at /); // at least one frame
  expect(e.stack?.startsWith(`${e.name}: ${e.message}`)).toBe(true);
  expect(e.code).toMatch(/^(ERR_[A-Z_]+|ABORT_ERR)$/);
  expect(e.name).toBe(Class.name);
  expect(errorsModule.isTokenpaceError(e, e.code)).toBe(true);
}
