/**
 * The store contract suite: the same cases against every store (MemoryStore,
 * RedisStore with ioredis, RedisStore with node-redis). Time is a fake clock
 * the test moves by hand; a RedisStore reads it through its `now` option
 * instead of Redis's TIME, so the numbers are exact in every store.
 */

import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import {
  CostExceedsCapacityError,
  InvalidOptionError,
  InvalidSizeError,
  isTokenpaceError,
  WaitTooLongError,
} from '../../src/errors.js';
import { type BucketKeyedLimiterOptions, KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import type { KeyedStore } from '../../src/keyed/store.js';
import { fakeClock } from '../helpers/fake-clock.js';

/** Makes a fresh, empty store that reads time from `now`. */
export type StoreFactory = (now: () => number, clock: Clock) => KeyedStore;

/** Waits (in real time) until the fake clock has `n` timers armed: a Redis round trip is real I/O. */
export async function armed(pending: () => number, n = 1): Promise<void> {
  const deadline = Date.now() + 2000;
  while (pending() < n) {
    if (Date.now() > deadline) throw new Error(`expected ${n} armed timers, have ${pending()}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/**
 * Awaits `promise`'s rejection and checks it: an instance of `type` with these fields (its `code`
 * among them) and, if given, a message matching `message`. A fulfilment fails, as does any other
 * error: `rejects.toBeDefined()` would pass for every rejection.
 */
export async function expectRejection<E extends Error>(
  promise: Promise<unknown>,
  type: new (...args: never[]) => E,
  fields: Partial<Record<keyof E, unknown>>,
  message?: RegExp,
): Promise<E> {
  const error: unknown = await promise.then(
    (value: unknown) => {
      throw new Error(`expected a rejection with ${type.name}, got a fulfilment with ${JSON.stringify(value)}`);
    },
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(type);
  expect(error).toMatchObject(fields);
  if (message !== undefined) expect((error as Error).message).toMatch(message);
  return error as E;
}

/** The reason an `AbortSignal` aborted without one carries: a DOMException named AbortError. */
const ABORT_REASON = { name: 'AbortError', code: DOMException.ABORT_ERR };

export function storeContract(name: string, makeStore: StoreFactory): void {
  describe(`store contract: ${name}`, () => {
    function setup(options: Omit<BucketKeyedLimiterOptions, 'store' | 'clock'>, startMs = 1_000_000) {
      const fc = fakeClock(startMs);
      const store = makeStore(() => fc.timers.now, fc.clock);
      const limiter = new KeyedLimiter({ ...options, store, clock: fc.clock });
      return { fc, store, limiter };
    }

    async function takeMany(limiter: KeyedLimiter, key: string, n: number, cost = 1): Promise<number> {
      let admitted = 0;
      for (let i = 0; i < n; i++) if ((await limiter.tryTake(key, cost)).allowed) admitted++;
      return admitted;
    }

    it('100/s with a burst of 200: 200 pass at once, the 201st waits 10 ms, full again after exactly 2 s', async () => {
      const { fc, limiter } = setup({ rate: 100, burst: 200 });
      expect(await takeMany(limiter, 'client', 200)).toBe(200);
      const refused = await limiter.tryTake('client');
      expect(refused).toEqual({ allowed: false, remaining: 0, retryAfterMs: 10, resetAfterMs: 2000, limit: 200 });
      fc.timers.tick(1999);
      expect((await limiter.peek('client', 200)).allowed).toBe(false);
      expect((await limiter.peek('client', 199)).allowed).toBe(true);
      fc.timers.tick(1);
      const full = await limiter.peek('client', 200);
      expect(full).toMatchObject({ allowed: true, remaining: 200, resetAfterMs: 0 });
      fc.timers.tick(60_000); // idle: never above the burst
      expect(await takeMany(limiter, 'client', 201)).toBe(200);
    });

    it('20/s with 40: after an idle minute 30 quick calls pass, and of the next 30 exactly 10', async () => {
      const { fc, limiter } = setup({ rate: 20, burst: 40 });
      await limiter.tryTake('k');
      fc.timers.tick(60_000);
      expect(await takeMany(limiter, 'k', 30)).toBe(30);
      expect(await takeMany(limiter, 'k', 30)).toBe(10);
      const d = await limiter.tryTake('k');
      expect(d).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 50, limit: 40 });
    });

    it('keys are independent, and __proto__ is an ordinary key', async () => {
      const { limiter } = setup({ rate: 1, burst: 2 });
      for (const key of ['__proto__', 'constructor', 'a', 'hasOwnProperty']) {
        expect(await takeMany(limiter, key, 3)).toBe(2);
      }
    });

    it('a cost takes that many tokens; a refused cost charges nothing', async () => {
      const { limiter } = setup({ rate: 10, burst: 10 });
      expect((await limiter.tryTake('k', 7)).remaining).toBe(3);
      const refused = await limiter.tryTake('k', 5);
      expect(refused).toMatchObject({ allowed: false, remaining: 3, retryAfterMs: 200 });
      expect(await limiter.tryTake('k', 3)).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('cost above the burst is ERR_COST_EXCEEDS_CAPACITY; a bad key or cost rejects clearly', async () => {
      const { limiter } = setup({ rate: 10, burst: 10, global: { rate: 100, burst: 8 } });
      const tooLarge = { code: 'ERR_COST_EXCEEDS_CAPACITY' } as const;
      // The key's bucket is checked first, then the global one; the message names both numbers.
      await expectRejection(
        limiter.tryTake('k', 11),
        CostExceedsCapacityError,
        { ...tooLarge, cost: 11, capacity: 10 },
        /^cost 11 exceeds the bucket's capacity \(burst\) of 10: /,
      );
      await expectRejection(limiter.tryTake('k', 9), CostExceedsCapacityError, { ...tooLarge, cost: 9, capacity: 8 });
      await expectRejection(limiter.take('k', 11), CostExceedsCapacityError, { ...tooLarge, cost: 11, capacity: 10 });
      const badCost = { code: 'ERR_INVALID_SIZE' } as const;
      await expectRejection(limiter.tryTake('k', -1), InvalidSizeError, { ...badCost, value: -1 }, /invalid cost -1/);
      await expectRejection(limiter.tryTake('k', Number.NaN), InvalidSizeError, badCost, /invalid cost NaN/);
      const badKey = { code: 'ERR_INVALID_OPTION', option: 'key' } as const;
      await expectRejection(limiter.tryTake(''), InvalidOptionError, { ...badKey, value: '' }, /got an empty string/);
      await expectRejection(
        limiter.tryTake(42 as unknown as string),
        InvalidOptionError,
        { ...badKey, value: 42 },
        /non-empty string, got number/,
      );
      await expectRejection(limiter.reset(''), InvalidOptionError, badKey, /non-empty string/);
      expect(await limiter.tryTake('k', 8)).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('global: admitted only when both buckets have the tokens, neither charged when either refuses', async () => {
      const { fc, limiter } = setup({ rate: 1, burst: 5, global: { rate: 2, burst: 8 } });
      expect(await takeMany(limiter, 'a', 6)).toBe(5); // the key refuses the 6th: the global keeps 3
      expect(await takeMany(limiter, 'b', 4)).toBe(3); // the global refuses b's 4th
      // b's bucket was charged 3, not 4: once the global refills, b still has 2
      fc.timers.tick(2500); // global +5 (to 5), each key +2.5
      expect((await limiter.peek('b')).remaining).toBe(4);
      expect(await takeMany(limiter, 'c', 10)).toBe(5); // c is full (5) and the global holds 5
      expect((await limiter.tryTake('b')).allowed).toBe(false); // global empty, b has tokens
      expect((await limiter.peek('b', 4)).retryAfterMs).toBe(2000); // the global's wait: 4 tokens at 2/s
      // totals: never more than the global's burst + rate * T over the whole run
      fc.timers.tick(10_000);
      const admitted =
        (await takeMany(limiter, 'a', 20)) + (await takeMany(limiter, 'b', 20)) + (await takeMany(limiter, 'd', 20));
      expect(admitted).toBe(8);
    });

    it('a refused request changes nothing (the retry-after stays exact)', async () => {
      const { fc, limiter } = setup({ rate: 4, burst: 4 });
      expect(await takeMany(limiter, 'k', 4)).toBe(4);
      for (let i = 0; i < 50; i++) expect((await limiter.tryTake('k')).retryAfterMs).toBe(250);
      fc.timers.tick(250);
      expect(await takeMany(limiter, 'k', 2)).toBe(1);
    });

    it('time going backwards creates no token and shuts no key for the step (re-counted from the earlier time)', async () => {
      const { fc, limiter } = setup({ rate: 10, burst: 10 });
      expect(await takeMany(limiter, 'k', 10)).toBe(10);
      fc.timers.setSystemTime(fc.timers.now - 5000);
      expect(await takeMany(limiter, 'k', 5)).toBe(0); // the step back earns nothing
      const d = await limiter.peek('k');
      expect(d.remaining).toBe(0);
      // Go's x/time rule (bucket.ts rewind): one token's refill from the earlier time, not the 5 s step.
      expect(d.retryAfterMs).toBeGreaterThanOrEqual(100);
      expect(d.retryAfterMs).toBeLessThanOrEqual(103);
      fc.timers.tick(100);
      expect(await takeMany(limiter, 'k', 5)).toBe(1);
      fc.timers.tick(60_000);
      expect(await takeMany(limiter, 'k', 20)).toBe(10); // never more than the burst
    });

    it('peek spends nothing; reset makes a key full again', async () => {
      const { limiter } = setup({ rate: 1, burst: 3 });
      for (let i = 0; i < 10; i++) expect((await limiter.peek('k')).allowed).toBe(true);
      expect(await takeMany(limiter, 'k', 5)).toBe(3);
      await limiter.reset('k');
      expect(await takeMany(limiter, 'k', 5)).toBe(3);
    });

    it('setRate and setBurst apply from the next decision', async () => {
      const { fc, limiter } = setup({ rate: 1, burst: 10 });
      expect(await takeMany(limiter, 'k', 10)).toBe(10);
      limiter.setRate(10);
      fc.timers.tick(500);
      expect(await takeMany(limiter, 'k', 10)).toBe(5);
      limiter.setBurst(2);
      fc.timers.tick(10_000);
      expect(await takeMany(limiter, 'k', 10)).toBe(2);
      expect(limiter.burst).toBe(2);
      expect(limiter.rate).toBe(10);
    });

    it('take reserves and waits: the third of a burst of 2 at 10/s resolves after exactly 100 ms', async () => {
      const { fc, limiter } = setup({ rate: 10, burst: 2 });
      await limiter.take('k');
      await limiter.take('k');
      let done = false;
      const third = limiter.take('k').then((d) => {
        done = true;
        return d;
      });
      await armed(fc.pending);
      await fc.timers.tickAsync(99);
      expect(done).toBe(false);
      await fc.timers.tickAsync(1);
      // The decision describes the bucket when the wait ends: at 0, full again 200 ms later (not the
      // -1 and 300 ms of the instant the reservation was made).
      expect(await third).toEqual({ allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 200, limit: 2 });
      // the reservation was charged: the bucket is at 0, not 1
      expect((await limiter.tryTake('k')).allowed).toBe(false);
    });

    it('take over maxWait charges nothing and rejects with WaitTooLongError', async () => {
      const { limiter } = setup({ rate: 10, burst: 2 });
      await limiter.take('k', 2);
      const error = await expectRejection(limiter.take('k', 1, { maxWait: 50 }), WaitTooLongError, {
        code: 'ERR_WAIT_TOO_LONG',
        waitMs: 100,
        maxWaitMs: 50,
        retryAfterMs: 50,
      });
      expect(isTokenpaceError(error, 'ERR_WAIT_TOO_LONG')).toBe(true);
      // nothing charged: a reservation within maxWait still waits only 100 ms
      const d = await limiter.peek('k');
      expect(d.retryAfterMs).toBe(100);
    });

    it('an aborted take gives its tokens back by the cancel rule', async () => {
      const { fc, limiter } = setup({ rate: 10, burst: 2 });
      await limiter.take('k', 2);
      const first = new AbortController();
      const a = limiter.take('k', 2, { signal: first.signal }); // ready at +200 ms
      await armed(fc.pending, 1);
      const b = limiter.take('k', 1); // ready at +300 ms: counts on 1 token after a's
      await armed(fc.pending, 2);
      const gone = new Error('client went away');
      first.abort(gone);
      await expect(a).rejects.toBe(gone); // the signal's reason itself
      // a's 2 tokens: 1 is counted on by b, so 1 comes back. The bucket is at -3 + 1 = -2.
      const d = await limiter.peek('k');
      expect(d.retryAfterMs).toBe(300);
      await fc.timers.tickAsync(300);
      await b;
      // Alone, a cancelled reservation comes back whole.
      const alone = new AbortController();
      fc.timers.tick(200); // full: 2
      const c = limiter.take('k', 2);
      await c;
      const e = limiter.take('k', 2, { signal: alone.signal });
      await armed(fc.pending, 1);
      alone.abort();
      await expect(e).rejects.toBe(alone.signal.reason);
      await expectRejection(e, DOMException, ABORT_REASON);
      expect((await limiter.peek('k')).retryAfterMs).toBe(100); // back to 0 tokens: one token in 100 ms
      // an already-aborted signal charges nothing
      const already = AbortSignal.abort();
      const late = limiter.take('k', 1, { signal: already });
      await expect(late).rejects.toBe(already.reason);
      await expectRejection(late, DOMException, ABORT_REASON);
      expect((await limiter.peek('k')).retryAfterMs).toBe(100);
    });

    it('an abort during the store round trip gives an immediate reservation back whole', async () => {
      const { limiter } = setup({ rate: 1, burst: 4, global: { rate: 1, burst: 6 } });
      const controller = new AbortController();
      const taking = limiter.take('k', 3, { signal: controller.signal });
      const gone = new Error('gone');
      controller.abort(gone);
      await expect(taking).rejects.toBe(gone);
      expect((await limiter.peek('k', 4)).allowed).toBe(true);
      expect(await limiter.tryTake('k', 4)).toMatchObject({ allowed: true, remaining: 0 });
      expect((await limiter.peek('other', 2)).allowed).toBe(true); // the global got its 3 back too: 6 - 4 = 2
      expect((await limiter.peek('other', 3)).allowed).toBe(false);
    });

    it('take with a global limit waits for the slower bucket', async () => {
      const { fc, limiter } = setup({ rate: 100, burst: 10, global: { rate: 10, burst: 10 } });
      for (let i = 0; i < 10; i++) await limiter.take(`k${i}`);
      const waiting = limiter.take('k0', 2);
      await armed(fc.pending);
      let done = false;
      void waiting.then(() => {
        done = true;
      });
      await fc.timers.tickAsync(199);
      expect(done).toBe(false);
      await fc.timers.tickAsync(1);
      await waiting;
      expect(done).toBe(true);
    });

    it('credit gives a cost back to the key and the global bucket, never above either capacity', async () => {
      const { fc, limiter } = setup({ rate: 1, burst: 5, global: { rate: 1, burst: 8 } });
      expect(await takeMany(limiter, 'a', 5)).toBe(5); // a: 0, global: 3
      await limiter.credit('a', 2); // a: 2, global: 5
      expect(await limiter.peek('a')).toMatchObject({ remaining: 2 });
      expect(await takeMany(limiter, 'b', 5)).toBe(5); // the global had 5 for b
      expect((await limiter.tryTake('c')).allowed).toBe(false); // and is empty now
      await limiter.credit('a', 5); // a: min(5, 2 + 5); global: 5
      expect(await takeMany(limiter, 'a', 9)).toBe(5);
      // A key the store does not have is full (nothing to add); the global bucket, charged too, gets 3.
      await limiter.credit('never-seen', 3);
      fc.timers.tick(3000); // global: 6
      expect(await takeMany(limiter, 'never-seen', 9)).toBe(5);
      expect(await takeMany(limiter, 'c', 9)).toBe(1);
      await expectRejection(limiter.credit('a', 6), CostExceedsCapacityError, { cost: 6, capacity: 5 });
      await expectRejection(limiter.credit(''), InvalidOptionError, { option: 'key' });
    });
  });
}
