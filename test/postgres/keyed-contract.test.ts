/**
 * The store contract suite (test/keyed/contract.ts) on PostgreSQL, with `pg` (a Pool and a single
 * Client) and with `postgres` (porsager's), each store in its own prefix of one schema of this file.
 */

import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll } from 'vitest';
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
