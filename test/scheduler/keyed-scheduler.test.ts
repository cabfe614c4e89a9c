import { describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { KeyedScheduler, type KeyedSchedulerOptions } from '../../src/scheduler/keyed-scheduler.js';
import { fakeClock } from '../helpers/fake-clock.js';

function setup(options: Omit<KeyedSchedulerOptions, 'clock'>) {
  const fake = fakeClock();
  const keyed = new KeyedScheduler({ ...options, clock: fake.clock });
  const starts: { key: string; n: number; at: number }[] = [];
  const job =
    (key: string, n = 0) =>
    () => {
      starts.push({ key, n, at: fake.timers.now });
      return n;
    };
  return { ...fake, keyed, starts, job };
}

/** Lets the promise callbacks queued so far run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

describe('KeyedScheduler: a Scheduler per key', () => {
  it('gives each key its own bucket: one key spending its burst leaves the other untouched', async () => {
    const { keyed, starts, job, timers } = setup({ rate: 10, burst: 2 });
    for (let n = 0; n < 4; n++) void keyed.schedule('a', job('a', n));
    void keyed.schedule('b', job('b', 0));
    void keyed.schedule('b', job('b', 1));
    expect(starts.map((s) => `${s.key}${s.n}@${s.at}`)).toEqual(['a0@0', 'a1@0', 'b0@0', 'b1@0']);
    await timers.tickAsync(200);
    expect(starts.map((s) => `${s.key}${s.n}@${s.at}`).slice(4)).toEqual(['a2@100', 'a3@200']);
    expect(keyed.keys()).toEqual(['a', 'b']);
    expect(keyed.scheduler('a')?.rate).toBe(10);
  });

  it('takes each key limits by plan, through the same resolvers as KeyedLimiter (sync and async)', async () => {
    const plans = { free: { rate: 1, burst: 1 }, pro: { rate: 100, burst: 5 } };
    const { keyed, starts, job } = setup({ plans, plan: (key) => (key.startsWith('pro') ? 'pro' : 'free') });
    for (let n = 0; n < 5; n++) void keyed.schedule('pro-1', job('pro-1', n));
    for (let n = 0; n < 5; n++) void keyed.schedule('free-1', job('free-1', n));
    expect(starts.filter((s) => s.key === 'pro-1')).toHaveLength(5);
    expect(starts.filter((s) => s.key === 'free-1')).toHaveLength(1);
    expect(keyed.scheduler('pro-1')?.burst).toBe(5);

    const later = setup({ limits: async (key) => (key === 'big' ? { rate: 1, burst: 3 } : { rate: 1, burst: 1 }) });
    const done = Promise.all([1, 2, 3].map((n) => later.keyed.schedule('big', later.job('big', n))));
    await settle();
    expect(later.starts.map((s) => s.n)).toEqual([1, 2, 3]);
    await done;
  });

  it('refuses a plan name not in the table with the table in the message', async () => {
    const { keyed } = setup({ plans: { free: { rate: 1, burst: 1 } }, plan: () => 'gold' });
    await expect(keyed.schedule('k', () => 1)).rejects.toThrow(/not one of `plans` \(free\)/);
  });

  it('a key whose plan changes keeps its tokens, capped at the new burst', async () => {
    let plan = 'big';
    const { keyed, starts, job } = setup({
      plans: { big: { rate: 1, burst: 10 }, small: { rate: 1, burst: 2 } },
      plan: () => plan,
    });
    void keyed.schedule('k', job('k', 0)); // 9 tokens left
    plan = 'small';
    for (let n = 1; n <= 3; n++) void keyed.schedule('k', job('k', n));
    expect(starts.map((s) => s.n)).toEqual([0, 1, 2]); // capped at 2
    expect(keyed.scheduler('k')?.burst).toBe(2);
  });

  it('checks every option up front, as a Scheduler would', () => {
    expect(() => new KeyedScheduler({ rate: 10, maxQueue: -1 })).toThrow(/maxQueue/);
    expect(() => new KeyedScheduler({ rate: 10, maxKeys: 0 })).toThrow(/maxKeys/);
    // The one rule for every table of keys (MemoryStore's): an integer from 1 to 2^31 - 1.
    expect(() => new KeyedScheduler({ rate: 10, maxKeys: 2 ** 31 })).toThrow(/from 1 to 2\^31 - 1/);
    expect(new KeyedScheduler({ rate: 10, maxKeys: 2 ** 31 - 1 }).maxKeys).toBe(2 ** 31 - 1);
    expect(() => new KeyedScheduler({ rate: 10, global: { rate: 5 } as never })).toThrow(/global.burst/);
    expect(() => new KeyedScheduler({ rate: 10, plans: { a: { rate: 1, burst: 1 } }, plan: () => 'a' })).toThrow(
      /not both/,
    );
    expect(() => new KeyedScheduler({ rate: 10, brust: 3 } as never)).toThrow(/brust/);
    expect(() => new KeyedScheduler({})).toThrow(/at least one finite limit/);
  });

  it('forwards every key’s events with the key, and sums the counters of all keys, dropped ones too', async () => {
    const { keyed, job, timers } = setup({ concurrency: 1, maxKeys: 1 });
    const seen: string[] = [];
    keyed.on('completed', (key, result) => seen.push(`${key}:${String(result)}`));
    await keyed.schedule('a', job('a', 1));
    await keyed.schedule('b', job('b', 2)); // 'a' is idle: dropped for 'b'
    await timers.tickAsync(0);
    expect(seen).toEqual(['a:1', 'b:2']);
    expect(keyed.keys()).toEqual(['b']);
    expect(keyed.counters).toMatchObject({ admitted: 2, started: 2, completed: 2 });
  });

  it('onIdle() waits for jobs whose plan is being looked up; close() rejects them with ClosedError', async () => {
    const later = setup({ limits: async () => ({ rate: 10, burst: 1 }) });
    const first = later.keyed.schedule('k', later.job('k', 1));
    await later.keyed.onIdle();
    expect(later.starts).toHaveLength(1);
    await expect(first).resolves.toBe(1);
    const looking = later.keyed.schedule('k', later.job('k', 2));
    await later.keyed.close();
    await expect(looking).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    expect(later.starts).toHaveLength(1);
  });

  it('once() hears the first key that emits, then nothing; off() removes a listener', async () => {
    const { keyed, job } = setup({ concurrency: 1 });
    const heard: string[] = [];
    const all = (key: string) => heard.push(`all:${key}`);
    keyed.once('active', (key) => heard.push(`once:${key}`));
    keyed.on('active', all);
    await keyed.schedule('a', job('a'));
    keyed.off('active', all);
    await keyed.schedule('b', job('b'));
    expect(heard).toEqual(['once:a', 'all:a']);
  });

  it('close() closes every key; then schedule rejects with ClosedError', async () => {
    const { keyed, starts, job, timers } = setup({ rate: 1, burst: 1 });
    void keyed.schedule('a', job('a', 0));
    const waiting = keyed.schedule('a', job('a', 1));
    void keyed.schedule('b', job('b', 0));
    const closed = keyed.close();
    await expect(keyed.schedule('c', job('c'))).rejects.toMatchObject({ code: 'ERR_CLOSED' });
    await timers.tickAsync(1000);
    await closed;
    await expect(waiting).resolves.toBe(1);
    expect(starts).toHaveLength(3);
    expect(keyed.scheduler('a')?.isClosed).toBe(true);
    await keyed.onIdle();
  });
});

describe('KeyedScheduler: keys are bounded by maxKeys', () => {
  it('refuses a new key with ERR_TOO_MANY_KEYS when every key kept is busy, and takes it once one is idle', async () => {
    const { keyed, timers } = setup({ concurrency: 1, maxKeys: 2 });
    const slow = () => new Promise((resolve) => timers.setTimeout(resolve, 100));
    const a = keyed.schedule('a', slow);
    const b = keyed.schedule('b', slow);
    const refused = await keyed.schedule('c', () => 1).catch((error: unknown) => error);
    expect(isTokenpaceError(refused, 'ERR_TOO_MANY_KEYS')).toBe(true);
    expect(refused).toMatchObject({ maxKeys: 2, key: 'c' });
    expect(String((refused as Error).message)).toMatch(/raise maxKeys/);
    expect(keyed.keyCount).toBe(2);
    await timers.tickAsync(100);
    await Promise.all([a, b]);
    await expect(keyed.schedule('c', () => 'c')).resolves.toBe('c');
    expect(keyed.keys()).toEqual(['c']); // with no rate, an idle key equals a new one: both were dropped
  });

  it('drops a key seen idle for a refill first, then the least recently used idle key; never a busy one', async () => {
    const { keyed, timers, job } = setup({ rate: 10, burst: 1, maxKeys: 3 }); // a refill takes 100 ms
    await keyed.schedule('a', job('a'));
    await keyed.schedule('b', job('b'));
    await timers.tickAsync(10);
    await keyed.schedule('c', job('c')); // the table sees 'a' and 'b' idle at 10 ms
    expect(keyed.keys()).toEqual(['a', 'b', 'c']);
    await timers.tickAsync(190);
    await keyed.schedule('b', job('b')); // used again: idle only from when it is next seen so
    await keyed.schedule('d', job('d')); // 'a' idle since 10 ms is full again: dropped
    expect(keyed.keys()).toEqual(['c', 'b', 'd']);
    await keyed.schedule('e', job('e')); // none known full: the least recently used idle key goes
    expect(keyed.keys()).toEqual(['b', 'd', 'e']);
    expect(keyed.counters.completed).toBe(6);
  });
});

describe('KeyedScheduler: memory', () => {
  it('keeps at most maxKeys however many keys come, busy or idle', async () => {
    const { keyed, timers } = setup({ rate: 1, burst: 1, maxKeys: 100 });
    let refused = 0;
    const all: Promise<unknown>[] = [];
    for (let i = 0; i < 10_000; i++) {
      // Every third key leaves a job waiting (its bucket is empty after the first): busy until it starts.
      all.push(keyed.schedule(`k${i}`, () => i).catch(() => refused++));
      if (i % 3 === 0) all.push(keyed.schedule(`k${i}`, () => i).catch(() => refused++));
      expect(keyed.keyCount).toBeLessThanOrEqual(100);
    }
    await timers.tickAsync(1000);
    await Promise.all(all);
    expect(refused).toBeGreaterThan(0); // new keys while 100 were busy: ERR_TOO_MANY_KEYS
    expect(keyed.keyCount).toBeLessThanOrEqual(100);
    expect(keyed.counters.completed + refused).toBe(all.length);
  });
});

describe('KeyedScheduler: a limit over all keys, taken in turns', () => {
  it('admits at most the global burst + rate * T over all keys, and charges no key the global refused', async () => {
    const { keyed, starts, job, timers } = setup({ rate: 1000, burst: 10, global: { rate: 10, burst: 2 } });
    for (const key of ['a', 'b', 'c']) for (let n = 0; n < 5; n++) void keyed.schedule(key, job(key, n));
    expect(starts).toHaveLength(2);
    await timers.tickAsync(1000);
    expect(starts).toHaveLength(12); // 2 + 10 per second
    // Each key's own bucket was charged only for its starts: 'c', served last, still holds 10 - its starts.
    const cStarts = starts.filter((s) => s.key === 'c').length;
    expect(cStarts).toBeGreaterThanOrEqual(3);
    await timers.tickAsync(1000);
    expect(starts).toHaveLength(15);
  });

  it('serves waiting keys in turns by cost: a key of cost-3 jobs gets a third of the starts of a key of cost-1 jobs', async () => {
    const { keyed, starts, job, timers } = setup({
      rate: 1000,
      burst: 100,
      maxQueue: 1000,
      global: { rate: 100, burst: 3 },
    });
    void keyed.schedule('fill', job('fill'), { cost: 3 }); // empties the global bucket
    for (let n = 0; n < 200; n++) void keyed.schedule('heavy', job('heavy', n), { cost: 3 });
    for (let n = 0; n < 200; n++) void keyed.schedule('light', job('light', n), { cost: 1 });
    await timers.tickAsync(1200);
    const heavy = starts.filter((s) => s.key === 'heavy').length * 3;
    const light = starts.filter((s) => s.key === 'light').length;
    expect(heavy + light).toBeGreaterThan(110);
    expect(Math.abs(heavy - light)).toBeLessThanOrEqual(6); // equal cost each, within a turn
  });

  it('passes over rounds in which no key can start in one step, whatever the costs', async () => {
    const { keyed, starts, job, timers } = setup({ rate: 1e9, burst: 1e9, global: { rate: 1e8, burst: 1e8 } });
    void keyed.schedule('fill', job('fill'), { cost: 1e8 }); // empties the global bucket
    for (let k = 0; k < 1000; k++) void keyed.schedule(`k${k}`, job(`k${k}`), { cost: 1e5 });
    const started = performance.now();
    await timers.tickAsync(1000);
    // A round per unit of cost would be 10^8 visits here: minutes, not this.
    expect(performance.now() - started).toBeLessThan(3000);
    expect(starts).toHaveLength(1001);
  });

  it('shares by cost between a key of jobs costing a thousand times the quantum and a key of cheap jobs', async () => {
    const { keyed, starts, job, timers } = setup({
      rate: 1e6,
      burst: 1e6,
      maxQueue: 5000,
      global: { rate: 1000, burst: 1000 },
    });
    void keyed.schedule('fill', job('fill'), { cost: 1000 }); // empties the global bucket
    for (let n = 0; n < 5; n++) void keyed.schedule('heavy', job('heavy', n), { cost: 1000 });
    for (let n = 0; n < 5000; n++) void keyed.schedule('light', job('light', n));
    await timers.tickAsync(4000);
    const heavy = starts.filter((s) => s.key === 'heavy').length * 1000;
    const light = starts.filter((s) => s.key === 'light').length;
    expect(heavy + light).toBeGreaterThanOrEqual(3999);
    expect(Math.abs(heavy - light)).toBeLessThanOrEqual(1000); // within a turn of the heavy key's
  });

  it('fairness: with 1,000 keys and one flooding, every other key starts its first job within one turn', async () => {
    const rate = 1000;
    const { keyed, starts, job, timers } = setup({
      rate: 100_000,
      burst: 10_000,
      maxQueue: 10_000,
      global: { rate, burst: 1 },
    });
    const flood: Promise<unknown>[] = [];
    for (let n = 0; n < 10_000; n++) flood.push(keyed.schedule('flood', job('flood', n)));
    for (let k = 0; k < 999; k++) void keyed.schedule(`key-${k}`, job(`key-${k}`));
    expect(keyed.keyCount).toBe(1000);
    // One turn: every key waiting (1,000 of them) starts one job at the global rate: 1,000 ms.
    const turnMs = (1000 * 1000) / rate;
    await timers.tickAsync(turnMs + 2);
    const first = new Map<string, number>();
    for (const s of starts) if (s.key !== 'flood' && !first.has(s.key)) first.set(s.key, s.at);
    expect(first.size).toBe(999);
    const latest = Math.max(...first.values());
    expect(latest).toBeLessThanOrEqual(turnMs + 1);
    const floodBy = starts.filter((s) => s.key === 'flood' && s.at <= latest).length;
    expect(floodBy).toBeLessThanOrEqual(2); // the one that started at once, and its turn in the round
    // The flood then has the whole rate, at exactly the global rate.
    const before = starts.length;
    await timers.tickAsync(1000);
    expect(starts.length - before).toBe(1000);
    keyed.scheduler('flood')?.clear();
    await Promise.allSettled(flood);
  });

  it('a job waiting for its turn keeps its signal and maxWait', async () => {
    const { keyed, starts, job, timers } = setup({ rate: 100, burst: 10, maxWait: 500, global: { rate: 1, burst: 1 } });
    void keyed.schedule('a', job('a', 0));
    const controller = new AbortController();
    const aborted = keyed.schedule('b', job('b', 1), { signal: controller.signal });
    const expires = keyed.schedule('c', job('c', 2)).catch((error: unknown) => error);
    controller.abort(new Error('no longer needed'));
    await expect(aborted).rejects.toThrow('no longer needed');
    await timers.tickAsync(600);
    const expired = await expires;
    expect(isTokenpaceError(expired, 'ERR_WAIT_TOO_LONG')).toBe(true);
    expect(String((expired as Error).message)).toMatch(/limit over all keys/);
    expect(starts.map((s) => s.key)).toEqual(['a']);
    expect(keyed.counters.rejected).toMatchObject({ aborted: 1, waitTooLong: 1 });
  });

  it('keeps priorities within a key while it waits for its turn', async () => {
    const { keyed, starts, job, timers } = setup({ rate: 100, burst: 10, global: { rate: 10, burst: 1 } });
    void keyed.schedule('a', job('a', 0));
    void keyed.schedule('a', job('a', 1));
    void keyed.schedule('a', job('a', 2), { priority: 5 });
    await timers.tickAsync(300);
    expect(starts.map((s) => s.n)).toEqual([0, 2, 1]);
  });

  it('refuses at once a cost above the global burst', async () => {
    const { keyed } = setup({ rate: 100, burst: 10, global: { rate: 10, burst: 2 } });
    expect(keyed.global).toEqual({ ratePerSecond: 10, burst: 2 }); // as KeyedLimiter's `global`
    expect(setup({ rate: 1 }).keyed.global).toBeUndefined();
    const error = await keyed.schedule('a', () => 1, { cost: 3 }).catch((e: unknown) => e);
    expect(isTokenpaceError(error, 'ERR_COST_EXCEEDS_CAPACITY')).toBe(true);
    expect(String((error as Error).message)).toMatch(/global.burst/);
  });

  it('holds no timer once closed with { drain: false }, keys waiting for their turn', async () => {
    const { keyed, job, pending } = setup({ rate: 100, burst: 10, global: { rate: 1, burst: 1 } });
    const all = ['a', 'b', 'c'].map((key) => keyed.schedule(key, job(key)).catch((error: unknown) => error));
    await keyed.close({ drain: false });
    expect((await Promise.all(all)).filter((outcome) => isTokenpaceError(outcome, 'ERR_CLOSED'))).toHaveLength(2);
    expect(pending()).toBe(0);
  });

  it('holds no timer once every key is idle', async () => {
    const { keyed, job, timers, pending } = setup({ rate: 100, burst: 1, global: { rate: 10, burst: 1 } });
    const all = [0, 1, 2].map((n) => keyed.schedule(`k${n}`, job(`k${n}`, n)));
    await timers.tickAsync(300);
    await Promise.all(all);
    await keyed.onIdle();
    expect(pending()).toBe(0);
  });
});

describe('KeyedScheduler: ctx.adjust bills the limit over all keys too', () => {
  /** Cost charged per start: its own, plus what its function adjusts by. */
  function billed(starts: { n: number }[]): number {
    return starts.reduce((sum, s) => sum + s.n, 0);
  }

  for (const [name, perKey] of [
    ['keys with a rate', { rate: 1000, burst: 10 }],
    ['keys without a rate', { concurrency: 100 }],
  ] as const) {
    it(`charges adjust(+n) to the global bucket: at most global burst + rate * T over the starts (${name})`, async () => {
      const { keyed, timers } = setup({ ...perKey, maxQueue: 100, global: { rate: 10, burst: 4 } });
      const starts: { n: number; at: number }[] = [];
      for (const key of ['a', 'b']) {
        for (let n = 0; n < 30; n++) {
          keyed
            .schedule(key, ({ adjust }) => {
              adjust(2); // the real cost, known once the call is made: 3
              starts.push({ n: 3, at: timers.now });
            })
            .catch(() => undefined);
        }
      }
      for (const T of [0, 500, 1000, 2000]) {
        await timers.tickAsync(T - timers.now);
        // burst + rate * T, plus the one adjustment not known when its job started (the bucket's debt).
        expect(billed(starts.filter((s) => s.at <= T))).toBeLessThanOrEqual(4 + (10 * T) / 1000 + 2);
      }
      expect(billed(starts)).toBeGreaterThanOrEqual(4 + 20 - 3); // and the whole rate is used
      keyed.scheduler('a')?.clear();
      keyed.scheduler('b')?.clear();
    });
  }

  it('gives adjust(-n) back to the global bucket', async () => {
    const { keyed, timers } = setup({ rate: 1000, burst: 10, maxQueue: 100, global: { rate: 10, burst: 2 } });
    let started = 0;
    for (const key of ['a', 'b']) {
      for (let n = 0; n < 30; n++) {
        keyed
          .schedule(
            key,
            ({ adjust }) => {
              started++;
              adjust(-1); // billed 2, cost 1
            },
            { cost: 2 },
          )
          .catch(() => undefined);
      }
    }
    await timers.tickAsync(1000);
    expect(started).toBeGreaterThanOrEqual(11); // 2 + 10 tokens at 1 each, not at 2
    keyed.scheduler('a')?.clear();
    keyed.scheduler('b')?.clear();
  });

  it('refuses adjust(+n) that takes a job above global.burst, naming it', async () => {
    const { keyed } = setup({ rate: 1000, burst: 10, global: { rate: 10, burst: 2 } });
    const error = await keyed.schedule('a', ({ adjust }) => adjust(5)).catch((e: unknown) => e);
    expect(isTokenpaceError(error, 'ERR_COST_EXCEEDS_CAPACITY')).toBe(true);
    expect(String((error as Error).message)).toMatch(/global.burst/);
  });
});

describe('KeyedScheduler: a key has no window limit', () => {
  it("refuses setWindow on a key's Scheduler with NotSupportedError, and takes no global token for it", async () => {
    const { keyed, starts, job, timers } = setup({ rate: 1000, burst: 10, global: { rate: 10, burst: 2 } });
    void keyed.schedule('a', job('a', 0));
    const scheduler = keyed.scheduler('a');
    let error: unknown;
    try {
      scheduler?.setWindow({ limit: 1, window: '1s' });
    } catch (caught) {
      error = caught;
    }
    expect(isTokenpaceError(error, 'ERR_NOT_SUPPORTED')).toBe(true);
    expect(String((error as Error).message)).toMatch(/KeyedScheduler/);
    expect(scheduler?.window).toBe(0);
    void keyed.schedule('a', job('a', 1));
    void keyed.schedule('b', job('b', 2));
    await timers.tickAsync(100);
    expect(starts.map((s) => s.n)).toEqual([0, 1, 2]); // the global bucket's 2, then 1 a 100 ms
  });
});

describe('KeyedScheduler: a key is dropped only once its bucket is full at its limits now', () => {
  it("waits a refill at the key's live rate after scheduler(key).setRate(lower)", async () => {
    const { keyed, starts, job, timers } = setup({ rate: 10, burst: 1 }); // a refill takes 100 ms
    await keyed.schedule('a', job('a', 0));
    keyed.scheduler('a')?.setRate(1); // a refill now takes 1,000 ms
    await timers.tickAsync(10);
    await keyed.schedule('b', job('b')); // the table sees 'a' idle at 10 ms
    await timers.tickAsync(190);
    await keyed.schedule('c', job('c')); // 'a' holds 0.2 tokens: kept
    expect(keyed.keys()).toContain('a');
    void keyed.schedule('a', job('a', 1));
    await timers.tickAsync(800);
    expect(starts.filter((s) => s.key === 'a').map((s) => s.at)).toEqual([0, 1000]); // burst + rate * T
  });

  it('waits a refill for a key made without a rate and given one since', async () => {
    const { keyed, starts, job, timers } = setup({ concurrency: 1 });
    void keyed.schedule('a', job('a', 0));
    keyed.scheduler('a')?.setRate(1); // a bucket of burst 1, full
    await keyed.schedule('a', job('a', 1)); // empties it
    await timers.tickAsync(10);
    await keyed.schedule('b', job('b'));
    await timers.tickAsync(10);
    await keyed.schedule('c', job('c'));
    expect(keyed.keys()).toContain('a');
    expect(keyed.scheduler('a')?.rate).toBe(1);
    void keyed.schedule('a', job('a', 2));
    await timers.tickAsync(1000);
    expect(starts.filter((s) => s.key === 'a').map((s) => s.at)).toEqual([0, 0, 1000]);
  });

  it('restarts the idle time of a key whose Scheduler took a job directly', async () => {
    const { keyed, starts, job, timers } = setup({ rate: 10, burst: 1 }); // a refill takes 100 ms
    await keyed.schedule('a', job('a', 0));
    await timers.tickAsync(10);
    await keyed.schedule('b', job('b')); // the table sees 'a' idle at 10 ms
    await timers.tickAsync(90);
    await keyed.scheduler('a')?.schedule(job('a', 1)); // charged at 100 ms, not through the KeyedScheduler
    await timers.tickAsync(50);
    await keyed.schedule('c', job('c')); // 'a' holds 0.5 tokens: kept
    expect(keyed.keys()).toContain('a');
    void keyed.schedule('a', job('a', 2));
    await timers.tickAsync(50);
    expect(starts.filter((s) => s.key === 'a').map((s) => s.at)).toEqual([0, 100, 200]);
  });
});

describe('KeyedScheduler: new limits while a key is idle', () => {
  it('restarts the idle time when the key is given a higher rate after it was seen idle', async () => {
    const { keyed, starts, job, timers } = setup({ rate: 1, burst: 2 }); // a refill takes 2,000 ms
    void keyed.schedule('a', job('a', 0));
    await keyed.schedule('a', job('a', 1)); // empty at 0
    await timers.tickAsync(10);
    await keyed.schedule('b', job('b')); // the table sees 'a' idle at 10 ms
    await timers.tickAsync(990);
    keyed.scheduler('a')?.setRate(2); // 1 token at 1,000 ms, full at 1,500 ms
    await timers.tickAsync(100);
    await keyed.schedule('c', job('c')); // at 1,100 ms: 'a' holds 1.2 tokens, kept
    expect(keyed.keys()).toContain('a');
    for (let n = 2; n < 4; n++) void keyed.schedule('a', job('a', n));
    await timers.tickAsync(0);
    expect(starts.filter((s) => s.key === 'a').map((s) => s.at)).toEqual([0, 0, 1100]);
  });
});

describe('KeyedScheduler: calls waiting for an asynchronous plan are bounded', () => {
  it('refuses past maxQueue per key (QueueFullError) and past maxKeys keys (TooManyKeysError)', async () => {
    const { keyed, timers } = setup({ limits: () => new Promise(() => undefined), maxQueue: 10, maxKeys: 3 });
    const outcomes: unknown[] = [];
    const record = (promise: Promise<unknown>) => promise.catch((error: unknown) => outcomes.push(error));
    await timers.tickAsync(40);
    for (let n = 0; n < 100; n++) void record(keyed.schedule('k', () => n));
    for (let k = 1; k < 6; k++) void record(keyed.schedule(`k${k}`, () => k));
    await settle();
    expect(outcomes).toHaveLength(90 + 3);
    const full = outcomes.filter((error) => isTokenpaceError(error, 'ERR_QUEUE_FULL'));
    expect(full).toHaveLength(90);
    expect(full[0]).toMatchObject({ maxQueue: 10 });
    expect((full[0] as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
    expect(outcomes.filter((error) => isTokenpaceError(error, 'ERR_TOO_MANY_KEYS'))).toHaveLength(3);
  });

  it('counts a call out when its plan settles, fulfilled or not', async () => {
    let fail = true;
    const { keyed } = setup({
      limits: async () => {
        if (fail) throw new Error('plan service down');
        return { rate: 1000, burst: 1000 };
      },
      maxQueue: 2,
      maxKeys: 1,
    });
    await expect(keyed.schedule('a', () => 1)).rejects.toThrow('plan service down');
    await expect(keyed.schedule('b', () => 1)).rejects.toThrow('plan service down');
    fail = false;
    await expect(Promise.all([keyed.schedule('c', () => 1), keyed.schedule('c', () => 2)])).resolves.toEqual([1, 2]);
  });
});

describe('KeyedScheduler: the refusals it decides itself are counted and heard', () => {
  it('counts and tells a cost above global.burst, a key too many and a flood of plan lookups', async () => {
    const { keyed, timers } = setup({ concurrency: 1, maxKeys: 1, maxQueue: 1, global: { rate: 10, burst: 2 } });
    const heard: string[] = [];
    keyed.on('rejected', (key, job) => heard.push(`${key} ${job.reason} ${job.cost} ${job.priority}`));
    await expect(keyed.schedule('a', () => 1, { cost: 3, priority: 2 })).rejects.toThrow(/global.burst/);
    const slow = keyed.schedule('a', () => new Promise((resolve) => timers.setTimeout(resolve, 100)));
    await expect(keyed.schedule('b', () => 1)).rejects.toMatchObject({ code: 'ERR_TOO_MANY_KEYS' });
    expect(heard).toEqual(['a costExceedsCapacity 3 2', 'b tooManyKeys 1 0']);
    expect(keyed.counters.rejected).toMatchObject({ costExceedsCapacity: 1, tooManyKeys: 1 });
    await timers.tickAsync(100);
    await slow;

    const later = setup({ limits: () => new Promise(() => undefined), maxQueue: 1 });
    const reasons: string[] = [];
    later.keyed.on('rejected', (key, job) => reasons.push(`${key} ${job.reason}`));
    void later.keyed.schedule('k', () => 1);
    await expect(later.keyed.schedule('k', () => 2)).rejects.toMatchObject({ code: 'ERR_QUEUE_FULL' });
    expect(reasons).toEqual(['k queueFull']);
    expect(later.keyed.counters.rejected.queueFull).toBe(1);
  });

  it('hands a rejected listener that throws to the error listeners, with the key', async () => {
    const { keyed } = setup({ rate: 10, burst: 1, global: { rate: 10, burst: 1 } });
    const errors: string[] = [];
    keyed.on('rejected', () => {
      throw new Error('listener bug');
    });
    keyed.on('error', (key, error) => errors.push(`${key} ${(error as Error).message}`));
    await expect(keyed.schedule('a', () => 1, { cost: 2 })).rejects.toMatchObject({
      code: 'ERR_COST_EXCEEDS_CAPACITY',
    });
    expect(errors).toEqual(['a listener bug']);
  });
});

describe('KeyedScheduler: retry hints count the turns at the limit over all keys', () => {
  it("a full key's QueueFullError.retryAfterMs is the later of its own wait and its turn", async () => {
    const { keyed, starts, job, timers } = setup({
      rate: 1000,
      burst: 10,
      maxQueue: 1,
      global: { rate: 10, burst: 1 },
    });
    void keyed.schedule('a', job('a', 0)); // takes the global token
    const waiting = keyed.schedule('a', job('a', 1)); // waits for its turn: the queue is full
    const error = await keyed.schedule('a', job('a', 2)).catch((e: unknown) => e);
    expect(isTokenpaceError(error, 'ERR_QUEUE_FULL')).toBe(true);
    const retryAfterMs = (error as { retryAfterMs: number }).retryAfterMs;
    expect(retryAfterMs).toBeGreaterThanOrEqual(100); // the head starts at 100 ms, at its turn
    expect(retryAfterMs).toBeLessThanOrEqual(110);
    await timers.tickAsync(retryAfterMs);
    await waiting;
    expect(starts.map((s) => s.at)).toEqual([0, 100]);
    const third = keyed.schedule('a', job('a', 3)); // room, as told
    await timers.tickAsync(100);
    await expect(third).resolves.toBe(3);
  });
});

describe('KeyedScheduler: close() never waits for a plan', () => {
  it('rejects the calls waiting for a plan that never comes with ClosedError, and resolves', async () => {
    const { keyed } = setup({ limits: () => new Promise(() => undefined) });
    const waiting = keyed.schedule('k', () => 1).catch((error: unknown) => error);
    let closed = false;
    void keyed.close().then(() => {
      closed = true;
    });
    await settle();
    expect(closed).toBe(true);
    expect(isTokenpaceError(await waiting, 'ERR_CLOSED')).toBe(true);
    expect(keyed.counters.rejected.cleared).toBe(1); // accepted, then given up, as close({ drain: false }) counts
  });
});
