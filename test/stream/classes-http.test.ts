/**
 * Bandwidth classes over real HTTP, on the real clock: a node:http server on
 * 127.0.0.1 shapes every response body by a tree of groups (the uplink, a
 * subgroup per tenant, a member per download), and tenants download through
 * undici. Rates of a few MiB/s, a small part of what loopback carries even on
 * a loaded machine; tolerances as the other real-time tests', best of two runs.
 */

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { ThrottleGroup } from '../../src/index.js';

const MiB = 1048576;

/** An endless body of 64 KiB chunks, produced only when read. */
function endless(): Readable {
  const block = Buffer.alloc(65536, 0x61);
  return new Readable({
    read() {
      this.push(block);
    },
  });
}

/** A server whose responses are endless bodies, each through a member of the tenant's subgroup named by `x-tenant`. */
async function shapedServer(tenants: Record<string, ThrottleGroup>) {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const tenant = tenants[String(req.headers['x-tenant'])];
    if (tenant === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    pipeline(endless(), tenant.throttle(), res).catch(() => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Bytes a download received after `fromMs`, and the pieces' times (real clock). */
function countingSink(): Writable & { pieces: { atMs: number; bytes: number }[] } {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      sink.pieces.push({ atMs: performance.now(), bytes: chunk.length });
      callback();
    },
  }) as Writable & { pieces: { atMs: number; bytes: number }[] };
  sink.pieces = [];
  return sink;
}

const bytesAfter = (pieces: readonly { atMs: number; bytes: number }[], fromMs: number, toMs: number) =>
  pieces.reduce((sum, p) => (p.atMs > fromMs && p.atMs <= toMs ? sum + p.bytes : sum), 0);

describe('bandwidth classes on real HTTP (node:http on 127.0.0.1, undici)', () => {
  it('tenants downloading through undici get their weights and ceilings, the uplink its rate', async () => {
    // Uplink 6 MiB/s; tenant a (weight 2, three downloads), b (weight 1, one), c (ceiling 0.5 MiB/s, one):
    // c gets 0.5, a and b share the other 5.5 MiB/s 2 : 1.
    const rate = 6 * MiB;
    let best = Number.POSITIVE_INFINITY;
    for (let attempt = 0; attempt < 2 && best > 0.08; attempt++) {
      const uplink = new ThrottleGroup({ rate });
      const tenants = {
        a: uplink.group({ weight: 2 }),
        b: uplink.group({ weight: 1 }),
        c: uplink.group({ rate: 0.5 * MiB }),
      };
      const server = await shapedServer(tenants);
      const dispatcher = new Agent({ connections: 8 });
      try {
        const downloads = ['a', 'a', 'a', 'b', 'c'];
        const sinks = downloads.map(() => countingSink());
        const bodies = await Promise.all(
          downloads.map((tenant) => request(server.url, { dispatcher, headers: { 'x-tenant': tenant } })),
        );
        const start = performance.now();
        const done = bodies.map((r, i) => pipeline(r.body, sinks[i] as Writable).catch(() => undefined));
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const end = performance.now();
        for (const r of bodies) r.body.destroy();
        await Promise.all(done);
        const from = start + 300;
        const seconds = (end - from) / 1000;
        const rateOf = (tenant: string) =>
          downloads.reduce(
            (sum, t, i) =>
              t === tenant ? sum + bytesAfter((sinks[i] as ReturnType<typeof countingSink>).pieces, from, end) : sum,
            0,
          ) / seconds;
        const [a, b, c] = [rateOf('a'), rateOf('b'), rateOf('c')];
        const expected = { a: (5.5 * MiB * 2) / 3, b: (5.5 * MiB) / 3, c: 0.5 * MiB };
        // Never above a ceiling (its burst is 50 ms of it, the window 1.2 s), nor the uplink.
        expect(c).toBeLessThanOrEqual(expected.c * 1.05);
        expect(a + b + c).toBeLessThanOrEqual(rate * 1.1);
        const off = Math.max(Math.abs(a / expected.a - 1), Math.abs(b / expected.b - 1), Math.abs(c / expected.c - 1));
        best = Math.min(best, off);
      } finally {
        await dispatcher.close();
        await server.close();
      }
      // Every download has ended on the server: no member is left in any class.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(uplink.size).toBe(0);
    }
    expect(best).toBeLessThanOrEqual(0.08);
  });
});
