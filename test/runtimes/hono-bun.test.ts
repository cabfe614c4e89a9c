/**
 * honoRateLimit on Bun's own server, with Bun's fetch as the client, from the built package
 * (test/runtimes/hono-bun.mjs): the key is Bun's `server.requestIP()`, the 429 and its fields
 * are the engine's, `maxWait` holds, and `skipSuccessfulRequests` hears the status without node:http.
 * Skipped where the Bun binary is absent.
 */

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const BUN = process.env.BUN_BINARY ?? '/work/runtimes/oven-bun-linux-x64-1.4.5/package/bin/bun';
const root = join(import.meta.dirname, '..', '..');
const out = mkdtempSync(join(tmpdir(), 'tokenpace-bun-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

interface Seen {
  status: number;
  headers: Record<string, string>;
  body: { rateLimit: { key: string; remaining: number } | null; 'violated-policies'?: string[] };
  ms: number;
}

describe.skipIf(!existsSync(BUN))(`Hono on Bun (${existsSync(BUN) ? BUN : 'no Bun binary: skipped'})`, () => {
  it('keys by requestIP, answers 429 with the fields, holds with maxWait, gives back successes', () => {
    // Built apart from dist/, so that this test never races a build.
    const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', out]);
    const printed = execFileSync(BUN, [join(import.meta.dirname, 'hono-bun.mjs'), join(out, 'index.js')], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    const { runtime, burst, held, logins } = JSON.parse(printed) as {
      runtime: string;
      burst: Seen[];
      held: Seen[];
      logins: Seen[];
    };
    expect(runtime).toMatch(/^bun /);
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
  }, 120_000);
});
