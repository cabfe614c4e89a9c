/**
 * Several processes, each with many decisions in flight, hammer one key in one
 * Redis: exactly the burst is admitted, never one more.
 */

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { beforeAll, expect, inject, it } from 'vitest';

const source = fileURLToPath(new URL('./fixtures/race-child.ts', import.meta.url));
const child = fileURLToPath(new URL('../../.tmp/race-child.mjs', import.meta.url));

// One bundle (esbuild, which tsx ships) starts in a fraction of the time a
// TypeScript loader per process takes on a loaded machine.
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
});

it('4 processes (2 with ioredis, 2 with node-redis), 64 calls in flight each, one key: exactly the burst passes', async () => {
  const port = inject('redisPort');
  const prefix = `race-${process.pid}-${Date.now()}`;
  const libraries = ['ioredis', 'redis', 'ioredis', 'redis'];
  const processes = libraries.map((library) =>
    spawn(process.execPath, [child, String(port), library, prefix, '600'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  const lines = processes.map((p) => createInterface({ input: p.stdout })[Symbol.asyncIterator]());
  for (const line of lines) expect((await line.next()).value).toBe('ready');
  for (const p of processes) p.stdin.write('go\n');
  const started = performance.now();
  const results = [];
  for (const line of lines) results.push(JSON.parse((await line.next()).value as string));
  for (const p of processes) p.stdin.end();
  console.log(`race: ${JSON.stringify(results)} in ${Math.round(performance.now() - started)} ms`);
  const admitted = results.reduce((sum, r) => sum + r.admitted, 0);
  expect(results.map((r) => r.failures + r.byPolicy)).toEqual([0, 0, 0, 0]);
  expect(admitted).toBe(1000); // 2400 calls, burst 1000, a refill of 0.001/s
  expect(results.every((r) => r.admitted < 1000)).toBe(true); // they really raced: no process took it all
}, 30_000);
