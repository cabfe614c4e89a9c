/**
 * A rate-limited HTTP API: each API key gets 20 requests/s with bursts of 40,
 * and the whole server takes at most 100 requests/s with bursts of 200.
 *
 *   npx tsx examples/http-server.ts
 *
 * The example starts the server on 127.0.0.1 (a free port) and exercises it
 * with undici: one key sends 60 requests at once (about 40 pass, the rest get
 * 429 with Retry-After), then ten other keys send 40 each at once, which no
 * key's own limit stops but the global limit does (about 200 pass). It prints
 * what happened and exits.
 */

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';
import { rateLimit } from '../src/index.js';

export interface HttpServerExampleOptions {
  /** Where to print. @default console.log */
  log?: (line: string) => void;
}

export interface Tally {
  ok: number;
  tooMany: number;
}

export interface HttpServerExampleResult {
  /** One key's 60 requests at once. */
  oneKey: Tally;
  /** Ten keys x 40 requests at once. */
  manyKeys: Tally;
  /** A 429's headers and body, as a client sees them. */
  refused: { retryAfter: string | undefined; rateLimit: string | undefined; policy: string | undefined; body: string };
}

export async function main(options: HttpServerExampleOptions = {}): Promise<HttpServerExampleResult> {
  const log = options.log ?? console.log;
  const limit = rateLimit({
    rate: 20, // per API key: 20 requests/s ...
    burst: 40, // ... with bursts of 40
    global: { rate: 100, burst: 200 }, // and at most 100/s (bursts of 200) over all keys
    key: (req) => String(req.headers['x-api-key'] ?? 'anonymous'),
  });
  const server: Server = createServer((req, res) => {
    limit(req, res, () => {
      res.setHeader('content-type', 'application/json');
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/items`;
  const agent = new Agent({ connections: 128 });

  const send = async (key: string) => {
    const response = await request(url, { dispatcher: agent, headers: { 'x-api-key': key } });
    return { status: response.statusCode, headers: response.headers, body: await response.body.text() };
  };
  const tally = (statuses: number[]): Tally => ({
    ok: statuses.filter((s) => s === 200).length,
    tooMany: statuses.filter((s) => s === 429).length,
  });

  try {
    log(`server on ${url}: 20/s (bursts of 40) per x-api-key, 100/s (bursts of 200) in all`);
    const alice = await Promise.all(Array.from({ length: 60 }, () => send('alice')));
    const oneKey = tally(alice.map((r) => r.status));
    log(`key "alice", 60 requests at once:   ${oneKey.ok} x 200, ${oneKey.tooMany} x 429`);
    const first429 = alice.find((r) => r.status === 429);
    const refused = {
      retryAfter: first429?.headers['retry-after'] as string | undefined,
      rateLimit: first429?.headers.ratelimit as string | undefined,
      policy: first429?.headers['ratelimit-policy'] as string | undefined,
      body: first429?.body ?? '',
    };
    log(`  a 429 says: Retry-After: ${refused.retryAfter}`);
    log(`              RateLimit-Policy: ${refused.policy}`);
    log(`              RateLimit: ${refused.rateLimit}`);
    log(`              ${refused.body}`);

    await new Promise((resolve) => setTimeout(resolve, 2100)); // every bucket refills (200 / 100/s = 2 s)
    const keys = Array.from({ length: 10 }, (_, i) => `tenant-${i}`);
    const burst = await Promise.all(keys.flatMap((key) => Array.from({ length: 40 }, () => send(key))));
    const manyKeys = tally(burst.map((r) => r.status));
    log(`10 keys x 40 requests at once:      ${manyKeys.ok} x 200, ${manyKeys.tooMany} x 429 (the global limit)`);
    return { oneKey, manyKeys, refused };
  } finally {
    await agent.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
