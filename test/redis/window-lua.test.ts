/**
 * The Lua twin of the window counters (src/redis/window-lua.ts) held to
 * src/meters/windows.ts on a real redis-server, as the bucket's twin is held
 * to bucket.ts (./bucket-lua.test.ts): every row of the window tables
 * (test/meters/window-cases.ts), and random calls of both steps, run through
 * `EVAL` of a harness (the Lua steps, and a dispatcher that makes one call
 * per row and answers with the decision and the state after), and must give
 * windows.ts's answers exactly, state included. The tables' own answers are
 * checked against windows.ts here too, so each row is right, not only agreed on.
 */

import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  type FixedWindowState,
  fixedWindowTake,
  type SlidingCounterState,
  slidingCounterTake,
} from '../../src/meters/windows.js';
import { fromLua, LUA_FMT } from '../../src/redis/lua-script.js';
import { WINDOW_STEPS } from '../../src/redis/window-lua.js';
import { fixedWindowCases, slidingCounterCases, type WindowCall, windowTableCalls } from '../meters/window-cases.js';

/** An answer: the decision's four fields, then the state after the call. */
interface Answer {
  decision: [boolean, number, number, number];
  state: number[];
}

/** windows.ts's step for a call, on a copy of its state. */
function runTs(c: WindowCall): Answer {
  if (c.kind === 'fixed') {
    const s: FixedWindowState = { windowStartMs: n(c.state[0]), count: n(c.state[1]) };
    const d = fixedWindowTake(s, c.params, c.nowMs, c.cost);
    return { decision: [d.allowed, d.remaining, d.retryAfterMs, d.resetAfterMs], state: [s.windowStartMs, s.count] };
  }
  const s: SlidingCounterState = { windowStartMs: n(c.state[0]), previous: n(c.state[1]), current: n(c.state[2]) };
  const d = slidingCounterTake(s, c.params, c.nowMs, c.cost);
  return {
    decision: [d.allowed, d.remaining, d.retryAfterMs, d.resetAfterMs],
    state: [s.windowStartMs, s.previous, s.current],
  };
}

function n(x: number | undefined): number {
  if (x === undefined) throw new Error('a window call is missing a state field');
  return x;
}

/** The steps, then a dispatcher: ARGV per call is kind, limit, windowMs, the state's three numbers, now, cost. */
const HARNESS = `
${LUA_FMT}
${WINDOW_STEPS}
local function num(s)
  if s == 'inf' then return math.huge elseif s == '-inf' then return -math.huge end
  return tonumber(s)
end
local out = {}
for i = 1, #ARGV, 8 do
  local limit, w, at, cost = num(ARGV[i + 1]), num(ARGV[i + 2]), num(ARGV[i + 6]), num(ARGV[i + 7])
  local s, allowed, remaining, retry_after, reset_after, x, y
  if ARGV[i] == 'fixed' then
    s = { start = num(ARGV[i + 3]), count = num(ARGV[i + 4]) }
    allowed, remaining, retry_after, reset_after = fixed_window_take(s, limit, w, at, cost)
    x, y = s.count, 0
  else
    s = { start = num(ARGV[i + 3]), previous = num(ARGV[i + 4]), current = num(ARGV[i + 5]) }
    allowed, remaining, retry_after, reset_after = sliding_counter_take(s, limit, w, at, cost)
    x, y = s.previous, s.current
  end
  for _, v in ipairs({ allowed and 1 or 0, remaining, retry_after, reset_after, s.start, x, y }) do
    out[#out + 1] = fmt(v)
  end
end
return out
`;

/** A double as a string Lua's num reads back exactly (-0 kept). */
function str(x: number): string {
  if (x === Number.POSITIVE_INFINITY) return 'inf';
  if (x === Number.NEGATIVE_INFINITY) return '-inf';
  return Object.is(x, -0) ? '-0' : String(x);
}

const client = new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
afterAll(() => client.disconnect());

async function runLua(calls: readonly WindowCall[]): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let from = 0; from < calls.length; from += 200) {
    const batch = calls.slice(from, from + 200);
    const args = batch.flatMap((c) => [
      c.kind,
      str(c.params.limit),
      str(c.params.windowMs),
      str(n(c.state[0])),
      str(n(c.state[1])),
      str(c.state[2] ?? 0),
      str(c.nowMs),
      str(c.cost),
    ]);
    const reply = ((await client.eval(HARNESS, 0, ...args)) as string[]).map((word) => {
      const x = fromLua(word);
      if (x === undefined) throw new Error(`not a number from the harness: ${JSON.stringify(word)}`);
      return x;
    });
    for (let i = 0; i < batch.length; i++) {
      const [allowed, remaining, retry, reset, start, x, y] = reply.slice(7 * i, 7 * i + 7) as number[];
      const kind = (batch[i] as WindowCall).kind;
      answers.push({
        decision: [allowed === 1, n(remaining), n(retry), n(reset)],
        state: kind === 'fixed' ? [n(start), n(x)] : [n(start), n(x), n(y)],
      });
    }
  }
  return answers;
}

/** Each call's Lua answer is windows.ts's, bit for bit (toEqual compares numbers with Object.is). */
async function expectSame(calls: readonly WindowCall[]): Promise<void> {
  const lua = await runLua(calls);
  for (const [i, c] of calls.entries()) {
    expect({ call: c, answer: lua[i] }).toEqual({ call: c, answer: runTs(c) });
  }
}

describe('the Lua twin of windows.ts', () => {
  it('windows.ts answers every row of the tables as the row says', () => {
    for (const [[limit, windowMs], state, nowMs, cost, decision, after] of fixedWindowCases) {
      const answer = runTs({ kind: 'fixed', params: { limit, windowMs }, state, nowMs, cost });
      expect({ row: [limit, windowMs, state, nowMs, cost], answer }).toEqual({
        row: [limit, windowMs, state, nowMs, cost],
        answer: { decision, state: after },
      });
    }
    for (const [[limit, windowMs], state, nowMs, cost, decision, after] of slidingCounterCases) {
      const answer = runTs({ kind: 'counter', params: { limit, windowMs }, state, nowMs, cost });
      expect({ row: [limit, windowMs, state, nowMs, cost], answer }).toEqual({
        row: [limit, windowMs, state, nowMs, cost],
        answer: { decision, state: after },
      });
    }
  });

  it('answers every row of the tables exactly as windows.ts does', async () => {
    const calls = windowTableCalls();
    expect(calls.length).toBeGreaterThan(25);
    await expectSame(calls);
  });

  const callArb: fc.Arbitrary<WindowCall> = fc
    .tuple(
      fc.constantFrom<'fixed' | 'counter'>('fixed', 'counter'),
      fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.double({ min: 0.5, max: 1e6, noNaN: true })),
      fc.oneof(fc.constantFrom(1, 7, 1000, 60_000), fc.double({ min: 0.01, max: 1e7, noNaN: true })),
      fc.oneof(fc.constant(Number.NEGATIVE_INFINITY), fc.integer({ min: 0, max: 20 })), // the window's index
      fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 4, maxLength: 4 }),
      fc.double({ min: 0, max: 1.7e12, noNaN: true, noDefaultInfinity: true }),
    )
    .map(([kind, limit, windowMs, index, [a, b, t, c], base]): WindowCall => {
      // a window start aligned to the window, at or near the call's time, and counts up to the limit
      const start = Math.floor(base / windowMs) * windowMs;
      const windowStartMs = index === Number.NEGATIVE_INFINITY ? index : start + (index - 10) * windowMs;
      const nowMs = Math.max(0, start + (n(t) * 4 - 1) * windowMs); // a window before to three after
      const state = kind === 'fixed' ? [windowStartMs, n(a) * limit] : [windowStartMs, n(a) * limit, n(b) * limit];
      return { kind, params: { limit, windowMs }, state, nowMs, cost: n(c) * limit };
    });

  it('answers random calls of both steps exactly as windows.ts does', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(callArb, { minLength: 50, maxLength: 200 }), (calls) => expectSame(calls)),
      { numRuns: 40 },
    );
  });
});
