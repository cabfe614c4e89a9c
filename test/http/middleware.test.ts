/**
 * rateLimit against real node:http servers on 127.0.0.1 and undici clients.
 * The limiter's clock is fake, so counts are exact: HTTP is real, time is not.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Agent } from 'undici';
import { afterEach, beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import { StoreUnavailableError, WaitTooLongError } from '../../src/errors.js';
import type { HttpDecisionMessage, HttpErrorMessage } from '../../src/http/messages.js';
import { rateLimit } from '../../src/http/middleware.js';
import type { RateLimitOptions } from '../../src/http/rate-limit-options.js';
import { QUOTA_EXCEEDED } from '../../src/http/response.js';
import type { Decision, RateLimitDecider } from '../../src/http/types.js';
import { KeyedLimiter } from '../../src/keyed/keyed-limiter.js';
import { type FakeClock, fakeClock } from '../helpers/fake-clock.js';
import { agent, call, type Loopback, serve, until } from './support.js';

let fake: FakeClock;
let client: Agent;
const servers: Loopback[] = [];

beforeEach(() => {
  fake = fakeClock();
  client = agent();
});

afterEach(async () => {
  await client.close();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(options: RateLimitOptions): Promise<Loopback> {
  const server = await serve(rateLimit({ clock: fake.clock, ...options }));
  servers.push(server);
  return server;
}

function calls(url: string, n: number, headers?: Record<string, string>) {
  return Promise.all(Array.from({ length: n }, () => call(url, { dispatcher: client, headers })));
}

/** Collects the keys the middleware decided on, through its diagnostics channel. */
function watchDecisions(): { keys: string[]; stop(): void } {
  const keys: string[] = [];
  const listener = (message: unknown): void => {
    keys.push((message as HttpDecisionMessage).key);
  };
  subscribe('tokenpace:http:decision', listener);
  return { keys, stop: () => unsubscribe('tokenpace:http:decision', listener) };
}

describe('rateLimit: 20/s with bursts of 40', () => {
  it('passes 30 quick calls, then exactly 10 of the next 30; the rest get 429 with Retry-After', async () => {
    const { url } = await start({ rate: 20, burst: 40 });
    const first = await calls(url, 30);
    expect(first.map((r) => r.status)).toEqual(Array(30).fill(200));
    const second = await calls(url, 30);
    expect(second.filter((r) => r.status === 200)).toHaveLength(10);
    const refused = second.filter((r) => r.status === 429);
    expect(refused).toHaveLength(20);
    for (const reply of refused) {
      expect(reply.headers['retry-after']).toBe('1'); // 50 ms for one token, rounded up to a whole second
      expect(reply.headers['content-type']).toBe('application/problem+json');
      expect(JSON.parse(reply.body)).toMatchObject({ type: QUOTA_EXCEEDED, status: 429, title: 'Too Many Requests' });
    }
    // One second refills 20: 20 more pass and the 21st does not (both sides of the bound).
    fake.timers.tick(1000);
    const third = await calls(url, 21);
    expect(third.filter((r) => r.status === 200)).toHaveLength(20);
    expect(third.filter((r) => r.status === 429)).toHaveLength(1);
  });

  it('sends RateLimit-Policy and RateLimit on admitted and refused responses', async () => {
    const { url } = await start({ rate: 20, burst: 40 });
    const ok = await call(url, { dispatcher: client });
    expect(ok.status).toBe(200);
    expect(ok.headers['ratelimit-policy']).toBe('"default";q=40;w=2');
    expect(ok.headers.ratelimit).toBe('"default";r=39;t=1'); // 1 token short of full: 50 ms -> 1 s
    expect(ok.headers['retry-after']).toBeUndefined();
    await calls(url, 39);
    const refused = await call(url, { dispatcher: client });
    expect(refused.status).toBe(429);
    expect(refused.headers['ratelimit-policy']).toBe('"default";q=40;w=2');
    expect(refused.headers.ratelimit).toBe('"default";r=0;t=1');
    expect(refused.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused.body)['violated-policies']).toEqual(['default']);
  });

  it('rounds Retry-After up to whole seconds for slow rates', async () => {
    const { url } = await start({ rate: '6/min', burst: 1, policyName: 'slow' });
    expect((await call(url, { dispatcher: client })).status).toBe(200);
    fake.timers.tick(1); // 9.999 s to go
    const refused = await call(url, { dispatcher: client });
    expect(refused.headers['retry-after']).toBe('10');
    expect(refused.headers['ratelimit-policy']).toBe('"slow";q=1;w=10');
    expect(refused.headers.ratelimit).toBe('"slow";r=0;t=10');
  });
});

describe('rateLimit: keys', () => {
  it('keeps each key independent', async () => {
    const { url } = await start({ rate: 1, burst: 2, key: (req) => String(req.headers['x-api-key'] ?? 'none') });
    const a = await calls(url, 3, { 'x-api-key': 'a' });
    expect(a.map((r) => r.status).sort()).toEqual([200, 200, 429]);
    const b = await calls(url, 2, { 'x-api-key': 'b' });
    expect(b.map((r) => r.status)).toEqual([200, 200]);
  });

  it('applies the global limit over all keys, charging no key the global bucket refused', async () => {
    const { url } = await start({
      rate: 0.001,
      burst: 2,
      global: { rate: 1, burst: 3 },
      key: (req) => String(req.headers['x-api-key']),
    });
    const send = (key: string) => call(url, { dispatcher: client, headers: { 'x-api-key': key } });
    expect((await send('a')).status).toBe(200);
    expect((await send('a')).status).toBe(200);
    expect((await send('b')).status).toBe(200); // global now empty, b has 1 left
    const refused = await send('b');
    expect(refused.status).toBe(429); // the global bucket refused
    expect(refused.headers['retry-after']).toBe('1');
    fake.timers.tick(1000); // one global token back; b's own bucket refills only 0.001
    expect((await send('b')).status).toBe(200); // b was not charged for the refused request
    expect((await send('c')).status).toBe(429); // and that took the global token
  });

  it('ignores a spoofed X-Forwarded-For unless trustProxy says so', async () => {
    const watch = watchDecisions();
    try {
      const { url } = await start({ rate: 1, burst: 1 });
      expect((await call(url, { dispatcher: client, headers: { 'x-forwarded-for': '198.51.100.1' } })).status).toBe(
        200,
      );
      expect((await call(url, { dispatcher: client, headers: { 'x-forwarded-for': '198.51.100.2' } })).status).toBe(
        429,
      );
      expect(watch.keys).toEqual(['127.0.0.1', '127.0.0.1']);
    } finally {
      watch.stop();
    }
  });

  it('reads X-Forwarded-For from the trusted proxy, right to left', async () => {
    const watch = watchDecisions();
    try {
      const { url } = await start({ rate: 1, burst: 1, trustProxy: ['127.0.0.0/8'] });
      const send = (xff: string) => call(url, { dispatcher: client, headers: { 'x-forwarded-for': xff } });
      expect((await send('198.51.100.1')).status).toBe(200);
      expect((await send('198.51.100.2')).status).toBe(200);
      // The client may prepend anything; only the entry our proxy appended counts.
      expect((await send('203.0.113.9, 198.51.100.1')).status).toBe(429);
      expect(watch.keys).toEqual(['198.51.100.1', '198.51.100.2', '198.51.100.1']);
    } finally {
      watch.stop();
    }
  });

  it('trusts a hop count, and the Forwarded header when asked', async () => {
    const watch = watchDecisions();
    try {
      const byCount = await start({ rate: 10, burst: 10, trustProxy: 2 });
      await call(byCount.url, {
        dispatcher: client,
        headers: { 'x-forwarded-for': '203.0.113.9, 198.51.100.7, 10.0.0.2' },
      });
      const forwarded = await start({ rate: 10, burst: 10, trustProxy: true, proxyHeader: 'forwarded' });
      await call(forwarded.url, {
        dispatcher: client,
        headers: { forwarded: 'for="[2001:db8:cafe:1::17]:4711";proto=https, for=10.0.0.2' },
      });
      expect(watch.keys).toEqual(['198.51.100.7', '2001:db8:cafe:1::/64']);
    } finally {
      watch.stop();
    }
  });

  it('groups IPv6 clients by /64', async () => {
    const watch = watchDecisions();
    try {
      const { url } = await start({ rate: 1, burst: 1, trustProxy: true });
      const send = (xff: string) => call(url, { dispatcher: client, headers: { 'x-forwarded-for': xff } });
      expect((await send('2001:db8:1:2::1')).status).toBe(200);
      expect((await send('2001:db8:1:2:ffff:ffff:ffff:fffe')).status).toBe(429); // same /64
      expect((await send('2001:db8:1:3::1')).status).toBe(200); // next /64
      expect((await send('::ffff:192.0.2.1')).status).toBe(200);
      expect((await send('192.0.2.1')).status).toBe(429); // the same IPv4 client
      expect(watch.keys).toEqual([
        '2001:db8:1:2::/64',
        '2001:db8:1:2::/64',
        '2001:db8:1:3::/64',
        '192.0.2.1',
        '192.0.2.1',
      ]);
    } finally {
      watch.stop();
    }
  });

  it('groups a real IPv6 peer (::1) by its /64', async () => {
    const watch = watchDecisions();
    const limit = rateLimit({ rate: 1, burst: 1, clock: fake.clock });
    const server = createServer((req, res) => limit(req, res, () => res.end('ok')));
    await new Promise<void>((resolve) => server.listen(0, '::1', resolve));
    try {
      const url = `http://[::1]:${(server.address() as AddressInfo).port}/`;
      expect((await call(url, { dispatcher: client })).status).toBe(200);
      expect((await call(url, { dispatcher: client })).status).toBe(429);
      expect(watch.keys).toEqual(['0:0:0:0::/64', '0:0:0:0::/64']);
    } finally {
      watch.stop();
      await client.close();
      client = agent();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('counts cost(req) and lets skip(req) through without headers', async () => {
    const { url } = await start({
      rate: 1,
      burst: 10,
      cost: (req) => Number(req.headers['x-cost'] ?? 1),
      skip: (req) => req.headers['x-health'] === '1',
    });
    expect((await call(url, { dispatcher: client, headers: { 'x-cost': '7' } })).headers.ratelimit).toBe(
      '"default";r=3;t=7',
    );
    expect((await call(url, { dispatcher: client, headers: { 'x-cost': '4' } })).status).toBe(429);
    const skipped = await call(url, { dispatcher: client, headers: { 'x-health': '1' } });
    expect(skipped.status).toBe(200);
    expect(skipped.headers.ratelimit).toBeUndefined();
    expect((await call(url, { dispatcher: client, headers: { 'x-cost': '3' } })).status).toBe(200);
  });
});

describe('rateLimit: memory bound and async functions', () => {
  const byHeader = (req: { headers: Record<string, string | string[] | undefined> }) =>
    String(req.headers['x-api-key']);

  it('keeps at most maxKeys keys, dropping a bucket that has refilled first, then the least recently used', async () => {
    const { url } = await start({ rate: 1, burst: 1, maxKeys: 2, key: byHeader });
    const send = async (key: string) => (await call(url, { dispatcher: client, headers: { 'x-api-key': key } })).status;
    expect(await send('a')).toBe(200);
    fake.timers.tick(1000); // a is full again: it holds no information
    expect(await send('b')).toBe(200);
    expect(await send('c')).toBe(200); // a third key: a (full) is dropped, not b
    expect(await send('b')).toBe(429); // b still remembers its request
    // Nothing is full now: the least recently used key (c) goes, forgiven. b, refused a moment ago, is
    // the most recently used and stays remembered: a key that keeps asking keeps its debt.
    expect(await send('d')).toBe(200);
    expect(await send('b')).toBe(429);
    expect(await send('c')).toBe(200); // c starts full again (d, the least recently used now, goes)
  });

  it('awaits key, cost and skip functions that return promises, and answers 500 when one rejects', async () => {
    const { url } = await start({
      rate: 1,
      burst: 5,
      key: async (req) => {
        if (req.headers['x-api-key'] === 'bad') throw new Error('lookup failed');
        return byHeader(req);
      },
      cost: async (req) => Number(req.headers['x-cost'] ?? 1),
      skip: async (req) => req.headers['x-skip'] === '1',
    });
    const send = (headers: Record<string, string>) => call(url, { dispatcher: client, headers });
    expect((await send({ 'x-api-key': 'a', 'x-cost': '4' })).headers.ratelimit).toBe('"default";r=1;t=4');
    expect((await send({ 'x-api-key': 'a', 'x-cost': '2' })).status).toBe(429);
    expect((await send({ 'x-api-key': 'a', 'x-skip': '1' })).status).toBe(200);
    expect((await send({ 'x-api-key': 'bad' })).status).toBe(500);
    expect((await send({ 'x-api-key': 'a', 'x-cost': '-1' })).status).toBe(500);
    expect((await send({ 'x-api-key': 'a', 'x-cost': '1' })).status).toBe(200);
  });
});

describe('rateLimit: maxWait', () => {
  it('holds requests up to maxWait in a bounded queue, refuses beyond it at once', async () => {
    const server = await start({ rate: 10, burst: 1, maxWait: 350, maxQueue: 3 });
    const { url } = server;
    expect((await call(url, { dispatcher: client })).status).toBe(200); // the burst
    const held = [
      call(url, { dispatcher: client }),
      call(url, { dispatcher: client }),
      call(url, { dispatcher: client }),
    ];
    await until(() => server.arrived() === 4, '3 held requests');
    // The queue is full: the next one is decided at once (no tokens: 429), and is not held.
    const overflow = await call(url, { dispatcher: client });
    expect(overflow.status).toBe(429);
    expect(overflow.headers['retry-after']).toBe('1');
    fake.timers.tick(100);
    fake.timers.tick(100);
    fake.timers.tick(100);
    const replies = await Promise.all(held);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200]);
  });

  it('refuses at once a request predicted to wait longer than maxWait', async () => {
    const server = await start({ rate: 10, burst: 1, maxWait: 150, maxQueue: 10 });
    expect((await call(server.url, { dispatcher: client })).status).toBe(200);
    const held = call(server.url, { dispatcher: client }); // due in 100 ms
    await until(() => server.arrived() === 2, 'the held request');
    const refused = await call(server.url, { dispatcher: client }); // would be due in 200 ms > 150
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    fake.timers.tick(100);
    expect((await held).status).toBe(200);
  });

  it('refuses maxWait with a window limiter when it is made, not at the first request', () => {
    for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
      const limiter = new KeyedLimiter({ algorithm, limit: 10, window: '1s' });
      expect(() => rateLimit({ limiter, maxWait: '1s' })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'maxWait' }),
      );
      expect(() => rateLimit({ limiter, maxWait: '1s' })).toThrow(/take\(\).*'(fixed|sliding)-window'/);
      // without a wait (or with maxWait 0) a window limiter is fine: refusals carry Retry-After
      expect(() => rateLimit({ limiter })).not.toThrow();
      expect(() => rateLimit({ limiter, maxWait: 0 })).not.toThrow();
    }
    const bucket = new KeyedLimiter({ rate: 10, burst: 10 });
    expect(() => rateLimit({ limiter: bucket, maxWait: '1s' })).not.toThrow();
  });

  it('gives back the reservation of a held request whose client went away', async () => {
    const server = await start({ rate: 10, burst: 1, maxWait: 1000 });
    expect((await call(server.url, { dispatcher: client })).status).toBe(200);
    const abort = new AbortController();
    const gone = call(server.url, { dispatcher: client, signal: abort.signal }).catch((e: unknown) => e);
    await until(() => server.arrived() === 2, 'the held request');
    abort.abort();
    expect(await gone).toBeInstanceOf(Error);
    await until(() => fake.pending() === 0, 'the held request to be dropped');
    const next = call(server.url, { dispatcher: client }); // due at 100 ms, not 200: the slot was given back
    await until(() => server.arrived() === 3, 'the next request');
    fake.timers.tick(100);
    expect((await next).status).toBe(200);
  });
});

describe('rateLimit: failures', () => {
  const broken = (failure: () => Promise<Decision>): RateLimitDecider => ({ tryTake: failure, take: failure });

  it('answers 500 when key() throws, and keeps serving', async () => {
    const { url } = await start({
      rate: 10,
      burst: 10,
      key: (req) => {
        if (req.headers['x-bad']) throw new Error('no key');
        return 'k';
      },
    });
    const failed = await call(url, { dispatcher: client, headers: { 'x-bad': '1' } });
    expect(failed.status).toBe(500);
    expect(failed.headers['content-type']).toBe('application/problem+json');
    expect((await call(url, { dispatcher: client })).status).toBe(200);
  });

  it('answers 500 for a bad cost and for a cost above the burst', async () => {
    const { url } = await start({ rate: 10, burst: 10, cost: (req) => Number(req.headers['x-cost']) });
    expect((await call(url, { dispatcher: client, headers: { 'x-cost': 'NaN' } })).status).toBe(500);
    expect((await call(url, { dispatcher: client, headers: { 'x-cost': '11' } })).status).toBe(500);
    expect((await call(url, { dispatcher: client, headers: { 'x-cost': '10' } })).status).toBe(200);
  });

  it('answers 503 with Retry-After when the limiter rejects, and publishes the error', async () => {
    const errors: HttpErrorMessage[] = [];
    const listener = (m: unknown): void => {
      errors.push(m as HttpErrorMessage);
    };
    subscribe('tokenpace:http:error', listener);
    try {
      const { url } = await start({
        limiter: broken(() => Promise.reject(new StoreUnavailableError('store down'))),
      });
      const replies = await calls(url, 5);
      expect(replies.map((r) => r.status)).toEqual([503, 503, 503, 503, 503]);
      expect(replies[0]?.headers['retry-after']).toBe('1');
      expect(errors).toHaveLength(5);
      expect(errors[0]).toMatchObject({ stage: 'limiter', statusCode: 503 });
    } finally {
      unsubscribe('tokenpace:http:error', listener);
    }
  });

  it('lets onError fail open', async () => {
    const { url } = await start({
      limiter: broken(() => Promise.reject(new Error('down'))),
      onError: (_error, _req, _res, next) => next(),
    });
    expect((await call(url, { dispatcher: client })).status).toBe(200);
  });

  it('survives an onLimit that throws', async () => {
    const { url } = await start({
      rate: 1,
      burst: 1,
      onLimit: () => {
        throw new Error('bug in onLimit');
      },
    });
    expect((await call(url, { dispatcher: client })).status).toBe(200);
    expect((await call(url, { dispatcher: client })).status).toBe(500);
    expect((await call(url, { dispatcher: client })).status).toBe(500);
  });

  it('uses onLimit to answer refusals', async () => {
    const { url } = await start({
      rate: 1,
      burst: 1,
      onLimit: (_req, res, info) => {
        res.statusCode = 429;
        res.end(`slow down, ${info.key}: ${info.retryAfterSeconds}`);
      },
    });
    await call(url, { dispatcher: client });
    const refused = await call(url, { dispatcher: client });
    expect(refused).toMatchObject({ status: 429, body: 'slow down, 127.0.0.1: 1' });
    expect(refused.headers['retry-after']).toBe('1');
  });

  it('turns a limiter wait that is too long into a 429', async () => {
    const limiter: RateLimitDecider = {
      tryTake: () =>
        Promise.resolve({ allowed: false, remaining: 0, retryAfterMs: 2500, resetAfterMs: 2500, limit: 5 }),
      take: () => Promise.reject(new WaitTooLongError({ waitMs: 2500, maxWaitMs: 100, retryAfterMs: 2500 })),
    };
    const { url } = await start({ limiter, maxWait: 100, policy: { rate: 5, burst: 5 } });
    const refused = await call(url, { dispatcher: client });
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('3');
    expect(refused.headers['ratelimit-policy']).toBe('"default";q=5;w=1');
  });

  it('refuses bad options with a message that says what to give', () => {
    expect(() => rateLimit({})).toThrow(/needs either `limiter` or both `rate` and `burst`/);
    expect(() => rateLimit({ rate: 1, burst: 1, maxQueue: -1 })).toThrow(/maxQueue/);
    expect(() => rateLimit({ rate: 1, burst: 1, trustProxy: ['not-an-ip'] })).toThrow(/CIDR/);
  });
});

describe('rateLimit: the limiter contract', () => {
  it("is KeyedLimiter's tryTake and take; a hand-written decider with a numeric maxWait fits too", () => {
    expectTypeOf<KeyedLimiter>().toExtend<RateLimitDecider>();
    const own = {
      tryTake: (_key: string, _cost?: number): Promise<Decision> => Promise.reject(new Error('unused')),
      take: (_key: string, _cost?: number, _options?: { signal?: AbortSignal; maxWait?: number }): Promise<Decision> =>
        Promise.reject(new Error('unused')),
    };
    expectTypeOf(own).toExtend<RateLimitDecider>();
  });

  it('made from rate and burst, it refuses a maxKeys its MemoryStore would refuse', () => {
    expect(() => rateLimit({ rate: 1, burst: 1, maxKeys: 0 })).toThrow(/maxKeys/);
    expect(() => rateLimit({ rate: 1, burst: 1, maxKeys: 1.5 })).toThrow(/maxKeys/);
  });
});
