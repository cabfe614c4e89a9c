/**
 * Database jobs limited by cost: heavy and light queries against PostgreSQL.
 *
 *   npx tsx examples/db-jobs.ts
 *
 * `DATABASE_URL` defaults to the local server (postgres://postgres@127.0.0.1:5432/test).
 *
 * The database can take about 6 units of work at once. A heavy query (a
 * `pg_sleep` plus an aggregate over a few hundred thousand rows, standing in
 * for a report) costs 3 units; a light lookup costs 1. A Scheduler with
 * `concurrency: 6` runs at most two heavy queries at once, or one heavy and
 * three light, or six light: the weights, not the number of queries, are what
 * is limited. A rate of 100 cost units per second paces them too, and a
 * bounded queue (`maxQueue: 50`) turns a burst of extra lookups away at once
 * with `QueueFullError` instead of piling them up.
 */

import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { isTokenpaceError, Scheduler } from '../src/index.js';

export interface DbJobsOptions {
  /** @default process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' */
  databaseUrl?: string;
  /** Heavy queries (cost 3). @default 6 */
  heavy?: number;
  /** Light queries (cost 1). @default 30 */
  light?: number;
  /** Extra light queries submitted at once against the full queue. @default 100 */
  overload?: number;
  /** How long a heavy query sleeps, seconds. @default 0.3 */
  heavySleepSeconds?: number;
  /** Where to print. @default console.log */
  log?: (line: string) => void;
}

export interface DbJobsResult {
  heavy: number;
  light: number;
  /** Extra lookups turned away by the full queue. */
  turnedAway: number;
  /** The most cost that ran at once, and the limit. */
  mostCostAtOnce: number;
  concurrency: number;
  elapsedMs: number;
}

export const defaultDatabaseUrl = 'postgres://postgres@127.0.0.1:5432/test';

/** The message when no database answers: what was tried, and how to start one. */
export function unreachableMessage(databaseUrl: string, error: unknown): string {
  const reason = error instanceof Error ? error.message || error.name : String(error);
  return (
    `no PostgreSQL reachable at ${databaseUrl.replace(/:[^:@/]*@/, ':***@')} (${reason}).\n` +
    'Start the local server (on this machine: `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`), ' +
    'or set DATABASE_URL to one that runs.'
  );
}

export async function main(options: DbJobsOptions = {}): Promise<DbJobsResult> {
  const databaseUrl = options.databaseUrl ?? process.env.DATABASE_URL ?? defaultDatabaseUrl;
  const heavy = options.heavy ?? 6;
  const light = options.light ?? 30;
  const overload = options.overload ?? 100;
  const heavySleepSeconds = options.heavySleepSeconds ?? 0.3;
  const log = options.log ?? console.log;
  const concurrency = 6;

  const pool = new pg.Pool({ connectionString: databaseUrl, max: concurrency, connectionTimeoutMillis: 3000 });
  pool.on('error', () => {}); // an idle client's error: the next query reports it
  try {
    try {
      await pool.query('select 1');
    } catch (error) {
      throw new Error(unreachableMessage(databaseUrl, error), { cause: error });
    }

    const scheduler = new Scheduler({ concurrency, rate: 100, burst: 20, maxQueue: 50 });
    let costNow = 0;
    let mostCostAtOnce = 0;
    const measured =
      <T>(cost: number, work: () => Promise<T>) =>
      async (): Promise<T> => {
        costNow += cost;
        mostCostAtOnce = Math.max(mostCostAtOnce, costNow);
        try {
          return await work();
        } finally {
          costNow -= cost;
        }
      };

    const heavyQuery = () =>
      pool.query(
        'select pg_sleep($1::float8), sum(g)::bigint as total, count(*) filter (where g % 7 = 0) as sevens ' +
          'from generate_series(1, 300000) as g',
        [heavySleepSeconds],
      );
    const lightQuery = (id: number) =>
      pool.query('select $1::int as id, count(*) as tables from pg_catalog.pg_class where relkind = $2', [id, 'r']);

    const start = performance.now();
    const jobs: Promise<unknown>[] = [];
    for (let i = 0; i < Math.max(heavy, light); i++) {
      if (i < heavy) jobs.push(scheduler.schedule(measured(3, heavyQuery), { cost: 3 }));
      if (i < light)
        jobs.push(
          scheduler.schedule(
            measured(1, () => lightQuery(i)),
            { cost: 1, priority: 1 },
          ),
        );
    }
    // A burst of extra lookups while the queue is full: turned away at once, not queued.
    let turnedAway = 0;
    const extra = Array.from({ length: overload }, (_, i) =>
      scheduler
        .schedule(
          measured(1, () => lightQuery(1000 + i)),
          { cost: 1 },
        )
        .catch((error: unknown) => {
          if (!isTokenpaceError(error, 'ERR_QUEUE_FULL')) throw error;
          turnedAway++;
        }),
    );
    await Promise.all([...jobs, ...extra]);
    await scheduler.onIdle();
    const elapsedMs = performance.now() - start;

    const { counters } = scheduler;
    log(`PostgreSQL at ${databaseUrl.replace(/:[^:@/]*@/, ':***@')}; concurrency ${concurrency} units, 100 units/s`);
    log(`heavy queries (cost 3): ${heavy}, light (cost 1): ${light}, extra lookups: ${overload}`);
    log(`ran ${counters.completed} jobs in ${elapsedMs.toFixed(0)} ms; turned away (queue full): ${turnedAway}`);
    log(`most cost running at once: ${mostCostAtOnce} of ${concurrency}`);
    log(`mean wait before starting: ${(counters.waitedMs / Math.max(1, counters.started)).toFixed(0)} ms`);
    return { heavy, light, turnedAway, mostCostAtOnce, concurrency, elapsedMs };
  } finally {
    await pool.end();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  });
}
