/**
 * honoRateLimit on each runtime's own server, Bun.serve and Deno.serve, with the runtime's fetch as
 * the client, from the built package (test/runtimes/hono-web.mjs): the key is the address the server
 * reports (Bun's `server.requestIP()`, Deno's `info.remoteAddr`), the 429 and its fields are the
 * engine's, `maxWait` holds, and `skipSuccessfulRequests` hears the status without node:http.
 * The binaries come from BUN_BINARY and DENO_BINARY (`.ci/run` sets both from scripts/runtime.sh);
 * a runtime whose variable is unset is skipped, and says so.
 */

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');
const runtimes = [
  { name: 'Bun', binary: process.env.BUN_BINARY, args: [] as string[], version: /^bun / },
  { name: 'Deno', binary: process.env.DENO_BINARY, args: ['run', '-A'], version: /^deno / },
];
let out = '';
beforeAll(() => {
  if (runtimes.every((r) => r.binary === undefined)) return;
  // Built apart from dist/, so that this test never races a build.
  out = mkdtempSync(join(tmpdir(), 'tokenpace-hono-web-'));
  const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', out]);
}, 120_000);
afterAll(() => {
  if (out !== '') rmSync(out, { recursive: true, force: true });
});

interface Seen {
  status: number;
  headers: Record<string, string>;
  body: { rateLimit: { key: string; remaining: number } | null; 'violated-policies'?: string[] };
  ms: number;
}

describe.each(runtimes)('Hono on $name', ({ name, binary, args, version }) => {
  const present = binary !== undefined && existsSync(binary);
  it.skipIf(!present)(
    `keys by the server's address, answers 429 with the fields, holds with maxWait, gives back successes (${present ? binary : `${name}: no binary given: skipped`})`,
    () => {
      const script = join(import.meta.dirname, 'hono-web.mjs');
      const printed = execFileSync(binary as string, [...args, script, join(out, 'index.js')], {
        cwd: root, // Deno finds hono through this project's package.json and node_modules
        encoding: 'utf8',
        timeout: 30_000,
      });
      const { runtime, burst, held, logins } = JSON.parse(printed) as {
        runtime: string;
        burst: Seen[];
        held: Seen[];
        logins: Seen[];
      };
      expect(runtime).toMatch(version);
      expect(burst.map((r) => r.status)).toEqual([200, 200, 429]);
      expect(burst[0]?.body.rateLimit).toMatchObject({ key: '127.0.0.1', remaining: 1 });
      expect(burst[0]?.headers['ratelimit-policy']).toBe('"p";q=2;w=2000');
      const refused = burst[2];
      expect(refused?.headers['retry-after']).toBe('1000');
      expect(refused?.headers['content-type']).toBe('application/problem+json');
      expect(refused?.body['violated-policies']).toEqual(['p']);
      expect(held.map((r) => r.status)).toEqual([200, 200]);
      expect(Math.max(...held.map((r) => r.ms))).toBeGreaterThanOrEqual(80); // one waited ~100 ms for its token
      expect(logins.map((r) => r.status)).toEqual([200, 200, 401, 429]); // successes were given back
    },
    120_000,
  );
});
