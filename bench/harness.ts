/**
 * The bench harness: measure tokenpace and its peers side by side, in one
 * process, in interleaved rounds, and report medians and ratios.
 *
 * Interleaving (A B C, A B C, ...) rather than A A A, B B B spreads slow
 * phases of the machine (JIT tiers, GC, the other core's load) over every
 * contender instead of punishing whichever ran during them. Each sample runs
 * a contender for about `sampleMs`, so a timer read costs nothing next to it.
 */

import { execFile, spawnSync } from 'node:child_process';

/** One contender: `run(n)` performs n operations and returns something (kept, so nothing is optimised away). */
export interface Contender {
  name: string;
  /** Performs `n` operations. May be async (awaited). */
  run(n: number): unknown;
  /** Called once before the first round. */
  setup?(): void | Promise<void>;
}

export interface Measured {
  name: string;
  /** Median operations per second over the rounds. */
  opsPerSecond: number;
  /** Every round's operations per second. */
  samples: number[];
  /** Operations per sample. */
  size: number;
}

export interface CompareOptions {
  /** Rounds per contender. @default 7 */
  rounds?: number;
  /** Target wall time of one sample, ms. @default 200 */
  sampleMs?: number;
  /**
   * Run every contender, interleaved, for at least this long before sizing the samples. Sized on cold
   * code, n fits a cold run: once the JIT has optimised it, a "50 ms" sample takes a few ms, and the
   * figure measures warm-up and timer noise. @default 0
   */
  warmupMs?: number;
  /**
   * Every contender runs the n sized for this one (by name), so that each sample is the same work and
   * holds the same number of jobs at once (the garbage collector's share grows with it). A contender
   * more than four times slower keeps its own n, so that its samples stay short.
   */
  sameSizeAs?: string;
}

let sink: unknown;
/** Keeps a value alive so the JIT cannot drop the work that made it. */
export function keep(value: unknown): void {
  sink = value;
}
export function sunk(): unknown {
  return sink;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Per round, the baseline's time over the contender's (`times[0]` is the baseline's): above 1, faster. */
export function roundRatios(times: readonly (readonly number[])[], i: number): number[] {
  return (times[i] as number[]).map((t, round) => ((times[0] as number[])[round] as number) / t);
}

/** The median of `ratios` and their range, as two cells: `0.95x` and `0.87x to 1.15x`. */
export function ratioCells(ratios: readonly number[]): [string, string] {
  const sorted = [...ratios].sort((a, b) => a - b);
  const fixed = (x: number | undefined) => (x as number).toFixed(2);
  return [`${fixed(median(sorted))}x`, `${fixed(sorted[0])}x to ${fixed(sorted[sorted.length - 1])}x`];
}

/** The median of `ratios` and their range in one cell: `0.95x (0.87-1.15)`. */
export function ratioSpread(ratios: readonly number[]): string {
  const [mid, range] = ratioCells(ratios);
  return `${mid} (${range.replaceAll('x', '').replace(' to ', '-')})`;
}

async function timeRun(contender: Contender, n: number): Promise<number> {
  const start = performance.now();
  const result = contender.run(n);
  if (result instanceof Promise) keep(await result);
  else keep(result);
  return performance.now() - start;
}

/** Finds n such that run(n) takes about `sampleMs` (also warms the code up). */
async function calibrate(contender: Contender, sampleMs: number): Promise<number> {
  let n = 1;
  for (;;) {
    const ms = await timeRun(contender, n);
    if (ms >= sampleMs / 4 || n >= 2 ** 40) return Math.max(1, Math.round((n * sampleMs) / Math.max(ms, 1e-3)));
    n *= ms < sampleMs / 64 ? 8 : 2;
  }
}

/** Measures every contender in interleaved rounds; returns medians in the given order. */
export async function compare(contenders: readonly Contender[], options: CompareOptions = {}): Promise<Measured[]> {
  const rounds = options.rounds ?? 7;
  const sampleMs = options.sampleMs ?? 200;
  for (const c of contenders) await c.setup?.();
  const warmupMs = options.warmupMs ?? 0;
  const sizes: number[] = [];
  if (warmupMs > 0) {
    // Interleaved warm-up runs of growing n; n is then sized from the rate over the second half of
    // them (warm code, many runs: one slow run does not size every sample).
    const spent = contenders.map(() => 0);
    const late = contenders.map(() => ({ ops: 0, ms: 0 }));
    const warmSizes = [];
    for (const c of contenders) warmSizes.push(await calibrate(c, sampleMs / 4));
    while (spent.some((ms) => ms < warmupMs)) {
      for (let i = 0; i < contenders.length; i++) {
        if ((spent[i] as number) >= warmupMs) continue;
        const n = warmSizes[i] as number;
        const ms = await timeRun(contenders[i] as Contender, n);
        spent[i] = (spent[i] as number) + ms;
        if ((spent[i] as number) >= warmupMs / 2) {
          const l = late[i] as { ops: number; ms: number };
          l.ops += n;
          l.ms += ms;
        }
        if (ms < sampleMs / 8) warmSizes[i] = n * 2;
      }
    }
    for (const l of late) sizes.push(Math.max(1, Math.round((l.ops * sampleMs) / Math.max(l.ms, 1e-3))));
  } else {
    for (const c of contenders) sizes.push(await calibrate(c, sampleMs));
  }
  const base = options.sameSizeAs === undefined ? -1 : contenders.findIndex((c) => c.name === options.sameSizeAs);
  if (base >= 0) {
    const baseSize = sizes[base] as number;
    for (let i = 0; i < sizes.length; i++) if ((sizes[i] as number) * 4 >= baseSize) sizes[i] = baseSize;
  }
  const samples: number[][] = contenders.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < contenders.length; i++) {
      const n = sizes[i] as number;
      const ms = await timeRun(contenders[i] as Contender, n);
      samples[i]?.push((n * 1000) / ms);
    }
  }
  return contenders.map((c, i) => ({
    name: c.name,
    opsPerSecond: median(samples[i] as number[]),
    samples: samples[i] as number[],
    size: sizes[i] as number,
  }));
}

/** Formats a number of operations per second: 12.3M/s, 456k/s. */
export function formatOps(opsPerSecond: number): string {
  if (opsPerSecond >= 1e6) return `${(opsPerSecond / 1e6).toFixed(1)}M/s`;
  if (opsPerSecond >= 1e3) return `${(opsPerSecond / 1e3).toFixed(0)}k/s`;
  return `${opsPerSecond.toFixed(0)}/s`;
}

/** A markdown table. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [headers, ...rows];
  const widths = headers.map((_, col) => Math.max(...all.map((row) => (row[col] ?? '').length)));
  const line = (row: readonly string[]) =>
    `| ${row.map((cell, col) => cell.padEnd(widths[col] as number)).join(' | ')} |`;
  return [line(headers), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

/** A table of measured throughputs with each one's ratio to `baseline` (by name). */
export function ratioTable(measured: readonly Measured[], baseline: string, unit = 'decisions'): string {
  const base = measured.find((m) => m.name === baseline)?.opsPerSecond ?? Number.NaN;
  return table(
    ['contender', unit, `vs ${baseline}`],
    measured.map((m) => [m.name, formatOps(m.opsPerSecond), `${(m.opsPerSecond / base).toFixed(2)}x`]),
  );
}

/** A bench section: a title and a function that prints its findings as markdown. */
export interface Section {
  /** Short id used to select sections: `npm run bench -- bucket stream`. */
  id: string;
  title: string;
  /** Returns the section's markdown (tables and a line or two of notes). */
  run(): Promise<string>;
  /** Runs only when named (a long run): `npm run bench` alone skips it. */
  onRequest?: boolean;
}

/**
 * A probe (a contender alone in a process: `bench/*-probe.ts`) bundled once into .tmp/, so that a
 * child starts as plain JavaScript, as a consumer's build would run, without a TypeScript loader.
 * Packages stay external (the probe resolves them from node_modules). Returns the bundle's path.
 */
export async function bundledProbe(source: URL): Promise<string> {
  const { build } = await import('esbuild');
  const { fileURLToPath } = await import('node:url');
  const name = fileURLToPath(source).replace(/^.*\//, '').replace(/\.ts$/, '.mjs');
  const outfile = fileURLToPath(new URL(`../.tmp/bench-${name}`, import.meta.url));
  await build({
    entryPoints: [fileURLToPath(source)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile,
    logLevel: 'warning',
  });
  return outfile;
}

/** Runs a bundled probe in a child process (`nodeFlags` first); resolves with the last line it printed. */
export async function runProbe(bundle: string, args: readonly string[], nodeFlags: readonly string[] = []) {
  const { execFile } = await import('node:child_process');
  return new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [...nodeFlags, bundle, ...args], { encoding: 'utf8' }, (error, stdout) => {
      if (error) reject(error);
      else resolve(stdout.trim().split('\n').pop() ?? '');
    });
  });
}

/**
 * One run of a plain JavaScript `script` under callgrind (valgrind): the instructions it executed. Node
 * runs `--single-threaded` (no background compiler or collector threads, whose share varies from run to
 * run) with fixed hash and random seeds, so a count repeats to within an instruction or two per
 * operation. A caller takes the difference of two runs of different lengths: startup, compilation and
 * warm-up cancel out.
 */
export function callgrindCount(script: string, args: readonly string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile(
      'valgrind',
      [
        '--tool=callgrind',
        '--callgrind-out-file=/dev/null',
        process.execPath,
        '--single-threaded',
        '--hash-seed=1',
        '--random-seed=1',
        script,
        ...args,
      ],
      { encoding: 'utf8' },
      (error, _stdout, stderr) => {
        const match = /Collected : (\d+)/.exec(stderr);
        if (error !== null || match === null)
          reject(new Error(`callgrind run of ${script} ${args.join(' ')} failed:\n${stderr}`));
        else resolve(Number(match[1]));
      },
    );
  });
}

/**
 * Why a measure needing `tools` (valgrind's) is skipped here, or undefined when they are all
 * installed: a note for the section's output, with the install command.
 */
export function missingTool(tools: readonly string[], what: string): string | undefined {
  for (const tool of tools) {
    const found = spawnSync(tool, ['--version'], { encoding: 'utf8' });
    if (found.error !== undefined || found.status !== 0) {
      return `${tool} is not installed here, so ${what} are skipped (Debian/Ubuntu: \`apt-get install valgrind\`).`;
    }
  }
  return undefined;
}
