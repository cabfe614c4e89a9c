/**
 * An upload capped at 1 MiB/s: the request body is paced through a Throttle.
 *
 *   npx tsx examples/upload-cap.ts
 *
 * The example starts its own HTTP server on 127.0.0.1 (a free port) that
 * reads POST bodies as fast as they come and reports how many bytes it got,
 * over how long, and their sha256. The client sends 2 MiB of generated data
 * with undici's `request`, the body piped through a Throttle. The body is
 * produced only as fast as the cap lets it leave: nothing is buffered.
 * The server sees the default burst (128 KiB) at once and then 1 MiB/s:
 * about 2 s in all.
 */

import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { request } from 'undici';
import { type RateInput, Throttle } from '../src/index.js';

export interface UploadCapOptions {
  /** Bytes to upload. @default 2 MiB */
  sizeBytes?: number;
  /** The cap. @default '1MiB/s' */
  rate?: RateInput;
  /** Where to print. @default console.log */
  log?: (line: string) => void;
}

/** What the server saw. */
export interface UploadReport {
  bytes: number;
  /** From the first byte of the body to the last, ms. */
  bodyMs: number;
  sha256: string;
}

export interface UploadResult {
  report: UploadReport;
  sentSha256: string;
  elapsedMs: number;
}

/** A server that reads each POST body and answers with an {@link UploadReport}. */
function receivingServer(): Promise<Server> {
  const server = createServer((req, res) => {
    const hash = createHash('sha256');
    let bytes = 0;
    let firstAt = 0;
    req.on('data', (chunk: Buffer) => {
      if (bytes === 0) firstAt = performance.now();
      bytes += chunk.length;
      hash.update(chunk);
    });
    req.on('end', () => {
      const report: UploadReport = { bytes, bodyMs: performance.now() - firstAt, sha256: hash.digest('hex') };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(report));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** `sizeBytes` of generated data, made only when read, hashed as it goes. */
function generated(sizeBytes: number, hash: ReturnType<typeof createHash>): Readable {
  let made = 0;
  return new Readable({
    read() {
      if (made >= sizeBytes) {
        this.push(null);
        return;
      }
      const size = Math.min(16 * 1024, sizeBytes - made);
      const chunk = Buffer.alloc(size, made & 0xff);
      made += size;
      hash.update(chunk);
      this.push(chunk);
    },
  });
}

export async function main(options: UploadCapOptions = {}): Promise<UploadResult> {
  const sizeBytes = options.sizeBytes ?? 2 * 1048576;
  const log = options.log ?? console.log;
  const server = await receivingServer();
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/upload`;
  try {
    const sent = createHash('sha256');
    const throttle = new Throttle({ rate: options.rate ?? '1MiB/s' });
    const paced = pipeline(generated(sizeBytes, sent), throttle);
    log(
      `POST ${url}: ${(sizeBytes / 1048576).toFixed(2)} MiB, capped at ${((throttle.rate as number) / 1048576).toFixed(2)} MiB/s`,
    );
    const start = performance.now();
    const response = await request(url, {
      method: 'POST',
      body: throttle,
      headers: { 'content-length': String(sizeBytes) },
    });
    const report = (await response.body.json()) as UploadReport;
    await paced;
    const elapsedMs = performance.now() - start;
    const sentSha256 = sent.digest('hex');
    log(
      `server got ${report.bytes} bytes in ${(report.bodyMs / 1000).toFixed(2)} s ` +
        `(${(report.bytes / 1048576 / (report.bodyMs / 1000)).toFixed(2)} MiB/s with the initial burst), ` +
        `sha256 ${report.sha256 === sentSha256 ? 'matches' : 'DIFFERS'}`,
    );
    const { waitedMs, averageBytesPerSecond } = throttle.counters;
    log(
      `client: average ${(averageBytesPerSecond / 1048576).toFixed(2)} MiB/s, held back ${(waitedMs / 1000).toFixed(2)} s`,
    );
    return { report, sentSha256, elapsedMs };
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().then(
    ({ report, sentSha256 }) => {
      process.exitCode = report.sha256 === sentSha256 ? 0 : 1;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
