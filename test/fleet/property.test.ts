/**
 * Random sequences of store operations (exchanges with releases, cancels,
 * renewals, time passing) on a MemoryFleetStore, checked against a model of
 * what a fleet store promises, and the same sequences on a RedisFleetStore (on
 * the same virtual time) agreeing with memory answer for answer:
 *
 * - never over the budget: the in-flight weight is the sum of the live leases
 *   of the model, and at most the concurrency while every lease is renewed in
 *   time (a renewal that brings back an expired lease counts its job, which
 *   still runs, even above the budget: the store counts what really runs);
 * - the rate bound: the reservations not cancelled, by their ready times,
 *   conform to the bucket (at most burst + rate * (t2 - t1) in [t1, t2]);
 * - the cancel rule: a cancel gives back between nothing and the job's cost;
 * - leases expire: a lease not renewed stops counting at its expiry; a renewal
 *   adds back one the store had dropped;
 * - an exchange's shape: nothing is granted after a refusal for units, only
 *   the last grant may have a delay, and no grant waits past its maxWait.
 *
 * The comparison with Redis also adjusts running jobs and changes the limits
 * (the bounds above are then not checked), and asks for the bucket to the
 * last bit.
 */

import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import {
  type ExchangeResult,
  type FleetParams,
  type FleetSnapshot,
  type FleetStore,
  MemoryFleetStore,
} from '../../src/fleet/store.js';
import { fakeClock } from '../helpers/fake-clock.js';

const LEASE_MS = 200;
const CLAIM_TTL_MS = 100;
const EPS = 1e-6;

type Op =
  | { t: 'advance'; ms: number }
  | { t: 'exchange'; release: number[]; acquire: { cost: number; maxWaitMs: number }[] }
  | { t: 'cancel'; pick: number }
  | { t: 'renew'; picks: number[] }
  | { t: 'adjust'; delta: number }
  | { t: 'configure'; change: Partial<FleetParams> };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('advance' as const),
      // whole ms, and fractions (whose sums round: the stores must round alike)
      ms: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.double({ min: 0, max: 300, noNaN: true })),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('exchange' as const),
      release: fc.array(fc.nat(20), { maxLength: 3 }),
      acquire: fc.array(
        fc.record({
          cost: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.double({ min: 0.01, max: 3, noNaN: true })),
          maxWaitMs: fc.constantFrom(0, 50, 200, Number.POSITIVE_INFINITY),
        }),
        { maxLength: 4 },
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('cancel' as const), pick: fc.nat(20) }) },
  {
    weight: 1,
    arbitrary: fc.record({ t: fc.constant('renew' as const), picks: fc.array(fc.nat(20), { maxLength: 3 }) }),
  },
);

/** The model's ops and the two that change the bucket outside the model (a job's adjust, new limits). */
const storeOpArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: opArb },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('adjust' as const),
      delta: fc.oneof(fc.constant(0), fc.double({ min: -3, max: 3, noNaN: true })),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('configure' as const),
      change: fc.record(
        {
          ratePerSecond: fc.constantFrom(5, 7.3, 20, Number.POSITIVE_INFINITY),
          burst: fc.constantFrom(3, 3.7, 4),
          concurrency: fc.constantFrom(3, 5, Number.POSITIVE_INFINITY),
        },
        { requiredKeys: [] },
      ),
    }),
  },
);

const paramsArb: fc.Arbitrary<FleetParams> = fc.record({
  ratePerSecond: fc.constantFrom(5, 20, 7.3, Number.POSITIVE_INFINITY),
  burst: fc.constantFrom(3, 4, 3.7),
  concurrency: fc.constantFrom(3, 5, Number.POSITIVE_INFINITY),
});

/** What one step answered: for comparing two stores. */
type Answer = { grants?: ExchangeResult['grants']; snapshot: FleetSnapshot };

interface Lease {
  id: string;
  cost: number;
  expiry: number;
  readyAt: number;
}

/**
 * Runs `ops` on `store` (time from `clock`), checking the model's promises at each step; returns
 * every answer.
 */
async function run(
  store: FleetStore,
  key: string,
  params: FleetParams,
  ops: Op[],
  clock: { now(): number; advance(ms: number): void },
): Promise<Answer[]> {
  const held: Lease[] = []; // leases the worker holds (not released, not cancelled), live or expired
  const kept: { readyAt: number; cost: number }[] = []; // grants not cancelled
  const answers: Answer[] = [];
  let seq = 0;
  let revived = false;
  let changed = false; // an adjust or a configure: the model's bounds (at the first params) no longer apply
  const liveWeight = () => held.filter((l) => l.expiry > clock.now()).reduce((s, l) => s + l.cost, 0);
  const pickFrom = (n: number) => (held.length === 0 ? undefined : held[n % held.length]);
  for (const op of ops) {
    const now = clock.now();
    if (op.t === 'adjust' || op.t === 'configure') {
      changed = true;
      const snapshot =
        op.t === 'adjust' ? await store.adjust(key, op.delta, params) : await store.configure(key, op.change, params);
      answers.push({ snapshot });
    } else if (op.t === 'advance') {
      clock.advance(op.ms);
      answers.push({ snapshot: await store.inspect(key, params) });
    } else if (op.t === 'exchange') {
      const release = [...new Set(op.release.map(pickFrom).filter((l) => l !== undefined))];
      for (const l of release) held.splice(held.indexOf(l), 1);
      const acquire = op.acquire.map((a) => ({ ...a, leaseId: `${key}:${seq++}` }));
      const result = await store.exchange({
        key,
        release: release.map((l) => ({ leaseId: l.id, cost: l.cost, source: 'store' as const })),
        acquire,
        leaseMs: LEASE_MS,
        claimTtlMs: CLAIM_TTL_MS,
        params,
      });
      const { grants, ...snapshot } = result;
      answers.push({ grants, snapshot });
      const statuses = grants.map((g) => g.status);
      // the exchange's shape
      const busyAt = statuses.indexOf('busy');
      if (busyAt >= 0) expect(statuses.slice(busyAt + 1).every((s) => s === 'later')).toBe(true);
      const oks = grants.flatMap((g, i) => (g.status === 'ok' ? [i] : []));
      for (const i of oks.slice(0, -1)) expect(grants[i]?.delayMs).toBe(0);
      for (const [i, g] of grants.entries()) {
        if (g.status === 'ok') {
          expect(g.delayMs).toBeLessThanOrEqual((acquire[i]?.maxWaitMs ?? 0) + EPS);
          held.push({
            id: acquire[i]?.leaseId as string,
            cost: acquire[i]?.cost as number,
            expiry: g.readyAtMs + LEASE_MS,
            readyAt: g.readyAtMs,
          });
          kept.push({ readyAt: g.readyAtMs, cost: acquire[i]?.cost as number });
        }
        if (g.status === 'tooLarge' && !changed) {
          expect(acquire[i]?.cost).toBeGreaterThan(
            Math.min(
              params.concurrency,
              params.ratePerSecond < Number.POSITIVE_INFINITY ? params.burst : Number.POSITIVE_INFINITY,
            ),
          );
        }
      }
    } else if (op.t === 'cancel') {
      const lease = pickFrom(op.pick);
      if (lease === undefined) continue;
      const before = await store.inspect(key, params);
      await store.cancel(key, { leaseId: lease.id, cost: lease.cost, source: 'store' }, lease.readyAt);
      const after = await store.inspect(key, params);
      answers.push({ snapshot: after });
      held.splice(held.indexOf(lease), 1);
      // the cancel rule: between nothing and the cost comes back (never above the burst)
      if (params.ratePerSecond < Number.POSITIVE_INFINITY && !changed) {
        expect(after.tokens - before.tokens).toBeGreaterThanOrEqual(-EPS);
        expect(after.tokens - before.tokens).toBeLessThanOrEqual(lease.cost + EPS);
        if (lease.readyAt < now) expect(after.tokens).toBeCloseTo(before.tokens, 9);
        if (after.tokens - before.tokens > EPS) {
          const k = kept.findIndex((g) => g.readyAt === lease.readyAt && g.cost === lease.cost);
          if (k >= 0) kept.splice(k, 1); // it gave tokens back: it never started
        }
      }
    } else {
      const leases = [...new Set(op.picks.map(pickFrom).filter((l) => l !== undefined))];
      if (leases.length === 0) continue;
      await store.renew(
        key,
        leases.map((l) => ({ leaseId: l.id, cost: l.cost, source: 'store' as const })),
        LEASE_MS,
      );
      for (const l of leases) {
        if (l.expiry <= now) revived = true;
        l.expiry = now + LEASE_MS;
      }
      answers.push({ snapshot: await store.inspect(key, params) });
    }
    // never over the budget, and the weight is what the live leases hold
    const snapshot = (answers.at(-1) as Answer).snapshot;
    expect(snapshot.inFlight).toBeCloseTo(liveWeight(), 9);
    if (!revived && !changed) expect(snapshot.inFlight).toBeLessThanOrEqual(params.concurrency + EPS);
  }
  // the rate bound over the reservations that were not given back
  if (params.ratePerSecond < Number.POSITIVE_INFINITY && !changed) {
    const sorted = [...kept].sort((a, b) => a.readyAt - b.readyAt);
    for (let i = 0; i < sorted.length; i++) {
      let sum = 0;
      for (let j = i; j < sorted.length; j++) {
        sum += (sorted[j] as { cost: number }).cost;
        const span = (sorted[j] as { readyAt: number }).readyAt - (sorted[i] as { readyAt: number }).readyAt;
        expect(sum).toBeLessThanOrEqual(params.burst + (params.ratePerSecond * span) / 1000 + EPS);
      }
    }
  }
  return answers;
}

function virtualTime(startMs: number) {
  const { clock, timers } = fakeClock(startMs);
  return { clock, time: { now: () => clock.now(), advance: (ms: number) => timers.tick(ms) } };
}

let runSeq = 0;

describe('fleet stores against a model', () => {
  it('MemoryFleetStore keeps the budget, the rate bound, the cancel rule and lease expiry', async () => {
    await fc.assert(
      fc.asyncProperty(paramsArb, fc.array(opArb, { maxLength: 40 }), async (params, ops) => {
        const { clock, time } = virtualTime(1_000_000);
        await run(new MemoryFleetStore({ clock }), `m${runSeq++}`, params, ops, time);
      }),
      { numRuns: 300 },
    );
  });

  const client = new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
  afterAll(() => client.disconnect());

  it('RedisFleetStore answers the same random sequences as MemoryFleetStore, to the last bit', async () => {
    await fc.assert(
      fc.asyncProperty(paramsArb, fc.array(storeOpArb, { maxLength: 30 }), async (params, ops) => {
        const key = `prop-${process.pid}-${runSeq++}`;
        const a = virtualTime(1_000_000);
        const memory = await run(new MemoryFleetStore({ clock: a.clock }), key, params, ops, a.time);
        const b = virtualTime(1_000_000);
        const redis = new RedisFleetStore({ client, onError: 'deny', timeout: 5000, now: () => b.clock.now() });
        const answers = await run(redis, key, params, ops, b.time);
        expect(answers.length).toBe(memory.length);
        for (const [i, r] of answers.entries()) {
          const m = memory[i] as Answer;
          // The bucket, the grants and the leases' expiries to the last bit: both stores run bucket.ts's
          // steps (the script by their Lua twin). The in-flight weight is a sum of lease weights that the
          // two add and subtract in different orders (memory by insertion, Redis by expiry), so only close.
          expect(r.snapshot.inFlight).toBeCloseTo(m.snapshot.inFlight, 9);
          expect({ ...r, snapshot: { ...r.snapshot, inFlight: 0 } }).toEqual({
            ...m,
            snapshot: { ...m.snapshot, inFlight: 0 },
          });
        }
      }),
      {
        numRuns: 60,
        examples: [
          // A delay asked right after a small grant: the delay is bucket.ts's delayUntil from now, to the
          // last bit (a delay computed from the last update and nudged from now is 2 ulp off).
          [
            { ratePerSecond: 5, burst: 3, concurrency: 3 },
            [
              { t: 'exchange', release: [], acquire: [{ cost: 1, maxWaitMs: 0 }] },
              { t: 'exchange', release: [], acquire: [{ cost: 0.01, maxWaitMs: 0 }] },
              { t: 'exchange', release: [0], acquire: [{ cost: 2, maxWaitMs: 0 }] },
            ],
          ],
        ],
      },
    );
  }, 60_000);
});
