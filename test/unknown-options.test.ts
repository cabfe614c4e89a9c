/**
 * Plain JavaScript has no type checker: every constructor and factory refuses an option name it does
 * not know with InvalidOptionError, naming it and the closest known one (or what a peer's name is
 * called here), instead of ignoring it in silence.
 */

import { describe, expect, it } from 'vitest';
import { isTokenpaceError, Scheduler, throttleInterceptor } from '../src/index.js';

/** What `make` threw: it must be an InvalidOptionError for `option`. */
function refused(make: () => unknown, option: string): Error {
  let error: unknown;
  try {
    make();
  } catch (e) {
    error = e;
  }
  expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
  expect(error).toMatchObject({ option });
  return error as Error;
}

const loose = <T>(options: Record<string, unknown>): T => options as T;

describe('unknown option names', () => {
  it('Scheduler: brust', () => {
    const error = refused(() => new Scheduler(loose({ rate: 10, brust: 5 })), 'brust');
    expect(error.message).toContain('did you mean `burst`?');
  });

  it("Scheduler: bottleneck's maxConcurrent and minTime name ours", () => {
    expect(refused(() => new Scheduler(loose({ maxConcurrent: 2 })), 'maxConcurrent').message).toContain(
      'write `concurrency`',
    );
    expect(refused(() => new Scheduler(loose({ minTime: 5 })), 'minTime').message).toContain('write `rate`');
  });

  it("Scheduler: p-queue's intervalCap stays mapped", () => {
    expect(() => new Scheduler({ intervalCap: 10, interval: 1000 })).not.toThrow();
  });

  it('throttleInterceptor: brust, at the top and for one origin', () => {
    expect(refused(() => throttleInterceptor(loose({ rate: 10, brust: 5 })), 'brust').message).toContain(
      'did you mean `burst`?',
    );
    refused(() => throttleInterceptor(loose({ rate: 10, origins: { 'http://a.test': { rat: 5 } } })), 'rat');
  });

  it('throttleInterceptor: a clock that is not one', () => {
    refused(() => throttleInterceptor(loose({ rate: 10, clock: {} })), 'clock');
  });
});
