/**
 * The fleet admission of the Scheduler (`new Scheduler({ store, key })`) on a
 * MemoryFleetStore and a fake clock: exact times. Two schedulers on one store
 * are two workers of one fleet.
 */

import { describe, expect, it, vi } from 'vitest';
import { type FleetStore, MemoryFleetStore } from '../../src/fleet/store.js';
import { Scheduler, type SchedulerOptions } from '../../src/scheduler/scheduler.js';
import { fakeClock } from '../helpers/fake-clock.js';

const flush = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

function fleet(options: Omit<SchedulerOptions, 'store' | 'key'> = {}, workers = 2) {
  const { clock, timers } = fakeClock(1000);
  const store = new MemoryFleetStore({ clock });
  const make = () => new Scheduler({ store, key: 'api', clock, ...options });
  return { clock, timers, store, workers: Array.from({ length: workers }, make) };
}

async function advance(timers: ReturnType<typeof fakeClock>['timers'], ms: number, step = 1) {
  for (let t = 0; t < ms; t += step) {
    timers.tick(step);
    await flush();
  }
}

describe('Scheduler with a fleet store', () => {
  it('names its leases with a random worker id, not a time: workers made at one instant never collide', async () => {
    const { store, workers } = fleet({ concurrency: 4 }, 2);
    const leaseIds: string[] = [];
    const exchange = store.exchange.bind(store);
    store.exchange = (op) => {
      leaseIds.push(...op.acquire.map((a) => a.leaseId));
      return exchange(op);
    };
    const now = vi.spyOn(Date, 'now').mockImplementation(() => {
      throw new Error('Date.now() read');
    });
    try {
      const third = new Scheduler({ store, key: 'api', concurrency: 4 });
      await Promise.all([...workers, third].map((w) => w.schedule(() => 1)));
    } finally {
      now.mockRestore();
    }
    expect(leaseIds).toHaveLength(3);
    for (const id of leaseIds) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:0$/);
    expect(new Set(leaseIds.map((id) => id.split(':')[0])).size).toBe(3);
  });

  it("a job's ctx.adjust changes its charge in the shared bucket: the other worker's next job waits for it", async () => {
    const { clock, timers, store, workers } = fleet({ rate: 10, burst: 5 });
    const [a, b] = workers as [Scheduler, Scheduler];
    const params = { ratePerSecond: 10, burst: 5, concurrency: Number.POSITIVE_INFINITY };
    await a.schedule((ctx) => ctx.adjust(3)); // charged 1 + 3: one token left
    await flush();
    expect((await store.inspect('api', params)).tokens).toBeCloseTo(1, 9);
    let started = 0;
    const next = b.schedule(
      () => {
        started = clock.now();
      },
      { cost: 3 },
    );
    await advance(timers, 250, 5);
    await next;
    expect(started).toBe(1200); // 2 tokens short at 10/s
    await advance(timers, 100, 5); // -2 at 1000 (b reserved 3 with 1 there): 1.5 at 1350
    // a refund gives back at most what the job was charged
    await a.schedule((ctx) => {
      ctx.adjust(-5);
    });
    await flush();
    expect((await store.inspect('api', params)).tokens).toBeCloseTo(1.5, 9);
    const error = await a.schedule((ctx) => ctx.adjust(5)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_COST_EXCEEDS_CAPACITY' });
  });

  it('two workers share one rate: starts at the shared rate, evenly, interleaved', async () => {
    const { clock, timers, workers } = fleet({ rate: 100, burst: 1 });
    const starts: [number, number][] = [];
    for (const [w, s] of workers.entries()) {
      for (let i = 0; i < 20; i++) void s.schedule(() => starts.push([w, clock.now()]));
    }
    await flush();
    await advance(timers, 400);
    expect(starts.length).toBe(40);
    const times = starts.map(([, t]) => t);
    // 100/s burst 1: one start every 10 ms across the fleet, the first at once
    for (let i = 1; i < times.length; i++)
      expect((times[i] as number) - (times[i - 1] as number)).toBeGreaterThanOrEqual(10);
    expect((times[39] as number) - (times[0] as number)).toBeLessThanOrEqual(392);
    expect(starts.filter(([w]) => w === 0).length).toBe(20);
    // interleaved, not 20 of one then 20 of the other
    expect(starts.slice(0, 10).filter(([w]) => w === 1).length).toBeGreaterThanOrEqual(4);
  });

  it('weighted concurrency across workers never exceeds the budget, and units come back on release', async () => {
    const { timers, workers } = fleet({ concurrency: 5 });
    let inFlight = 0;
    let peak = 0;
    const releases: (() => void)[] = [];
    const job = () => () => {
      inFlight += 3;
      peak = Math.max(peak, inFlight);
      return new Promise<void>((r) =>
        releases.push(() => {
          inFlight -= 3;
          r();
        }),
      );
    };
    const done = Promise.all(workers.flatMap((s) => [s.schedule(job(), { cost: 3 }), s.schedule(job(), { cost: 3 })]));
    await advance(timers, 5);
    expect(inFlight).toBe(3); // 3 + 3 > 5: one at a time across the fleet
    for (let round = 0; round < 4; round++) {
      releases.shift()?.();
      await advance(timers, 25);
      expect(inFlight).toBe(round < 3 ? 3 : 0);
    }
    await done;
    expect(peak).toBe(3);
    expect(workers.map((s) => s.counters.completed)).toEqual([2, 2]);
  });

  it('maxWait is decided up front from the shared bucket, and by the store for the head', async () => {
    const { timers, workers } = fleet({ rate: 10, burst: 1, maxWait: 250 });
    const [a, b] = workers as [Scheduler, Scheduler];
    const results: string[] = [];
    const run = (s: Scheduler, name: string) =>
      s.schedule(() => results.push(name)).catch((e: { code: string }) => results.push(`${name}:${e.code}`));
    const all = [run(a, 'a1'), run(a, 'a2'), run(a, 'a3'), run(a, 'a4')];
    await flush();
    await advance(timers, 1);
    // b's first job: the bucket is in debt from a's reservations
    all.push(run(b, 'b1'), run(b, 'b2'), run(b, 'b3'));
    await advance(timers, 600, 5);
    await Promise.all(all);
    expect(results).toContain('a4:ERR_WAIT_TOO_LONG');
    expect(results.filter((r) => !r.includes(':')).length).toBeGreaterThanOrEqual(3);
    expect(results.some((r) => r.startsWith('b') && r.endsWith('ERR_WAIT_TOO_LONG'))).toBe(true);
  });

  it('an aborted reservation gives its tokens back by the cancel rule', async () => {
    const { clock, timers, store, workers } = fleet({ rate: 10, burst: 2 }, 1);
    const s = workers[0] as Scheduler;
    const params = { ratePerSecond: 10, burst: 2, concurrency: Number.POSITIVE_INFINITY };
    await s.schedule(() => {}, { cost: 2 });
    const controller = new AbortController();
    const aborted = s.schedule(() => {}, { cost: 2, signal: controller.signal });
    await flush();
    expect((await store.inspect('api', params)).tokens).toBeCloseTo(-2, 9);
    await advance(timers, 50);
    controller.abort(new Error('no longer needed'));
    await expect(aborted).rejects.toThrow('no longer needed');
    await flush();
    // nothing came after it: all 2 come back (tokens at 1050: -2 + 0.5 + 2)
    expect((await store.inspect('api', params)).tokens).toBeCloseTo(0.5, 9);
    expect(s.counters.rejected.aborted).toBe(1);
    expect(clock.now()).toBe(1050);
  });

  it('leases are renewed while a job runs; a dead worker’s lease expires after `lease`', async () => {
    const { timers, store, workers } = fleet({ concurrency: 2, lease: 300 }, 2);
    const [a, b] = workers as [Scheduler, Scheduler];
    const params = { ratePerSecond: Number.POSITIVE_INFINITY, burst: 1, concurrency: 2 };
    let finish: () => void = () => {};
    const long = a.schedule(() => new Promise<void>((r) => (finish = r)), { cost: 2 });
    await flush();
    await advance(timers, 1000, 10);
    expect((await store.inspect('api', params)).inFlight).toBe(2); // renewed every 100 ms
    let ran = false;
    void b.schedule(() => {
      ran = true;
    });
    await advance(timers, 50, 5);
    expect(ran).toBe(false);
    finish();
    await long;
    await advance(timers, 30, 5); // b polls every 20 ms
    expect(ran).toBe(true);
    // a lease nobody renews (a worker that died) expires by itself
    await store.acquire({ key: 'api', cost: 2, maxWaitMs: 0, leaseId: 'dead', leaseMs: 300, claimTtlMs: 100, params });
    expect((await store.inspect('api', params)).inFlight).toBe(2);
    timers.tick(301);
    expect((await store.inspect('api', params)).inFlight).toBe(0);
  });

  it('setRate and setConcurrency by one worker apply to the others', async () => {
    const { workers } = fleet({ rate: 10, burst: 1, concurrency: 4 });
    const [a, b] = workers as [Scheduler, Scheduler];
    a.setRate('50/s');
    a.setConcurrency(2);
    await flush();
    expect(a.rate).toBe(50); // the store's answer
    await b.schedule(() => {});
    expect(b.rate).toBe(50);
    expect(b.concurrency).toBe(2);
    await expect(b.schedule(() => {}, { cost: 3 })).rejects.toMatchObject({ code: 'ERR_COST_EXCEEDS_CAPACITY' });
  });

  it('a bounded queue, priorities, and onIdle', async () => {
    const { timers, workers } = fleet({ rate: 10, burst: 1, maxQueue: 2 }, 1);
    const s = workers[0] as Scheduler;
    const order: string[] = [];
    const first = s.schedule(() => order.push('first'));
    await flush();
    await first;
    const p = [s.schedule(() => order.push('low')), s.schedule(() => order.push('high'), { priority: 5 })];
    await flush();
    // the worker asks the store after the current synchronous work: 'high' first, holding a
    // reservation; 'low' waits; one more fits, then the queue is full
    const third = s.schedule(() => order.push('third'), { priority: 5 });
    await expect(s.schedule(() => order.push('overflow'))).rejects.toMatchObject({ code: 'ERR_QUEUE_FULL' });
    const idle = s.onIdle();
    await advance(timers, 400, 10);
    await Promise.all([...p, third]);
    await idle;
    expect(order).toEqual(['first', 'high', 'third', 'low']);
    expect(s.size).toBe(0);
    expect(s.counters.rejected.queueFull).toBe(1);
  });

  it("a job that overtakes the worker's claimant takes its claim: it starts when units free, not when the claim lapses", async () => {
    const { clock, timers, workers } = fleet({ concurrency: 1 }, 1);
    const s = workers[0] as Scheduler;
    const starts: Array<[string, number]> = [];
    const job = (name: string, ms: number) => () => {
      starts.push([name, clock.now() - 1000]);
      return new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
    };
    const running = s.schedule(job('running', 50));
    await flush();
    const low = s.schedule(job('low', 10)); // the budget is full: its claim is recorded in the store
    await flush();
    const high = s.schedule(job('high', 10), { priority: 1 }); // overtakes it
    await advance(timers, 200);
    await Promise.all([running, low, high]);
    // Before: 'high' was refused (busy) behind the worker's own claim for 'low' until the claim lapsed
    // (claimTtlMs, 100 ms), and started at 120.
    expect(starts).toEqual([
      ['running', 0],
      ['high', 50],
      ['low', 60],
    ]);
  });

  it("a store that denies (onError 'deny' while Redis is away): jobs wait, then maxWait rejects them", async () => {
    const { clock, timers } = fakeClock(0);
    let asked = 0;
    const denying: FleetStore = {
      exchange: async (op) => {
        asked++;
        const nowMs = clock.now();
        return {
          grants: op.acquire.map((_, i) => ({ status: i === 0 ? 'busy' : 'later', delayMs: 0, readyAtMs: nowMs })),
          nowMs,
          tokens: 0,
          inFlight: 0,
          params: op.params,
          nextExpiryMs: 50,
          source: 'deny',
        };
      },
      acquire: async () => {
        throw new Error('not used');
      },
      cancel: async () => {},
      adjust: async () => {
        throw new Error('unavailable');
      },
      renew: async () => {},
      release: async () => {},
      configure: async () => {
        throw new Error('unavailable');
      },
      inspect: async () => {
        throw new Error('unavailable');
      },
    };
    const s = new Scheduler({ store: denying, key: 'k', rate: 10, maxWait: 500, pollInterval: '20ms', clock });
    const errors: Error[] = [];
    s.on('storeError', (error) => errors.push(error));
    s.setRate(20); // sync; the failure is told by the event
    await flush();
    expect(errors.map((e) => e.message)).toEqual(['unavailable']);
    expect(s.rate).toBe(10);
    let ran = false;
    const job = s.schedule(() => {
      ran = true;
    });
    const rejected = expect(job).rejects.toMatchObject({ code: 'ERR_WAIT_TOO_LONG' });
    await advance(timers, 499, 1);
    expect(ran).toBe(false);
    expect(asked).toBeGreaterThanOrEqual(20); // asked again every poll interval
    expect(asked).toBeLessThanOrEqual(27);
    await advance(timers, 2, 1);
    await rejected;
    expect(s.counters.rejected.waitTooLong).toBe(1);
    expect(s.size).toBe(0);
  });

  it('is a Scheduler with its API: wrap, sizeBy, onSizeLessThan, and a job timeout that gives the lease back', async () => {
    const { timers, store, workers } = fleet({ concurrency: 2 }, 1);
    const s = workers[0] as Scheduler;
    const params = { ratePerSecond: Number.POSITIVE_INFINITY, burst: 1, concurrency: 2 };
    expect(s).toBeInstanceOf(Scheduler);
    const double = s.wrap(async (x: number) => x * 2, { cost: (x) => (x > 5 ? 2 : 1) });
    expect(await Promise.all([double(1), double(6)])).toEqual([2, 12]);
    // a job that never settles: with onTimeout 'release' (the default) its lease goes back at the timeout
    const stuck = s.schedule(() => new Promise(() => {}), { timeout: 50, cost: 2 });
    const timedOut = expect(stuck).rejects.toMatchObject({ code: 'ERR_JOB_TIMEOUT' });
    await advance(timers, 10);
    expect((await store.inspect('api', params)).inFlight).toBe(2);
    const later = [s.schedule(() => 'a', { priority: 1 }), s.schedule(() => 'b'), s.schedule(() => 'c')];
    await flush();
    expect(s.sizeBy({ priority: 0 })).toBe(2);
    expect(s.sizeBy({ priority: 1 })).toBe(1);
    expect(s.isSaturated).toBe(true);
    let below = false;
    void s.onSizeLessThan(1).then(() => {
      below = true;
    });
    await advance(timers, 60);
    await timedOut;
    expect(await Promise.all(later)).toEqual(['a', 'b', 'c']);
    expect(below).toBe(true);
    expect(s.counters.timedOut).toBe(1);
    await s.close();
    expect((await store.inspect('api', params)).inFlight).toBe(0); // close gives back what it holds
  });

  it("onTimeout 'hold' keeps the lease until the function really settles", async () => {
    const { timers, store, workers } = fleet({ concurrency: 2, onTimeout: 'hold' }, 1);
    const s = workers[0] as Scheduler;
    const params = { ratePerSecond: Number.POSITIVE_INFINITY, burst: 1, concurrency: 2 };
    let finish: () => void = () => {};
    const slow = s.schedule(() => new Promise<void>((r) => (finish = r)), { timeout: 20, cost: 2 });
    const timedOut = expect(slow).rejects.toMatchObject({ code: 'ERR_JOB_TIMEOUT' });
    await advance(timers, 40);
    await timedOut;
    expect((await store.inspect('api', params)).inFlight).toBe(2);
    finish();
    await advance(timers, 5);
    expect((await store.inspect('api', params)).inFlight).toBe(0);
  });

  it('batches: 200 jobs take a handful of calls, each giving back the leases of the jobs before', async () => {
    const { clock } = fakeClock(0);
    const memory = new MemoryFleetStore({ clock });
    let calls = 0;
    let released = 0;
    const counting: FleetStore = {
      exchange: (op) => {
        calls++;
        released += op.release.length;
        return memory.exchange(op);
      },
      acquire: (op) => memory.acquire(op),
      cancel: (...a) => memory.cancel(...a),
      adjust: (...a) => memory.adjust(...a),
      renew: (...a) => memory.renew(...a),
      release: (...a) => memory.release(...a),
      configure: (...a) => memory.configure(...a),
      inspect: (...a) => memory.inspect(...a),
    };
    const s = new Scheduler({ store: counting, key: 'k', concurrency: 1000, clock });
    await Promise.all(Array.from({ length: 200 }, () => s.schedule(() => {})));
    await s.close();
    expect(released).toBe(200);
    expect(calls).toBeLessThanOrEqual(8); // 200 / 64 asks, the releases riding along, and one to finish
  });

  it('refuses what a fleet cannot do, with coded errors', async () => {
    const store = new MemoryFleetStore();
    expect(() => new Scheduler({ store, key: 'k', rate: 10, catchUp: 5 })).toThrow(
      expect.objectContaining({ code: 'ERR_NOT_SUPPORTED' }),
    );
    expect(() => new Scheduler({ rate: 10, lease: 1000 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'lease' }),
    );
    expect(() => new Scheduler({ key: 'k', rate: 10 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'store' }),
    );
    expect(() => new Scheduler({ store, key: '', rate: 10 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'key' }),
    );
    expect(() => new Scheduler({ store, key: 'k' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
    const s = new Scheduler({ store, key: 'k', rate: 10 });
    expect(() => s.setRate('fast')).toThrow(expect.objectContaining({ code: 'ERR_INVALID_RATE' }));
    expect(() => new Scheduler({ store, key: 'k2', concurrency: 2 }).setBurst(3)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'burst' }),
    );
  });

  it('a subclass given a store is a fleet scheduler too: two of them on one store, concurrency 1, never run two jobs at once', async () => {
    class Mine extends Scheduler {}
    const { clock, timers } = fakeClock(0);
    const store = new MemoryFleetStore({ clock });
    const workers = [1, 2].map(() => new Mine({ store, key: 'mine', concurrency: 1, clock }));
    expect(workers[0]).toBeInstanceOf(Mine);
    expect(workers[0]).toBeInstanceOf(Scheduler);
    let running = 0;
    let most = 0;
    const job = () => async () => {
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => clock.setTimeout(resolve, 10));
      running--;
    };
    const done = Promise.all(workers.flatMap((s) => [s.schedule(job()), s.schedule(job()), s.schedule(job())]));
    await advance(timers, 200, 5);
    await done;
    expect(most).toBe(1);
    expect(workers.map((s) => s.counters.completed)).toEqual([3, 3]);
  });

  it('jobs deep in the queue are rejected at their deadline too, not only those the store was asked about', async () => {
    const { clock, timers, workers } = fleet({ concurrency: 1, maxWait: 100, maxQueue: 500 }, 1);
    const s = workers[0] as Scheduler;
    void s.schedule(() => new Promise(() => {})); // holds the whole budget
    await flush();
    const settled: number[] = [];
    const jobs = Array.from({ length: 200 }, () =>
      s
        .schedule(() => 0)
        .catch((e: { code: string }) => {
          settled.push(clock.now());
          return e.code;
        }),
    );
    await advance(timers, 150, 5);
    expect(new Set(await Promise.all(jobs))).toEqual(new Set(['ERR_WAIT_TOO_LONG']));
    expect(new Set(settled)).toEqual(new Set([1100])); // all at the deadline (the clock starts at 1000)
  });

  it('size counts reserved jobs; onSizeLessThan and onEmpty resolve when the last one starts, not when it ends', async () => {
    const { clock, timers, workers } = fleet({ rate: 10, burst: 1 }, 1);
    const s = workers[0] as Scheduler;
    const never = () => new Promise<never>(() => {});
    for (let i = 0; i < 3; i++) void s.schedule(never);
    await flush();
    expect(s.size).toBe(2); // one reserved, one queued
    expect(s.pending).toBe(1);
    let at = 0;
    void Promise.all([s.onSizeLessThan(1), s.onEmpty()]).then(() => {
      at = clock.now();
    });
    await advance(timers, 250, 5);
    expect(at).toBe(1200);
    expect(s.pending).toBe(3);
  });
});
