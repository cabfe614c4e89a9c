/**
 * The store contract suite (test/keyed/contract.ts) on PostgreSQL, with `pg` (a Pool and a single
 * Client) and with `postgres` (porsager's), each store in its own prefix of one schema of this file.
 */

import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../../src/postgres/postgres-store.js';
import { dropSchema, PG_URL, schemaName, testPool } from '../helpers/postgres.js';
import { storeContract } from '../keyed/contract.js';

const schema = schemaName();
const pool = testPool();
const client = new pg.Client({ connectionString: PG_URL });
const sql = postgres(PG_URL, { max: 4, onnotice: () => {} });
let n = 0;

beforeAll(async () => {
  await client.connect();
  await new PostgresStore({ client: pool, schema, onError: 'deny' }).migrate();
});
afterAll(async () => {
  await client.end();
  await pool.end();
  await sql.end();
  await dropSchema(schema);
});

storeContract(
  'PostgresStore (pg Pool)',
  (now) => new PostgresStore({ client: pool, schema, prefix: `pool-${++n}`, onError: 'deny', now, timeout: 2000 }),
);
storeContract(
  'PostgresStore (pg Client)',
  (now) => new PostgresStore({ client, schema, prefix: `client-${++n}`, onError: 'deny', now, timeout: 2000 }),
);
storeContract(
  'PostgresStore (postgres)',
  (now) => new PostgresStore({ client: sql, schema, prefix: `js-${++n}`, onError: 'deny', now, timeout: 2000 }),
);
storeContract(
  'PostgresStore (pg Pool, synchronousCommit)',
  (now) =>
    new PostgresStore({
      client: pool,
      schema,
      prefix: `sync-${++n}`,
      onError: 'deny',
      now,
      timeout: 2000,
      synchronousCommit: true,
    }),
);

describe('synchronous_commit', () => {
  it("is off for a decision's own transaction only: the session keeps its setting", async () => {
    const store = new PostgresStore({ client, schema, prefix: `session-${++n}`, onError: 'deny', timeout: 2000 });
    const before = await client.query('show synchronous_commit');
    const result = await store.decide({
      key: 'k',
      mode: 'try',
      cost: 1,
      bucket: { ratePerSecond: 1, burst: 5 },
      global: undefined,
      maxWaitMs: 0,
    });
    expect(result.allowed).toBe(true);
    const after = await client.query('show synchronous_commit');
    expect(after.rows[0]).toEqual(before.rows[0]);
    expect(before.rows[0].synchronous_commit).toBe('on');
    store.close();
  });
});
