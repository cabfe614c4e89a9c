/**
 * The one rule for a missing `burst` (docs/buckets.md#a-missing-burst), over every part that takes
 * one: a bucket that refuses work needs it (the same InvalidOptionError everywhere); a bucket that
 * paces work takes the smallest burst that sustains its rate (one job; a little time of a byte rate).
 */

import { describe, expect, it } from 'vitest';
import {
  InvalidOptionError,
  isTokenpaceError,
  KeyedLimiter,
  rateLimit,
  Scheduler,
  Throttle,
  ThrottleGroup,
  TokenBucket,
} from '../src/index.js';
import { defaultBurstBytes, defaultGroupBurstBytes } from '../src/stream/pacing.js';

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('a missing burst', () => {
  it.each([
    ['TokenBucket', 'burst', () => new TokenBucket({ rate: 10 } as never)],
    ['KeyedLimiter', 'burst', () => new KeyedLimiter({ rate: 10 } as never)],
    [
      'KeyedLimiter global',
      'global.burst',
      () => new KeyedLimiter({ rate: 10, burst: 5, global: { rate: 100 } as never }),
    ],
    ['rateLimit', 'burst', () => rateLimit({ rate: 10 })],
    ['rateLimit global', 'global.burst', () => rateLimit({ rate: 10, burst: 5, global: { rate: 100 } as never })],
  ])('%s, which refuses work, throws the same InvalidOptionError', (_part, option, make) => {
    const error = thrown(make);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect(isTokenpaceError(error, 'ERR_INVALID_OPTION') && error.option).toBe(option);
    expect((error as Error).message).toMatch(/is required: a limit that refuses work states its largest burst/);
    expect((error as Error).message).toContain('docs/buckets.md#a-missing-burst');
  });

  it('a Scheduler, which paces jobs, takes one job', () => {
    const scheduler = new Scheduler({ rate: 10 });
    expect(scheduler.burst).toBe(1);
    scheduler.setBurst(3);
    expect(scheduler.burst).toBe(3);
    const noBucket = new Scheduler({ concurrency: 2 });
    noBucket.setRate(5); // a bucket added later follows the same rule
    expect(noBucket.burst).toBe(1);
  });

  it.each([1024, 64 * 1024, 10 * 2 ** 20, 2 ** 30])(
    'a Throttle at %d B/s, which paces bytes, takes 100 ms of the rate',
    (rate) => {
      expect(new Throttle({ rate }).burst).toBe(defaultBurstBytes(rate));
      expect(new ThrottleGroup({ rate }).burst).toBe(defaultGroupBurstBytes(rate));
    },
  );

  it('an explicit burst is taken as given everywhere', () => {
    expect(new TokenBucket({ rate: 10, burst: 7 }).burst).toBe(7);
    expect(new KeyedLimiter({ rate: 10, burst: 7 }).burst).toBe(7);
    expect(new Scheduler({ rate: 10, burst: 7 }).burst).toBe(7);
    expect(new Throttle({ rate: 10_000, burst: 7000 }).burst).toBe(7000);
  });
});
