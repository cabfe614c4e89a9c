/**
 * PostgresFleetStore: a fleet's shared rate bucket and weighted concurrency
 * budget in PostgreSQL, one call of `tp_fleet_call` (./fleet-sql.ts, the
 * fleet script's PL/pgSQL port) per operation.
 *
 * Everything but the call itself is the shared fleet store's
 * (src/fleet/shared-fleet-store.ts), as for RedisFleetStore: the failure
 * policy and its events, the `'allow'`/`'local'` fallback, the leases this
 * process holds, releases deferred through an outage and sent again, the
 * resync that adds back leases a restarted server lost, and the deadline a
 * call carries so that a call run after its worker gave it up grants
 * nothing. Each call also waits at most `timeout` for the fleet key's row
 * lock (`lock_timeout`), so a lock another session holds frees the
 * connection instead of keeping it.
 *
 * Time is the server's `clock_timestamp()`, so workers with skewed clocks
 * agree. Tables are created by {@link PostgresFleetStore.migrate} in
 * `schema`; `unlogged: true` makes them UNLOGGED (less I/O per call; a crash
 * empties them: the budget and the bucket start afresh, and the workers'
 * renewals add their running leases back).
 */

import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import { InvalidOptionError } from '../errors.js';
import { PROBE_TTL_MS, SHARED_FLEET_OPTIONS, SharedFleetStore } from '../fleet/shared-fleet-store.js';
import type { FailurePolicy } from '../stores/health.js';
import type { DurationInput } from '../units.js';
import { bucketSql } from './bucket-sql.js';
import {
  decisionStatement,
  POSTGRES_CLIENT,
  type PostgresClientLike,
  queryRows,
  quoteIdent,
  runScript,
} from './client.js';
import { fleetSql } from './fleet-sql.js';
import { parseReply } from './postgres-store.js';

/** Options for {@link PostgresFleetStore}. */
export interface PostgresFleetStoreOptions {
  /** A `pg` Pool or Client, or a `postgres` (porsager) sql function. */
  client: PostgresClientLike;
  /** The schema of the store's tables and functions (any name). @default 'tokenpace' */
  schema?: string;
  /** Namespace of the fleet keys within the tables. @default 'tokenpace-fleet' */
  prefix?: string;
  /** What to do when PostgreSQL fails: `'deny'`, `'allow'` or `'local'`. Required. */
  onError: FailurePolicy;
  /** With `'local'`: how many workers share the limits (each gets 1/expectedWorkers). Required then. */
  expectedWorkers?: number;
  /** The longest a call waits for PostgreSQL (and for the key's row lock): ms, or a string such as `'100ms'`. @default 200 */
  timeout?: DurationInput;
  /** How often a failed server is probed: ms, or a string such as `'1s'`. @default 250 */
  probeInterval?: DurationInput;
  /** An idle fleet key is deleted this long after its last lease expires: ms, or a string such as `'1h'`. @default '1d' */
  idleTtl?: DurationInput;
  /** {@link PostgresFleetStore.migrate} creates the tables UNLOGGED. @default false */
  unlogged?: boolean;
  /** Whether an exchange waits for its WAL record to reach the disk (as PostgresStore's). @default false */
  synchronousCommit?: boolean;
  /** @default systemClock */
  clock?: Clock;
  /** Replaces the server's `clock_timestamp()` (tests on a virtual clock). */
  now?: () => number;
}

const POSTGRES_FLEET_STORE_OPTIONS: ReadonlySet<string> = new Set([
  ...SHARED_FLEET_OPTIONS,
  'schema',
  'unlogged',
  'synchronousCommit',
]);

/** A fleet's shared state in PostgreSQL; see the file's opening comment. */
export class PostgresFleetStore extends SharedFleetStore {
  readonly schema: string;
  readonly unlogged: boolean;
  readonly synchronousCommit: boolean;
  readonly #client: PostgresClientLike;
  readonly #sql: string;
  readonly #statement: string;

  constructor(options: PostgresFleetStoreOptions) {
    super(options, {
      name: 'PostgreSQL',
      storeName: 'PostgresFleetStore',
      client: POSTGRES_CLIENT,
      knownOptions: POSTGRES_FLEET_STORE_OPTIONS,
      badPrefix: () => undefined,
    });
    const schema = options.schema ?? 'tokenpace';
    if (typeof schema !== 'string' || schema.length === 0) {
      throw new InvalidOptionError(
        'schema',
        schema,
        `Expected \`schema\` to be a non-empty string, got ${String(schema)}`,
      );
    }
    this.schema = schema;
    this.unlogged = options.unlogged === true;
    this.synchronousCommit = options.synchronousCommit === true;
    this.#client = options.client;
    this.#sql = decisionStatement(
      `${quoteIdent(schema)}.tp_fleet_call($1, $2, $3::text[], $4::float8, $5::int)`,
      this.synchronousCommit,
    );
    this.#statement = `tokenpace_fleet_${createHash('sha1').update(this.#sql).digest('hex').slice(0, 16)}`;
  }

  /** The SQL that creates the store's schema, tables and functions (what {@link migrate} runs). */
  get migrationSql(): string {
    const s = quoteIdent(this.schema);
    return `create schema if not exists ${s};\n${bucketSql(s)}\n${fleetSql(s, this.unlogged)}`;
  }

  /** Creates the schema, tables (if absent) and functions (replaced), under an advisory lock. */
  async migrate(): Promise<void> {
    const name = `tokenpace:${this.schema}`.replaceAll("'", "''");
    await runScript(
      this.#client,
      `begin;\nselect pg_advisory_xact_lock(hashtext('${name}'));\n${this.migrationSql}\ncommit;`,
    );
  }

  protected runScript(key: string, args: string[]): Promise<number[]> {
    return this.health.withTimeout(this.#run(this.prefix, key, args)).then(parseReply);
  }

  protected probeScript(key: string): Promise<unknown> {
    return this.#run(`${this.prefix}:probe`, key, ['g', String(PROBE_TTL_MS), '-1', '1', '-1', '']).then(parseReply);
  }

  #run(ns: string, key: string, args: string[]): Promise<Record<string, unknown>[]> {
    const now = this.now === undefined ? null : String(this.now());
    return queryRows(this.#client, this.#statement, this.#sql, [
      ns,
      key,
      arrayLiteral(['', ...args]),
      now,
      String(this.timeoutMs),
    ]);
  }
}

/** Strings as a PostgreSQL text[] literal: each quoted, `"` and `\` escaped. */
function arrayLiteral(items: readonly string[]): string {
  return `{${items.map((item) => `"${item.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`;
}
