/**
 * TokenBucket and the bucket's parameters under bad input: every mistake is a coded error
 * (never a TypeError, a crash from a timer callback, a lost token, or a silently ignored value).
 */

import { describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/index.js';
import { MAX_BURST, MAX_RATE, TokenBucket } from '../../src/meters/token-bucket.js';
import { fakeClock, manualClock } from '../helpers/fake-clock.js';

/** Calls `fn` and returns what it threw. */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('TokenBucket: bad input is a coded error', () => {
  it('a signal that is not an AbortSignal is refused before a token is taken or a timer armed', async () => {
    const { clock, timers, pending } = fakeClock();
    const bucket = new TokenBucket({ rate: 10, burst: 1, clock });
    await bucket.take();
    const controller = new AbortController();
    for (const signal of [controller, { aborted: true }, { aborted: false }, 'x', null]) {
      const error = await bucket.take(1, { signal: signal as AbortSignal }).catch((e: unknown) => e);
      expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
      expect(error).toMatchObject({ option: 'signal' });
    }
    expect(
      (await bucket.take(1, { signal: controller as unknown as AbortSignal }).catch((e: Error) => e.message)) as string,
    ).toMatch(
      /Expected `signal` to be an AbortSignal, got a value of type object \(AbortController\): pass the controller's `signal`/,
    );
    expect(pending()).toBe(0); // nothing armed
    timers.tick(100);
    expect(bucket.tokens).toBeCloseTo(1, 9); // nothing charged: the bucket refilled to full
  });

  it('a real signal (aborted or not) still works', async () => {
    const { clock } = fakeClock();
    const bucket = new TokenBucket({ rate: 10, burst: 1, clock });
    await bucket.take(1, { signal: new AbortController().signal });
    const reason = new Error('stop');
    await expect(bucket.take(1, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it.each([
    ['no options', undefined, 'ERR_INVALID_OPTION', /Expected the TokenBucket options/],
    ['null', null, 'ERR_INVALID_OPTION', /got a value of type null/],
    ['no burst', { rate: 10 }, 'ERR_INVALID_OPTION', /`burst` is required: a limit that refuses work/],
    ['clock: {}', { rate: 10, burst: 1, clock: {} }, 'ERR_INVALID_OPTION', /Expected `clock` to have now\(\)/],
    ["tokens: '5'", { rate: 10, burst: 10, tokens: '5' }, 'ERR_INVALID_OPTION', /invalid tokens "5"/],
    ['tokens: NaN', { rate: 10, burst: 10, tokens: Number.NaN }, 'ERR_INVALID_OPTION', /invalid tokens NaN/],
    ['rate above 2^53', { rate: 1e306, burst: 1 }, 'ERR_INVALID_RATE', /largest supported rate is 2\^53/],
    ['burst above 2^53', { rate: 1, burst: 1e306 }, 'ERR_INVALID_SIZE', /largest supported burst is 2\^53/],
  ])('new TokenBucket(%s) throws %s', (_name, options, code, message) => {
    const error = thrown(() => new TokenBucket(options as never));
    expect(isTokenpaceError(error, code as 'ERR_INVALID_OPTION')).toBe(true);
    expect((error as Error).message).toMatch(message);
  });

  it('the largest rate and burst (2^53) work exactly', () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ rate: MAX_RATE, burst: MAX_BURST, clock });
    expect(bucket.tryTake(MAX_BURST)).toBe(true);
    expect(bucket.tryTake(2 ** 18)).toBe(false); // (within the tolerance of capacity * 2^-36 = 2^17 it would pass)
    expect(bucket.delayFor(MAX_BURST)).toBe(1000);
    clock.advance(1000);
    expect(bucket.tryTake(MAX_BURST)).toBe(true);
    expect(() => bucket.setRate(2 ** 54)).toThrow(/largest supported rate/);
    expect(() => bucket.setBurst(2 ** 54)).toThrow(/largest supported burst/);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, '5'])('the *At twins refuse the time %s', (nowMs) => {
    const bucket = new TokenBucket({ rate: 1, burst: 5, clock: manualClock() });
    for (const call of [
      () => bucket.tryTakeAt(nowMs as number),
      () => bucket.delayForAt(nowMs as number),
      () => bucket.reserveAt(nowMs as number),
      () => bucket.tokensAt(nowMs as number),
      () => bucket.refundAt(nowMs as number, 1),
    ]) {
      expect(isTokenpaceError(thrown(call), 'ERR_INVALID_OPTION')).toBe(true);
    }
    expect(bucket.tokens).toBe(5); // nothing taken
  });

  it("a cost of '1' is refused, not compared as a string", () => {
    const bucket = new TokenBucket({ rate: 1, burst: 5, clock: manualClock() });
    expect(
      isTokenpaceError(
        thrown(() => bucket.tryTake('1' as never)),
        'ERR_INVALID_SIZE',
      ),
    ).toBe(true);
    expect(bucket.tokens).toBe(5);
  });

  it('maxWait NaN, negative or a bad string rejects; "1s" is a limit of 1000 ms', async () => {
    const { clock } = fakeClock();
    const bucket = new TokenBucket({ rate: 1, burst: 1, clock });
    await bucket.take();
    for (const maxWait of [Number.NaN, 'soon', -1]) {
      const error = await bucket.take(1, { maxWait }).catch((e: unknown) => e);
      expect(isTokenpaceError(error, 'ERR_INVALID_DURATION')).toBe(true);
    }
    await expect(bucket.take(1, { maxWait: '500ms' })).rejects.toMatchObject({
      code: 'ERR_WAIT_TOO_LONG',
      waitMs: 1000,
      maxWaitMs: 500,
    });
    expect(bucket.reserve(1, { maxWait: '1s' }).ok).toBe(true);
  });

  it('take(1, null) rejects with a coded error', async () => {
    const bucket = new TokenBucket({ rate: 1, burst: 1, clock: manualClock() });
    const error = await bucket.take(1, null as never).catch((e: unknown) => e);
    expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
    expect(bucket.tokens).toBe(1);
  });
});
