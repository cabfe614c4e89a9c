/**
 * Stacked limiters (per second, per minute, ... on one route) and the header
 * styles for older clients, in node:http, Express 5, Fastify 5, Hono 4 and Koa 3. Each
 * limiter adds its item to `RateLimit-Policy` and `RateLimit` under a name of
 * its own, so the client sees every limit; the single-valued fields of the
 * older styles keep the most restrictive layer's values.
 */

import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { fakeClock } from '../helpers/fake-clock.js';
import { type AnyOptions, type App, FRAMEWORKS, startApp } from './apps.js';
import { agent, call, type Reply } from './support.js';

const client = agent();
const apps: App[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});
afterAll(() => client.close());

async function start(framework: (typeof FRAMEWORKS)[number], layers: AnyOptions[]): Promise<App> {
  const app = await startApp(framework, { layers });
  apps.push(app);
  return app;
}

const send = (app: App, n: number): Promise<Reply[]> =>
  (async () => {
    const replies: Reply[] = [];
    for (let i = 0; i < n; i++) replies.push(await call(`${app.url}/`, { dispatcher: client }));
    return replies;
  })();

describe.each(FRAMEWORKS)('%s: stacked limiters', (framework) => {
  it('two layers with their own names: both items in both fields, in the order they ran', async () => {
    const { clock } = fakeClock();
    const app = await start(framework, [
      { rate: 10, burst: 10, clock, policyName: 'per-second' },
      { rate: '100/min', burst: 100, clock, policyName: 'per-minute' },
    ]);
    const [first] = await send(app, 1);
    expect(first?.status).toBe(200);
    expect(first?.headers['ratelimit-policy']).toBe('"per-second";q=10;w=1, "per-minute";q=100;w=60');
    expect(first?.headers.ratelimit).toBe('"per-second";r=9;t=1, "per-minute";r=99;t=1');
    const replies = await send(app, 10);
    const refused = replies.at(-1);
    expect(refused?.status).toBe(429); // the 11th within the same instant: the per-second layer refuses
    expect(refused?.headers['ratelimit-policy']).toBe('"per-second";q=10;w=1');
    expect(refused?.headers.ratelimit).toBe('"per-second";r=0;t=1');
    expect(refused?.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused?.body ?? '{}')['violated-policies']).toEqual(['per-second']);
  });

  it('five layers left at the default name: default, default-2 ... default-5, and a layer at r=0 is visible', async () => {
    const { clock } = fakeClock();
    const layers = [2, 3, 4, 5, 6].map((burst) => ({ rate: 1, burst, clock }));
    const app = await start(framework, layers);
    const [, second] = await send(app, 2);
    expect(second?.status).toBe(200);
    expect(second?.headers['ratelimit-policy']).toBe(
      '"default";q=2;w=2, "default-2";q=3;w=3, "default-3";q=4;w=4, "default-4";q=5;w=5, "default-5";q=6;w=6',
    );
    // The first layer is spent (r=0) while the others still have tokens: the client is told so.
    expect(second?.headers.ratelimit).toBe(
      '"default";r=0;t=2, "default-2";r=1;t=2, "default-3";r=2;t=2, "default-4";r=3;t=2, "default-5";r=4;t=2',
    );
    const [third] = await send(app, 1);
    expect(third?.status).toBe(429);
    expect(third?.headers.ratelimit).toBe('"default";r=0;t=1');
    expect(JSON.parse(third?.body ?? '{}')['violated-policies']).toEqual(['default']);
  });

  it('five layers, the third refuses: the earlier items, its own, its name in violated-policies', async () => {
    const { clock } = fakeClock();
    const names = ['second', 'minute', 'hour', 'day', 'week'];
    const bursts = [10, 5, 2, 50, 100];
    const app = await start(
      framework,
      names.map((policyName, i) => ({ rate: 1, burst: bursts[i] ?? 1, clock, policyName })),
    );
    const replies = await send(app, 3);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
    const refused = replies[2];
    expect(refused?.headers['ratelimit-policy']).toBe('"second";q=10;w=10, "minute";q=5;w=5, "hour";q=2;w=2');
    expect(refused?.headers.ratelimit).toBe('"second";r=7;t=3, "minute";r=2;t=3, "hour";r=0;t=1');
    expect(refused?.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused?.body ?? '{}')['violated-policies']).toEqual(['hour']);
  });

  it('older header styles: each alone, exact values', async () => {
    const { clock } = fakeClock();
    const draft7 = await start(framework, [{ rate: 20, burst: 40, clock, headers: 'draft-7' }]);
    const [a] = await send(draft7, 1);
    expect(a?.headers['ratelimit-policy']).toBe('40;w=2');
    expect(a?.headers.ratelimit).toBe('limit=40, remaining=39, reset=1');
    const draft6 = await start(framework, [{ rate: 20, burst: 40, clock, headers: 'draft-6' }]);
    const [b] = await send(draft6, 1);
    expect(b?.headers).toMatchObject({
      'ratelimit-policy': '40;w=2',
      'ratelimit-limit': '40',
      'ratelimit-remaining': '39',
      'ratelimit-reset': '1',
    });
    expect(b?.headers.ratelimit).toBeUndefined();
    // X-RateLimit-Reset is a Unix time: the wall clock's second, rounded up, plus the reset's seconds.
    const wallClock = () => Date.parse('2026-01-01T00:00:00.500Z');
    const legacy = await start(framework, [
      { rate: 1, burst: 2, clock, wallClock, headers: false, legacyHeaders: true },
    ]);
    const [c, d, refused] = await send(legacy, 3);
    expect(c?.headers).toMatchObject({ 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '1' });
    expect(c?.headers['x-ratelimit-reset']).toBe(String(1_767_225_601 + 1)); // full again in 1 s
    expect(d?.headers['x-ratelimit-remaining']).toBe('0');
    expect(d?.headers['x-ratelimit-reset']).toBe(String(1_767_225_601 + 2)); // full again in 2 s
    expect(c?.headers.ratelimit).toBeUndefined();
    expect(c?.headers['ratelimit-policy']).toBeUndefined();
    // Retry-After on every refusal, whatever the style (here with the standard fields off).
    expect(refused?.status).toBe(429);
    expect(refused?.headers['retry-after']).toBe('1');
    const none = await start(framework, [{ rate: 1, burst: 1, clock, headers: false }]);
    const [ok, no] = await send(none, 2);
    expect(ok?.headers.ratelimit).toBeUndefined();
    expect(no?.headers['retry-after']).toBe('1');
  });

  it('X-RateLimit-Limit is the burst: what Remaining counts down from, and is back to at Reset', async () => {
    const fake = fakeClock();
    const wallClock = () => Date.parse('2026-01-01T00:00:00.000Z') + fake.clock.now();
    // 2 per 500 ms (the policy would say 4 per 1 s), and 3/s with 10 (the policy: 12 per 4 s).
    for (const [rate, burst] of [
      ['2/500ms', 2],
      [3, 10],
    ] as const) {
      const app = await start(framework, [
        { rate, burst, clock: fake.clock, wallClock, headers: 'draft-6', legacyHeaders: true },
      ]);
      const replies = await send(app, burst + 1);
      expect(replies.map((r) => r.headers['x-ratelimit-limit'])).toEqual(Array(burst + 1).fill(String(burst)));
      expect(replies.map((r) => Number(r.headers['x-ratelimit-remaining']))).toEqual([
        ...Array.from({ length: burst }, (_, i) => burst - 1 - i),
        0,
      ]);
      expect(replies[burst]?.status).toBe(429);
      // The draft fields keep the policy's quota per its window.
      expect(replies[0]?.headers['ratelimit-limit']).toBe(rate === 3 ? '12' : '4');
      // At X-RateLimit-Reset the bucket is full again: Remaining is back to Limit (less this request).
      const resetAtMs = Number(replies[burst - 1]?.headers['x-ratelimit-reset']) * 1000;
      fake.timers.tick(resetAtMs - wallClock());
      const [after] = await send(app, 1);
      expect(after?.headers['x-ratelimit-remaining']).toBe(String(burst - 1));
    }
  });

  it('older styles, stacked: the policy list grows, the single-valued fields keep the fewest remaining', async () => {
    const { clock } = fakeClock();
    const app = await start(framework, [
      { rate: 1, burst: 3, clock, headers: 'draft-6', legacyHeaders: true },
      { rate: 1, burst: 10, clock, headers: 'draft-6', legacyHeaders: true }, // more left: does not overwrite
      { rate: 1, burst: 2, clock, headers: 'draft-6', legacyHeaders: true }, // fewer left: overwrites
    ]);
    const [first] = await send(app, 1);
    expect(first?.headers).toMatchObject({
      'ratelimit-policy': '3;w=3, 10;w=10, 2;w=2',
      'ratelimit-limit': '2',
      'ratelimit-remaining': '1',
      'x-ratelimit-limit': '2',
      'x-ratelimit-remaining': '1',
    });
    const seven = await start(framework, [
      { rate: 1, burst: 3, clock, headers: 'draft-7' },
      { rate: 1, burst: 10, clock, headers: 'draft-7' },
    ]);
    const [item] = await send(seven, 1);
    expect(item?.headers['ratelimit-policy']).toBe('3;w=3, 10;w=10');
    expect(item?.headers.ratelimit).toBe('limit=3, remaining=2, reset=1');
    const sevenTighter = await start(framework, [
      { rate: 1, burst: 3, clock, headers: 'draft-7' },
      { rate: 1, burst: 2, clock, headers: 'draft-7' }, // fewer left: overwrites
    ]);
    const [tighter] = await send(sevenTighter, 1);
    expect(tighter?.headers.ratelimit).toBe('limit=2, remaining=1, reset=1');
  });
});
