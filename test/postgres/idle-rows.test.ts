/**
 * Idle keys go away without a cron (src/postgres/keyed-sql.ts): every decision that inserts a row
 * first deletes up to two rows whose bucket is full again, so the table holds at most the keys
 * touched within one refill time (burst / rate), plus one, however many keys are sprayed at it.
 * Keys are sprayed by one DO block that commits after each decision, as separate decisions do,
 * one new key per virtual millisecond.
 */

import { afterAll, beforeAll, expect, it } from 'vitest';
import { PostgresStore } from '../../src/postgres/postgres-store.js';
import { dropSchema, schemaName, testPool } from '../helpers/postgres.js';

const schema = schemaName();
const pool = testPool({ max: 1 });

beforeAll(async () => {
  await new PostgresStore({ client: pool, schema, onError: 'deny', unlogged: true }).migrate();
}, 60_000);
afterAll(async () => {
  await pool.end();
  await dropSchema(schema);
});

/** Sprays `keys` new keys under prefix `ns`, key i at virtual time `i` ms; returns the rows left. */
async function spray(ns: string, keys: number, rate: number, burst: number): Promise<number> {
  await pool.query(`do $$ begin
    for i in 1 .. ${keys} loop
      perform "${schema}".tp_keyed_decide('${ns}', 'k' || i, 't', 1, ${rate}, ${burst}, null, null, null, null, i::float8, null);
      commit;
    end loop;
  end $$`);
  const { rows } = await pool.query(`select count(*)::int as n from "${schema}".tp_keyed where ns = $1`, [ns]);
  return rows[0].n as number;
}

it('a key full again 2 ms after its take: 20,000 sprayed keys leave a handful of rows', async () => {
  const rows = await spray('fast', 20_000, 1000, 1); // full again after 1 ms (+ 1 ms of margin)
  console.log(`idle rows: 20,000 keys at 1000/s burst 1 leave ${rows} rows`);
  expect(rows).toBeLessThanOrEqual(4);
}, 120_000);

it('full again 100 ms after a take: 10,000 keys at one per ms leave the last 101 ms of them, plus one', async () => {
  const rows = await spray('slow', 10_000, 10, 10); // a take of 1 refills in 100 ms (+ 1 ms): full_at = i + 101
  console.log(`idle rows: 10,000 keys at 10/s burst 10 leave ${rows} rows`);
  expect(rows).toBeGreaterThanOrEqual(102); // the live ones are kept: keys N - 101 .. N
  expect(rows).toBeLessThanOrEqual(103);
}, 120_000);
