/**
 * PostgresStore: keyed buckets in PostgreSQL, shared by every instance that
 * uses the database.
 *
 * One decision is one statement: a call of the store's PL/pgSQL function
 * (./keyed-sql.ts), which locks the global bucket's row and the key's row,
 * decides by the SQL twin of the bucket arithmetic (./bucket-sql.ts, held to
 * bucket.ts's tables), and writes both or neither. Time is the server's
 * `clock_timestamp()`, so instances with skewed clocks agree. Rows of keys
 * that are full again are reclaimed by the decisions that insert new rows
 * (two per insert), so the table stays bounded without a cron.
 *
 * Tables: created by {@link PostgresStore.migrate} (or by running
 * {@link PostgresStore.migrationSql} yourself) in `schema`: `tp_keyed` (one row
 * per key of every prefix) and `tp_keyed_global` (one row per prefix). With
 * `unlogged: true` they are UNLOGGED: no write-ahead log, so decisions cost
 * less I/O, but a crash (not a clean restart) empties them (every bucket is
 * full again) and replicas do not have them.
 *
 * Failure policy (src/stores/health.ts, the one every shared store uses).
 * Each call is bounded by `timeout`, and the function waits at most that long
 * for a row lock (`lock_timeout`), so a connection is not held by a lock
 * another session keeps. When PostgreSQL fails or does not answer in time the
 * store decides by `onError` (`'allow'`, `'deny'`, or `'local'`: an in-memory
 * bucket per instance), answers by the policy at once while one probe at a
 * time (a decision on the probe prefix `<prefix>:probe`) tries the server
 * every `probeInterval`, and recovers at the first probe that succeeds. The
 * events are `degraded`, `recovered` and `failure`, and the same messages on
 * the `tokenpace:redis:*` diagnostics channels as the Redis stores'.
 *
 * A call that timed out may still run on the server later and be counted
 * there: that errs on the strict side, never the lenient one.
 */

import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, InvalidOptionError, StoreUnavailableError } from '../errors.js';
import { MemoryStore } from '../keyed/memory-store.js';
import { decideByPolicy, resultOf } from '../keyed/policy-answers.js';
import type { KeyedStore, StoreCredit, StoreOp, StoreResult } from '../keyed/store.js';
import {
  errorOf,
  type FailurePolicy,
  failureOptions,
  SHARED_STORE_OPTIONS,
  type StoreEvents,
  StoreHealth,
} from '../stores/health.js';
import type { DurationInput } from '../units.js';
import {
  decisionStatement,
  POSTGRES_CLIENT,
  type PostgresClientLike,
  queryRows,
  quoteIdent,
  runScript,
} from './client.js';
import { keyedSql } from './keyed-sql.js';

/** Options for {@link PostgresStore}. */
export interface PostgresStoreOptions {
  /** A `pg` Pool or Client, or a `postgres` (porsager) sql function. Neither library is a dependency. */
  client: PostgresClientLike;
  /** The schema of the store's tables and functions (any name). @default 'tokenpace' */
  schema?: string;
  /** Namespace of the keys within the tables; use one per limiter. @default 'tokenpace' */
  prefix?: string;
  /** Fail-open (`'allow'`), fail-closed (`'deny'`), or an in-memory bucket per instance (`'local'`). Required. */
  onError: FailurePolicy;
  /** The longest a decision waits for PostgreSQL (and for a row lock): ms, or a string such as `'100ms'`. @default 200 */
  timeout?: DurationInput;
  /** How often a failed server is probed with a decision: ms, or a string such as `'1s'`. @default 250 */
  probeInterval?: DurationInput;
  /** Timers (timeouts, probes) and the `'local'` policy's time. @default systemClock */
  clock?: Clock;
  /** The most keys the `'local'` policy keeps. @default 100_000 */
  localMaxKeys?: number;
  /** {@link PostgresStore.migrate} creates the tables UNLOGGED (faster; emptied by a crash, not replicated). @default false */
  unlogged?: boolean;
  /**
   * Whether a decision waits for its WAL record to reach the disk. Off by default: a server crash may
   * then forget the last few hundred ms of decisions (docs/keys-and-stores.md, PostgreSQL). @default false
   */
  synchronousCommit?: boolean;
  /**
   * Replaces the server's `clock_timestamp()` with this clock's milliseconds: for tests and
   * simulations on a virtual clock only.
   */
  now?: () => number;
}

/** Counters a PostgresStore keeps. */
export interface PostgresStoreStats {
  /** Decisions made by PostgreSQL. */
  decisions: number;
  /** Decisions made by the failure policy. */
  byPolicy: number;
  /** Failed or timed-out calls and probes. */
  failures: number;
}

/** The probe's bucket: a try of 1 always conforms. */
const PROBE_RATE = '1000000';

const POSTGRES_STORE_OPTIONS: ReadonlySet<string> = new Set([
  ...SHARED_STORE_OPTIONS,
  'schema',
  'localMaxKeys',
  'unlogged',
  'synchronousCommit',
]);

/**
 * Keyed token buckets in PostgreSQL, shared by a fleet, with an explicit failure policy.
 *
 * @example
 * import pg from 'pg';
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const store = new PostgresStore({ client: pool, onError: 'local', timeout: '100ms' });
 * await store.migrate();
 * const limiter = new KeyedLimiter({ rate: '100/min', burst: 20, store });
 */
export class PostgresStore extends EventEmitter<StoreEvents> implements KeyedStore {
  readonly schema: string;
  readonly prefix: string;
  readonly policy: FailurePolicy;
  /** The bound on one call, ms. */
  readonly timeoutMs: number;
  /** The interval between probes of a failed server, ms. */
  readonly probeIntervalMs: number;
  readonly unlogged: boolean;
  readonly synchronousCommit: boolean;
  readonly stats: PostgresStoreStats = { decisions: 0, byPolicy: 0, failures: 0 };
  readonly #client: PostgresClientLike;
  readonly #clock: Clock;
  readonly #now: (() => number) | undefined;
  readonly #local: MemoryStore | undefined;
  readonly #health: StoreHealth;
  readonly #decideSql: string;
  readonly #statement: string;

  constructor(options: PostgresStoreOptions) {
    super();
    const failure = failureOptions(options, POSTGRES_CLIENT);
    checkKnownOptions(options, POSTGRES_STORE_OPTIONS, 'PostgresStore options');
    for (const name of ['schema', 'prefix'] as const) {
      const value = options[name];
      if (value !== undefined && (typeof value !== 'string' || value.length === 0)) {
        throw new InvalidOptionError(
          name,
          value,
          `Expected \`${name}\` to be a non-empty string, got ${String(value)}`,
        );
      }
    }
    this.#client = options.client;
    this.schema = options.schema ?? 'tokenpace';
    this.prefix = options.prefix ?? 'tokenpace';
    this.unlogged = options.unlogged === true;
    this.synchronousCommit = options.synchronousCommit === true;
    this.policy = failure.policy;
    this.timeoutMs = failure.timeoutMs;
    this.probeIntervalMs = failure.probeIntervalMs;
    this.#now = failure.now;
    this.#clock = checkClock(options.clock);
    this.#health = new StoreHealth({
      owner: this,
      backend: 'PostgreSQL',
      failure,
      clock: this.#clock,
      probe: () => this.#probe(),
      stats: this.stats,
    });
    this.#local =
      this.policy === 'local' ? new MemoryStore({ clock: this.#clock, maxKeys: options.localMaxKeys }) : undefined;
    const s = quoteIdent(this.schema);
    this.#decideSql = decisionStatement(
      `${s}.tp_keyed_decide($1, $2, $3, $4::float8, $5::float8, $6::float8, $7::float8, $8::float8, $9::float8, $10::float8, $11::float8, $12::int)`,
      this.synchronousCommit,
    );
    this.#statement = `tokenpace_keyed_${createHash('sha1').update(this.#decideSql).digest('hex').slice(0, 16)}`;
  }

  /** The SQL that creates the store's schema, tables and functions (what {@link migrate} runs). */
  get migrationSql(): string {
    return keyedSql(quoteIdent(this.schema), this.unlogged);
  }

  /**
   * Creates the schema, the tables (if absent) and the functions (replaced), under an advisory lock
   * so that instances starting together do not race. Not bounded by `timeout`; rejects on failure.
   */
  async migrate(): Promise<void> {
    const lock = `select pg_advisory_xact_lock(hashtext(${literal(`tokenpace:${this.schema}`)}));`;
    await runScript(this.#client, `begin;\n${lock}\n${this.migrationSql}\ncommit;`);
  }

  /** False while decisions follow the failure policy. */
  get healthy(): boolean {
    return this.#health.healthy;
  }

  decide(op: StoreOp): Promise<StoreResult> {
    if (!this.#health.usable) return this.#byPolicy(op);
    const mode = op.mode === 'try' ? 't' : op.mode === 'peek' ? 'p' : 'r';
    const maxWait =
      op.mode === 'reserve' ? (op.maxWaitMs === Number.POSITIVE_INFINITY ? '-1' : String(op.maxWaitMs)) : null;
    return this.#call(op, mode, maxWait, null).then(
      (result) => result,
      (error: unknown) => {
        this.#health.failed(errorOf(error), 1);
        return this.#byPolicy(op);
      },
    );
  }

  refund(op: StoreOp, result: StoreResult): Promise<void> {
    if (result.source === 'local') return (this.#local as MemoryStore).refund(op, result);
    if (result.source !== 'store' || !this.#health.usable) return Promise.resolve();
    return this.#call(op, 'c', String(result.readyAtMs), String(result.globalReadyAtMs)).then(
      () => undefined,
      (error: unknown) => this.#health.failed(errorOf(error), 1),
    );
  }

  /**
   * Gives `op.cost` back (bucket.ts's `credit`). While the server is unreachable, only the
   * `'local'` policy charged anything: its own bucket gets the credit. A credit that fails is lost
   * (it errs on the strict side) and counts as a failure.
   */
  credit(op: StoreCredit): Promise<void> {
    if (!this.#health.usable) return this.#local === undefined ? Promise.resolve() : this.#local.credit(op);
    return this.#call(op, 'a', null, null).then(
      () => undefined,
      (error: unknown) => this.#health.failed(errorOf(error), 1),
    );
  }

  async reset(key: string): Promise<void> {
    await this.#local?.reset(key);
    const sql = `delete from ${quoteIdent(this.schema)}.tp_keyed where ns = $1 and key = $2`;
    await this.#health
      .withTimeout(queryRows(this.#client, undefined, sql, [this.prefix, key]))
      .catch((error: unknown) => {
        throw new StoreUnavailableError(
          `could not reset key ${JSON.stringify(key)} in PostgreSQL: ${errorOf(error).message}`,
          { cause: error },
        );
      });
  }

  /** Stops probing and answers every later decision by the policy. Does not close the client (it is yours). */
  close(): void {
    this.#health.close();
  }
  /** {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  /** One call of the decision function for `op`, by `mode` (keyed-sql.ts), bounded by the timeout. */
  #call(op: Pick<StoreOp, 'key' | 'cost' | 'bucket' | 'global'>, mode: string, a: string | null, b: string | null) {
    const { bucket, global } = op;
    const values = [
      this.prefix,
      op.key,
      mode,
      String(op.cost),
      String(bucket.ratePerSecond),
      String(bucket.burst),
      global === undefined ? null : String(global.ratePerSecond),
      global === undefined ? null : String(global.burst),
      a,
      b,
      this.#now === undefined ? null : String(this.#now()),
      String(this.timeoutMs),
    ];
    const rows = queryRows(this.#client, this.#statement, this.#decideSql, values);
    return this.#health.withTimeout(rows).then((r) => {
      const reply = parseReply(r);
      const hasGlobal = global !== undefined;
      if (reply.length !== (hasGlobal ? 6 : 4)) {
        throw new StoreUnavailableError(`unexpected reply from the keyed function: ${JSON.stringify(r)}`);
      }
      this.stats.decisions++;
      const [nowMs, flag, x, y, gx, gy] = reply as [number, number, number, number, number, number];
      return resultOf(op as StoreOp, nowMs, flag, x, y, hasGlobal ? [gx, gy] : undefined);
    });
  }

  /** A try of 1 on the probe prefix, written as a decision is: it succeeds where decisions can. */
  #probe(): Promise<unknown> {
    const values = [
      `${this.prefix}:probe`,
      'probe',
      't',
      '1',
      PROBE_RATE,
      PROBE_RATE,
      null,
      null,
      null,
      null,
      null,
      String(this.timeoutMs),
    ];
    return queryRows(this.#client, this.#statement, this.#decideSql, values).then(parseReply);
  }

  #byPolicy(op: StoreOp): Promise<StoreResult> {
    this.stats.byPolicy++;
    if (this.#health.usable) this.#health.degrade(new StoreUnavailableError('PostgreSQL failed'));
    return decideByPolicy(this.policy, op, this.#clock, this.#local);
  }
}

/** The function's text reply as numbers (float8's shortest exact text, `Infinity` included). */
export function parseReply(rows: Record<string, unknown>[]): number[] {
  const text = rows[0]?.r;
  if (typeof text !== 'string')
    throw new StoreUnavailableError(`unexpected reply from PostgreSQL: ${JSON.stringify(rows)}`);
  const numbers = text.split(' ').map(Number);
  if (numbers.some(Number.isNaN)) throw new StoreUnavailableError(`unexpected reply from PostgreSQL: ${text}`);
  return numbers;
}

/** A string as an SQL literal. */
function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}
