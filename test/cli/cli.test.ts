/**
 * The `tokenpace` command end to end: as a child process (exit codes, stdout
 * and stderr, byte-exact piping checked by sha256, a reader that closes the
 * pipe early), and in-process through `run()` for the many flag checks and
 * the progress bar (which needs a terminal on stderr).
 */

import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { run } from '../../src/cli/cli.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const dir = mkdtempSync(join(tmpdir(), 'tokenpace-cli-'));

interface Ran {
  code: number | null;
  stdout: Buffer;
  stderr: string;
  /** Milliseconds from the first byte on stdout to the last (0 if fewer than two chunks). */
  outputMs: number;
}

/** Runs `tokenpace args` as a child process (from source, through tsx). */
function tokenpace(args: string[], input?: Buffer): Promise<Ran> {
  return new Promise((resolve, reject) => {
    let firstMs: number | undefined;
    let lastMs = 0;
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'src/cli/main.ts'), ...args], {
      cwd: root, // where tsx resolves from
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      lastMs = performance.now();
      firstMs ??= lastMs;
      out.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, stdout: Buffer.concat(out), stderr: err, outputMs: lastMs - (firstMs ?? lastMs) }),
    );
    child.stdin.on('error', () => {}); // a command that does not read stdin may exit first
    child.stdin.end(input);
  });
}

/** Runs `tokenpace args` in-process with captured streams. */
async function inProcess(
  args: string[],
  options: { stdin?: Buffer; tty?: boolean } = {},
): Promise<{ code: number; stdout: string; bytes: Buffer; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  let err = '';
  stdout.on('data', (c: Buffer) => out.push(c));
  stderr.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const code = await run(args, {
    stdin: Readable.from(options.stdin ? [options.stdin] : []),
    stdout,
    stderr,
    stderrIsTty: options.tty ?? false,
    columns: 100,
  });
  // Let everything written reach the 'data' listeners before reading it.
  for (const stream of [stdout, stderr]) {
    if (!stream.writableEnded) stream.end();
    await finished(stream);
  }
  const bytes = Buffer.concat(out);
  return { code, stdout: bytes.toString(), bytes, stderr: err };
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('tokenpace as a process', () => {
  it('--version prints the package version; no command prints the usage on stderr and exits 2', async () => {
    const v = await tokenpace(['--version']);
    expect(v.code).toBe(0);
    expect(v.stdout.toString()).toBe(`${pkg.version}\n`);
    const none = await tokenpace([]);
    expect(none.code).toBe(2);
    expect(none.stdout.length).toBe(0);
    expect(none.stderr).toContain('Usage: tokenpace <command>');
  }, 30_000);

  it('explain --json gives the numbers: 20/s with 40, 30 quick calls then 30 more', async () => {
    const r = await tokenpace(['explain', '--rate', '20/s', '--burst', '40', '--calls', '30,30', '--json']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const e = JSON.parse(r.stdout.toString()) as { refillFromEmptyMs: number; calls: { passed: number }[] };
    expect(e.refillFromEmptyMs).toBe(2000);
    expect(e.calls.map((c) => c.passed)).toEqual([30, 10]);
  }, 30_000);

  it('a bad flag value: one line naming the flag, then the usage, on stderr; exit 2; nothing on stdout', async () => {
    const r = await tokenpace(['explain', '--rate', 'fast', '--burst', '200']);
    expect(r.code).toBe(2);
    expect(r.stdout.length).toBe(0);
    const [first] = r.stderr.split('\n');
    expect(first).toMatch(/^tokenpace explain: --rate: invalid value "fast": expected/);
    expect(r.stderr).toContain('Usage: tokenpace explain');
  }, 30_000);

  it('simulate prints the table, the chart and the summary, and says time is simulated', async () => {
    const r = await tokenpace([
      'simulate',
      '--rate',
      '100/s',
      '--burst',
      '200',
      '--scenario',
      'campaign',
      '--compare',
      'all',
    ]);
    expect(r.code).toBe(0);
    const text = r.stdout.toString();
    expect(text).toContain('Time is simulated');
    expect(text).toContain('What to look at');
    // The first burst second: 180 offered; the token bucket passes all, the fixed window 100 and refuses 80.
    const row = text.split('\n').find((line) => line.startsWith('  10 s'));
    const cells = (row ?? '').split('│').map((cell) => cell.trim().split(/\s+/));
    expect(cells[0]).toEqual(['10', 's', '180']);
    expect(cells[1]).toEqual(['180', '0']);
    expect(cells[2]).toEqual(['100', '80']);
    expect(text).toContain('unbounded queue');
  }, 30_000);

  it('pipe: stdin to stdout byte for byte, silent on a non-terminal stderr', async () => {
    const data = randomBytes(1024 * 1024 + 7);
    const r = await tokenpace(['pipe', '--rate', '64MiB/s'], data);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout.length).toBe(data.length);
    expect(sha(r.stdout)).toBe(sha(data));
  }, 30_000);

  it('pipe FILE at a cap: byte for byte, and no faster than the cap allows', async () => {
    const data = randomBytes(512 * 1024);
    const file = join(dir, 'in.bin');
    writeFileSync(file, data);
    const r = await tokenpace(['pipe', '--rate', '512KiB/s', file]);
    expect(r.code).toBe(0);
    expect(sha(r.stdout)).toBe(sha(data));
    // The default burst is two 64 KiB chunks (128 KiB, 250 ms of the rate) and passes at once; the other
    // 384 KiB are paced at 512 KiB/s: 0.75 s from the first byte to the last, and not much more.
    expect(r.outputMs).toBeGreaterThan(700);
    expect(r.outputMs).toBeLessThan(3000);
  }, 30_000);

  it('pipe: a reader that closes the pipe early ends the copy quietly with status 0', async () => {
    const file = join(dir, 'big.bin');
    writeFileSync(file, randomBytes(8 * 1024 * 1024));
    let closedAt = 0;
    const result = await new Promise<{ code: number | null; stderr: string; got: number; afterCloseMs: number }>(
      (resolve, reject) => {
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', join(root, 'src/cli/main.ts'), 'pipe', '--rate', '2MiB/s', file],
          {
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
        let got = 0;
        let err = '';
        child.stderr.on('data', (c: Buffer) => {
          err += c.toString();
        });
        child.stdout.on('data', (c: Buffer) => {
          got += c.length;
          if (got >= 64 * 1024 && !closedAt) {
            closedAt = performance.now();
            child.stdout.destroy(); // like `| head -c 65536`
          }
        });
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, stderr: err, got, afterCloseMs: performance.now() - closedAt }));
      },
    );
    expect(result.got).toBeGreaterThanOrEqual(64 * 1024);
    // It stops at once: the whole 8 MiB would take 4 s at 2 MiB/s.
    expect(result.afterCloseMs).toBeLessThan(2500);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
  }, 30_000);

  it('pipe: a missing file exits 1 with one line; a burst the timers cannot sustain exits 2', async () => {
    const missing = await tokenpace(['pipe', '--rate', '1MiB/s', join(dir, 'nope.bin')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`tokenpace pipe: cannot read ${join(dir, 'nope.bin')}: no such file\n`);
    const small = await tokenpace(['pipe', '--rate', '1MiB/s', '--burst', '1KiB']);
    expect(small.code).toBe(2);
    expect(small.stderr).toMatch(/^tokenpace pipe: .*burst.*at least/);
  }, 30_000);
});

describe('tokenpace in-process: flags and help', () => {
  it.each([
    [['explain', '--burst', '200'], /explain: missing --rate/],
    [['explain', '--rate', '100/s'], /missing --burst/],
    [['explain', '--rate', '100/s', '--burst', '0'], /--burst: invalid value "0": the size must be positive/],
    [['explain', '--rate', '100/s', '--burst', '2', '--instances', '0'], /--instances: .*from 1 to/],
    [['explain', '--rate', '100/s', '--burst', '2', '--calls', '3,x'], /--calls: invalid value/],
    [['explain', '--rate', '100/s', '--burst', '2', '--nope'], /unknown option --nope/],
    [['explain', '--rate'], /option --rate needs a value/],
    [['explain', '--rate', '100/s', '--burst', '2', 'extra'], /unexpected argument extra/],
    [['simulate', '--rate', '100/s', '--burst', '200'], /missing --scenario/],
    [['simulate', '--rate', '100/s', '--burst', '200', '--scenario', 'flood'], /unknown scenario "flood"/],
    [['simulate', '--rate', '100/s', '--burst', '200', '--scenario', 'x.csv'], /cannot read x.csv: no such file/],
    [
      ['simulate', '--rate', '100/s', '--burst', '200', '--scenario', 'steady', '--compare', 'gcra'],
      /unknown algorithm "gcra"/,
    ],
    [['simulate', '--rate', '0.5/s', '--burst', '200', '--scenario', 'steady'], /from 1\/s to 10000\/s/],
    [['pipe'], /missing --rate/],
    [['pipe', '--rate', '1MiB/s', 'a', 'b'], /at most one FILE/],
    [['pipe', '--rate', '1MiB/s', '--peak-rate', '512KiB/s'], /peakRate .* must be above rate/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['explain', '--rate', '100/s', '--burst', '2', '--json=yes'], /option --json takes no value/],
  ])('%j exits 2 with a one-line reason', async (args, reason) => {
    const r = await inProcess(args as string[]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.split('\n')[0]).toMatch(reason as RegExp);
  });

  it.each([['explain'], ['simulate'], ['pipe']])(
    '%s --help prints its usage on stdout and exits 0',
    async (command) => {
      const r = await inProcess([command, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`Usage: tokenpace ${command}`);
      expect(r.stderr).toBe('');
    },
  );

  it('--help and help print the command list', async () => {
    for (const arg of ['--help', '-h', 'help']) {
      const r = await inProcess([arg]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('explain');
      expect(r.stdout).toContain('simulate');
      expect(r.stdout).toContain('pipe');
    }
  });

  it('simulate --json is the same on every run, and a CSV trace works', async () => {
    const args = ['simulate', '--rate', '100/s', '--burst', '200', '--scenario', 'spike', '--compare', 'all', '--json'];
    const a = await inProcess(args);
    const b = await inProcess(args);
    expect(a.code).toBe(0);
    expect(a.stdout).toBe(b.stdout);
    expect(JSON.parse(a.stdout).simulatedTime).toBe(true);
    const csv = join(dir, 'trace.csv');
    writeFileSync(csv, 'second,count\n0,150\n1,150\n2,50\n');
    const c = await inProcess(['simulate', '--rate', '100/s', '--burst', '50', '--scenario', csv, '--json']);
    expect(c.code).toBe(0);
    const sim = JSON.parse(c.stdout) as { results: { totals: { admitted: number; rejected: number } }[] };
    expect(sim.results[0]?.totals.admitted).toBeLessThanOrEqual(50 + 100 * 3);
    expect(sim.results[0]?.totals.rejected).toBeGreaterThan(0);
  });

  it('pipe: a directory or a missing FILE exits 1 with one line; --peak-rate passes the bytes unchanged', async () => {
    const d = await inProcess(['pipe', '--rate', '1MiB/s', dir]);
    expect(d).toMatchObject({ code: 1, stdout: '', stderr: `tokenpace pipe: ${dir}: is a directory\n` });
    const m = await inProcess(['pipe', '--rate', '1MiB/s', join(dir, 'missing')]);
    expect(m.code).toBe(1);
    expect(m.stderr).toBe(`tokenpace pipe: cannot read ${join(dir, 'missing')}: no such file\n`);
    const data = randomBytes(200 * 1024);
    const p = await inProcess(['pipe', '--rate', '32MiB/s', '--burst', '1MiB', '--peak-rate', '64MiB/s', '-'], {
      stdin: data,
    });
    expect(p.code).toBe(0);
    expect(sha(p.bytes)).toBe(sha(data));
  });

  it('simulate --svg and --html write the plot; a path that cannot be written exits 1', async () => {
    const svg = join(dir, 'plot.svg');
    const html = join(dir, 'plot.html');
    const args = ['simulate', '--rate', '100/s', '--burst', '200', '--scenario', 'ramp', '--compare', 'all'];
    const r = await inProcess([...args, '--svg', svg, '--html', html]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(`tokenpace simulate: wrote ${svg}\ntokenpace simulate: wrote ${html}\n`);
    expect(readFileSync(svg, 'utf8')).toMatch(/^<svg /);
    expect(readFileSync(html, 'utf8')).toMatch(/^<!doctype html>/);
    const bad = await inProcess([...args, '--svg', join(dir, 'no', 'such', 'dir', 'plot.svg')]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^tokenpace simulate: cannot write the plot: /);
  });

  it('the progress bar is drawn on a terminal: bytes, rate, elapsed time, and a bar and ETA when the size is known', async () => {
    const data = randomBytes(300 * 1024);
    const file = join(dir, 'bar.bin');
    writeFileSync(file, data);
    // Slow enough for several frames (one every 200 ms): 300 KiB at 256 KiB/s, after a 128 KiB burst.
    const r = await inProcess(['pipe', '--rate', '256KiB/s', file], { tty: true });
    expect(r.code).toBe(0);
    const frames = r.stderr.split('\r\x1b[K').slice(1);
    expect(frames.length).toBeGreaterThan(2);
    const last = frames.at(-1) ?? '';
    // The last frame: the average rate and the time it took, as pv ends; no ETA.
    expect(last).toMatch(/^ {2}300 KiB \/ 300 KiB 100% \[#+\] +~?[0-9.]+ KiB\/s {2}0:00:0[0-9]\n$/);
    expect(last).not.toContain('ETA');
    for (const frame of frames.slice(0, -1)) expect(frame).toMatch(/ {2}ETA (-:--:--|0:00:0[0-9])$/);
    // One layout on every frame: the bar and every field in the same columns, the first frame too.
    const bars = frames.map((f) => /\[[#.]+\]/.exec(f));
    expect(new Set(bars.map((b) => b?.[0].length)).size).toBe(1);
    expect(new Set(bars.map((b) => b?.index)).size).toBe(1);
    expect(new Set(frames.slice(0, -1).map((f) => f.length)).size).toBe(1);
    // Sizes and rates are written by the library's formatSize/formatRate: three significant digits.
    for (const frame of frames) {
      for (const [, number = ''] of frame.matchAll(/~?([0-9.]+) (?:B|kB|KiB|MB|MiB)\b/g)) {
        expect(number.includes('.') ? number.replace('.', '').replace(/^0+/, '').length : 0).toBeLessThanOrEqual(3);
      }
    }
    const piped = await inProcess(['pipe', '--rate', '64MiB/s'], { stdin: data, tty: true });
    expect(sha(piped.bytes)).toBe(sha(data));
    expect(piped.stderr.split('\r\x1b[K').at(-1)).toMatch(/^ {2}300 KiB {2}.*\/s {2}0:00:00\n$/);
  });

  it('progressLine keeps one layout from the first frame to the last, and fits the terminal', async () => {
    const { progressLine } = await import('../../src/cli/pipe.js');
    const total = 10 * 1024 * 1024;
    const frames = [
      progressLine(0, total, 0, 0, 100),
      progressLine(1_000_000, total, 10.49e6, 100, 100),
      progressLine(5 * 1024 * 1024, total, 9.999 * 1024 * 1024, 500, 100),
      progressLine(total, total, 10 * 1024 * 1024, 1000, 100),
    ];
    const barAt = frames.map((f) => /\[[#.]+\]/.exec(f));
    expect(new Set(barAt.map((b) => `${b?.index}:${b?.[0].length}`)).size).toBe(1);
    expect(new Set(frames.map((f) => f.length)).size).toBe(1);
    for (const f of frames) expect(f.length).toBeLessThan(100);
    expect(frames[2]).toContain('~10 MiB/s'); // 9.999 MiB/s in three digits, marked as rounded
    expect(frames[1]).toContain('~10 MiB/s');
    const final = progressLine(total, total, 10 * 1024 * 1024, 1000, 100, true);
    expect(final).toBe(frames[3]?.replace(/ {2}ETA .*$/, ''));
    expect(final.endsWith('10 MiB/s  0:00:01')).toBe(true);
    // A wider terminal gets a wider bar (up to 40), a narrow one at least 10.
    const width = (columns: number): number => /\[[#.]+\]/.exec(progressLine(0, total, 0, 0, columns))?.[0].length ?? 0;
    expect(width(200)).toBe(42);
    expect(width(40)).toBe(12);
    expect(width(90)).toBeGreaterThan(width(80));
  });

  it("pipe takes pv's short sizes: --rate 10m is 10 MiB/s and --burst 64k is 64 KiB (powers of 1024, either case)", async () => {
    const { pvBytes } = await import('../../src/cli/args.js');
    expect(pvBytes('10m')).toBe(10 * 1024 ** 2);
    expect(pvBytes('10M')).toBe(10 * 1024 ** 2);
    expect(pvBytes('64k')).toBe(64 * 1024);
    expect(pvBytes('1.5g')).toBe(1.5 * 1024 ** 3);
    expect(pvBytes('2T')).toBe(2 * 1024 ** 4);
    for (const other of ['10', '10MiB', '10MB', '10m/s', '10mb', 'm', '10x']) expect(pvBytes(other)).toBeUndefined();
    const data = randomBytes(100 * 1024);
    const p = await inProcess(['pipe', '--rate', '64m', '--burst', '1M', '--peak-rate', '1g'], { stdin: data });
    expect(p.code).toBe(0);
    expect(sha(p.bytes)).toBe(sha(data));
    const zero = await inProcess(['pipe', '--rate', '0k']);
    expect(zero.code).toBe(2);
    expect(zero.stderr.split('\n')[0]).toBe(
      'tokenpace pipe: --rate: invalid value "0k": it must be positive and finite',
    );
    // The library, and so the other commands, keep refusing the short form: there 10m could be 10 per minute.
    const explain = await inProcess(['explain', '--rate', '10m', '--burst', '20']);
    expect(explain.code).toBe(2);
    expect(explain.stderr.split('\n')[0]).toMatch(/--rate: invalid value "10m": "m" is ambiguous/);
    const help = await inProcess(['pipe', '--help']);
    expect(help.stdout).toContain("pv's 10m");
    expect(help.stdout).toContain('--rate 10m is 10 MiB/s');
  });
});
