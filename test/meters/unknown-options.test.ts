/**
 * The meters as plain JavaScript meets them: an option name they do not know (a typo, or a peer's
 * name) and a clock that is not one are coded errors at construction, never ignored.
 */

import { describe, expect, it } from 'vitest';
import { FixedWindow, isTokenpaceError, LeakyBucket, SlidingWindow, srTCM, trTCM } from '../../src/index.js';

/** Calls `make` (plain JavaScript: the options are not type-checked) and returns what it threw. */
function thrown(make: (options: never) => unknown, options: Record<string, unknown>): unknown {
  try {
    make(options as never);
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

const makers = {
  LeakyBucket: [(o: never) => new LeakyBucket(o), { rate: 10, maxQueue: 5 }],
  FixedWindow: [(o: never) => new FixedWindow(o), { limit: 10, window: '1s' }],
  SlidingWindow: [(o: never) => new SlidingWindow(o), { limit: 10, window: '1s' }],
  srTCM: [(o: never) => new srTCM(o), { cir: 100, cbs: 10, ebs: 20 }],
  trTCM: [(o: never) => new trTCM(o), { pir: 200, pbs: 10, cir: 100, cbs: 10 }],
} as const;

describe.each(Object.entries(makers))('%s', (name, [make, valid]) => {
  it('accepts its own options', () => {
    expect(() => make(valid as never)).not.toThrow();
  });

  it('refuses a misspelt option, naming it and the closest known one', () => {
    const error = thrown(make, { ...valid, clok: undefined, clcok: 1 });
    expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
    expect(error).toMatchObject({ option: 'clcok', value: 1 });
    expect((error as Error).message).toContain(`Unknown option \`clcok\` for ${name} options: did you mean \`clock\`?`);
  });

  it('refuses a clock that is not one', () => {
    const error = thrown(make, { ...valid, clock: {} });
    expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
    expect(error).toMatchObject({ option: 'clock' });
  });
});

describe('window meters', () => {
  it.each([
    ['windowMs', 'write `window`'],
    ['max', 'write `limit`'],
    ['intervalCap', 'write `limit`'],
  ])("answer express-rate-limit's and p-queue's %s with ours", (peer, hint) => {
    const error = thrown((o) => new FixedWindow(o), { limit: 10, window: '1s', [peer]: 5 });
    expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
    expect((error as Error).message).toContain(hint);
  });
});
