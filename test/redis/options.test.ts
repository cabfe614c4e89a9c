/**
 * Every store in Redis refuses bad options up front with an InvalidOptionError
 * (ERR_INVALID_OPTION) that says what to write: the checks live once, in
 * src/redis/health.ts `failureOptions`.
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
  ['timeoutMs above 2^31 - 1 ms', { timeoutMs: 2 ** 31 }, 'timeoutMs', /2\^31 - 1/],
  ['probeIntervalMs above 2^31 - 1 ms', { probeIntervalMs: 2 ** 32 }, 'probeIntervalMs', /2\^31 - 1/],
  ['a string timeoutMs', { timeoutMs: '200' }, 'timeoutMs', /a number of ms/],
  ['timeoutMs 0', { timeoutMs: 0 }, 'timeoutMs', /from 1/],
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
    const store = make({ client, onError: 'deny', timeoutMs: 2 ** 31 - 1, probeIntervalMs: 2 ** 31 - 1 });
    (store as { close?: () => void }).close?.();
  });
});
