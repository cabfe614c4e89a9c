/**
 * PostgresStore against rate-limiter-flexible's RateLimiterPostgres on the machine's PostgreSQL
 * (127.0.0.1:5432, database `test`, or TOKENPACE_PG_URL), each on the same `pg` Pool of 10
 * connections, in a schema of its own dropped afterwards, and RedisStore beside them on a
 * redis-server started for the run (ioredis): decisions per second one call at a time, and with 32
 * in flight. 1000 keys, every call admitted (RateLimiterPostgres rejects its promise on a refusal:
 * admitted calls keep both on their fast path). Interleaved rounds.
 */

import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { RateLimiterPostgres } from 'rate-limiter-flexible';
import { KeyedLimiter } from '../src/keyed/keyed-limiter.js';
import { RedisStore } from '../src/keyed/redis-store.js';
import { PostgresStore } from '../src/postgres/postgres-store.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { compare, formatOps, keep, type Section, table } from './harness.js';

const URL = process.env.TOKENPACE_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const KEYS = 1000;

export const keyedPostgresSection: Section = {
  id: 'keyed-postgres',
  title: 'Keyed limits in PostgreSQL: PostgresStore vs RateLimiterPostgres, RedisStore beside',
  async run() {
    const schema = `tp_bench_${randomBytes(4).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: URL, max: 10 });
    pool.on('error', () => {});
    const server = await startRedis();
    const redis = new Redis({ port: server.port, host: '127.0.0.1' });
    try {
      const store = new PostgresStore({ client: pool, schema, onError: 'deny', timeout: 5000 });
      await store.migrate();
      const limiter = new KeyedLimiter({ rate: 1e6, burst: 1e6, store });
      const redisStore = new RedisStore({ client: redis, onError: 'deny', timeout: 5000 });
      const inRedis = new KeyedLimiter({ rate: 1e6, burst: 1e6, store: redisStore });
      await pool.query(`create schema if not exists ${schema}`);
      const rlf = await new Promise<RateLimiterPostgres>((resolve, reject) => {
        const r: RateLimiterPostgres = new RateLimiterPostgres(
          { storeClient: pool, schemaName: schema, tableName: 'rlf', points: 1e9, duration: 3600 },
          (error?: Error) => (error ? reject(error) : resolve(r)),
        );
      });
      let i = 0;
      const key = () => `k${i++ % KEYS}`;
      const ours = async () => keep(await limiter.tryTake(key()));
      const peer = async () => keep(await rlf.consume(key()));
      const redisOurs = async () => keep(await inRedis.tryTake(key()));
      const serial = (one: () => Promise<void>) => async (n: number) => {
        for (let j = 0; j < n; j++) await one();
      };
      const inFlight = (one: () => Promise<void>) => async (n: number) => {
        let left = n;
        const worker = async () => {
          while (left-- > 0) await one();
        };
        await Promise.all(Array.from({ length: 32 }, worker));
      };
      const options = { rounds: 5, sampleMs: 400, warmupMs: 1000 };
      const one = await compare(
        [
          { name: 'PostgresStore', run: serial(ours) },
          { name: 'RateLimiterPostgres', run: serial(peer) },
          { name: 'RedisStore', run: serial(redisOurs) },
        ],
        options,
      );
      const many = await compare(
        [
          { name: 'PostgresStore', run: inFlight(ours) },
          { name: 'RateLimiterPostgres', run: inFlight(peer) },
          { name: 'RedisStore', run: inFlight(redisOurs) },
        ],
        options,
      );
      const row = (label: string, m: typeof one) => {
        const [a, b, c] = m as [(typeof one)[0], (typeof one)[0], (typeof one)[0]];
        return [
          label,
          formatOps(a.opsPerSecond),
          formatOps(b.opsPerSecond),
          `${(a.opsPerSecond / b.opsPerSecond).toFixed(2)}x`,
          formatOps(c.opsPerSecond),
          `${(a.opsPerSecond / c.opsPerSecond).toFixed(2)}x`,
        ];
      };
      return [
        table(
          ['calls', 'PostgresStore', 'RateLimiterPostgres', 'ours vs the peer', 'RedisStore', 'PostgreSQL vs Redis'],
          [row('one at a time', one), row('32 in flight', many)],
        ),
        '',
        `${KEYS} keys, every call admitted, one pg Pool of 10 connections for both PostgreSQL contenders, logged tables; RedisStore on one ioredis client to a redis-server of its own; the median of 5 interleaved rounds.`,
        'Each PostgresStore decision is one function call that locks the key row; RateLimiterPostgres runs one INSERT ... ON CONFLICT ... RETURNING per call.',
      ].join('\n');
    } finally {
      await pool.query(`drop schema if exists ${schema} cascade`).catch(() => {});
      await pool.end();
      redis.disconnect();
      await server.stop();
    }
  },
};

/** Keys sprayed in `keyed-postgres-spray`. */
const SPRAY = 1_000_000;

/**
 * `keyed-postgres-spray`: a million keys, each taken once, sprayed through each limiter with 32 calls
 * in flight. PostgresStore deletes up to two rows full again per row it inserts, so its table holds
 * the keys touched within one refill time; RateLimiterPostgres keeps a row per key until its
 * expired-row sweep (every 5 minutes by default). Rows are counted every second on a connection of
 * their own; the size is the table's with its indexes, at the end. Runs only when named.
 */
export const keyedPostgresSpraySection: Section = {
  id: 'keyed-postgres-spray',
  title: 'A million keys sprayed at PostgreSQL: rows kept by PostgresStore and RateLimiterPostgres',
  onRequest: true, // about 13 minutes on this machine
  async run() {
    const schema = `tp_bench_${randomBytes(4).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: URL, max: 10 });
    pool.on('error', () => {});
    const watcher = new pg.Client({ connectionString: URL });
    await watcher.connect();
    try {
      const store = new PostgresStore({ client: pool, schema, onError: 'deny', timeout: 5000 });
      await store.migrate();
      await pool.query(`create schema if not exists ${schema}`);
      const rlf = await new Promise<RateLimiterPostgres>((resolve, reject) => {
        const r: RateLimiterPostgres = new RateLimiterPostgres(
          { storeClient: pool, schemaName: schema, tableName: 'rlf', points: 1, duration: 1 },
          (error?: Error) => (error ? reject(error) : resolve(r)),
        );
      });
      // A take of 1 from a burst of 10 at 10/s is full again after 100 ms.
      const limiter = new KeyedLimiter({ rate: 10, burst: 10, store });
      const contenders: [string, string, (key: string) => Promise<unknown>][] = [
        ['PostgresStore (full again 100 ms after a take)', 'tp_keyed', (key) => limiter.tryTake(key)],
        ['RateLimiterPostgres (points 1, duration 1 s)', 'rlf', (key) => rlf.consume(key)],
      ];
      const rows: string[][] = [];
      for (const [name, relation, take] of contenders) {
        const count = async () =>
          Number((await watcher.query(`select count(*) as n from ${schema}.${relation}`)).rows[0].n);
        let most = 0;
        let sampling = true;
        const sampler = (async () => {
          while (sampling) {
            most = Math.max(most, await count());
            await new Promise((r) => setTimeout(r, 1000));
          }
        })();
        const started = performance.now();
        let next = 0;
        await Promise.all(
          Array.from({ length: 32 }, async () => {
            while (next < SPRAY) keep(await take(`spray:${next++}`));
          }),
        );
        const seconds = (performance.now() - started) / 1000;
        sampling = false;
        await sampler;
        const left = await count();
        most = Math.max(most, left);
        const size = Number(
          (await watcher.query(`select pg_total_relation_size('${schema}.${relation}') as b`)).rows[0].b,
        );
        rows.push([
          name,
          `${Math.round(SPRAY / seconds / 1000)}k/s`,
          most.toLocaleString('en'),
          left.toLocaleString('en'),
          `${(size / 2 ** 20).toFixed(1)} MiB`,
        ]);
      }
      return [
        table(['limiter', 'keys per second', 'most rows seen', 'rows at the end', 'table and indexes'], rows),
        '',
        `${SPRAY.toLocaleString('en')} keys, each taken once, 32 calls in flight on one pg Pool of 10 connections, logged tables; rows counted every second.`,
      ].join('\n');
    } finally {
      await watcher.end().catch(() => {});
      await pool.query(`drop schema if exists ${schema} cascade`).catch(() => {});
      await pool.end();
    }
  },
};
