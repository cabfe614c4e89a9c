/**
 * KeyedScheduler against one Scheduler per key made by hand (a `Map` of schedulers, each made on
 * first use), side by side in one process run:
 *
 * 1. Throughput of no-op jobs spread over 1,000 hot keys (concurrency 4 and a rate that never binds
 *    per key), in batches of 1,000 awaited together: the cost of the table, the plan lookup and,
 *    with `global` (a rate that never binds), the turns' check on every start.
 * 2. Memory per idle key: heap retained (after a forced GC) per key that ran one job and is idle,
 *    its bucket not yet full (so it is kept), for both.
 * 3. Fairness when the global limit binds: 1,000 keys, one with 10,000 jobs queued first, global
 *    10,000/s burst 1: when the last other key's first job starts (one turn is 100 ms).
 */

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { KeyedScheduler, Scheduler } from '../src/index.js';
import { compare, formatOps, ratioTable, type Section, table } from './harness.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function settleHeap(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    await tick();
    gc();
  }
  return process.memoryUsage().heapUsed;
}

const HOT_KEYS = 1000;
const BATCH = 1000;
const LIMITS = { rate: 1e9, burst: 1e6, concurrency: 4, maxQueue: 10_000 };

/** One Scheduler per key made by hand: what a user writes without a KeyedScheduler. */
function byHand(): (key: string, fn: () => unknown) => Promise<unknown> {
  const schedulers = new Map<string, Scheduler>();
  return (key, fn) => {
    let scheduler = schedulers.get(key);
    if (scheduler === undefined) {
      scheduler = new Scheduler(LIMITS);
      schedulers.set(key, scheduler);
    }
    return scheduler.schedule(fn);
  };
}

const keys = Array.from({ length: HOT_KEYS }, (_, i) => `tenant:${i}`);
const noop = (): void => {};

function contender(name: string, schedule: (key: string, fn: () => unknown) => Promise<unknown>) {
  let cursor = 0;
  return {
    name,
    async run(n: number) {
      for (let done = 0; done < n; done += BATCH) {
        const jobs: Promise<unknown>[] = [];
        for (let i = 0; i < BATCH; i++) jobs.push(schedule(keys[cursor++ % HOT_KEYS] as string, noop));
        await Promise.all(jobs);
      }
    },
  };
}

async function throughput(): Promise<string> {
  const plain = new KeyedScheduler({ ...LIMITS, maxKeys: HOT_KEYS });
  const global = new KeyedScheduler({ ...LIMITS, maxKeys: HOT_KEYS, global: { rate: 1e9, burst: 1e6 } });
  const plans = new KeyedScheduler({
    plans: { free: { rate: 1e9, burst: 1e6 }, paid: { rate: 2e9, burst: 1e6 } },
    plan: (key) => (key.endsWith('0') ? 'paid' : 'free'),
    concurrency: 4,
    maxQueue: 10_000,
    maxKeys: HOT_KEYS,
  });
  const measured = await compare(
    [
      contender('one Scheduler per key, by hand', byHand()),
      contender('KeyedScheduler', (key, fn) => plain.schedule(key, fn)),
      contender('KeyedScheduler, plans + plan(key)', (key, fn) => plans.schedule(key, fn)),
      contender('KeyedScheduler, global (not binding)', (key, fn) => global.schedule(key, fn)),
    ],
    { rounds: 7, sampleMs: 200, warmupMs: 500 },
  );
  return [
    `#### ${HOT_KEYS} hot keys, no-op jobs in batches of ${BATCH}`,
    '',
    ratioTable(measured, measured[0]?.name ?? '', 'jobs'),
  ].join('\n');
}

async function idleMemory(): Promise<string> {
  const n = 20_000;
  const limits = { rate: 1, burst: 10, concurrency: 4 };
  const perKey = async (schedule: (key: string) => Promise<unknown>, keep: () => unknown): Promise<number> => {
    const before = await settleHeap();
    for (let done = 0; done < n; done += BATCH) {
      const jobs: Promise<unknown>[] = [];
      for (let i = done; i < done + BATCH; i++) jobs.push(schedule(`idle:${i}`));
      await Promise.all(jobs);
    }
    const after = await settleHeap();
    if (keep() === undefined) throw new Error('unreachable');
    return (after - before) / n;
  };
  const schedulers = new Map<string, Scheduler>();
  const hand = await perKey(
    (key) => {
      const scheduler = new Scheduler(limits);
      schedulers.set(key, scheduler);
      return scheduler.schedule(noop);
    },
    () => schedulers,
  );
  const keyed = new KeyedScheduler({ ...limits, maxKeys: n });
  const kept = await perKey(
    (key) => keyed.schedule(key, noop),
    () => keyed,
  );
  const global = new KeyedScheduler({ ...limits, maxKeys: n, global: { rate: 1e9, burst: 1e6 } });
  const keptGlobal = await perKey(
    (key) => global.schedule(key, noop),
    () => global,
  );
  const bytes = (x: number) => `${Math.round(x).toLocaleString('en')} B`;
  return [
    `#### Memory per idle key (${n.toLocaleString('en')} keys, one job each, buckets not yet full)`,
    '',
    table(
      ['contender', 'heap per idle key'],
      [
        ['one Scheduler per key, by hand', bytes(hand)],
        ['KeyedScheduler', bytes(kept)],
        ['KeyedScheduler, global', bytes(keptGlobal)],
      ],
    ),
    '',
    'An idle key whose bucket is full again equals a new one: the table drops it (no memory).',
  ].join('\n');
}

async function fairness(): Promise<string> {
  const rate = 10_000;
  const keyed = new KeyedScheduler({ rate: 1e9, burst: 1e6, maxQueue: 10_000, global: { rate, burst: 1 } });
  let floodStarted = 0;
  let floodBy = 0;
  let lastFirstMs = 0;
  const flood: Promise<unknown>[] = [];
  for (let i = 0; i < 10_000; i++) flood.push(keyed.schedule('flood', () => void floodStarted++));
  const others: Promise<unknown>[] = [];
  let started = 0;
  let start = 0;
  for (let k = 0; k < HOT_KEYS - 1; k++) {
    others.push(
      keyed.schedule(`key:${k}`, () => {
        if (++started < HOT_KEYS - 1) return;
        lastFirstMs = performance.now() - start;
        floodBy = floodStarted;
      }),
    );
  }
  // Timed from when every job is queued: making 1,000 keys takes time of its own.
  start = performance.now();
  const floodBefore = floodStarted;
  await Promise.all(others);
  keyed.scheduler('flood')?.clear();
  await Promise.allSettled(flood);
  const turnMs = (HOT_KEYS * 1000) / rate;
  return [
    `#### Fairness: ${HOT_KEYS} keys, one with 10,000 jobs queued first, global ${formatOps(rate)} burst 1`,
    '',
    table(
      ['one turn (keys / global rate)', "last other key's first start", 'flood jobs started by then'],
      [[`${turnMs} ms`, `${lastFirstMs.toFixed(1)} ms`, `${floodBy} (${floodBefore} before the clock started)`]],
    ),
    '',
    "Real timers: a start every 0.1 ms is served from timers that fire every ms or later, the bucket's",
    "theoretical start times making up the lateness; the exact figure is the fake-clock test's.",
  ].join('\n');
}

export const keyedSchedulerSection: Section = {
  id: 'keyed-scheduler',
  title: 'KeyedScheduler: a queue per key',
  async run() {
    return [await throughput(), '', await idleMemory(), '', await fairness()].join('\n');
  },
};
