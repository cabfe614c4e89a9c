/**
 * KeyedLimiter as plain JavaScript meets it: every mistake in its options is a coded error at
 * construction (or a rejection of the call), never a bare TypeError, never a later failure.
 */

import { describe, expect, it } from 'vitest';
import { isTokenpaceError, KeyedLimiter } from '../../src/index.js';

/** `new KeyedLimiter(options)` without type checks, and what it threw. */
function refused(options: unknown): Error & { code?: string; option?: string } {
  try {
    new KeyedLimiter(options as never);
  } catch (error) {
    return error as Error & { code?: string; option?: string };
  }
  throw new Error('expected a throw');
}

describe('KeyedLimiter: bad options are coded errors at construction', () => {
  it.each([
    ['no options at all', undefined, 'ERR_INVALID_OPTION', 'options'],
    ['null', null, 'ERR_INVALID_OPTION', 'options'],
    ['global: null', { rate: 1, burst: 1, global: null }, 'ERR_INVALID_OPTION', 'options'],
    [
      'a global rate past 2^53',
      { rate: 1, burst: 1, global: { rate: 1e308, burst: 1 } },
      'ERR_INVALID_RATE',
      undefined,
    ],
    [
      'a global burst past 2^53',
      { rate: 1, burst: 1, global: { rate: 1, burst: 1e308 } },
      'ERR_INVALID_SIZE',
      undefined,
    ],
    ['store: {}', { rate: 1, burst: 1, store: {} }, 'ERR_INVALID_OPTION', 'store'],
    ['store: 5', { rate: 1, burst: 1, store: 5 }, 'ERR_INVALID_OPTION', 'options'],
    ['clock: {}', { rate: 1, burst: 1, clock: {} }, 'ERR_INVALID_OPTION', 'clock'],
    ['maxkeys (a typo)', { rate: 1, burst: 1, maxkeys: 5 }, 'ERR_INVALID_OPTION', 'maxkeys'],
    ['points (rate-limiter-flexible)', { rate: 1, burst: 1, points: 5 }, 'ERR_INVALID_OPTION', 'points'],
    [
      'a window limiter with a typo',
      { algorithm: 'fixed-window', limit: 5, window: '1s', windw: 2 },
      'ERR_INVALID_OPTION',
      'windw',
    ],
    ['global with a typo', { rate: 1, burst: 1, global: { rate: 1, brust: 2 } }, 'ERR_INVALID_OPTION', 'brust'],
  ])('%s', (_name, options, code, option) => {
    const error = refused(options);
    expect(error).not.toBeInstanceOf(TypeError);
    expect(error.code).toBe(code);
    if (option !== undefined) expect(error.option).toBe(option);
  });

  it('says what to write: the closest name, the missing method, the words of the message', () => {
    expect(refused({ rate: 1, burst: 1, maxkeys: 5 }).message).toContain('did you mean `maxKeys`?');
    expect(refused({ rate: 1, burst: 1, store: {} }).message).toContain('no `decide()` method');
    expect(refused({ rate: 1 }).message).toMatch(/^`burst` is required: a limit that refuses work/);
    expect(refused({ rate: 1, burst: 1, points: 5 }).message).toContain('write `burst`');
    expect(refused({ rate: 1, burst: 1, capacity: 5 }).message).toContain("write `burst`: it is each key's capacity");
  });

  it('take() with a controller instead of its signal rejects with a coded error, charging nothing', async () => {
    const limiter = new KeyedLimiter({ rate: 1, burst: 1 });
    const error = await limiter.take('k', 1, { signal: new AbortController() as never }).catch((e: unknown) => e);
    expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
    expect((error as Error).message).toContain('controller.signal');
    expect((await limiter.peek('k')).remaining).toBe(1);
  });
});
