/**
 * rateLimit on a KeyedLimiter with a RedisStore, against a real redis-server
 * that this file starts, pauses (SIGSTOP), kills and restarts: every request
 * is answered by the store's `onError` policy within its `timeout`, the
 * server never crashes and no promise rejection goes unhandled. Times are
 * real, so the bounds are generous.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { Redis } from 'ioredis';
import type { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channelNames } from '../../src/diagnostics.js';
import type { HttpErrorMessage } from '../../src/http/messages.js';
import { rateLimit } from '../../src/http/middleware.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { type FailurePolicy, RedisStore } from '../../src/keyed/redis-store.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';
import { agent, call, type Loopback, type Reply, serve, until } from './support.js';

const TIMEOUT_MS = 100;
/** Room for a loaded machine: an answer "within the timeout" must come within this. */
const SLACK_MS = 400;

let redis: RedisServer;
let client: Agent;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  redis = await startRedis();
  client = agent();
  process.on('unhandledRejection', onUnhandled);
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await client.close();
  await redis.stop();
});

const byHeader = (req: IncomingMessage) => String(req.headers['x-api-key']);

async function timed(promise: Promise<Reply>): Promise<Reply & { ms: number }> {
  const start = performance.now();
  const reply = await promise;
  return { ...reply, ms: performance.now() - start };
}

/** What each policy answers while Redis is down, for five requests of a fresh key (burst 3). */
function expectByPolicy(policy: FailurePolicy, held: boolean, replies: Reply[]): void {
  const statuses = replies.map((r) => r.status);
  if (policy === 'allow') {
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
  } else if (policy === 'deny') {
    // tryTake: the store's refusal is a decision (429 with the store's retry-after, 1 s);
    // take (maxWait): the limiter rejects with StoreUnavailableError, and the middleware answers 503.
    expect(statuses).toEqual(Array(5).fill(held ? 503 : 429));
    for (const r of replies) {
      expect(r.headers['retry-after']).toBe('1');
      expect(r.headers['content-type']).toBe('application/problem+json');
    }
  } else {
    // 'local': this instance's own bucket of burst 3 for the key, fresh
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect(replies[3]?.headers.ratelimit).toMatch(/^"default";r=0;t=\d+$/);
  }
}

describe('rateLimit on a RedisStore when Redis fails', () => {
  for (const policy of ['allow', 'deny', 'local'] as const) {
    for (const held of [false, true]) {
      const how = held ? 'held requests (maxWait, take)' : 'immediate decisions (tryTake)';
      it(`onError '${policy}', ${how}: paused, then resumed; killed, then restarted`, async () => {
        const redisClient = new Redis({ port: redis.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
        redisClient.on('error', () => {});
        await new Promise<void>((resolve) => redisClient.once('ready', () => resolve()));
        const store = new RedisStore({
          client: redisClient,
          prefix: `http-${policy}-${held}-${process.pid}`,
          onError: policy,
          timeout: TIMEOUT_MS,
          probeInterval: 50,
        });
        const limiter = new KeyedLimiter({ rate: 0.01, burst: 3, store });
        const errors: unknown[] = [];
        const middleware = rateLimit({
          limiter,
          key: byHeader,
          ...(held ? { maxWait: 5000 } : {}),
        });
        const onError = (message: unknown) => errors.push((message as HttpErrorMessage).error);
        subscribe(channelNames.error, onError);
        let server: Loopback | undefined;
        try {
          server = await serve(middleware);
          const url = server.url;
          const send = (key: string) => timed(call(url, { dispatcher: client, headers: { 'x-api-key': key } }));
          const k = `k-${policy}-${held}`;
          const first = await send(k);
          expect(first.status).toBe(200);
          expect(first.headers.ratelimit).toMatch(/^"default";r=2;/);
          expect(first.headers['ratelimit-policy']).toBe('"default";q=3;w=300');

          for (const fault of ['pause', 'kill'] as const) {
            redis.signal(fault === 'pause' ? 'SIGSTOP' : 'SIGKILL');
            await new Promise((r) => setTimeout(r, 20));
            // The first request after the fault is answered within the timeout (a pause) or at once (a kill).
            const firstDown = await send(`${k}-${fault}`);
            expect(firstDown.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
            expect(store.healthy).toBe(false);
            // Degraded: the rest are answered by the policy at once, several in flight together.
            const started = performance.now();
            const rest = await Promise.all([1, 2, 3, 4].map(() => send(`${k}-${fault}`)));
            expect(performance.now() - started).toBeLessThan(SLACK_MS);
            expectByPolicy(policy, held, [firstDown, ...rest]);

            if (fault === 'pause') redis.signal('SIGCONT');
            else await redis.restart();
            await until(() => store.healthy, 'recovery', 5000);
            // Back on Redis: after a pause the key still has the request made before it (r=1 after
            // this one); a restarted server kept nothing (r=2).
            const back = await send(k);
            expect(back.status).toBe(200);
            expect(back.headers.ratelimit).toMatch(fault === 'pause' ? /^"default";r=1;/ : /^"default";r=2;/);
          }
          // Only the 'deny' policy makes take reject: the default answer (503) and one error message each.
          expect(errors.length).toBe(policy === 'deny' && held ? 10 : 0);
          for (const error of errors) expect(error).toMatchObject({ code: 'ERR_STORE_UNAVAILABLE' });
          await new Promise((r) => setTimeout(r, 50));
          expect(unhandled).toEqual([]);
        } finally {
          unsubscribe(channelNames.error, onError);
          await server?.close();
          store.close();
          redisClient.disconnect();
        }
      }, 20_000);
    }
  }
});
