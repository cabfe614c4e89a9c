/**
 * throttleInterceptor against real loopback servers through undici's
 * `Agent.compose`. The schedulers' and throttles' clock is fake, so pacing is
 * checked exactly: the sockets are real, time moves when the test says.
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { Agent, type Dispatcher, interceptors, request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { type ThrottleInterceptorOptions, throttleInterceptor } from '../../src/http/interceptor.js';
import type { ClientPauseMessage, ClientStartMessage } from '../../src/http/messages.js';
import { ThrottleGroup } from '../../src/stream/group.js';
import { type FakeClock, fakeClock } from '../helpers/fake-clock.js';
import { type Loopback, listen, until } from './support.js';

let fake: FakeClock;
const cleanups: Array<() => Promise<void>> = [];

beforeEach(() => {
  fake = fakeClock(1_000_000);
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function server(handler: (res: ServerResponse, n: number, body: Buffer) => void): Promise<Loopback> {
  let n = 0;
  const s = await listen((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handler(res, ++n, Buffer.concat(chunks)));
  });
  cleanups.push(() => s.close());
  return s;
}

function client(options: ThrottleInterceptorOptions, ...more: Dispatcher.DispatcherComposeInterceptor[]): Dispatcher {
  const agent = new Agent({ connections: 64 });
  cleanups.push(() => agent.close());
  return agent.compose(throttleInterceptor({ clock: fake.clock, ...options }), ...more);
}

async function get(url: string, dispatcher: Dispatcher, signal?: AbortSignal) {
  const response = await request(url, { dispatcher, signal });
  const body = await response.body.text();
  return { status: response.statusCode, body, headers: response.headers };
}

const ok = (res: ServerResponse): void => {
  res.end('ok');
};

/** Lets the sockets move (real time) without moving the fake clock. */
const settle = (ms = 30) => new Promise((resolve) => setTimeout(resolve, ms));

describe('throttleInterceptor: pacing', () => {
  it('paces a burst of requests to the rate, starting with the burst', async () => {
    const s = await server(ok);
    const dispatcher = client({ rate: 10, burst: 2 });
    const replies = Promise.all(Array.from({ length: 6 }, () => get(s.url, dispatcher)));
    await until(() => s.arrived() === 2, 'the burst');
    await settle();
    expect(s.arrived()).toBe(2);
    for (const expected of [3, 4, 5, 6]) {
      fake.timers.tick(99);
      await settle(10);
      expect(s.arrived()).toBe(expected - 1); // not a millisecond early
      fake.timers.tick(1);
      await until(() => s.arrived() === expected, `request ${expected}`);
    }
    expect((await replies).map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
  });

  it('limits concurrency: a request holds its slot until its response is delivered', async () => {
    const pending: ServerResponse[] = [];
    const s = await server((res) => pending.push(res));
    const dispatcher = client({ concurrency: 2 });
    const replies = Promise.all(Array.from({ length: 4 }, () => get(s.url, dispatcher)));
    await until(() => pending.length === 2, 'two in flight');
    await settle();
    expect(s.arrived()).toBe(2);
    pending.shift()?.end('ok');
    await until(() => pending.length === 2 && s.arrived() === 3, 'the third');
    for (const res of pending.splice(0)) res.end('ok');
    await until(() => s.arrived() === 4, 'the fourth');
    for (const res of pending.splice(0)) res.end('ok');
    expect((await replies).every((r) => r.status === 200)).toBe(true);
  });

  it('refuses with QueueFullError when the queue is full, and sends nothing for it', async () => {
    const s = await server(ok);
    const dispatcher = client({ rate: 1, burst: 1, maxQueue: 1 });
    const first = get(s.url, dispatcher);
    const second = get(s.url, dispatcher);
    const third = await get(s.url, dispatcher).catch((e: unknown) => e);
    expect(isTokenpaceError(third, 'ERR_QUEUE_FULL')).toBe(true);
    expect((await first).status).toBe(200);
    fake.timers.tick(1000);
    expect((await second).status).toBe(200);
    expect(s.arrived()).toBe(2);
  });

  it('takes an aborted waiting request out of the queue at once', async () => {
    const s = await server(ok);
    const dispatcher = client({ rate: 1, burst: 1, maxQueue: 1 });
    await get(s.url, dispatcher);
    const abort = new AbortController();
    const waiting = get(s.url, dispatcher, abort.signal).catch((e: unknown) => e);
    abort.abort(new Error('changed my mind'));
    expect(((await waiting) as Error).message).toBe('changed my mind');
    const next = get(s.url, dispatcher); // the queue slot is free again
    fake.timers.tick(1000);
    expect((await next).status).toBe(200);
    expect(s.arrived()).toBe(2);
  });

  it('keeps origins apart, with per-origin limits', async () => {
    const a = await server(ok);
    const b = await server(ok);
    const dispatcher = client({ rate: 1, burst: 1, origins: { [b.url]: { rate: 100, burst: 5 } } });
    const toA = Promise.all(Array.from({ length: 3 }, () => get(a.url, dispatcher)));
    const toB = await Promise.all(Array.from({ length: 5 }, () => get(b.url, dispatcher)));
    expect(toB.every((r) => r.status === 200)).toBe(true); // b was not held behind a
    expect(a.arrived()).toBe(1);
    fake.timers.tick(2000);
    expect((await toA).length).toBe(3);
  });

  it("gives an origin with its own rate and no burst the default burst, not the defaults' burst", async () => {
    const s = await server(ok);
    const dispatcher = client({ rate: 36, burst: 8, origins: { [s.url]: { rate: 2, concurrency: 1 } } });
    const replies = Promise.all(Array.from({ length: 4 }, () => get(s.url, dispatcher)));
    await until(() => s.arrived() === 1, 'the first');
    await settle();
    expect(s.arrived()).toBe(1); // a burst of 1 at 2/s, not 8
    for (const expected of [2, 3, 4]) {
      fake.timers.tick(499);
      await settle(10);
      expect(s.arrived()).toBe(expected - 1);
      fake.timers.tick(1);
      await until(() => s.arrived() === expected, `request ${expected}`);
    }
    expect((await replies).every((r) => r.status === 200)).toBe(true);
  });
});

describe('throttleInterceptor: pushback', () => {
  it('pauses the origin for Retry-After seconds; the 429 reaches the caller', async () => {
    const s = await server((res, n) => {
      if (n === 1) {
        res.writeHead(429, { 'retry-after': '2' });
        res.end();
      } else ok(res);
    });
    const pauses: ClientPauseMessage[] = [];
    const onPause = (m: unknown): void => {
      pauses.push(m as ClientPauseMessage);
    };
    subscribe('tokenpace:http:client:pause', onPause);
    try {
      const dispatcher = client({ rate: 100, burst: 10 });
      expect((await get(s.url, dispatcher)).status).toBe(429);
      expect(pauses).toEqual([{ origin: s.url, statusCode: 429, delayMs: 2000, source: 'retry-after' }]);
      const next = get(s.url, dispatcher);
      await settle();
      fake.timers.tick(1999);
      await settle();
      expect(s.arrived()).toBe(1);
      fake.timers.tick(1);
      expect((await next).status).toBe(200);
    } finally {
      unsubscribe('tokenpace:http:client:pause', onPause);
    }
  });

  it('reads Retry-After as an HTTP date, relative to the Date field', async () => {
    const s = await server((res, n) => {
      if (n === 1) {
        res.writeHead(503, { date: 'Mon, 30 Nov 2026 12:00:00 GMT', 'retry-after': 'Mon, 30 Nov 2026 12:00:03 GMT' });
        res.end();
      } else ok(res);
    });
    const dispatcher = client({ rate: 100, burst: 10 });
    expect((await get(s.url, dispatcher)).status).toBe(503);
    const next = get(s.url, dispatcher);
    await settle();
    fake.timers.tick(2999);
    await settle();
    expect(s.arrived()).toBe(1);
    fake.timers.tick(1);
    expect((await next).status).toBe(200);
  });

  it('reads an HTTP-date Retry-After against wallClock when the answer has no Date field', async () => {
    const s = await server((res, n) => {
      if (n === 1) {
        res.sendDate = false;
        res.writeHead(429, { 'retry-after': 'Mon, 30 Nov 2026 12:00:05 GMT' });
        res.end();
      } else ok(res);
    });
    const wallClock = () => Date.parse('Mon, 30 Nov 2026 12:00:01 GMT');
    const pauses: ClientPauseMessage[] = [];
    const onPause = (m: unknown): void => {
      pauses.push(m as ClientPauseMessage);
    };
    subscribe('tokenpace:http:client:pause', onPause);
    try {
      const dispatcher = client({ rate: 100, burst: 10, wallClock });
      const refused = await get(s.url, dispatcher);
      expect(refused.status).toBe(429);
      expect(refused.headers.date).toBeUndefined();
      expect(pauses.map((p) => p.delayMs)).toEqual([4000]);
    } finally {
      unsubscribe('tokenpace:http:client:pause', onPause);
    }
  });

  it('refuses a wallClock that is not a function', () => {
    expect(() => throttleInterceptor({ wallClock: 5 as unknown as () => number })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'wallClock' }),
    );
  });

  it('pauses for the t of a RateLimit item with r=0, and not for other statuses', async () => {
    const s = await server((res, n) => {
      if (n === 1) res.writeHead(200, { ratelimit: '"default";r=0;t=5' });
      else if (n === 2) res.writeHead(429, { ratelimit: '"default";r=0;t=4, "day";r=10;t=60' });
      res.end('x');
    });
    const dispatcher = client({ rate: 100, burst: 10 });
    await get(s.url, dispatcher); // a 200 with r=0 does not pause
    expect((await get(s.url, dispatcher)).status).toBe(429);
    const next = get(s.url, dispatcher);
    await settle();
    fake.timers.tick(3999);
    await settle();
    expect(s.arrived()).toBe(2);
    fake.timers.tick(1);
    expect((await next).status).toBe(200);
  });

  it('refuses at once a request whose maxWait is shorter than the pause', async () => {
    const s = await server((res, n) => {
      res.writeHead(n === 1 ? 429 : 200, n === 1 ? { 'retry-after': '30' } : {});
      res.end();
    });
    const dispatcher = client({ rate: 100, burst: 10, maxWait: '5s' });
    await get(s.url, dispatcher);
    const refused = await get(s.url, dispatcher).catch((e: unknown) => e);
    expect(isTokenpaceError(refused, 'ERR_WAIT_TOO_LONG')).toBe(true);
    expect(s.arrived()).toBe(1);
  });

  it('composes with undici retry: the retry waits in the paused queue, then succeeds', async () => {
    const s = await server((res, n) => {
      if (n === 1) {
        res.writeHead(429, { 'retry-after': '1' });
        res.end();
      } else ok(res);
    });
    const starts: ClientStartMessage[] = [];
    const onStart = (m: unknown): void => {
      starts.push(m as ClientStartMessage);
    };
    subscribe('tokenpace:http:client:start', onStart);
    try {
      // retry's own timer is real and capped at 20 ms; our pause (fake clock) is what holds the retry back.
      const dispatcher = client({ rate: 100, burst: 10 }, interceptors.retry({ maxRetries: 2, maxTimeout: 20 }));
      const reply = get(s.url, dispatcher);
      // retry's timer fires after 20 ms (real) and sends its attempt into our paused queue.
      await settle(200);
      expect(s.arrived()).toBe(1);
      expect(starts).toHaveLength(1);
      fake.timers.tick(1000);
      expect((await reply).status).toBe(200);
      expect(s.arrived()).toBe(2);
      expect(starts).toHaveLength(2);
      expect(starts[1]?.waitedMs).toBeGreaterThanOrEqual(1000 - 20); // queued (fake) time, behind the pause
    } finally {
      unsubscribe('tokenpace:http:client:start', onStart);
    }
  });
});

describe('throttleInterceptor: bandwidth', () => {
  it('paces a response body by pausing the connection, delivering every byte', async () => {
    const size = 1024 * 1024;
    const payload = Buffer.alloc(size, 7);
    const s = await server((res) => {
      res.writeHead(200, { 'content-length': String(size) });
      res.end(payload);
    });
    const group = new ThrottleGroup({ rate: 256 * 1024, burst: 32 * 1024, clock: fake.clock });
    const dispatcher = client({ bandwidth: group });
    const response = await request(s.url, { dispatcher });
    let received = 0;
    const reading = (async () => {
      for await (const chunk of response.body) received += (chunk as Buffer).length;
    })();
    await settle(100);
    expect(received).toBeLessThanOrEqual(32 * 1024); // the burst, nothing more until time passes
    const startMs = fake.clock.now();
    while (received < size) {
      fake.timers.tick(50);
      await settle(2);
      // never ahead of the bucket: burst + rate * elapsed
      expect(received).toBeLessThanOrEqual(32 * 1024 + ((fake.clock.now() - startMs) / 1000) * 256 * 1024 + 1);
    }
    await reading;
    expect(received).toBe(size);
    expect(fake.clock.now() - startMs).toBeGreaterThanOrEqual(((size - 32 * 1024) / (256 * 1024)) * 1000 - 50);
  });

  it('paces streamed request bodies (a Readable, an async iterable) and delivers them whole', async () => {
    const received: number[] = [];
    const s = await listen((req, res) => {
      let bytes = 0;
      req.on('data', (c: Buffer) => {
        bytes += c.length;
      });
      req.on('end', () => {
        received.push(bytes);
        res.end('ok');
      });
    });
    cleanups.push(() => s.close());
    const dispatcher = client({
      bandwidth: new ThrottleGroup({ rate: 64 * 1024, burst: 8 * 1024, clock: fake.clock }),
    });
    async function* pieces() {
      for (let i = 0; i < 8; i++) yield Buffer.alloc(8 * 1024, i);
    }
    const uploads = [
      request(s.url, {
        dispatcher,
        method: 'POST',
        body: Readable.from([Buffer.alloc(32 * 1024), Buffer.alloc(32 * 1024)]),
      }),
      request(s.url, { dispatcher, method: 'POST', body: pieces() as unknown as Readable }), // undici sends async iterables; its types omit them
    ];
    await settle(100);
    expect(received).toEqual([]); // 128 KiB cannot pass on an 8 KiB burst with the clock stopped
    for (let i = 0; i < 100 && received.length < 2; i++) {
      fake.timers.tick(100);
      await settle(2);
    }
    for (const response of await Promise.all(uploads)) await response.body.text();
    expect(received.sort()).toEqual([64 * 1024, 64 * 1024]);
    expect(fake.clock.now() - 1_000_000).toBeGreaterThanOrEqual(((128 - 8) / 64) * 1000);
  });

  it('paces a request body through the same bucket, with its content-length', async () => {
    const size = 256 * 1024;
    let got: { length: number; header: string | undefined } | undefined;
    let bytesIn = 0;
    const s = await listen((req, res) => {
      req.on('data', (c: Buffer) => {
        bytesIn += c.length;
      });
      req.on('end', () => {
        got = { length: bytesIn, header: req.headers['content-length'] };
        res.end('ok');
      });
    });
    cleanups.push(() => s.close());
    const dispatcher = client({ bandwidth: '64KiB/s' });
    const upload = request(s.url, { dispatcher, method: 'POST', body: Buffer.alloc(size, 1) });
    await settle(150);
    // 64 KiB/s with the default burst (50 ms of the rate) and the fake clock stopped: only the burst is through.
    expect(bytesIn).toBeLessThanOrEqual(4 * 1024);
    for (let i = 0; i < 100 && got === undefined; i++) {
      fake.timers.tick(100);
      await settle(2);
    }
    const response = await upload;
    await response.body.text();
    expect(got).toEqual({ length: size, header: String(size) });
  });
});
