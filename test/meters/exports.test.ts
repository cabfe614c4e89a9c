/**
 * The other meters are public under the names the docs give them, answer with the
 * `Decision` shape, and keep their step functions internal.
 */

import { describe, expect, expectTypeOf, it } from 'vitest';
import * as tokenpace from '../../src/index.js';
import {
  type Color,
  type Decision,
  FixedWindow,
  LeakyBucket,
  type LeakyDecision,
  SlidingWindow,
  srTCM,
} from '../../src/index.js';

describe('other meters: public exports', () => {
  it.each(['FixedWindow', 'SlidingWindow', 'LeakyBucket', 'srTCM', 'trTCM'])('exports %s', (name) => {
    expect(typeof (tokenpace as Record<string, unknown>)[name]).toBe('function');
  });

  it('keeps the step functions internal', () => {
    for (const internal of [
      'fixedWindowTake',
      'slidingLogTake',
      'slidingCounterTake',
      'leakyTake',
      'srTcmMark',
      'trTcmMark',
    ]) {
      expect(tokenpace).not.toHaveProperty(internal);
    }
  });

  it('answers with the Decision shape', () => {
    const w = new FixedWindow({ limit: 1, window: 1000 });
    expectTypeOf(w.tryTake).returns.toEqualTypeOf<Decision>();
    expectTypeOf(new SlidingWindow({ limit: 1, window: 1000 }).tryTakeAt).returns.toEqualTypeOf<Decision>();
    expectTypeOf(new LeakyBucket({ rate: 1, maxQueue: 1 }).tryTake).returns.toEqualTypeOf<LeakyDecision>();
    expectTypeOf<LeakyDecision>().toMatchTypeOf<Decision>();
    expectTypeOf(new srTCM({ cir: 1, cbs: 1, ebs: 1 }).mark).returns.toEqualTypeOf<Color>();
    expect(Object.keys(w.tryTake()).sort()).toEqual(['allowed', 'limit', 'remaining', 'resetAfterMs', 'retryAfterMs']);
  });
});
