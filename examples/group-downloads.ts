/**
 * Three downloads sharing one 3 MiB/s cap (a ThrottleGroup), printing each
 * one's rate.
 *
 *   npx tsx examples/group-downloads.ts
 *
 * The example starts its own HTTP server on 127.0.0.1 (a free port). Three
 * downloads run at once with undici's `stream`, each through a member of one
 * ThrottleGroup into a file in the OS temp folder. Download C also has a cap
 * of its own, 512 KiB/s; A and B have none. The group shares its 3 MiB/s
 * max-min fairly: C gets its 0.5 MiB/s, A and B split the rest (about
 * 1.25 MiB/s each), and when A and B are done C still keeps to its own cap.
 * About 3 s in all.
 */

import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { stream } from 'undici';
import { type RateInput, type Throttle, ThrottleGroup } from '../src/index.js';
import { dataServer } from './download-cap.js';

export interface GroupDownloadsOptions {
  /** Bytes each of A and B downloads; C downloads half as much. @default 3 MiB */
  sizeBytes?: number;
  /** The group's cap. @default '3MiB/s' */
  rate?: RateInput;
  /** C's own cap. @default '512KiB/s' */
  capRate?: RateInput;
  /** Where to print. @default console.log */
  log?: (line: string) => void;
}

export interface DownloadReport {
  name: string;
  bytes: number;
  /** Average bytes per second while all three were running. */
  sharedBytesPerSecond: number;
  elapsedMs: number;
}

const mib = (bytes: number) => (bytes / 1048576).toFixed(2);

export async function main(options: GroupDownloadsOptions = {}): Promise<DownloadReport[]> {
  const sizeBytes = options.sizeBytes ?? 3 * 1048576;
  const log = options.log ?? console.log;
  const server = await dataServer(sizeBytes);
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const group = new ThrottleGroup({ rate: options.rate ?? '3MiB/s' });
  const plan = [
    { name: 'A', member: group.throttle(), bytes: sizeBytes },
    { name: 'B', member: group.throttle(), bytes: sizeBytes },
    { name: 'C', member: group.throttle({ rate: options.capRate ?? '512KiB/s' }), bytes: sizeBytes / 2 },
  ];
  log(
    `${plan.length} downloads sharing ${mib(group.rate)} MiB/s; C also capped at ${mib(plan[2]?.member.rate ?? 0)} MiB/s`,
  );
  const files = plan.map(({ name }) => join(tmpdir(), `tokenpace-group-${process.pid}-${name}.bin`));
  const start = performance.now();
  const done = new Map<string, number>();
  // Bytes of each while all three ran, for the report.
  const shared = new Map<string, number>();
  const printer = setInterval(() => {
    const cells = plan.map(({ name, member }) => {
      const { currentBytesPerSecond, bytes } = member.counters;
      return `${name} ${mib(currentBytesPerSecond)} MiB/s (${mib(bytes)} MiB)`;
    });
    log(`${((performance.now() - start) / 1000).toFixed(1)} s  ${cells.join('   ')}`);
  }, 500);
  try {
    await Promise.all(
      plan.map(async ({ name, member, bytes }, i) => {
        const file = files[i] as string;
        let written: Promise<void> | undefined;
        await stream(`${base}/${name}?bytes=${bytes}`, { method: 'GET', opaque: member }, ({ opaque }) => {
          const throttle = opaque as Throttle;
          written = pipeline(throttle, createWriteStream(file));
          return throttle;
        });
        await written;
        const elapsedMs = performance.now() - start;
        done.set(name, elapsedMs);
        if (shared.size === 0) for (const p of plan) shared.set(p.name, p.member.counters.bytes);
      }),
    );
  } finally {
    clearInterval(printer);
    await Promise.all(files.map((file) => rm(file, { force: true })));
    await new Promise((resolve) => server.close(resolve));
  }
  const firstDoneMs = Math.min(...done.values());
  const reports = plan.map(({ name, member }) => ({
    name,
    bytes: member.counters.bytes,
    sharedBytesPerSecond: ((shared.get(name) ?? 0) * 1000) / firstDoneMs,
    elapsedMs: done.get(name) ?? Number.NaN,
  }));
  for (const r of reports) {
    log(
      `${r.name}: ${mib(r.bytes)} MiB in ${(r.elapsedMs / 1000).toFixed(2)} s; ` +
        `${mib(r.sharedBytesPerSecond)} MiB/s while all three ran (initial bursts included)`,
    );
  }
  return reports;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
