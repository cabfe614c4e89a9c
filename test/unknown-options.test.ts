/**
 * Plain JavaScript has no type checker: every constructor and factory refuses an option name it does
 * not know with InvalidOptionError, naming it and the closest known one (or what a peer's name is
 * called here), instead of ignoring it in silence.
 */

import { describe, expect, it } from 'vitest';
import {
  isTokenpaceError,
  KeyedScheduler,
  MemoryFleetStore,
  MemoryStore,
  MemoryWindowStore,
  RedisFleetStore,
  RedisStore,
  RedisWindowStore,
  Scheduler,
  Throttle,
  ThrottleGroup,
  type ThrottleOptions,
  TokenBucket,
  throttleInterceptor,
} from '../src/index.js';

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

  it("Scheduler: p-queue's interval options name `limit`/`window`, and PQueue for p-queue's own", () => {
    for (const name of ['interval', 'intervalCap', 'strict', 'carryoverIntervalCount']) {
      const message = refused(() => new Scheduler(loose({ concurrency: 1, [name]: 1 })), name).message;
      expect(message).toContain('`limit` per `window`');
      expect(message).toContain("PQueue` from 'tokenpace/p-queue'");
    }
  });

  it("KeyedScheduler: brust, and bottleneck's names name ours", () => {
    expect(refused(() => new KeyedScheduler(loose({ rate: 10, brust: 5 })), 'brust').message).toContain(
      'did you mean `burst`?',
    );
    expect(refused(() => new KeyedScheduler(loose({ maxConcurrent: 2 })), 'maxConcurrent').message).toContain(
      'write `concurrency`',
    );
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

describe('unknown option names: buckets and stores', () => {
  it('TokenBucket: capacty is a typo, capacity is our burst', () => {
    refused(() => new TokenBucket(loose({ rate: 1, burst: 2, capacty: 2 })), 'capacty');
    expect(refused(() => new TokenBucket(loose({ rate: 1, burst: 2, capacity: 2 })), 'capacity').message).toContain(
      'write `burst`',
    );
  });

  it('MemoryStore, MemoryWindowStore, MemoryFleetStore: maxkeys and a bad clock', () => {
    expect(refused(() => new MemoryStore(loose({ maxkeys: 5 })), 'maxkeys').message).toContain(
      'did you mean `maxKeys`?',
    );
    refused(() => new MemoryWindowStore(loose({ maxkeys: 5 })), 'maxkeys');
    refused(() => new MemoryStore(loose({ clock: {} })), 'clock');
    refused(() => new MemoryFleetStore(loose({ clok: 1 })), 'clok');
  });

  it('RedisStore, RedisWindowStore, RedisFleetStore: a misspelt timeout', () => {
    const client = { evalsha: async () => null, eval: async () => null, del: async () => 0, ping: async () => 'PONG' };
    for (const make of [
      (o: Record<string, unknown>) => new RedisStore(loose(o)),
      (o: Record<string, unknown>) => new RedisWindowStore(loose(o)),
      (o: Record<string, unknown>) => new RedisFleetStore(loose(o)),
    ]) {
      const error = refused(() => make({ client, onError: 'deny', timeoutMs: 100 }), 'timeoutMs');
      expect(error.message).toContain('did you mean `timeout`?');
    }
  });
});

describe('unknown option names: streams', () => {
  it('Throttle, ThrottleGroup, a member and a subgroup: brust', () => {
    for (const make of [
      () => new Throttle(loose<ThrottleOptions>({ rate: '1MiB/s', brust: 1000 })),
      () => new ThrottleGroup(loose({ rate: '1MiB/s', brust: 1000 })),
      () => new ThrottleGroup({ rate: '1MiB/s' }).throttle(loose({ brust: 1000 })),
      () => new ThrottleGroup({ rate: '1MiB/s' }).group(loose({ brust: 1000 })),
    ]) {
      expect(refused(make, 'brust').message).toContain('did you mean `burst`?');
    }
  });

  it("stream-throttle's bps names our rate; Transform's own options pass", () => {
    expect(refused(() => new Throttle(loose<ThrottleOptions>({ bps: 1000 })), 'bps').message).toContain('write `rate`');
    const t = new Throttle({ rate: '1MiB/s', highWaterMark: 1024, allowHalfOpen: false });
    t.destroy();
  });
});
