/**
 * throttleInterceptor({ adaptive }) against a real loopback server with a hidden limit of 40 in
 * any 1 s and 16 callers as fast as they can (real time, shortened runs: the full 20 s runs are
 * `npm run bench -- adaptive`). Unknown limit: few 429s and most of the limit used once learned;
 * advertised policy: no 429 and nearly all of it.
 */

import { performance } from 'node:perf_hooks';
import { Agent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { type RateChangeInfo, throttleInterceptor } from '../../src/index.js';
import { type Answer, drive, tally, windowServer } from './adaptive-server.js';

/** The `Retry-After` of the server's 429s (windowServer's default, 1 s). */
const RETRY_AFTER_MS = 1000;

/** How long of [fromMs, toMs) the caller was told to wait: the union of `retryAfterMs` after each 429. */
function pausedWithin(answers: readonly Answer[], retryAfterMs: number, fromMs: number, toMs: number): number {
  let paused = 0;
  let coveredTo = fromMs;
  for (const answer of answers) {
    if (answer.status !== 429) continue;
    const start = Math.max(answer.atMs, coveredTo);
    const end = Math.min(answer.atMs + retryAfterMs, toMs);
    if (end > start) paused += end - start;
    coveredTo = Math.max(coveredTo, end);
  }
  return paused;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function setup(advertise: boolean) {
  const server = await windowServer({ limit: 40, windowMs: 1000, advertise });
  cleanups.push(() => server.close());
  const agent = new Agent({ connections: 64 });
  cleanups.push(() => agent.close());
  const interceptor = throttleInterceptor({ adaptive: true, maxWait: '30s' });
  return { server, interceptor, dispatcher: agent.compose(interceptor) };
}

describe('throttleInterceptor: adaptive', () => {
  it('unknown limit: at most 2 % 429, and >= 85 % of the limit used once learned', async () => {
    const { server, interceptor, dispatcher } = await setup(false);
    const changes: RateChangeInfo[] = [];
    interceptor.on('rate', (info) => changes.push(info));
    const t0 = performance.now();
    await drive(dispatcher, server.url, 16, 8000);
    const all = tally(server.answers, t0, t0 + 8000);
    const learned = tally(server.answers, t0 + 4000, t0 + 8000);
    // A 429 is obeyed: its origin waits out `Retry-After` (1 s). The rate learned is judged over the
    // last 4 s less those waits (a late timer can still bring one 429 at the learned rate; their
    // number is bounded above, with every 429 of the run).
    const pausedMs = pausedWithin(server.answers, RETRY_AFTER_MS, t0 + 4000, t0 + 8000);
    const learnedPerSecond = (learned.okPerSecond * 4000) / (4000 - pausedMs);
    console.log(
      `unknown limit, 8 s: ${all.refused}/${all.total} x 429; ${learned.okPerSecond.toFixed(1)}/s in the last 4 s, ${learnedPerSecond.toFixed(1)}/s less ${pausedMs.toFixed(0)} ms told to wait; rate ${interceptor.rateOf(server.url)?.toFixed(1)}`,
    );
    expect(all.refused / all.total).toBeLessThanOrEqual(0.02);
    expect(pausedMs).toBeLessThanOrEqual(2 * RETRY_AFTER_MS);
    expect(learnedPerSecond / 40).toBeGreaterThanOrEqual(0.85);
    expect(changes.some((c) => c.reason === 'pushback')).toBe(true);
    expect(interceptor.rateOf(server.url)).toBeLessThan(41);
  }, 20_000);

  it('advertised policy: at most 0.5 % 429 and >= 95 % of the limit used', async () => {
    const { server, interceptor, dispatcher } = await setup(true);
    const t0 = performance.now();
    await drive(dispatcher, server.url, 16, 4000);
    const all = tally(server.answers, t0, t0 + 4000);
    const paced = tally(server.answers, t0 + 1000, t0 + 4000);
    console.log(
      `advertised, 4 s: ${all.refused}/${all.total} x 429; ${paced.okPerSecond.toFixed(1)}/s after the first second; rate ${interceptor.rateOf(server.url)}`,
    );
    expect(all.refused / all.total).toBeLessThanOrEqual(0.005);
    expect(paced.okPerSecond / 40).toBeGreaterThanOrEqual(0.95);
    expect(interceptor.rateOf(server.url)).toBe(40); // the quota per window: the adopted window limit spaces it
  }, 20_000);

  it('refuses bad adaptive options with coded errors', () => {
    for (const bad of [{ min: 10, max: 5 }, { initial: 100, max: 50 }, 'yes', { min: -1 }]) {
      let error: unknown;
      try {
        throttleInterceptor({ adaptive: bad as never });
      } catch (e) {
        error = e;
      }
      expect(isTokenpaceError(error)).toBe(true);
    }
    expect(() =>
      (throttleInterceptor() as unknown as { on: (e: string, l: unknown) => void }).on('x', () => {}),
    ).toThrow(/on\('rate'/);
  });
});
