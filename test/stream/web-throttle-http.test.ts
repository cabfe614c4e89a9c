/**
 * WebThrottle with what users feed it, on the real clock: a `fetch` download
 * from a real node:http server on 127.0.0.1 (`res.body.pipeThrough(...)`), a
 * `fetch` upload with `duplex: 'half'`, and `Blob.stream()`. Rates of a few
 * hundred KiB/s, tolerant bounds (a shared machine): the elapsed time is at
 * least what the cap allows, and not far above it.
 */

import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { WebThrottle } from '../../src/index.js';
import { patternByte } from './support.js';

const KiB = 1024;

function pattern(bytes: number): Uint8Array {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = patternByte(i);
  return data;
}

/** A server that answers GET with `body` and counts the bytes of a POST's body, answering their number. */
async function server(body: Uint8Array) {
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'POST') {
      let received = 0;
      req.on('data', (chunk: Buffer) => {
        received += chunk.length;
      });
      req.on('end', () => res.end(String(received)));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

describe('WebThrottle with fetch and Blob (real clock, loopback)', () => {
  it('a fetch download: res.body.pipeThrough(new WebThrottle(...)) to a file, at the cap', async () => {
    const body = pattern(384 * KiB);
    const origin = await server(body);
    const dir = await mkdtemp(join(tmpdir(), 'tokenpace-web-'));
    try {
      const file = join(dir, 'download.bin');
      const throttle = new WebThrottle({ rate: '512KiB/s', burst: '64KiB' });
      const startedMs = performance.now();
      const res = await fetch(origin.url);
      if (res.body === null) throw new Error('no body');
      await pipeline(Readable.fromWeb(res.body.pipeThrough(throttle)), createWriteStream(file));
      const elapsedMs = performance.now() - startedMs;
      // (384 - 64) KiB at 512 KiB/s: 625 ms at least.
      expect(elapsedMs).toBeGreaterThanOrEqual(620);
      expect(elapsedMs).toBeLessThan(2500);
      expect(new Uint8Array(await readFile(file))).toEqual(body);
      expect(throttle.counters.bytes).toBe(body.length);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await origin.close();
    }
  }, 20_000);

  it("a fetch upload: body: source.pipeThrough(new WebThrottle(...)), duplex: 'half'", async () => {
    const origin = await server(new Uint8Array(0));
    try {
      const data = pattern(256 * KiB);
      const source = new Blob([data]).stream();
      const startedMs = performance.now();
      const res = await fetch(origin.url, {
        method: 'POST',
        body: source.pipeThrough(new WebThrottle({ rate: '384KiB/s', burst: '64KiB' })),
        duplex: 'half',
      });
      expect(await res.text()).toBe(String(data.length));
      const elapsedMs = performance.now() - startedMs;
      // (256 - 64) KiB at 384 KiB/s: 500 ms at least.
      expect(elapsedMs).toBeGreaterThanOrEqual(495);
      expect(elapsedMs).toBeLessThan(2500);
    } finally {
      await origin.close();
    }
  }, 20_000);

  it('Blob.stream() through a WebThrottle into Writable.toWeb: every byte, at the cap', async () => {
    const data = pattern(200 * KiB);
    const chunks: Buffer[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk);
        callback();
      },
    });
    const startedMs = performance.now();
    await new Blob([data])
      .stream()
      .pipeThrough(new WebThrottle({ rate: '400KiB/s', burst: '40KiB' }))
      .pipeTo(Writable.toWeb(sink));
    const elapsedMs = performance.now() - startedMs;
    expect(elapsedMs).toBeGreaterThanOrEqual(395); // (200 - 40) KiB at 400 KiB/s
    expect(elapsedMs).toBeLessThan(2500);
    expect(new Uint8Array(Buffer.concat(chunks))).toEqual(data);
  }, 20_000);
});
