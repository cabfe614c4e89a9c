/**
 * Every store in Redis refuses bad options up front with an InvalidOptionError
 * (ERR_INVALID_OPTION) that says what to write: the checks live once, in
 * src/stores/health.ts `failureOptions`. Durations are a number of ms or a
 * string such as '250ms'.
 */

import { describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { RedisStore } from '../../src/keyed/redis-store.js';
import { RedisWindowStore } from '../../src/keyed/window-store.js';

const client = {
  evalsha: () => Promise.resolve(null),
  eval: () => Promise.resolve(null),
  del: () => Promise.resolve(0),
  ping: () => Promise.resolve('PONG'),
};
type Make = (options: Record<string, unknown>) => unknown;
const stores: [string, Make][] = [
  ['RedisStore', (o) => new RedisStore(o as never)],
  ['RedisWindowStore', (o) => new RedisWindowStore(o as never)],
  ['RedisFleetStore', (o) => new RedisFleetStore(o as never)],
];
const bad: [string, Record<string, unknown>, string, RegExp][] = [
  ['timeout above 2^31 - 1 ms', { timeout: 2 ** 31 }, 'timeout', /2\^31 - 1/],
  ['timeout of 25 days as a string', { timeout: '25d' }, 'timeout', /2\^31 - 1/],
  ['probeInterval above 2^31 - 1 ms', { probeInterval: 2 ** 32 }, 'probeInterval', /2\^31 - 1/],
  ['timeout 0', { timeout: 0 }, 'timeout', /from 1 ms/],
  ["timeout '0s'", { timeout: '0s' }, 'timeout', /from 1 ms/],
  ['timeout NaN', { timeout: Number.NaN }, 'timeout', /from 1 ms/],
  ['a boolean timeout', { timeout: true }, 'timeout', /a duration/],
  ['probeInterval Infinity', { probeInterval: Number.POSITIVE_INFINITY }, 'probeInterval', /from 1 ms/],
  ["now: 'x'", { now: 'x' }, 'now', /a function/],
  ['a missing client', { client: undefined }, 'client', /ioredis or node-redis/],
  ['a null client', { client: null }, 'client', /ioredis or node-redis/],
  ['a client without evalsha', { client: { ping: () => 0 } }, 'client', /evalsha/],
];

describe.each(stores)('%s refuses bad options up front', (_, make) => {
  it.each(bad)('%s', (_name, change, option, message) => {
    let thrown: unknown;
    try {
      make({ client, onError: 'deny', expectedWorkers: 2, ...change });
    } catch (error) {
      thrown = error;
    }
    expect(isTokenpaceError(thrown, 'ERR_INVALID_OPTION')).toBe(true);
    expect((thrown as { option?: string }).option ?? option).toBe(option);
    expect(String((thrown as Error).message)).toMatch(message);
  });

  it('no options at all', () => {
    expect(() => make(undefined as never)).toThrow(/options object/);
  });

  it('accepts 2^31 - 1 ms', () => {
    const store = make({ client, onError: 'deny', timeout: 2 ** 31 - 1, probeInterval: 2 ** 31 - 1 });
    (store as { close?: () => void }).close?.();
  });

  it('takes durations as numbers of ms or as strings, and reports them in ms', () => {
    const store = make({ client, onError: 'deny', timeout: '1.5s', probeInterval: '250ms' }) as {
      timeoutMs: number;
      probeIntervalMs: number;
      close(): void;
    };
    expect([store.timeoutMs, store.probeIntervalMs]).toEqual([1500, 250]);
    store.close();
    const byDefault = make({ client, onError: 'deny' }) as typeof store;
    expect([byDefault.timeoutMs, byDefault.probeIntervalMs]).toEqual([200, 250]);
    byDefault.close();
  });

  it('refuses a string that is no duration with InvalidDurationError', () => {
    expect(() => make({ client, onError: 'deny', timeout: 'soon' })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_DURATION' }),
    );
  });

  it('refuses the names with a unit suffix, naming the option to write', () => {
    expect(() => make({ client, onError: 'deny', timeoutMs: 100 })).toThrow(/did you mean `timeout`/);
    expect(() => make({ client, onError: 'deny', probeIntervalMs: 100 })).toThrow(/probeInterval/);
  });
});
