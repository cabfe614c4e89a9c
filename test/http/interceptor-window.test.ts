/**
 * throttleInterceptor's window limit against a real server that allows 50 in any 1 s (real time):
 * 300 calls at concurrency 8 draw no 429 and use at least 90 % of the limit.
 */

import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { throttleInterceptor } from '../../src/http/interceptor.js';
import { type WindowServer, windowServer } from './adaptive-server.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function run(
  server: WindowServer,
  options: Parameters<typeof throttleInterceptor>[0],
  calls: number,
  callers: number,
) {
  const agent = new Agent({ connections: 64 });
  cleanups.push(() => agent.close());
  const dispatcher = agent.compose(throttleInterceptor(options));
  let left = calls;
  const caller = async () => {
    while (left > 0) {
      left--;
      const response = await request(server.url, { dispatcher });
      await response.body.text();
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
  const answers = server.answers;
  const refused = answers.filter((a) => a.status === 429).length;
  const ok = answers.filter((a) => a.status === 200);
  // The steady rate: the starts after the first window's worth, over the time they took.
  const spanS = ((ok[ok.length - 1]?.atMs ?? 0) - (ok[0]?.atMs ?? 0)) / 1000;
  return { refused, used: (ok.length - 50) / spanS / 50 };
}

describe('throttleInterceptor: window limit against a real window server', () => {
  it('300 calls at concurrency 8 against 50 in any 1 s: no 429, >= 90 % of the limit used', async () => {
    const server = await windowServer({ limit: 50, windowMs: 1000 });
    cleanups.push(() => server.close());
    const { refused, used } = await run(server, { limit: 50, window: '1s', concurrency: 8 }, 300, 8);
    expect(refused).toBeLessThanOrEqual(1);
    expect(used).toBeGreaterThanOrEqual(0.9);
  }, 20_000);
});
