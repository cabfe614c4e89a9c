/**
 * An API client that stays under the server's rate limit.
 *
 *   npx tsx examples/api-client.ts
 *
 * The example starts its own HTTP server on 127.0.0.1 (a free port): it
 * allows 40 requests/s with bursts of 10 (a tokenpace TokenBucket) and answers
 * 429 past that. The client sends the same 100 requests twice with undici:
 * first all at once, then through a Scheduler set a little under the server's
 * limit (36/s, bursts of 8, at most 8 in flight). The first run is mostly 429s;
 * the second gets every answer, in about 2.5 s.
 */

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';
import { Scheduler, TokenBucket } from '../src/index.js';

export interface ApiClientOptions {
  /** Requests per run. @default 100 */
  requests?: number;
  /** Where to print. @default console.log */
  log?: (line: string) => void;
}

export interface RunResult {
  ok: number;
  tooMany: number;
  elapsedMs: number;
}

/** A server that allows `rate` requests/s with bursts of `burst`, and answers 429 past that. */
function limitedServer(rate: number, burst: number): Promise<Server> {
  const bucket = new TokenBucket({ rate, burst });
  const server = createServer((_req, res) => {
    if (bucket.tryTake()) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    } else {
      res.writeHead(429, { 'retry-after': String(Math.ceil(bucket.delayFor() / 1000)) });
      res.end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

export async function main(options: ApiClientOptions = {}): Promise<{ unpaced: RunResult; paced: RunResult }> {
  const requests = options.requests ?? 100;
  const log = options.log ?? console.log;
  const serverRate = 40;
  const serverBurst = 10;
  const server = await limitedServer(serverRate, serverBurst);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/items`;
  const agent = new Agent({ connections: 16 });

  const call = async (signal?: AbortSignal): Promise<number> => {
    const response = await request(url, { dispatcher: agent, signal });
    await response.body.text();
    return response.statusCode;
  };

  const run = async (send: () => Promise<number>): Promise<RunResult> => {
    const start = performance.now();
    const statuses = await Promise.all(Array.from({ length: requests }, send));
    return {
      ok: statuses.filter((s) => s === 200).length,
      tooMany: statuses.filter((s) => s === 429).length,
      elapsedMs: performance.now() - start,
    };
  };

  try {
    log(`server: ${serverRate} requests/s, bursts of ${serverBurst}, 429 past that (${url})`);
    const unpaced = await run(() => call());
    log(`all at once:          ${unpaced.ok} x 200, ${unpaced.tooMany} x 429 in ${unpaced.elapsedMs.toFixed(0)} ms`);

    await new Promise((resolve) => setTimeout(resolve, (serverBurst / serverRate) * 1000 + 50)); // the server's bucket refills

    // A little under the server's limit: its clock and ours differ, and requests jitter on the way.
    const scheduler = new Scheduler({ rate: serverRate * 0.9, burst: serverBurst - 2, concurrency: 8 });
    const paced = await run(() => scheduler.schedule(({ signal }) => call(signal)));
    log(`through a Scheduler:  ${paced.ok} x 200, ${paced.tooMany} x 429 in ${paced.elapsedMs.toFixed(0)} ms`);
    const { waitedMs, started } = scheduler.counters;
    log(`(36/s, bursts of 8, 8 in flight; mean wait ${(waitedMs / started).toFixed(0)} ms)`);
    return { unpaced, paced };
  } finally {
    await agent.close();
    await new Promise((resolve) => server.close(resolve));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().then(
    ({ paced }) => {
      process.exitCode = paced.tooMany === 0 ? 0 : 1;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
