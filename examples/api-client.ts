/**
 * An API client that stays under the server's rate limit.
 *
 *   npx tsx examples/api-client.ts
 *
 * The example starts its own HTTP server on 127.0.0.1 (a free port): it
 * allows 40 requests/s with bursts of 10 (a tokenpace TokenBucket) and answers
 * 429 past that. The client sends the same 100 requests three times with
 * undici:
 *
 * 1. all at once: mostly 429s;
 * 2. through tokenpace's `throttleInterceptor`, set a little under the
 *    server's limit (36/s, bursts of 5, at most 8 in flight): every answer is
 *    a 200, in about 2.5 s. The smaller burst leaves the server's bucket room
 *    for requests that the network delivers closer together than they left;
 * 3. through the interceptor set too fast (200/s, bursts of 20), composed with
 *    undici's retry interceptor: the server's 429s pause the origin until
 *    their Retry-After, the retries wait in the paused queue, and every
 *    request ends with a 200 all the same.
 */

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { Agent, type Dispatcher, interceptors, request } from 'undici';
import { TokenBucket, throttleInterceptor } from '../src/index.js';

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
let served429 = 0;

function limitedServer(rate: number, burst: number): Promise<Server> {
  const bucket = new TokenBucket({ rate, burst });
  const server = createServer((_req, res) => {
    if (bucket.tryTake()) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    } else {
      served429++;
      res.writeHead(429, { 'retry-after': String(Math.ceil(bucket.delayFor() / 1000)) });
      res.end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

export async function main(
  options: ApiClientOptions = {},
): Promise<{ unpaced: RunResult; paced: RunResult; pushback: RunResult & { served429: number } }> {
  const requests = options.requests ?? 100;
  const log = options.log ?? console.log;
  const serverRate = 40;
  const serverBurst = 10;
  const server = await limitedServer(serverRate, serverBurst);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/items`;
  const agent = new Agent({ connections: 16 });

  const call = async (dispatcher: Dispatcher): Promise<number> => {
    const response = await request(url, { dispatcher });
    await response.body.text();
    return response.statusCode;
  };

  const run = async (dispatcher: Dispatcher): Promise<RunResult> => {
    const start = performance.now();
    const statuses = await Promise.all(Array.from({ length: requests }, () => call(dispatcher)));
    return {
      ok: statuses.filter((s) => s === 200).length,
      tooMany: statuses.filter((s) => s === 429).length,
      elapsedMs: performance.now() - start,
    };
  };
  const refill = () => new Promise((resolve) => setTimeout(resolve, (serverBurst / serverRate) * 1000 + 50));

  try {
    log(`server: ${serverRate} requests/s, bursts of ${serverBurst}, 429 past that (${url})`);
    const unpaced = await run(agent);
    log(
      `all at once:                  ${unpaced.ok} x 200, ${unpaced.tooMany} x 429 in ${unpaced.elapsedMs.toFixed(0)} ms`,
    );

    await refill();
    // A little under the server's limit: its clock and ours differ, and requests jitter on the way.
    const paced = await run(
      agent.compose(throttleInterceptor({ rate: serverRate * 0.9, burst: serverBurst / 2, concurrency: 8 })),
    );
    log(`throttleInterceptor 36/s:     ${paced.ok} x 200, ${paced.tooMany} x 429 in ${paced.elapsedMs.toFixed(0)} ms`);

    await refill();
    const before = served429;
    const pushback = await run(
      agent.compose(
        throttleInterceptor({ rate: 200, burst: 20 }),
        interceptors.retry({ maxRetries: 10, minTimeout: 50, maxTimeout: 2000 }),
      ),
    );
    const seen = served429 - before;
    log(
      `too fast, obeying 429s:       ${pushback.ok} x 200, ${pushback.tooMany} x 429 in ${pushback.elapsedMs.toFixed(0)} ms ` +
        `(the server sent ${seen} x 429 with Retry-After; each paused the origin, and undici's retry sent the request again)`,
    );
    return { unpaced, paced, pushback: { ...pushback, served429: seen } };
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
