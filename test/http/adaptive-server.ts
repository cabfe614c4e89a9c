/**
 * A loopback API with a hidden limit, for the window and adaptive tests and bench/adaptive.ts: it
 * allows `limit` requests in any window of `windowMs` (a sliding log of arrival times, counted in
 * (t - W, t]; with `fixed`, fixed windows from the server's start) and answers the rest 429 with
 * `Retry-After`. With `advertise`, every answer carries the policy (`RateLimit-Policy:
 * "p";q=<limit>;w=<W s>`) and what is left (`RateLimit: "p";r=<left>;t=<s until a unit frees>`).
 */

import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { type Loopback, listen } from './support.js';

export interface WindowServerOptions {
  limit: number;
  windowMs?: number;
  /** Send the policy and the remaining quota on every answer. @default false */
  advertise?: boolean;
  /** `Retry-After` on a 429, seconds. @default 1 */
  retryAfterS?: number;
  /** Count in fixed windows (from the server's start) instead of a sliding log. @default false */
  fixed?: boolean;
}

export interface Answer {
  atMs: number;
  status: number;
}

export interface WindowServer extends Loopback {
  /** Every answer, in arrival order (`atMs` on performance.now()). */
  readonly answers: Answer[];
  /** Changes the hidden limit from now on. */
  setLimit(limit: number): void;
}

export async function windowServer(options: WindowServerOptions): Promise<WindowServer> {
  const windowMs = options.windowMs ?? 1000;
  const retryAfter = String(options.retryAfterS ?? 1);
  let limit = options.limit;
  const log: number[] = [];
  let head = 0;
  const answers: Answer[] = [];
  const startMs = performance.now();
  const loopback = await listen((req, res: ServerResponse) => {
    const now = performance.now();
    // A fixed window: everything before the current window's start has slid out.
    const from = options.fixed ? startMs + Math.floor((now - startMs) / windowMs) * windowMs : now - windowMs;
    while (head < log.length && (log[head] as number) <= from - (options.fixed ? 1e-9 : 0)) head++;
    const used = log.length - head;
    const allowed = used < limit;
    if (allowed) log.push(now);
    answers.push({ atMs: now, status: allowed ? 200 : 429 });
    if (options.advertise) {
      const left = Math.max(0, limit - used - (allowed ? 1 : 0));
      const oldest = log[head];
      const freesAtMs = options.fixed ? from + windowMs : oldest === undefined ? now : oldest + windowMs;
      const resetS = Math.max(0, Math.ceil((freesAtMs - now) / 1000));
      res.setHeader('RateLimit-Policy', `"p";q=${limit};w=${windowMs / 1000}`);
      res.setHeader('RateLimit', `"p";r=${left};t=${resetS}`);
    }
    req.resume();
    if (allowed) {
      res.end('ok');
      return;
    }
    res.statusCode = 429;
    res.setHeader('Retry-After', retryAfter);
    res.end('slow down');
  });
  return {
    ...loopback,
    answers,
    setLimit(next: number) {
      limit = next;
    },
  };
}

/** Answers in [fromMs, toMs) of the server's clock: their count, 429s, and 200s per second. */
export function tally(
  answers: readonly Answer[],
  fromMs: number,
  toMs: number,
): { total: number; refused: number; okPerSecond: number } {
  let total = 0;
  let refused = 0;
  for (const answer of answers) {
    if (answer.atMs < fromMs || answer.atMs >= toMs) continue;
    total++;
    if (answer.status === 429) refused++;
  }
  return { total, refused, okPerSecond: ((total - refused) * 1000) / (toMs - fromMs) };
}

/**
 * `callers` loops sending GETs to `url` through `dispatcher` as fast as they can for `durationMs`
 * (requests still waiting at the end are aborted); the latencies of those answered, ms.
 */
export async function drive(
  dispatcher: import('undici').Dispatcher,
  url: string,
  callers: number,
  durationMs: number,
): Promise<number[]> {
  const { request } = await import('undici');
  const latencies: number[] = [];
  const end = new AbortController();
  const timer = setTimeout(() => end.abort(), durationMs);
  const caller = async () => {
    while (!end.signal.aborted) {
      const startedAt = performance.now();
      try {
        const response = await request(url, { dispatcher, signal: end.signal });
        await response.body.text();
        latencies.push(performance.now() - startedAt);
      } catch (error) {
        if (!end.signal.aborted) throw error;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: callers }, caller));
  } finally {
    clearTimeout(timer);
  }
  return latencies;
}
