/**
 * What an origin says is left of its quota, read from every header style (ours, emitted by
 * rateLimit on a real server, and the common others) and spent by the adaptive interceptor: a
 * quota shared with another client is held back before the origin refuses.
 */

import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { quotaLeft } from '../../src/http/headers.js';
import { ServerBudget } from '../../src/http/server-budget.js';
import { rateLimit, throttleInterceptor } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { tally, windowServer } from './adaptive-server.js';
import { agent, call, type Loopback, serve } from './support.js';

const closing: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((c) => c.close()));
});

describe('quotaLeft', () => {
  const wall = Date.parse('2026-12-01T12:00:00Z');
  it.each([
    ['RateLimit, draft 8-11', { ratelimit: '"p";r=5;t=2' }, { remaining: 5, resetMs: 2000 }],
    ['the most exhausted item', { ratelimit: '"a";r=9;t=60, "b";r=2;t=1' }, { remaining: 2, resetMs: 1000 }],
    ['no t', { ratelimit: 'p;r=3' }, { remaining: 3, resetMs: undefined }],
    ['draft 7, one field', { ratelimit: 'limit=40, remaining=7, reset=3' }, { remaining: 7, resetMs: 3000 }],
    ['draft 7, any order, no reset', { ratelimit: 'remaining=2,limit=10' }, { remaining: 2, resetMs: undefined }],
    [
      'a malformed RateLimit, then the older pair',
      { ratelimit: 'limit=40, remaining=x', 'x-ratelimit-remaining': '3' },
      { remaining: 3, resetMs: undefined },
    ],
    ['draft 6', { 'ratelimit-remaining': '4', 'ratelimit-reset': '9' }, { remaining: 4, resetMs: 9000 }],
    [
      'X-RateLimit, seconds',
      { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '30' },
      { remaining: 0, resetMs: 30_000 },
    ],
    [
      'X-RateLimit, a Unix time against Date',
      {
        'x-ratelimit-remaining': '1',
        'x-ratelimit-reset': String((wall + 90_000) / 1000),
        date: new Date(wall + 30_000).toUTCString(),
      },
      { remaining: 1, resetMs: 60_000 },
    ],
    [
      'X-RateLimit, a Unix time in ms, no Date',
      { 'x-ratelimit-remaining': '2', 'x-ratelimit-reset': String(wall + 1500) },
      { remaining: 2, resetMs: 1500 },
    ],
    [
      'a reset in the past',
      { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(wall / 1000 - 5) },
      { remaining: 0, resetMs: 0 },
    ],
  ] as const)('%s', (_name, headers, expected) => {
    expect(quotaLeft(headers, wall)).toEqual(expected);
  });

  it('says nothing for no quota, or a malformed one', () => {
    expect(quotaLeft({}, wall)).toBeUndefined();
    expect(quotaLeft({ 'x-ratelimit-remaining': 'lots' }, wall)).toBeUndefined();
    expect(quotaLeft({ ratelimit: 'p;r=-1;t=2' }, wall)).toBeUndefined();
    expect(quotaLeft({ 'ratelimit-reset': '5' }, wall)).toBeUndefined();
  });

  it.each([
    ['draft-11', {}],
    ['draft-8', {}],
    ['draft-7', {}],
    ['draft-6', {}],
    ['draft-11', { legacyHeaders: true }],
  ] as const)('reads what rateLimit sends in %s %o, on a real server', async (style, extra) => {
    const fake = fakeClock(Date.parse('2026-12-01T12:00:00Z'));
    const server = await serve(rateLimit({ rate: 1, burst: 3, headers: style, clock: fake.clock, ...extra }));
    const client = agent();
    closing.push(server, client);
    const seen: Array<ReturnType<typeof quotaLeft>> = [];
    for (let i = 0; i < 4; i++) {
      const reply = await call(server.url, { dispatcher: client });
      const headers = { ...reply.headers };
      if ('legacyHeaders' in extra) {
        for (const name of Object.keys(headers)) if (!name.startsWith('x-') && name !== 'date') delete headers[name];
      }
      seen.push(quotaLeft(headers, fake.clock.now()));
    }
    expect(seen.map((q) => q?.remaining)).toEqual([2, 1, 0, 0]);
    // The fourth was refused: nothing is left until a token is there again, in 1 s (rounded up).
    expect(seen[3]?.resetMs).toBeGreaterThan(0);
    expect(seen[3]?.resetMs).toBeLessThanOrEqual(2000);
  });
});

describe('ServerBudget', () => {
  const all = Number.POSITIVE_INFINITY;
  it('holds once what is left is spent, until the reset, counting requests sent after the answered one', () => {
    const budget = new ServerBudget();
    const a = budget.sent(0, all);
    const b = budget.sent(0, all);
    expect([a.holdMs, b.holdMs]).toEqual([0, 0]);
    // a's answer: 2 left for 1 s; b, sent after a, was not counted in it: 1 may go.
    expect(
      budget.answered({
        seq: a.seq,
        nowMs: 100,
        statusCode: 200,
        quota: { remaining: 2, resetMs: 1000 },
        localLeft: all,
      }),
    ).toBe(0);
    expect(budget.leftAt(100)).toBe(1);
    const c = budget.sent(150, all);
    expect(c.holdMs).toBe(950); // the last one: hold until the reset at 1100
    expect(budget.leftAt(1100)).toBe(all); // past the reset it says nothing
  });

  it('ignores a stale answer (to a request sent before the one that set it)', () => {
    const budget = new ServerBudget();
    const a = budget.sent(0, all);
    const b = budget.sent(0, all);
    expect(
      budget.answered({ seq: b.seq, nowMs: 10, statusCode: 200, quota: { remaining: 0, resetMs: 500 }, localLeft: 5 }),
    ).toBe(500);
    expect(
      budget.answered({ seq: a.seq, nowMs: 20, statusCode: 200, quota: { remaining: 9, resetMs: 500 }, localLeft: 5 }),
    ).toBe(0);
    expect(budget.leftAt(20)).toBe(0);
  });

  it('holds only where its own window lets more start than the origin says is left', () => {
    const budget = new ServerBudget();
    const a = budget.sent(0, 0);
    expect(
      budget.answered({ seq: a.seq, nowMs: 10, statusCode: 200, quota: { remaining: 0, resetMs: 1000 }, localLeft: 0 }),
    ).toBe(0);
    expect(
      budget.answered({
        seq: budget.sent(20, 0).seq,
        nowMs: 30,
        statusCode: 200,
        quota: { remaining: 0, resetMs: 1000 },
        localLeft: 3,
      }),
    ).toBe(1000);
  });

  it('takes the advertised window as the reset when the answer gives none, else says nothing', () => {
    const budget = new ServerBudget();
    const a = budget.sent(0, all);
    expect(
      budget.answered({
        seq: a.seq,
        nowMs: 0,
        statusCode: 200,
        quota: { remaining: 0, resetMs: undefined },
        localLeft: 1,
      }),
    ).toBe(0);
    const b = budget.sent(0, 1);
    expect(
      budget.answered({
        seq: b.seq,
        nowMs: 10,
        statusCode: 200,
        quota: { remaining: 0, resetMs: undefined },
        fallbackResetMs: 2000,
        localLeft: 1,
      }),
    ).toBe(2000);
  });
});

/**
 * A client that is not ours: `n` requests with plain undici at the start of each of the origin's
 * fixed windows (a batch job on the same API key), from `startMs` every `windowMs`.
 */
function otherClient(server: Loopback, n: number, startMs: number, windowMs: number): { stop(): Promise<void> } {
  const dispatcher = new Agent();
  let timer: NodeJS.Timeout | undefined;
  const burst = () => {
    for (let i = 0; i < n; i++) {
      request(server.url, { dispatcher })
        .then((r) => r.body.text())
        .catch(() => {});
    }
    const next = startMs + Math.ceil((performance.now() - startMs + 1) / windowMs) * windowMs + 5;
    timer = setTimeout(burst, next - performance.now());
  };
  burst();
  return {
    stop: async () => {
      clearTimeout(timer);
      await dispatcher.close();
    },
  };
}

describe('throttleInterceptor adaptive: a quota shared with another client', () => {
  it('spends what the origin says is left: few 429s, where pacing to the whole quota draws many', async () => {
    const run = async (adaptive: boolean) => {
      const startMs = performance.now();
      const server = await windowServer({ limit: 30, windowMs: 2000, advertise: true, fixed: true });
      const interceptor = adaptive
        ? throttleInterceptor({ adaptive: { initial: 15 }, concurrency: 4 })
        : throttleInterceptor({ limit: 30, window: '2s', concurrency: 4 });
      const dispatcher = new Agent({ connections: 16 }).compose(interceptor);
      const other = otherClient(server, 10, startMs, 2000); // a third of each window's quota, first
      const ours: number[] = [];
      const t0 = performance.now();
      const end = t0 + 6000;
      const caller = async () => {
        while (performance.now() < end) {
          const response = await request(server.url, { dispatcher });
          await response.body.text();
          ours.push(response.statusCode);
        }
      };
      await Promise.all(Array.from({ length: 8 }, caller));
      await other.stop();
      await dispatcher.close();
      await server.close();
      const refused = ours.filter((s) => s === 429).length;
      const all = tally(server.answers, t0, end);
      return { share: refused / ours.length, ok: ours.length - refused, total: all.total, allRefused: all.refused };
    };
    const fixed = await run(false);
    const spent = await run(true);
    console.log(
      `shared quota (30 per 2 s, fixed windows, another client taking 10 first in each), 6 s: pacing to the quota ${fixed.ok} ok, ` +
        `${(fixed.share * 100).toFixed(1)} % 429; adaptive spending what is left ${spent.ok} ok, ${(spent.share * 100).toFixed(1)} % 429`,
    );
    expect(fixed.share).toBeGreaterThan(0.1);
    expect(spent.share).toBeLessThan(0.05);
    // It still gets a real share of the quota: 3 windows of 30, a third of which the other client takes.
    expect(spent.ok).toBeGreaterThanOrEqual(25);
  }, 30_000);
});
