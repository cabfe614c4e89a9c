/**
 * The HTTP middleware under load: a node:http server on loopback, loaded by
 * autocannon (programmatic API), with
 *
 * - no limiter (the ceiling),
 * - no limiter but the two header fields a limited response carries, with
 *   fixed values (what the extra header bytes cost, limiter aside),
 * - tokenpace's `rateLimit` (memory, 10 000 keys: every request carries one
 *   of 10 000 API keys in turn, each allowed 100/s with bursts of 200, so
 *   every request is admitted and the figures are the cost of deciding),
 * - express-rate-limit 8 (memory store, the same keys, 200 per 1 s window),
 * - and, with a 1 KB `X-Forwarded-For` chain on every request (70 hops, the
 *   right-most one of 10 000 client addresses in turn): no limiter, and
 *   `rateLimit` keyed by the client's address behind a trusted loopback
 *   proxy (`trustProxy: ['127.0.0.1']`), so the header is walked from its
 *   right end and only the last entry is read,
 *
 * on the same server code. The server runs in a child process of its own, so
 * the load generator and the server do not share a core. Contenders run in
 * interleaved rounds (a b c, a b c) and the table gives medians of requests
 * per second and of p99 latency. `BENCH_HTTP_SECONDS` (default 3) sets each
 * round's length; five rounds each plus a warm-up take the section to about 2 min.
 * On a shared, loaded machine the rounds swing widely: compare medians only.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import { rateLimit } from '../src/index.js';
import { median, type Section, table } from './harness.js';

type Mode = 'bare' | 'headers' | 'tokenpace' | 'express-rate-limit' | 'bare-xff' | 'tokenpace-xff';
const KEYS = 10_000;
const ROUNDS = 5;
const LABELS: Record<Mode, string> = {
  bare: 'no limiter',
  headers: 'no limiter, the 2 header fields set',
  tokenpace: 'tokenpace rateLimit',
  'express-rate-limit': 'express-rate-limit 8',
  'bare-xff': 'no limiter, 1 KB X-Forwarded-For',
  'tokenpace-xff': 'tokenpace rateLimit, 1 KB X-Forwarded-For, trustProxy',
};
/** The mode each is compared with: the same requests without a limiter. */
const BASELINE: Record<Mode, Mode> = {
  bare: 'bare',
  headers: 'bare',
  tokenpace: 'bare',
  'express-rate-limit': 'bare',
  'bare-xff': 'bare-xff',
  'tokenpace-xff': 'bare-xff',
};
/** 69 hops a client's request passed before ours (about 1 KB), then the client's own address. */
const CHAIN = Array.from({ length: 69 }, (_, i) => `198.51.${100 + (i % 100)}.${i + 1}`).join(', ');
const forwardedFor = (n: number): string => `${CHAIN}, 10.${n >> 8}.${n & 0xff}.1`;

type Handler = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

function middlewareFor(mode: Mode): Handler | undefined {
  const key = (req: IncomingMessage): string => String(req.headers['x-key']);
  if (mode === 'headers') {
    // No limiter, only the two header fields a limited response carries (fixed values): what the bytes cost.
    return (_req, res, next) => {
      res.setHeader('RateLimit-Policy', '"default";q=200;w=2');
      res.setHeader('RateLimit', '"default";r=199;t=1');
      next();
    };
  }
  if (mode === 'tokenpace') return rateLimit({ rate: 100, burst: 200, key, maxKeys: 2 * KEYS });
  if (mode === 'tokenpace-xff')
    return rateLimit({ rate: 100, burst: 200, trustProxy: ['127.0.0.1'], maxKeys: 2 * KEYS });
  if (mode === 'express-rate-limit') {
    const erl = expressRateLimit({
      windowMs: 1000,
      limit: 200,
      keyGenerator: key,
      standardHeaders: 'draft-8',
      legacyHeaders: false,
      validate: false,
    });
    return erl as unknown as Handler;
  }
  return undefined;
}

/** The child: serve `mode` on 127.0.0.1 and print the port. */
function serve(mode: Mode): void {
  const middleware = middlewareFor(mode);
  const reply = (res: ServerResponse): void => {
    res.setHeader('content-type', 'text/plain');
    res.end('ok');
  };
  const server = createServer(
    middleware === undefined ? (_req, res) => reply(res) : (req, res) => middleware(req, res, () => reply(res)),
  );
  server.listen(0, '127.0.0.1', () => {
    console.log(String((server.address() as AddressInfo).port));
  });
}

async function startServer(mode: Mode): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--serve', mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.stdout?.once('data', (data: Buffer) => resolve(Number(String(data).trim())));
  });
  return { port, child };
}

interface Round {
  requestsPerSecond: number;
  p99Ms: number;
  non2xx: number;
}

async function load(port: number, seconds: number, forwarded: boolean): Promise<Round> {
  let n = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/`,
    connections: 50,
    pipelining: 1,
    duration: seconds,
    requests: [
      {
        setupRequest: (request) => {
          n = (n + 1) % KEYS;
          request.headers = forwarded
            ? { ...request.headers, 'x-forwarded-for': forwardedFor(n) }
            : { ...request.headers, 'x-key': `key-${n}` };
          return request;
        },
      },
    ],
  });
  return { requestsPerSecond: result.requests.average, p99Ms: result.latency.p99, non2xx: result.non2xx };
}

async function run(): Promise<string> {
  const seconds = Number(process.env.BENCH_HTTP_SECONDS ?? 3);
  const modes: Mode[] = ['bare', 'headers', 'tokenpace', 'express-rate-limit', 'bare-xff', 'tokenpace-xff'];
  const forwarded = (mode: Mode): boolean => BASELINE[mode] === 'bare-xff';
  const servers = new Map<Mode, { port: number; child: ChildProcess }>();
  for (const mode of modes) servers.set(mode, await startServer(mode));
  const rounds = new Map<Mode, Round[]>(modes.map((m) => [m, []]));
  try {
    for (const mode of modes) await load(servers.get(mode)?.port ?? 0, 2, forwarded(mode)); // warm-up: JIT, every key seen
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate the order, so no contender always follows the same one through the machine's load swings.
      for (let i = 0; i < modes.length; i++) {
        const mode = modes[(i + round) % modes.length] as Mode;
        rounds.get(mode)?.push(await load(servers.get(mode)?.port ?? 0, seconds, forwarded(mode)));
      }
    }
  } finally {
    for (const { child } of servers.values()) child.kill();
  }
  const summary = modes.map((mode) => {
    const list = rounds.get(mode) ?? [];
    return {
      mode,
      rps: median(list.map((r) => r.requestsPerSecond)),
      p99: median(list.map((r) => r.p99Ms)),
      non2xx: list.reduce((sum, r) => sum + r.non2xx, 0),
    };
  });
  const rpsOf = (mode: Mode): number => summary.find((s) => s.mode === mode)?.rps ?? 1;
  const rows = summary.map((s) => [
    LABELS[s.mode],
    `${Math.round(s.rps)}`,
    BASELINE[s.mode] === s.mode
      ? '-'
      : `${(((rpsOf(BASELINE[s.mode]) - s.rps) / rpsOf(BASELINE[s.mode])) * 100).toFixed(1)} %`,
    `${s.p99} ms`,
    String(s.non2xx),
  ]);
  return [
    table(['server', 'requests/s', 'cost vs no limiter', 'p99 latency', 'non-2xx'], rows),
    '',
    `node:http on 127.0.0.1, autocannon 50 connections, ${KEYS} keys in turn, ` +
      `median of ${ROUNDS} rounds of ${seconds} s each in rotating order (after a 2 s warm-up); each server in its own process. ` +
      'The 1 KB X-Forwarded-For rows are compared with the no-limiter server given the same requests.',
  ].join('\n');
}

export const httpSection: Section = {
  id: 'http',
  title: 'HTTP middleware: node:http under autocannon',
  run,
};

if (process.argv[2] === '--serve') serve(process.argv[3] as Mode);
