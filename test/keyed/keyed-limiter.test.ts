/**
 * KeyedLimiter over stores of every kind: it knows no concrete store class. A store that offers the
 * contract's optional `decideSync` answers `tryTake` and `peek` through it, whatever its class (a
 * wrapper around a MemoryStore included); a store with `decide` alone is asked through `decide`.
 * Either way the decisions are the same.
 */

import { describe, expect, it } from 'vitest';
import { channelNames } from '../../src/diagnostics.js';
import { type KeyedDecisionMessage, KeyedLimiter, type KeyedRejectedMessage } from '../../src/keyed/keyed-limiter.js';
import { MemoryStore } from '../../src/keyed/memory-store.js';
import type { KeyedStore, StoreOp } from '../../src/keyed/store.js';
import { record } from '../helpers/channel-recorder.js';
import { fakeClock } from '../helpers/fake-clock.js';

/** A store of one's own around a MemoryStore, counting the calls the limiter makes. */
function wrap(inner: MemoryStore, withSync: boolean) {
  const calls = { decide: 0, decideSync: 0 };
  const store: KeyedStore = {
    decide: (op) => {
      calls.decide++;
      return inner.decide(op);
    },
    refund: (op, result) => inner.refund(op, result),
    credit: (op) => inner.credit(op),
    reset: (key) => inner.reset(key),
  };
  if (withSync) {
    store.decideSync = (op: StoreOp) => {
      calls.decideSync++;
      return inner.decideSync(op);
    };
  }
  return { store, calls };
}

const kinds = {
  'the default MemoryStore': (inner: MemoryStore) => ({ store: inner as KeyedStore, calls: undefined }),
  'a wrapper with decideSync': (inner: MemoryStore) => wrap(inner, true),
  'a wrapper with decide only': (inner: MemoryStore) => wrap(inner, false),
};

/** One run of tryTake, peek, take, credit and reset on a limiter over `kind`, with everything it answered. */
async function run(kind: keyof typeof kinds) {
  const f = fakeClock(1000);
  const { store } = kinds[kind](new MemoryStore({ clock: f.clock }));
  const limiter = new KeyedLimiter({ rate: 10, burst: 3, global: { rate: 20, burst: 5 }, store, clock: f.clock });
  const decisions = record<KeyedDecisionMessage>(channelNames.keyedDecision);
  const refusals = record<KeyedRejectedMessage>(channelNames.keyedRejected);
  const answers: unknown[] = [];
  for (const [key, cost] of [
    ['a', 2],
    ['a', 2],
    ['b', 3],
    ['b', 1],
  ] as const) {
    answers.push(await limiter.tryTake(key, cost));
  }
  answers.push(await limiter.peek('a', 1));
  const taking = limiter.take('a', 2);
  await f.timers.tickAsync(200);
  answers.push(await taking);
  await limiter.credit('a', 1);
  answers.push(await limiter.peek('a', 3));
  await limiter.reset('b');
  f.timers.tick(50);
  answers.push(await limiter.tryTake('b', 3));
  await limiter.take('a', 3, { maxWait: 10 }).catch((error: Error & { code: string }) => answers.push(error.code));
  const own = <T extends { limiter: KeyedLimiter }>(messages: T[]) =>
    messages.filter((m) => m.limiter === limiter).map(({ limiter: _, ...rest }) => rest);
  return { answers, decisions: own(decisions), refusals: own(refusals) };
}

describe('KeyedLimiter: every store takes the same path', () => {
  it('decides alike over a MemoryStore, a wrapper with decideSync and a wrapper with decide only', async () => {
    const memory = await run('the default MemoryStore');
    expect(memory.answers).toHaveLength(9);
    expect(memory.refusals.length).toBeGreaterThan(0);
    expect(await run('a wrapper with decideSync')).toEqual(memory);
    expect(await run('a wrapper with decide only')).toEqual(memory);
  });

  it("asks a store's decideSync for tryTake and peek when it offers one, and decide for take", async () => {
    const f = fakeClock(0);
    const { store, calls } = wrap(new MemoryStore({ clock: f.clock }), true);
    const limiter = new KeyedLimiter({ rate: 10, burst: 2, store, clock: f.clock });
    await limiter.tryTake('k');
    await limiter.peek('k');
    expect(calls).toEqual({ decide: 0, decideSync: 2 });
    await limiter.take('k');
    expect(calls).toEqual({ decide: 1, decideSync: 2 });
  });

  it('asks decide when a store offers no decideSync', async () => {
    const f = fakeClock(0);
    const { store, calls } = wrap(new MemoryStore({ clock: f.clock }), false);
    const limiter = new KeyedLimiter({ rate: 10, burst: 2, store, clock: f.clock });
    await limiter.tryTake('k');
    await limiter.peek('k');
    expect(calls).toEqual({ decide: 2, decideSync: 0 });
  });

  it('a decideSync that throws rejects the promise, as a failing decide does', async () => {
    const failure = new Error('the store is gone');
    const store: KeyedStore = {
      decideSync: () => {
        throw failure;
      },
      decide: () => Promise.reject(failure),
      refund: () => Promise.resolve(),
      reset: () => Promise.resolve(),
    };
    const limiter = new KeyedLimiter({ rate: 10, burst: 2, store });
    let pending: Promise<unknown> | undefined;
    expect(() => {
      pending = limiter.tryTake('k');
    }).not.toThrow();
    await expect(pending).rejects.toBe(failure);
  });
});
