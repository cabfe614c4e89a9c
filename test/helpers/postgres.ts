/**
 * The machine's PostgreSQL for integration tests: 127.0.0.1:5432, trust auth, database `test`,
 * user `postgres`. Each test file works in a schema of its own (a random name), dropped after.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const PG_URL = process.env.TOKENPACE_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A fresh schema name: `tp_test_<random>`. */
export function schemaName(): string {
  return `tp_test_${randomBytes(6).toString('hex')}`;
}

/** A pool on the test database whose idle-client errors (a killed backend) are absorbed. */
export function testPool(options: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 10, ...options });
  pool.on('error', () => {});
  return pool;
}

/** Drops `schema` and everything in it. */
export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`drop schema if exists "${schema}" cascade`);
  } finally {
    await client.end();
  }
}
