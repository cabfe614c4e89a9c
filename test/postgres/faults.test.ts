/**
 * PostgresStore under faults, on a private cluster (test/helpers/postgres-server.ts): a connection
 * killed with pg_terminate_backend, a row lock held by another session, and the server stopped and
 * started again. Under each, every decision is answered within the store's timeout (by the policy,
 * `'deny'`, while the server cannot decide), nothing hangs, the store says so (`degraded`,
 * `recovered`), and the bucket admits no more than its burst over the whole run: nothing is
 * over-admitted after recovery.
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreOp } from '../../src/keyed/store.js';
import { PostgresStore } from '../../src/postgres/postgres-store.js';
import { type PostgresServer, postgresBinaries, startPostgres } from '../helpers/postgres-server.js';

const binaries = postgresBinaries();
const TIMEOUT_MS = 300;
/** Scheduling slack on a loaded machine: a decision answered later than the timeout plus this hangs. */
const SLACK_MS = 1000;
const BURST = 30;

let server: PostgresServer;
let pool: pg.Pool;

const op = (key: string): StoreOp => ({
  mode: 'try',
  key,
  cost: 1,
  bucket: { ratePerSecond: 0.001, burst: BURST },
  global: undefined,
  maxWaitMs: 0,
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf('missing' in binaries)(
  `PostgresStore under faults${'missing' in binaries ? ` (skipped: ${binaries.missing})` : ''}`,
  () => {
    beforeAll(async () => {
      server = await startPostgres();
      pool = new pg.Pool({ connectionString: server.url, max: 4, connectionTimeoutMillis: 1000 });
      // A client whose backend is killed emits 'error' (idle in the pool, or between queries): the
      // application listens, as with any pg pool; the store sees the failed query.
      pool.on('error', () => {});
      pool.on('connect', (client) => client.on('error', () => {}));
      await new PostgresStore({ client: pool, onError: 'deny' }).migrate();
    }, 60_000);
    afterAll(async () => {
      await pool?.end().catch(() => {});
      await server?.destroy();
    });

    /** A store with its events recorded, and a decision that records its source and how long it took. */
    function subject(prefix: string) {
      const store = new PostgresStore({
        client: pool,
        prefix,
        onError: 'deny',
        timeout: TIMEOUT_MS,
        probeInterval: 50,
      });
      const events: string[] = [];
      store.on('degraded', () => events.push('degraded'));
      store.on('recovered', () => events.push('recovered'));
      let admittedByStore = 0;
      let byPolicy = 0;
      let slowest = 0;
      const take = async (key = 'k') => {
        const started = performance.now();
        const r = await store.decide(op(key));
        slowest = Math.max(slowest, performance.now() - started);
        if (r.allowed && r.source === 'store') admittedByStore++;
        if (r.source !== 'store') byPolicy++;
        return r;
      };
      return {
        store,
        events,
        take,
        admitted: () => admittedByStore,
        byPolicy: () => byPolicy,
        slowest: () => slowest,
      };
    }

    /**
     * The burst, never more: a decision the policy answered after `fromByPolicy` may have been made
     * in PostgreSQL all the same (its answer came after `timeoutMs`), so its token may be spent
     * unseen; every other token of the burst is admitted.
     */
    function expectTheBurst(s: ReturnType<typeof subject>, fromByPolicy: number): void {
      expect(s.admitted()).toBeLessThanOrEqual(BURST);
      expect(s.admitted()).toBeGreaterThanOrEqual(BURST - (s.byPolicy() - fromByPolicy));
    }

    /** Takes until the store answers from PostgreSQL again (or fails after `ms`). */
    async function untilRecovered(s: ReturnType<typeof subject>, ms: number): Promise<void> {
      const deadline = Date.now() + ms;
      while ((await s.take()).source !== 'store') {
        if (Date.now() > deadline) throw new Error('the store did not recover');
        await sleep(50);
      }
    }

    it('a connection killed with pg_terminate_backend: answered by the policy in time, then recovered', async () => {
      const s = subject('terminate');
      for (let i = 0; i < 10; i++) await s.take();
      const killer = new pg.Client({ connectionString: server.url });
      await killer.connect();
      const inFlight = Array.from({ length: 8 }, () => s.take());
      await killer.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where pid <> pg_backend_pid() and datname = 'postgres' and backend_type = 'client backend'`,
      );
      await killer.end();
      await Promise.all(inFlight);
      const answeredBefore = s.byPolicy() - 8; // the 8 in flight may have reached PostgreSQL too
      await untilRecovered(s, 10_000);
      for (let i = 0; i < 40; i++) await s.take();
      s.store.close();
      expectTheBurst(s, answeredBefore);
      expect(s.slowest()).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    }, 60_000);

    it('a row lock held by another session: decisions on it time out to the policy, the lock wait ends, no over-admission', async () => {
      const s = subject('locked');
      for (let i = 0; i < 10; i++) await s.take();
      const holder = new pg.Client({ connectionString: server.url });
      await holder.connect();
      try {
        await holder.query('begin');
        await holder.query(`select * from tokenpace.tp_keyed where ns = 'locked' and key = 'k' for update`);
        const during = await Promise.all(Array.from({ length: 6 }, () => s.take()));
        expect(during.every((r) => r.source === 'deny' && !r.allowed)).toBe(true);
        expect(s.events).toContain('degraded');
        // The statements waiting on the lock give up at lock_timeout (the 4 the pool runs at once, then
        // the 2 it queued): the pool's connections are free again while the lock is still held. Done
        // when the pool has nothing queued or running and PostgreSQL has no lock wait; the deadline is
        // generous for a loaded machine, and a failure lists what still waits, and for how long.
        const waiting = async () =>
          (
            await holder.query(
              `select a.pid, a.query, round(extract(epoch from now() - a.query_start) * 1000) as ms
                 from pg_locks l join pg_stat_activity a using (pid) where not l.granted`,
            )
          ).rows;
        const poolBusy = () => pool.waitingCount > 0 || pool.idleCount < pool.totalCount;
        const deadline = Date.now() + 10_000;
        while ((poolBusy() || (await waiting()).length > 0) && Date.now() < deadline) await sleep(50);
        expect(await waiting()).toEqual([]);
        expect({ waiting: pool.waitingCount, busy: pool.totalCount - pool.idleCount }).toEqual({ waiting: 0, busy: 0 });
      } finally {
        await holder.query('rollback').catch(() => {});
        await holder.end().catch(() => {});
      }
      const answeredBefore = s.byPolicy();
      await untilRecovered(s, 10_000);
      for (let i = 0; i < 40; i++) await s.take();
      s.store.close();
      expect(s.events).toContain('recovered');
      expectTheBurst(s, answeredBefore);
      expect(s.slowest()).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    }, 60_000);

    it('the server stopped and started again: the policy answers in time meanwhile, the bucket is kept', async () => {
      const s = subject('restart');
      for (let i = 0; i < 10; i++) await s.take();
      await server.stop();
      const down = performance.now();
      while (performance.now() - down < 1000) {
        const r = await s.take();
        expect(r.source).toBe('deny');
        await sleep(20);
      }
      await server.start();
      await untilRecovered(s, 20_000);
      for (let i = 0; i < 40; i++) await s.take();
      s.store.close();
      expect(s.events).toEqual(['degraded', 'recovered']);
      expect(s.admitted()).toBe(BURST); // the 10 before the restart were kept: 20 more, never 30
      expect(s.slowest()).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    }, 90_000);
  },
);
