/**
 * The PostgreSQL clients a store accepts, and the one way it sends a query.
 *
 * - `pg` (node-postgres): a `Pool`, a `Client` or a `PoolClient`, anything
 *   with `query(config)`; statements go as named prepared statements (one
 *   plan per connection), values as text.
 * - `postgres` (porsager's): the `sql` function, through `sql.unsafe(text,
 *   values, { prepare: true })`.
 *
 * Neither library is imported: the caller passes a connected client, and the
 * store only calls these methods. Every parameter is sent as text and cast in
 * the SQL (`$4::float8`), and every number comes back as text the store
 * parses, so both clients carry doubles exactly whatever their type parsers.
 */

/** node-postgres: a `Pool`, `Client` or `PoolClient`. */
export interface PgLikeClient {
  query(config: { name?: string; text: string; values?: unknown[] }): Promise<{ rows: unknown[] }>;
}

/** porsager's `postgres`: the `sql` function a `postgres(url)` call returns. */
export interface PostgresJsLikeClient {
  unsafe(text: string, values?: unknown[], options?: { prepare?: boolean }): PromiseLike<unknown>;
}

/** A client a PostgreSQL store accepts. */
export type PostgresClientLike = PgLikeClient | PostgresJsLikeClient;

/** How a PostgreSQL store names its `client` option in messages (src/stores/health.ts `failureOptions`). */
export const POSTGRES_CLIENT = {
  example: 'new pg.Pool({ connectionString })',
  what: 'a pg Pool or Client, or a postgres (porsager) sql function',
} as const;

/** Whether `client` is porsager's `postgres` (it has `unsafe`; pg has `query`). */
export function isPostgresJs(client: PostgresClientLike): client is PostgresJsLikeClient {
  return typeof (client as PostgresJsLikeClient).unsafe === 'function';
}

/**
 * Runs `text` with `values` and resolves with its rows. `name` names the statement for pg's
 * prepared-statement cache (one per distinct text); `null` values are sent as SQL NULL.
 */
export function queryRows(
  client: PostgresClientLike,
  name: string | undefined,
  text: string,
  values: readonly (string | null)[] = [],
): Promise<Record<string, unknown>[]> {
  try {
    if (isPostgresJs(client)) {
      return Promise.resolve(client.unsafe(text, [...values], { prepare: name !== undefined })) as Promise<
        Record<string, unknown>[]
      >;
    }
    return client
      .query(name === undefined ? { text, values: [...values] } : { name, text, values: [...values] })
      .then((result) => result.rows as Record<string, unknown>[]);
  } catch (error) {
    return Promise.reject(error); // a client that throws instead of rejecting (an ended pool)
  }
}

/**
 * Runs a multi-statement script (a migration): pg's simple query protocol, or postgres's `unsafe`
 * without parameters.
 */
export function runScript(client: PostgresClientLike, text: string): Promise<unknown> {
  try {
    if (isPostgresJs(client)) return Promise.resolve(client.unsafe(text));
    return (client as unknown as { query(text: string): Promise<unknown> }).query(text);
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * The statement a store sends for one decision or exchange: `call` (a function call returning the
 * reply) as column `r`. Unless `synchronousCommit`, the same statement sets `synchronous_commit` off
 * for its own transaction only: the commit returns before its WAL record reaches the disk, so a crash
 * of the server (not of a client, and not a clean restart) may forget the last few hundred ms of
 * decisions (at most `wal_writer_delay` x 3), as Redis's `appendfsync everysec` may forget the last
 * second. A forgotten decision gives its tokens back: the error is lenient by those decisions, and
 * bounded. Nothing else in the session or database changes.
 */
export function decisionStatement(call: string, synchronousCommit: boolean): string {
  return synchronousCommit
    ? `select ${call} as r`
    : `select ${call} as r, set_config('synchronous_commit', 'off', true) as c`;
}

/** A schema name as a quoted identifier (`"my schema"`): any name, quotes doubled. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
