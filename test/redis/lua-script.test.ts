/**
 * LuaScript (src/redis/lua-script.ts), the one way the stores call Redis, on
 * fake clients and a fake clock: EVALSHA first, EVAL with the whole script on
 * NOSCRIPT, the time argument, the number encoding of replies, and the error
 * rules (a client that throws, a reply of the wrong shape, a timeout).
 */

import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { fromLua, LUA_PRELUDE, LuaScript } from '../../src/redis/lua-script.js';
import { type StoreEvents, StoreHealth } from '../../src/stores/health.js';
import { fakeClock } from '../helpers/fake-clock.js';

type Sent = [string, ...unknown[]];

/** An ioredis-shaped client that records what it is sent and answers with `answer`. */
function ioredisFake(answer: (command: 'evalsha' | 'eval') => unknown) {
  const sent: Sent[] = [];
  const reply = (command: 'evalsha' | 'eval') => {
    const value = answer(command);
    return value instanceof Error ? Promise.reject(value) : Promise.resolve(value);
  };
  const client = {
    evalsha: (...args: unknown[]) => {
      sent.push(['evalsha', ...args]);
      return reply('evalsha');
    },
    eval: (...args: unknown[]) => {
      sent.push(['eval', ...args]);
      return reply('eval');
    },
    del: () => Promise.resolve(0),
    ping: () => Promise.resolve('PONG'),
  };
  return { client, sent };
}

function script(client: object, options: { nodeRedis?: boolean; now?: () => number; timeoutMs?: number } = {}) {
  const fake = fakeClock(1000);
  const health = new StoreHealth({
    owner: new EventEmitter<StoreEvents>(),
    backend: 'Redis',
    failure: { policy: 'deny', timeoutMs: options.timeoutMs ?? 100, probeIntervalMs: 50 },
    clock: fake.clock,
    probe: () => Promise.resolve('PONG'),
    stats: { failures: 0 },
  });
  const lua = new LuaScript({
    name: 'test',
    lua: 'return { fmt(now) }',
    client: client as never,
    nodeRedis: options.nodeRedis ?? false,
    health,
    now: options.now,
  });
  return { lua, ...fake };
}

describe('LuaScript', () => {
  it('calls EVALSHA with the SHA-1 of the prelude and the script, the time first among the arguments', async () => {
    const { client, sent } = ioredisFake(() => ['1', '2.5', '-0', 'inf']);
    const { lua } = script(client, { now: () => 1234.5 });
    expect(lua.lua.startsWith(LUA_PRELUDE)).toBe(true);
    expect(lua.sha).toBe(createHash('sha1').update(lua.lua).digest('hex'));
    const reply = await lua.run(['k1', 'k2'], ['a', 'b']);
    expect(reply).toEqual([1, 2.5, -0, Number.POSITIVE_INFINITY]);
    expect(sent).toEqual([['evalsha', lua.sha, 2, 'k1', 'k2', '1234.5', 'a', 'b']]);
  });

  it('sends an empty time (Redis TIME) without a virtual clock, and calls node-redis its own way', async () => {
    const sent: unknown[] = [];
    const client = {
      evalSha: (sha: string, options: unknown) => {
        sent.push(['evalSha', sha, options]);
        return Promise.resolve(['7']);
      },
      eval: () => Promise.reject(new Error('not expected')),
    };
    const { lua } = script(client, { nodeRedis: true });
    expect(await lua.run(['k'], ['x'])).toEqual([7]);
    expect(sent).toEqual([['evalSha', lua.sha, { keys: ['k'], arguments: ['', 'x'] }]]);
  });

  it('sends the whole script with EVAL when Redis has lost it (NOSCRIPT), once per call', async () => {
    let known = false;
    const { client, sent } = ioredisFake((command) => {
      if (command === 'evalsha' && !known) return new Error('NOSCRIPT No matching script. Please use EVAL.');
      known = true;
      return ['3'];
    });
    const { lua } = script(client);
    expect(await lua.run(['k'], [])).toEqual([3]);
    expect(await lua.run(['k'], [])).toEqual([3]);
    expect(sent.map(([command]) => command)).toEqual(['evalsha', 'eval', 'evalsha']);
    expect(sent[1]).toEqual(['eval', lua.lua, 1, 'k', '']);
  });

  it('rejects with any other error of Redis or the client, without EVAL', async () => {
    const { client, sent } = ioredisFake(() => new Error('ERR user_script:1: boom'));
    const { lua } = script(client);
    await expect(lua.run(['k'], [])).rejects.toThrow(/boom/);
    expect(sent.map(([command]) => command)).toEqual(['evalsha']);
    const throwing = {
      evalsha: () => {
        throw new Error('Connection is closed.');
      },
      eval: () => Promise.resolve(['1']),
    };
    await expect(script(throwing).lua.run(['k'], [])).rejects.toThrow(/closed/);
  });

  it.each([
    ['a string', 'OK'],
    ['an array with a word that is no number', ['1', 'x']],
    ['an array with an empty word', ['']],
    ['an array with a nested array', [['1']]],
    ['nothing', null],
  ])('rejects a reply that is not an array of numbers: %s', async (_, answer) => {
    const { client } = ioredisFake(() => answer);
    const error = await script(client)
      .lua.run(['k'], [])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isTokenpaceError(error, 'ERR_STORE_UNAVAILABLE')).toBe(true);
    expect((error as Error).message).toMatch(/^unexpected reply from the test script: expected an array of numbers/);
  });

  it("rejects at the store's timeout when Redis does not answer, and absorbs the late answer", async () => {
    let answer: (value: unknown) => void = () => {};
    const client = {
      evalsha: () => new Promise((resolve) => (answer = resolve)),
      eval: () => Promise.reject(new Error('not expected')),
    };
    const { lua, timers } = script(client, { timeoutMs: 100 });
    let settled: unknown;
    lua.run(['k'], []).then(
      () => (settled = 'answered'),
      (error: unknown) => (settled = error),
    );
    await timers.tickAsync(99);
    expect(settled).toBeUndefined();
    await timers.tickAsync(1);
    expect(isTokenpaceError(settled, 'ERR_STORE_UNAVAILABLE')).toBe(true);
    expect((settled as Error).message).toMatch(/did not answer within the store's timeout \(100 ms\)/);
    answer(['1']);
    await timers.tickAsync(10);
    expect(isTokenpaceError(settled, 'ERR_STORE_UNAVAILABLE')).toBe(true);
  });

  it('reads numbers as fmt writes them', () => {
    expect(['0', '-0', '1e+300', '-2.5', 'inf', '-inf', '0.10000000000000001'].map(fromLua)).toEqual([
      0,
      -0,
      1e300,
      -2.5,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      0.1,
    ]);
    expect(['nan', '-nan', '', 'x', undefined, 1].map(fromLua)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });
});
