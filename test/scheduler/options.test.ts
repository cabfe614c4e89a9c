/**
 * The Scheduler's option checks (src/scheduler/options.ts): what each accepts,
 * and a message that says what to change for what it refuses.
 */

import { describe, expect, it } from 'vitest';
import { MemoryFleetStore } from '../../src/fleet/store.js';
import { Scheduler } from '../../src/index.js';
import {
  DEFAULT_MAX_QUEUE,
  parseConcurrency,
  parseMaxQueue,
  parseOptionalDuration,
  parseSchedulerOptions,
  parseTimeout,
} from '../../src/scheduler/options.js';

describe('option checks', () => {
  it.each([
    // [value, hasRate, expected or error pattern]
    [4, false, 4],
    [0.5, false, 0.5],
    [Number.POSITIVE_INFINITY, true, Number.POSITIVE_INFINITY],
    [
      Number.POSITIVE_INFINITY,
      false,
      /needs at least one finite limit: `rate`, `concurrency` or `limit` with `window`/,
    ],
    [0, true, /Expected `concurrency` to be a number > 0 or Infinity, got 0/],
    ['4', true, /got "4"/],
  ] as const)('parseConcurrency(%s, another finite limit %s)', (value, hasRate, expected) => {
    if (expected instanceof RegExp) {
      expect(() => parseConcurrency(value, hasRate)).toThrow(expect.objectContaining({ option: 'concurrency' }));
      expect(() => parseConcurrency(value, hasRate)).toThrow(expected);
    } else {
      expect(parseConcurrency(value, hasRate)).toBe(expected);
    }
  });

  it('concurrency Infinity is fine beside any finite limit; alone it is refused with the rule', () => {
    expect(parseSchedulerOptions({ concurrency: Number.POSITIVE_INFINITY, rate: 5 }).concurrency).toBe(
      Number.POSITIVE_INFINITY,
    );
    expect(parseSchedulerOptions({ concurrency: Number.POSITIVE_INFINITY, limit: 5, window: '1s' }).concurrency).toBe(
      Number.POSITIVE_INFINITY,
    );
    const rule = /a Scheduler needs at least one finite limit: `rate`, `concurrency` or `limit` with `window`/;
    expect(() => parseSchedulerOptions({ concurrency: Number.POSITIVE_INFINITY })).toThrow(rule);
    expect(() => parseSchedulerOptions({})).toThrow(rule);
    const windowOnly = new Scheduler({ limit: 5, window: '1s', concurrency: 2 });
    windowOnly.setConcurrency(Number.POSITIVE_INFINITY); // the window still limits
    expect(windowOnly.concurrency).toBe(Number.POSITIVE_INFINITY);
    const concurrencyOnly = new Scheduler({ concurrency: 2 });
    expect(() => concurrencyOnly.setConcurrency(Number.POSITIVE_INFINITY)).toThrow(rule);
    expect(concurrencyOnly.concurrency).toBe(2);
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

describe('parseSchedulerOptions: every option parsed once, into settings', () => {
  it('local: the limits, the queue and the timings', () => {
    const settings = parseSchedulerOptions({ rate: '10/s', burst: 5, concurrency: 2, maxWait: '2s', timeout: '1s' });
    expect(settings).toMatchObject({
      params: { ratePerSecond: 10, burst: 5 },
      concurrency: 2,
      maxQueue: DEFAULT_MAX_QUEUE,
      maxWaitMs: 2000,
      timeoutMs: 1000,
      catchUpMs: 5,
      releaseOnTimeout: true,
      paused: false,
      fleet: undefined,
    });
    expect(parseSchedulerOptions({ concurrency: 1 }).params).toBeUndefined();
  });

  it("a fleet's own options, with their defaults; they are refused without a store", () => {
    const store = new MemoryFleetStore();
    const settings = parseSchedulerOptions({ store, key: 'k', rate: 1, lease: '1s', pollInterval: '50ms' });
    expect(settings.fleet).toEqual({ store, key: 'k', leaseMs: 1000, pollMs: 50, reserveAhead: 1 });
    expect(() => parseSchedulerOptions({ rate: 1, pollInterval: 5 })).toThrow(
      expect.objectContaining({ option: 'pollInterval' }),
    );
    expect(() => parseSchedulerOptions({ store, key: 'k', rate: 1, catchUp: 5 })).toThrow(
      expect.objectContaining({ code: 'ERR_NOT_SUPPORTED' }),
    );
  });
});
