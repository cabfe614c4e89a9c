/**
 * Exchanges against a real redis-server that runs them late or twice: a call
 * the worker gave up on (the server was stopped, paused, or busy in a slow
 * command, and ran it on resuming) grants nothing; a grant, a renewal and a
 * cancel replayed with the same lease id count once; after the fault the
 * store's weight is the sum of the leases of jobs that hold one.
 */

import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import type { ExchangeOp, FleetParams } from '../../src/fleet/store.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const params: FleetParams = { ratePerSecond: 100, burst: 10, concurrency: 4 };
let server: RedisServer;
let admin: Redis;
beforeAll(async () => {
  server = await startRedis(['--enable-debug-command', 'yes']);
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
  admin.on('error', () => {});
});
afterAll(async () => {
  admin.disconnect();
  await server.stop();
});

function op(key: string, ids: string[], release: string[] = []): ExchangeOp {
  return {
    key,
    release: release.map((leaseId) => ({ leaseId, cost: 1, source: 'store' as const })),
    acquire: ids.map((leaseId) => ({ cost: 1, maxWaitMs: 1000, leaseId })),
    leaseMs: 10_000,
    claimTtlMs: 500,
    params,
  };
}

function newStore(): { store: RedisFleetStore; client: Redis } {
  const client = new Redis({ port: server.port, host: '127.0.0.1' });
  client.on('error', () => {});
  const store = new RedisFleetStore({ client, onError: 'deny', timeout: 100, probeInterval: 50 });
  return { store, client };
}

async function weightInRedis(store: RedisFleetStore, key: string): Promise<number> {
  const [, , weights] = store.keysFor(key);
  const values = (await admin.hvals(weights as string)).map(Number);
  return values.reduce((a, b) => a + b, 0);
}

describe('exchanges are idempotent per lease id', () => {
  it('a grant asked twice is counted once, and charged once', async () => {
    const { store, client } = newStore();
    const key = `twice-${Date.now()}`;
    const first = await store.exchange(op(key, ['a']));
    expect(first.grants[0]?.status).toBe('ok');
    const again = await store.exchange(op(key, ['a']));
    expect(again.grants[0]?.status).toBe('ok');
    expect(again.inFlight).toBe(1);
    expect(again.tokens).toBeGreaterThan(first.tokens - 0.5); // not charged a second time (a charge is 1)
    await store.renew(key, [{ leaseId: 'a', cost: 1, source: 'store' }], 10_000);
    expect((await store.inspect(key, params)).inFlight).toBe(1);
    const before = (await store.inspect(key, params)).tokens;
    await store.cancel(key, { leaseId: 'a', cost: 1, source: 'store' }, first.grants[0]?.readyAtMs ?? 0);
    const once = (await store.inspect(key, params)).tokens;
    await store.cancel(key, { leaseId: 'a', cost: 1, source: 'store' }, first.grants[0]?.readyAtMs ?? 0);
    expect((await store.inspect(key, params)).tokens).toBeLessThan(once + 0.5); // refunded once at most (a refund is 1)
    expect(once).toBeGreaterThanOrEqual(before);
    expect((await store.inspect(key, params)).inFlight).toBe(0);
    store.close();
    client.disconnect();
  });

  it('a lease named twice in one call, or in two, is given back once', async () => {
    const { store, client } = newStore();
    const key = `named-twice-${Date.now()}`;
    const granted = await store.exchange(op(key, ['a', 'b', 'c']));
    expect(granted.inFlight).toBe(3);
    const after = await store.exchange(op(key, [], ['a', 'a']));
    expect(after.inFlight).toBe(2);
    expect((await store.exchange(op(key, [], ['a', 'b', 'b']))).inFlight).toBe(1);
    expect(await weightInRedis(store, key)).toBe(1);
    store.close();
    client.disconnect();
  });

  it("a lease asked for again after a call given up on is never dropped by that call's release, sent again", async () => {
    // Redis runs every call at once; the answers to the calls `late` picks reach the store after its timeout.
    const client = new Redis({ port: server.port, host: '127.0.0.1' });
    client.on('error', () => {});
    let late = (_argv: string[]) => false;
    const evalsha = (sha: string, numKeys: number, ...rest: string[]) => {
      const reply = client.evalsha(sha, numKeys, ...rest);
      return late(rest.slice(numKeys).map(String)) ? reply.then((r) => sleep(150).then(() => r)) : reply;
    };
    const slow = new Proxy(client, {
      get: (target, name) => (name === 'evalsha' ? evalsha : Reflect.get(target, name, target)),
    });
    const store = new RedisFleetStore({ client: slow, onError: 'deny', timeout: 100, probeInterval: 20 });
    const key = `held-${Date.now()}`;
    expect((await store.exchange(op(key, ['warm']))).grants[0]?.status).toBe('ok'); // learns the offset
    // 1. Redis grants 'x', and the answer comes too late: the store defers 'x' for release.
    late = (argv) => argv.includes('x');
    expect((await store.exchange(op(key, ['x']))).source).toBe('deny');
    // 2. Back: the resync's renewal carries that release, and its answer comes too late as well;
    //    'x' is asked for again meanwhile, and granted after the renewal dropped it.
    late = (argv) => argv[1] === 'r';
    const deadline = Date.now() + 2000;
    while (!store.healthy && Date.now() < deadline) await sleep(1);
    const again = await store.exchange(op(key, ['x']));
    expect(again.grants[0]?.status).toBe('ok');
    await sleep(200); // the renewal has failed by now
    late = () => false;
    while (!store.healthy && Date.now() < deadline + 2000) await sleep(5);
    // 3. 'x' runs: no call of the store drops it; its weight stays until its job releases it.
    await store.renew(
      key,
      [
        { leaseId: 'warm', cost: 1, source: 'store' },
        { leaseId: 'x', cost: 1, source: 'store' },
      ],
      10_000,
    );
    expect((await store.exchange(op(key, []))).inFlight).toBe(2);
    expect(await weightInRedis(store, key)).toBe(2);
    const released = await store.exchange(op(key, [], ['x']));
    expect(released.inFlight).toBe(1);
    expect(await weightInRedis(store, key)).toBe(1);
    store.close();
    client.disconnect();
  });

  it('the script refuses a call run after its deadline (Redis time, through the `now` hook)', async () => {
    const client = new Redis({ port: server.port, host: '127.0.0.1' });
    let t = 1_000_000;
    let local = 0;
    const clock = { now: () => local, setTimeout, clearTimeout } as never;
    const store = new RedisFleetStore({ client, onError: 'deny', timeout: 100, clock, now: () => t });
    const key = `deadline-${Date.now()}`;
    expect((await store.exchange(op(key, ['a']))).grants[0]?.status).toBe('ok'); // offset: t - local
    t += 101; // the script runs 101 ms of store time after the call was sent: given up on
    const late = await store.exchange(op(key, ['b'], ['a']));
    expect(late.grants[0]?.status).toBe('later');
    expect(late.inFlight).toBe(0); // its release still applied
    local += 101; // in step again
    expect((await store.exchange(op(key, ['b']))).grants[0]?.status).toBe('ok');
    store.close();
    client.disconnect();
  });

  const faults: [string, () => Promise<void>][] = [
    [
      'SIGSTOP/SIGCONT',
      async () => {
        server.signal('SIGSTOP');
        await sleep(300);
        server.signal('SIGCONT');
      },
    ],
    ['CLIENT PAUSE', async () => void (await admin.call('CLIENT', 'PAUSE', '300', 'ALL'))],
    ['DEBUG SLEEP', async () => void admin.call('DEBUG', 'SLEEP', '0.3').catch(() => {})],
  ];
  for (const [name, fault] of faults) {
    it(`a call given up on during ${name} grants nothing when Redis runs it late`, async () => {
      const { store, client } = newStore();
      const key = `late-${name}-${Date.now()}`;
      expect((await store.exchange(op(key, ['warm']))).grants[0]?.status).toBe('ok'); // learns the offset
      const faulted = fault();
      await sleep(20);
      const t0 = performance.now();
      const gaveUp = await store.exchange(op(key, ['x', 'y'], ['warm']));
      expect(performance.now() - t0).toBeLessThan(180);
      expect(gaveUp.source).toBe('deny');
      await faulted;
      // Redis has run the late call by now: it released 'warm' and granted nothing.
      const deadline = Date.now() + 2000;
      while (!store.healthy && Date.now() < deadline) await sleep(10);
      expect(store.healthy).toBe(true);
      await sleep(20);
      expect(await weightInRedis(store, key)).toBe(0);
      const after = await store.exchange(op(key, ['x']));
      expect(after.grants[0]?.status).toBe('ok');
      expect(after.inFlight).toBe(1);
      expect(await weightInRedis(store, key)).toBe(1);
      store.close();
      client.disconnect();
    });
  }

  it('a call queued by the client while Redis restarts is replayed late and grants nothing; lost leases come back', async () => {
    const { store, client } = newStore();
    const key = `restart-${Date.now()}`;
    const held = await store.exchange(op(key, ['running']));
    expect(held.grants[0]?.status).toBe('ok');
    await server.stop();
    const gaveUp = await store.exchange(op(key, ['queued']));
    expect(gaveUp.source).toBe('deny');
    await sleep(300);
    const restartedAt = performance.now();
    await server.restart();
    const deadline = Date.now() + 3000;
    while (!store.healthy && Date.now() < deadline) await sleep(5);
    expect(store.healthy).toBe(true);
    await sleep(50);
    // The resync re-added the lease of the job that runs; the replayed call granted nothing.
    expect(await weightInRedis(store, key)).toBe(1);
    const next = await store.exchange(op(key, ['queued']));
    expect(next.grants[0]?.status).toBe('ok');
    expect(performance.now() - restartedAt).toBeLessThan(1500);
    expect(next.inFlight).toBe(2);
    store.close();
    client.disconnect();
  });
});

describe("Redis's clock going backwards", () => {
  it('re-counts from the earlier time: no token created, no key shut for the step', async () => {
    const client = new Redis({ port: server.port, host: '127.0.0.1' });
    let t = 10_000_000;
    const store = new RedisFleetStore({ client, onError: 'deny', now: () => t });
    const key = `backwards-${Date.now()}`;
    const p: FleetParams = { ratePerSecond: 10, burst: 2, concurrency: Number.POSITIVE_INFINITY };
    const ask = (leaseId: string) =>
      store.exchange({ ...op(key, [leaseId]), params: p, acquire: [{ cost: 1, maxWaitMs: 60_000, leaseId }] });
    expect((await ask('a')).grants[0]?.delayMs).toBe(0);
    expect((await ask('b')).grants[0]?.delayMs).toBe(0); // empty now
    t -= 5000; // a fail-over to a server 5 s behind
    const after = await ask('c');
    expect(after.tokens).toBeLessThanOrEqual(0); // nothing earned by the step
    expect(after.grants[0]?.delayMs).toBeCloseTo(100, 0); // one token's refill, not 5 s + 100 ms
    store.close();
    client.disconnect();
  });
});
