/**
 * The fleet store contract, run against MemoryFleetStore and RedisFleetStore
 * (ioredis and node-redis). Real time, coarse rates, tolerant bounds.
 */

import { expect, it } from 'vitest';
import type { FleetParams, FleetStore, HeldLease } from '../../src/fleet/store.js';

export interface ContractTarget {
  /** A store on the shared state (two calls = two workers of one fleet). */
  make(): FleetStore;
}

let seq = 0;
const fresh = () => `contract-${process.pid}-${Date.now()}-${seq++}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const params = (p: Partial<FleetParams> = {}): FleetParams => ({
  ratePerSecond: 10,
  burst: 2,
  concurrency: Number.POSITIVE_INFINITY,
  ...p,
});
const op = (
  key: string,
  cost: number,
  p: FleetParams,
  extra: { maxWaitMs?: number; leaseMs?: number; claimTtlMs?: number } = {},
) => ({
  key,
  cost,
  params: p,
  maxWaitMs: extra.maxWaitMs ?? Number.POSITIVE_INFINITY,
  leaseId: `lease-${seq++}`,
  leaseMs: extra.leaseMs ?? 10_000,
  claimTtlMs: extra.claimTtlMs ?? 5000,
});

export function fleetContract(target: ContractTarget): void {
  it('reserves starts: the burst at once, then into debt at the rate; a too-long wait charges nothing', async () => {
    const store = target.make();
    const key = fresh();
    const p = params();
    expect((await store.acquire(op(key, 1, p))).delayMs).toBe(0);
    expect((await store.acquire(op(key, 1, p))).delayMs).toBe(0);
    const third = await store.acquire(op(key, 1, p));
    expect(third.status).toBe('ok');
    expect(third.delayMs).toBeGreaterThan(0); // (less than 100 ms by the time the first two took)
    expect(third.delayMs).toBeLessThanOrEqual(100);
    expect(third.readyAtMs - third.nowMs).toBeCloseTo(third.delayMs, 6);
    const refused = await store.acquire(op(key, 1, p, { maxWaitMs: 150 }));
    expect(refused.status).toBe('waitTooLong');
    expect(refused.delayMs).toBeGreaterThan(150);
    const after = await store.inspect(key, p);
    expect(after.tokens).toBeGreaterThan(-1.01); // the refused one took nothing
    expect(after.tokens).toBeLessThan(0);
    expect(after.inFlight).toBe(3);
  });

  it('weighted concurrency: a cost that does not fit is busy, and fits once a lease is released', async () => {
    const store = target.make();
    const key = fresh();
    const p = params({ ratePerSecond: Number.POSITIVE_INFINITY, concurrency: 3 });
    const a = op(key, 2, p);
    expect((await store.acquire(a)).status).toBe('ok');
    expect((await store.acquire(op(key, 1, p))).status).toBe('ok');
    const big = op(key, 2, p);
    const busy = await store.acquire(big);
    expect(busy.status).toBe('busy');
    expect(busy.inFlight).toBe(3);
    expect(busy.nextExpiryMs).toBeGreaterThan(9000);
    await store.release(key, [{ leaseId: a.leaseId, cost: 2, source: 'store' }]);
    const again = await store.acquire(big); // the same job asks again
    expect(again.status).toBe('ok');
    expect(again.inFlight).toBe(3);
    expect((await store.acquire(op(key, 4, p))).status).toBe('tooLarge');
  });

  it('the oldest claim on the budget is not starved by smaller jobs; a claim nobody renews lapses', async () => {
    const store = target.make();
    const key = fresh();
    const p = params({ ratePerSecond: Number.POSITIVE_INFINITY, concurrency: 4 });
    const small = op(key, 1, p);
    await store.acquire(small);
    const big = op(key, 4, p, { claimTtlMs: 150 });
    expect((await store.acquire(big)).status).toBe('busy'); // claims 4
    // 1 free unit would fit a cost-1 job, but it is kept for the claim
    expect((await store.acquire(op(key, 1, p, { claimTtlMs: 150 }))).status).toBe('busy');
    await store.release(key, [{ leaseId: small.leaseId, cost: 1, source: 'store' }]);
    expect((await store.acquire(big)).status).toBe('ok');
    await store.release(key, [{ leaseId: big.leaseId, cost: 4, source: 'store' }]);
    // a claim that is not asked again lapses after claimTtlMs
    const blocker = op(key, 3, p);
    await store.acquire(blocker);
    expect((await store.acquire(op(key, 4, p, { claimTtlMs: 100 }))).status).toBe('busy');
    expect((await store.acquire(op(key, 1, p, { claimTtlMs: 100 }))).status).toBe('busy');
    await sleep(150);
    expect((await store.acquire(op(key, 1, p, { claimTtlMs: 100 }))).status).toBe('ok');
  });

  it("an expired lease's units come back by themselves; a renewed one's do not", async () => {
    const store = target.make();
    const key = fresh();
    const p = params({ ratePerSecond: Number.POSITIVE_INFINITY, concurrency: 2 });
    const kept = op(key, 1, p, { leaseMs: 150 });
    await store.acquire(kept);
    await store.acquire(op(key, 1, p, { leaseMs: 150 }));
    const waiting = op(key, 1, p);
    expect((await store.acquire(waiting)).status).toBe('busy');
    await sleep(100);
    await store.renew(key, [{ leaseId: kept.leaseId, cost: 1, source: 'store' }], 300);
    await sleep(120);
    const one = await store.acquire(waiting);
    expect(one.status).toBe('ok'); // the unrenewed lease expired
    expect((await store.acquire(op(key, 1, p))).status).toBe('busy'); // the renewed one still holds
  });

  it('renewing a lease the store lost adds it back', async () => {
    const store = target.make();
    const key = fresh();
    const p = params({ ratePerSecond: Number.POSITIVE_INFINITY, concurrency: 2 });
    await store.inspect(key, p);
    const lost: HeldLease = { leaseId: 'lost-one', cost: 2, source: 'store' };
    await store.renew(key, [lost], 5000);
    expect((await store.inspect(key, p)).inFlight).toBe(2);
    expect((await store.acquire(op(key, 1, p))).status).toBe('busy');
  });

  it('cancel gives back by the cancel rule and frees the lease', async () => {
    const store = target.make();
    const key = fresh();
    const p = params({ ratePerSecond: 10, burst: 2, concurrency: 10 });
    await store.acquire(op(key, 2, p));
    const b = op(key, 2, p);
    const rb = await store.acquire(b); // due in ~200 ms
    const c = await store.acquire(op(key, 1, p)); // due in ~300 ms
    expect(rb.delayMs).toBeGreaterThan(150);
    expect(c.delayMs).toBeGreaterThan(250);
    await store.cancel(key, { leaseId: b.leaseId, cost: 2, source: 'store' }, rb.readyAtMs);
    const s = await store.inspect(key, p);
    // C still counts on 1 token at B's due time, so 2 - 1 = 1 comes back: about -3 + 1
    expect(s.tokens).toBeGreaterThan(-2.2);
    expect(s.tokens).toBeLessThan(-1.5);
    expect(s.inFlight).toBe(3);
  });

  it('the parameters live with the state: a change by one worker applies to the other', async () => {
    const one = target.make();
    const two = target.make();
    const key = fresh();
    const p = params({ ratePerSecond: 10, burst: 5, concurrency: 4 });
    await one.inspect(key, p);
    // two starts with other defaults: the stored ones win
    const seen = await two.inspect(key, params({ ratePerSecond: 1000, burst: 50, concurrency: 100 }));
    expect(seen.params).toEqual(p);
    const changed = await one.configure(key, { ratePerSecond: 20, burst: 3, concurrency: 1 }, p);
    expect(changed.params).toEqual({ ratePerSecond: 20, burst: 3, concurrency: 1 });
    expect(changed.tokens).toBe(3); // tokens kept, capped at the new burst
    const r = await two.acquire(op(key, 1, params()));
    expect(r.params).toEqual({ ratePerSecond: 20, burst: 3, concurrency: 1 });
    expect((await two.acquire(op(key, 1, params()))).status).toBe('busy');
    const unlimited = await one.configure(key, { ratePerSecond: Number.POSITIVE_INFINITY }, p);
    expect(unlimited.params.ratePerSecond).toBe(Number.POSITIVE_INFINITY);
  });

  it('one exchange gives back leases, then grants jobs in order: only the first may wait, a full budget stops it', async () => {
    const store = target.make();
    const key = fresh();
    const p = params({ ratePerSecond: 10, burst: 2, concurrency: 3 });
    const held = op(key, 1, p);
    expect((await store.acquire(held)).status).toBe('ok'); // 1 token left, 1 unit held
    const job = (cost: number) => ({ cost, maxWaitMs: Number.POSITIVE_INFINITY, leaseId: `lease-${seq++}` });
    const base = { key, leaseMs: 10_000, claimTtlMs: 5000, params: p };
    const [j1, j2, j3, big] = [job(1), job(1), job(1), job(5)];
    const first = await store.exchange({
      ...base,
      release: [{ leaseId: held.leaseId, cost: 1, source: 'store' }],
      acquire: [big, j1, j2, j3],
    });
    expect(first.grants.map((g) => g.status)).toEqual(['tooLarge', 'ok', 'later', 'later']);
    expect(first.grants[1]?.delayMs).toBe(0);
    expect(first.inFlight).toBe(1); // the held lease went back first
    const second = await store.exchange({ ...base, release: [], acquire: [j2, j3] });
    expect(second.grants.map((g) => g.status)).toEqual(['ok', 'later']); // j2 waits for the bucket: it stops there
    expect(second.grants[0]?.delayMs).toBeGreaterThan(50);
    const budget = params({ ratePerSecond: Number.POSITIVE_INFINITY, concurrency: 2 });
    const other = fresh();
    const [k1, k2, k3, k4] = [job(1), job(1), job(1), job(1)];
    const third = await store.exchange({ ...base, key: other, params: budget, release: [], acquire: [k1, k2, k3, k4] });
    expect(third.grants.map((g) => g.status)).toEqual(['ok', 'ok', 'busy', 'later']);
    expect(third.inFlight).toBe(2);
    const fourth = await store.exchange({
      ...base,
      key: other,
      params: budget,
      release: [{ leaseId: k1.leaseId, cost: 1, source: 'store' }],
      acquire: [k4, k3],
    });
    // k3's claim came first: k4 may not take the unit k1 gave back (and a refusal stops the exchange)
    expect(fourth.grants.map((g) => g.status)).toEqual(['busy', 'later']);
    const fifth = await store.exchange({ ...base, key: other, params: budget, release: [], acquire: [k3, k4] });
    expect(fifth.grants.map((g) => g.status)).toEqual(['ok', 'busy']);
  });

  it("adjust changes a running job's charge: more into debt now, less given back never above the burst", async () => {
    const store = target.make();
    const key = fresh();
    const p = params({ ratePerSecond: 1, burst: 4 });
    await store.acquire(op(key, 1, p));
    const more = await store.adjust(key, 5, p);
    expect(more.tokens).toBeGreaterThan(-2.1); // 4 - 1 - 5, plus what a few ms refilled
    expect(more.tokens).toBeLessThan(-1.9);
    const back = await store.adjust(key, -3, p);
    expect(back.tokens).toBeGreaterThan(0.9);
    expect(back.tokens).toBeLessThan(1.1);
    expect((await store.adjust(key, -10, p)).tokens).toBe(4); // never above the burst
    const unlimited = fresh();
    const none = params({ ratePerSecond: Number.POSITIVE_INFINITY, concurrency: 2 });
    expect((await store.adjust(unlimited, 3, none)).tokens).toBe(Number.POSITIVE_INFINITY); // no rate: nothing
  });
}
