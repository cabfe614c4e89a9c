/**
 * The fleet store contract (test/fleet/contract.ts) on PostgreSQL, with `pg` and with `postgres`
 * (porsager's), in a schema of this file's own.
 */

import postgres from 'postgres';
import { afterAll, beforeAll, describe } from 'vitest';
import { PostgresFleetStore } from '../../src/postgres/postgres-fleet-store.js';
import { fleetContract } from '../fleet/contract.js';
import { dropSchema, PG_URL, schemaName, testPool } from '../helpers/postgres.js';

const schema = schemaName();
const pool = testPool();
const sql = postgres(PG_URL, { max: 4, onnotice: () => {} });

/** A call on every connection first: PL/pgSQL compiles a function at its first call in a session. */
const WARM = `select "${schema}".tp_fleet_call('warm', 'warm', '{"","g","1000","-1","1","-1",""}', null, 1000)`;

beforeAll(async () => {
  // UNLOGGED: no WAL flush per call, so the real-time cases see less time pass between calls.
  await new PostgresFleetStore({ client: pool, schema, onError: 'deny', unlogged: true }).migrate();
  const clients = await Promise.all(Array.from({ length: 10 }, () => pool.connect()));
  await Promise.all(clients.map((c) => c.query(WARM)));
  for (const c of clients) c.release();
  const reserved = await Promise.all(Array.from({ length: 4 }, () => sql.reserve()));
  await Promise.all(reserved.map((c) => c.unsafe(WARM)));
  for (const c of reserved) c.release();
}, 30_000);
afterAll(async () => {
  await pool.end();
  await sql.end();
  await dropSchema(schema);
});

// The contract runs in real time with coarse rates; a call through PostgreSQL commits (a WAL flush)
// where Redis answers from memory, so on a loaded machine a case may see more time pass than it
// allows for: it is tried again, up to twice, before it counts as failed.
describe('PostgresFleetStore (pg)', { retry: 2 }, () => {
  fleetContract({ make: () => new PostgresFleetStore({ client: pool, schema, onError: 'deny', timeout: 2000 }) });
});

describe('PostgresFleetStore (postgres)', { retry: 2 }, () => {
  fleetContract({ make: () => new PostgresFleetStore({ client: sql, schema, onError: 'deny', timeout: 2000 }) });
});
