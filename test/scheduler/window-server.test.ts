/**
 * The Scheduler's window limit with its defaults against a real loopback server that allows 50 in
 * any 1 s and counts arrival times (real time, undici): the first requests open connections, so
 * their arrivals lag their starts by more than the ones that follow. Counting a job until `window`
 * after it finishes (the default) keeps every arrival `window` apart from the one `limit` before it.
 */

import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, type SchedulerOptions } from '../../src/index.js';
import { type WindowServer, windowServer } from '../http/adaptive-server.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** `calls` GETs through a Scheduler made with `options`; the server's 429s. */
async function run(server: WindowServer, options: SchedulerOptions, calls: number): Promise<number> {
  const agent = new Agent({ connections: 64 });
  cleanups.push(() => agent.close());
  const scheduler = new Scheduler({ ...options, maxQueue: calls });
  const jobs = Array.from({ length: calls }, () =>
    scheduler.schedule(async () => {
      const response = await request(server.url, { dispatcher: agent });
      await response.body.text();
    }),
  );
  await Promise.all(jobs);
  return server.answers.filter((a) => a.status === 429).length;
}

describe('Scheduler window limit against a real window server', () => {
  it('with the defaults, 300 undici requests at concurrency 8 against 50 in any 1 s draw no 429', async () => {
    const server = await windowServer({ limit: 50, windowMs: 1000 });
    cleanups.push(() => server.close());
    const refused = await run(server, { limit: 50, window: '1s', concurrency: 8 }, 300);
    expect(server.answers).toHaveLength(300);
    expect(refused).toBe(0);
  }, 30_000);
});
