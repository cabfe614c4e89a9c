/**
 * Worker processes for the fleet tests: test/fleet/fixtures/fleet-child.ts
 * bundled once per file (a plain .mjs starts without a TypeScript loader
 * per process, as test/keyed/race.test.ts's children do), spawned against a Redis port, and the
 * window counts their start times are checked with.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { expect } from 'vitest';

export interface Worker {
  process: ChildProcess;
  next(): Promise<string>;
}

/** Worker processes from one bundle (`name` keeps files that run in parallel apart) of a fixture in ./fixtures/. */
export class Workers {
  readonly #bundle: string;
  readonly #source: string;
  readonly #spawned: ChildProcess[] = [];

  constructor(name: string, fixture = 'fleet-child.ts') {
    this.#bundle = fileURLToPath(new URL(`../../.tmp/${name}.mjs`, import.meta.url));
    this.#source = fileURLToPath(new URL(`./fixtures/${fixture}`, import.meta.url));
  }

  build(): Promise<unknown> {
    return build({
      entryPoints: [this.#source],
      bundle: true,
      platform: 'node',
      format: 'esm',
      packages: 'external',
      outfile: this.#bundle,
      logLevel: 'warning',
    });
  }

  killAll(): void {
    for (const p of this.#spawned) p.kill('SIGKILL');
  }

  start(port: number, key: string, mode: string, options: object): Worker {
    const p = spawn(process.execPath, [this.#bundle, String(port), key, mode, JSON.stringify(options)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    this.#spawned.push(p);
    const lines = createInterface({ input: p.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
    return { process: p, next: async () => (await lines.next()).value as string };
  }

  /** `count` workers on one key: all ready, then "go" to all, then each one's JSON line. */
  async runAll(port: number, mode: string, options: object, count = 4) {
    const key = `${mode}-${process.pid}-${Date.now()}`;
    const workers = Array.from({ length: count }, () => this.start(port, key, mode, options));
    for (const w of workers) expect(await w.next()).toBe('ready');
    for (const w of workers) w.process.stdin?.write('go\n');
    const results = [];
    for (const w of workers) results.push(JSON.parse(await w.next()));
    for (const w of workers) w.process.stdin?.end();
    return results;
  }
}

/** The most starts in any window of T ms, for each T. */
export function worstWindows(sorted: readonly number[], Ts: readonly number[]): Record<number, number> {
  const windows: Record<number, number> = {};
  for (const T of Ts) {
    let worst = 0;
    for (let i = 0, j = 0; i < sorted.length; i++) {
      while (j < sorted.length && (sorted[j] as number) < (sorted[i] as number) + T) j++;
      worst = Math.max(worst, j - i);
    }
    windows[T] = worst;
  }
  return windows;
}
