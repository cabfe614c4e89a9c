/**
 * throttleInterceptor({ adaptive }) against servers that advertise a window longer than `maxPause`:
 * a hostile `w` of 10^15 seconds (alone, and with a hostile reset, quota or Retry-After) and honest
 * daily quotas. The adopted window is at most `maxPause` long (the advertised quota scaled to it),
 * so no answer makes a request wait longer than the options say; `maxWait` rejects only what would
 * wait past it, with a bounded hint. Real loopback servers through undici; the interceptor's clock
 * is fake (one test runs in real time).
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ServerResponse } from 'node:http';
import { Agent, type Dispatcher, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { type ThrottleInterceptorOptions, throttleInterceptor } from '../../src/http/interceptor.js';
import type { ClientStartMessage } from '../../src/http/messages.js';
import { type FakeClock, fakeClock } from '../helpers/fake-clock.js';
import { type Loopback, listen, until } from './support.js';

const HOSTILE = '"p";q=2;w=999999999999999';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A server that answers every request `status` with `fields` (by default `RateLimit-Policy: policy`). */
async function advertising(policy: string, fields: Record<string, string> = {}, status = 200): Promise<Loopback> {
  const s = await listen((_req, res: ServerResponse) => {
    res.writeHead(status, { 'ratelimit-policy': policy, ...fields });
    res.end('ok');
  });
  cleanups.push(() => s.close());
  return s;
}

function client(options: ThrottleInterceptorOptions): Dispatcher {
  const agent = new Agent({ connections: 16 });
  cleanups.push(() => agent.close());
  return agent.compose(throttleInterceptor(options));
}

async function get(url: string, dispatcher: Dispatcher, signal?: AbortSignal): Promise<number> {
  const response = await request(url, { dispatcher, signal });
  await response.body.text();
  return response.statusCode;
}

/** Lets the sockets move (real time) without moving the fake clock. */
const settle = (ms = 30) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends one request after another, each once the last has been answered, moving the fake clock in
 * steps until it starts, and returns how long each waited (as the interceptor measured it on its
 * clock, published on tokenpace:http:client:start).
 */
async function gaps(
  fake: FakeClock,
  s: Loopback,
  dispatcher: Dispatcher,
  n: number,
  stepMs: number,
  limitMs = 0,
  status = 200,
) {
  const waited: number[] = [];
  const onStart = (message: unknown): void => {
    const { origin, waitedMs } = message as ClientStartMessage;
    if (origin === s.url) waited.push(waitedMs);
  };
  subscribe('tokenpace:http:client:start', onStart);
  try {
    for (let i = 0; i < n; i++) {
      const reply = get(s.url, dispatcher);
      reply.catch(() => {}); // awaited below; a request never sent is reported as such
      const startMs = fake.clock.now();
      await settle(10);
      while (waited.length === i) {
        if (fake.clock.now() - startMs > Math.max(limitMs, 400 * stepMs))
          throw new Error(`request ${i + 1} never sent`);
        fake.timers.tick(stepMs);
        await settle(1);
      }
      expect(await reply).toBe(status);
    }
  } finally {
    unsubscribe('tokenpace:http:client:start', onStart);
  }
  return waited;
}

describe('throttleInterceptor: an advertised window longer than maxPause', () => {
  it('a hostile w=10^15 s: every request is sent, none waits longer than maxPause', async () => {
    const fake = fakeClock(1_000_000);
    const s = await advertising(HOSTILE);
    const dispatcher = client({ clock: fake.clock, adaptive: { min: 5 }, maxPause: '1s' });
    const waited = await gaps(fake, s, dispatcher, 5, 100);
    // The first is sent at once; each later one a window of maxPause (1 per 1 s) after the last answer.
    expect(waited).toEqual([0, 1000, 1000, 1000, 1000]);
    expect(s.arrived()).toBe(5);
  });

  it.each([
    ['RateLimit r=0 with t=10^15 s', { ratelimit: '"p";r=0;t=999999999999999' }, 200],
    [
      'X-RateLimit-Reset far in the future',
      { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '99999999999999' },
      200,
    ],
    ['a 429 with Retry-After: 10^15 s', { 'retry-after': '999999999999999' }, 429],
  ] as const)(
    'with the hostile policy and %s: no request waits longer than maxPause',
    async (_what, fields, status) => {
      const fake = fakeClock(1_000_000);
      const s = await advertising(HOSTILE, fields, status);
      const dispatcher = client({ clock: fake.clock, adaptive: { min: 5 }, maxPause: '1s' });
      const waited = await gaps(fake, s, dispatcher, 4, 100, 0, status);
      expect(waited[0]).toBe(0);
      for (const ms of waited) expect(ms).toBeLessThanOrEqual(1000);
    },
  );

  it('a hostile w=10^15 s with maxWait: nothing fails at once, and a refusal names a bounded wait', async () => {
    const fake = fakeClock(1_000_000);
    const s = await advertising(HOSTILE);
    const dispatcher = client({ clock: fake.clock, adaptive: { min: 5 }, maxPause: '1s', maxWait: '2s' });
    expect(await gaps(fake, s, dispatcher, 4, 100)).toHaveLength(4);
    // A request that would wait past a shorter maxWait is refused at once, with a hint within maxPause.
    const impatient = client({ clock: fake.clock, adaptive: { min: 5 }, maxPause: '1s', maxWait: '100ms' });
    expect(await get(s.url, impatient)).toBe(200);
    const refused = await get(s.url, impatient).catch((error: unknown) => error);
    expect(isTokenpaceError(refused, 'ERR_WAIT_TOO_LONG')).toBe(true);
    expect((refused as { retryAfterMs: number }).retryAfterMs).toBeLessThanOrEqual(1000);
    fake.timers.tick(1000);
    expect(await get(s.url, impatient)).toBe(200);
  });

  it('an honest daily quota holds no request for a day: its window is followed in windows of maxPause', async () => {
    const fake = fakeClock(1_000_000);
    const s = await advertising('"day";q=3;w=86400');
    // 3 a day, with the default maxPause of 5 min: 1 per 5 min.
    const dispatcher = client({ clock: fake.clock, adaptive: true });
    const waited = await gaps(fake, s, dispatcher, 5, 5000);
    expect(waited).toEqual([0, 300_000, 300_000, 300_000, 300_000]); // where following it would hold the fourth a day
  }, 30_000);

  it('1000 a day is followed as 3 per 5 min (the same average), each wait within maxPause', async () => {
    const fake = fakeClock(1_000_000);
    const s = await advertising('"day";q=1000;w=86400');
    const dispatcher = client({ clock: fake.clock, adaptive: true, maxWait: '5min' });
    const waited = await gaps(fake, s, dispatcher, 8, 5000);
    for (const ms of waited) expect(ms).toBeLessThanOrEqual(300_000);
    // At most 3 in any 5 min after the first answer: later ones wait for the window's end.
    expect(waited.filter((ms) => ms > 200_000).length).toBeGreaterThanOrEqual(1);
    expect(s.arrived()).toBe(8);
  }, 30_000);

  it('with maxPause raised to the window, the window is followed whole (the opt-in)', async () => {
    const fake = fakeClock(1_000_000);
    const s = await advertising('"p";q=2;w=60');
    const dispatcher = client({ clock: fake.clock, adaptive: { min: 5 }, maxPause: '1min' });
    const waited = await gaps(fake, s, dispatcher, 3, 100, 70_000);
    expect(waited[1]).toBeLessThanOrEqual(200); // 2 in the window, at the pinned rate
    expect(waited[2]).toBeGreaterThan(50_000); // then until the window has passed
    expect(waited[2]).toBeLessThanOrEqual(60_000);
  }, 30_000);

  it('real time: the hostile header from the issue holds no request past maxPause', async () => {
    const s = await advertising(HOSTILE);
    const dispatcher = client({ adaptive: { min: 5 }, maxPause: '1s' });
    for (let i = 0; i < 4; i++) {
      // Each is answered within maxPause and a generous margin, never left pending.
      expect(await get(s.url, dispatcher, AbortSignal.timeout(4000))).toBe(200);
    }
    await until(() => s.arrived() === 4, 'four requests');
  }, 20_000);
});
