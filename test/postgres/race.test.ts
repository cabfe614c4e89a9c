/**
 * Four processes (two on `pg`, two on `postgres`), 200 takes each with 32 in flight, one key with
 * a burst of 100 in one PostgreSQL: exactly the burst is admitted, never one more.
 */

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PostgresStore } from '../../src/postgres/postgres-store.js';
import { dropSchema, PG_URL, schemaName, testPool } from '../helpers/postgres.js';

const source = fileURLToPath(new URL('./fixtures/race-child.ts', import.meta.url));
const child = fileURLToPath(new URL('../../.tmp/postgres-race-child.mjs', import.meta.url));
const schema = schemaName();

beforeAll(async () => {
  await build({
    entryPoints: [source],
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile: child,
    logLevel: 'warning',
  });
  const pool = testPool({ max: 1 });
  await new PostgresStore({ client: pool, schema, onError: 'deny' }).migrate();
  await pool.end();
});
afterAll(() => dropSchema(schema));

it('4 processes x 200 takes, 32 in flight each, one key with a burst of 100: exactly 100 pass', async () => {
  const libraries = ['pg', 'postgres', 'pg', 'postgres'];
  const processes = libraries.map((library) =>
    spawn(process.execPath, [child, PG_URL, library, schema, '200'], { stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  const lines = processes.map((p) => createInterface({ input: p.stdout })[Symbol.asyncIterator]());
  for (const line of lines) expect((await line.next()).value).toBe('ready');
  for (const p of processes) p.stdin.write('go\n');
  const started = performance.now();
  const results = [];
  for (const line of lines) results.push(JSON.parse((await line.next()).value as string));
  for (const p of processes) p.stdin.end();
  console.log(`postgres race: ${JSON.stringify(results)} in ${Math.round(performance.now() - started)} ms`);
  expect(results.map((r) => r.failures + r.byPolicy)).toEqual([0, 0, 0, 0]);
  expect(results.reduce((sum, r) => sum + r.admitted, 0)).toBe(100); // 800 takes, burst 100, refill 0.001/s
  expect(results.every((r) => r.admitted < 100)).toBe(true); // they really raced: no process took it all
}, 60_000);
