/**
 * A download capped at 1 MiB/s, with a progress line.
 *
 *   npx tsx examples/download-cap.ts
 *
 * The example starts its own HTTP server on 127.0.0.1 (a free port) that
 * serves 2.5 MiB as fast as it can. undici's `request` fetches it, and the
 * body goes through a Throttle into a file in the OS temp folder. The first
 * 128 KiB (the default burst at 1 MiB/s: two 64 KiB chunks) arrive at once, then the rate
 * holds: about 2.4 s in all. A progress line reads the Throttle's counters
 * every 200 ms. Backpressure does the rest: the server's socket is paused
 * while the cap holds the body, so memory stays at the streams' buffers.
 */

import { createWriteStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { request } from 'undici';
import { formatSize, type RateInput, Throttle, type ThrottleCounters } from '../src/index.js';

export interface DownloadCapOptions {
  /** Bytes the server sends. @default 2.5 MiB */
  sizeBytes?: number;
  /** The cap. @default '1MiB/s' */
  rate?: RateInput;
  /** Where to print. @default a progress line on stdout */
  log?: (line: string) => void;
}

export interface DownloadResult {
  bytes: number;
  elapsedMs: number;
  counters: ThrottleCounters;
  file: string;
}

/** A server that sends `sizeBytes` of data (or `?bytes=N`) on every GET, as fast as the client reads. */
export function dataServer(defaultBytes: number): Promise<Server> {
  const server = createServer((req, res) => {
    const asked = Number(new URL(req.url ?? '/', 'http://localhost').searchParams.get('bytes'));
    const sizeBytes = asked > 0 ? asked : defaultBytes;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(sizeBytes) });
    let sent = 0;
    const chunk = Buffer.alloc(64 * 1024, 0x2a);
    Readable.from(
      (function* () {
        while (sent < sizeBytes) {
          const size = Math.min(chunk.length, sizeBytes - sent);
          sent += size;
          yield size === chunk.length ? chunk : chunk.subarray(0, size);
        }
      })(),
    ).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** `'1.2 MiB of 2.5 MiB  48%  1.00 MiB/s  waited 1.1 s'` */
export function progressLine(counters: ThrottleCounters, totalBytes: number): string {
  const percent = ((counters.bytes / totalBytes) * 100).toFixed(0).padStart(3);
  const mib = (bytes: number) => `${(bytes / 1048576).toFixed(2)} MiB`;
  return `${mib(counters.bytes)} of ${mib(totalBytes)} ${percent}%  ${mib(counters.currentBytesPerSecond)}/s now, ${mib(counters.averageBytesPerSecond)}/s average, waited ${(counters.waitedMs / 1000).toFixed(1)} s`;
}

export async function main(options: DownloadCapOptions = {}): Promise<DownloadResult> {
  const sizeBytes = options.sizeBytes ?? 2.5 * 1048576;
  const log = options.log ?? console.log;
  // On a terminal the progress line rewrites itself; elsewhere it is printed line by line.
  const tty = options.log === undefined && process.stdout.isTTY;
  const progressLog = tty ? (line: string) => process.stdout.write(`\r${line}`) : log;
  const server = await dataServer(sizeBytes);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/file.bin`;
  const file = join(tmpdir(), `tokenpace-download-${process.pid}.bin`);
  const throttle = new Throttle({ rate: options.rate ?? '1MiB/s' });
  try {
    log(`GET ${url} -> ${file}`);
    log(
      `capped at ${formatSize(throttle.rate as number)}/s, burst ${((throttle.burst as number) / 1024).toFixed(1)} KiB`,
    );
    const start = performance.now();
    const progress = setInterval(() => progressLog(progressLine(throttle.counters, sizeBytes)), 200);
    try {
      const { statusCode, body } = await request(url);
      if (statusCode !== 200) throw new Error(`GET ${url} answered ${statusCode}`);
      await pipeline(body, throttle, createWriteStream(file));
    } finally {
      clearInterval(progress);
    }
    const elapsedMs = performance.now() - start;
    const counters = throttle.counters;
    progressLog(progressLine(counters, sizeBytes));
    if (tty) process.stdout.write('\n');
    const { size } = await stat(file);
    log(`done: ${formatSize(size)} in ${(elapsedMs / 1000).toFixed(2)} s`);
    return { bytes: size, elapsedMs, counters, file };
  } finally {
    await rm(file, { force: true });
    await new Promise((resolve) => server.close(resolve));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
