/**
 * `tokenpace pipe --redis URL --key NAME`: two pipes, as two processes, share one rate through a
 * real redis-server; and the flags that belong together are checked.
 */

import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/cli/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tokenpace-pipe-fleet-'));
let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server.stop();
});

function pipe(
  args: string[],
): Promise<{ code: number | null; stdout: Buffer; stderr: string; firstMs: number; endMs: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'src/cli/main.ts'), 'pipe', ...args], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let err = '';
    let firstMs = Number.NaN;
    child.stdout.on('data', (c: Buffer) => {
      if (out.length === 0) firstMs = performance.now();
      out.push(c);
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, stdout: Buffer.concat(out), stderr: err, firstMs, endMs: performance.now() }),
    );
  });
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('tokenpace pipe --redis', () => {
  it('two pipes on one key share one rate, byte for byte', async () => {
    const files = [0, 1].map((i) => {
      const data = randomBytes(768 * 1024);
      const file = join(dir, `in${i}.bin`);
      writeFileSync(file, data);
      return { data, file };
    });
    const args = ['--rate', '512KiB/s', '--redis', server.url, '--key', `pipe-${Date.now()}`];
    const runs = await Promise.all(files.map(({ file }) => pipe([...args, file])));
    for (const [i, r] of runs.entries()) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(sha(r.stdout)).toBe(sha((files[i] as { data: Buffer }).data));
    }
    // 1.5 MiB at 512 KiB/s with a burst of 2 leases (200 KiB): at least 2.6 s from the first byte out
    // to the last, where each alone would take 1.1 s.
    const spanMs = Math.max(...runs.map((r) => r.endMs)) - Math.min(...runs.map((r) => r.firstMs));
    expect(spanMs).toBeGreaterThan(2600);
    expect(spanMs).toBeLessThan(10_000);
  }, 60_000);

  it.each([
    [['--rate', '1MiB/s', '--key', 'k'], /--key applies to a fleet pipe/],
    [['--rate', '1MiB/s', '--redis', 'redis://127.0.0.1:1'], /--redis needs --key/],
    [
      ['--rate', '1MiB/s', '--redis', 'redis://127.0.0.1:1', '--key', 'k', '--on-error', 'maybe'],
      /--on-error: expected/,
    ],
    [['--rate', '1MiB/s', '--redis', 'redis://127.0.0.1:1', '--key', 'k', '--on-error', 'local'], /--workers N/],
    [['--rate', '1MiB/s', '--redis', 'redis://127.0.0.1:1', '--key', 'k', '--peak-rate', '2MiB/s'], /--peak-rate/],
  ])('refuses %j with a usage error', async (args, message) => {
    const stderr = new PassThrough();
    let err = '';
    stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    const code = await run(['pipe', ...args], {
      stdin: new PassThrough(),
      stdout: new PassThrough(),
      stderr,
      stderrIsTty: false,
      stderrColumns: 80,
    });
    expect(code).toBe(2);
    expect(err).toMatch(message);
  });
});
