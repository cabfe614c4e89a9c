/**
 * The interceptor with Node's own global `fetch`: composed onto an undici
 * `Agent`, given per call as `fetch(url, { dispatcher })` or to every call by
 * `setGlobalDispatcher`, against a real node:http server on 127.0.0.1. The
 * calls type-check without a cast with @types/node 24 (`npm run typecheck`
 * compiles this file).
 */

import { Agent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { throttleInterceptor } from '../../src/index.js';
import { listen } from './support.js';

/** Arrival times at the server, ms from the first. */
async function timedServer() {
  const arrivals: number[] = [];
  const server = await listen((_req, res) => {
    arrivals.push(performance.now());
    res.end('ok');
  });
  return { ...server, gaps: () => arrivals.map((t) => t - (arrivals[0] as number)) };
}

describe("throttleInterceptor with Node's global fetch (real server, real clock)", () => {
  const previous = getGlobalDispatcher();
  afterEach(() => {
    setGlobalDispatcher(previous);
  });

  it('fetch(url, { dispatcher }): requests paced at the rate, after the burst', async () => {
    const server = await timedServer();
    const dispatcher = new Agent().compose(throttleInterceptor({ rate: 20, burst: 2 }));
    try {
      const startedMs = performance.now();
      const replies = await Promise.all(
        Array.from({ length: 6 }, async () => (await fetch(server.url, { dispatcher })).text()),
      );
      expect(replies).toEqual(Array(6).fill('ok'));
      // Two at once, then one every 50 ms: the sixth 200 ms after the first (less the first's connection setup).
      expect(performance.now() - startedMs).toBeGreaterThanOrEqual(150);
      expect(server.gaps().at(-1)).toBeGreaterThanOrEqual(150);
    } finally {
      await dispatcher.close();
      await server.close();
    }
  }, 20_000);

  it('setGlobalDispatcher(new Agent().compose(throttleInterceptor(...))): plain fetch(url) is paced', async () => {
    const server = await timedServer();
    const dispatcher = new Agent().compose(throttleInterceptor({ rate: 20, burst: 1 }));
    setGlobalDispatcher(dispatcher);
    try {
      for (let i = 0; i < 4; i++) expect(await (await fetch(server.url)).text()).toBe('ok');
      expect(server.gaps().at(-1)).toBeGreaterThanOrEqual(125); // one every 50 ms after the first: 150 ms
    } finally {
      setGlobalDispatcher(previous);
      await dispatcher.close();
      await server.close();
    }
  }, 20_000);
});
