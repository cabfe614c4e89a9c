/**
 * The Lua twin of the bucket arithmetic (src/redis/bucket-lua.ts) held to
 * bucket.ts on a real redis-server: every row of bucket.ts's test tables
 * (test/meters/bucket-cases.ts), and random calls of every step, are run
 * through `EVAL` of a harness (every Lua step, and a dispatcher that calls
 * one step per call and answers with its value and the bucket's state), and
 * must give bucket.ts's answers exactly: the same doubles, sign of zero
 * included. Numbers go in as JavaScript's shortest round-trip strings and come
 * back as the stores' replies do (src/redis/lua-script.ts: `fmt`, `fromLua`),
 * both exact, so no ulp is lost in transit.
 */

import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import * as bucket from '../../src/meters/bucket.js';
import { BUCKET_LUA_STEPS, bucketLua } from '../../src/redis/bucket-lua.js';
import { fromLua, LUA_FMT } from '../../src/redis/lua-script.js';
import {
  NOT_STEPS,
  type StepCall,
  type StepResult,
  stepCallArb,
  TS_STEPS,
  tableCalls,
} from '../meters/bucket-cases.js';

/** bucket.ts's exports that are not arithmetic (validation, limits, the objects that hold a bucket): no Lua twin. */

/** Every Lua step, then a dispatcher: ARGV per call is step, number of args, tokens, upd, rate, capacity, args. */
const HARNESS = `
${LUA_FMT}
${bucketLua(...BUCKET_LUA_STEPS)}

local function num(s)
  if s == 'inf' then return math.huge elseif s == '-inf' then return -math.huge end
  return tonumber(s)
end
local function out_num(x)
  if x ~= x then return 'nan' end
  return fmt(x)
end
local steps = {
  slackFor = function(b, r, c, a) return slack_for(c) end,
  conforms = function(b, r, c, a) return conforms(a[1], a[2], c) end,
  largestConforming = function(b, r, c, a) return largest_conforming(a[1], c) end,
  tokensAt = function(b, r, c, a) return tokens_at(b, r, c, a[1]) end,
  advance = function(b, r, c, a) advance(b, r, c, a[1]) end,
  rewind = function(b, r, c, a) rewind(b, a[1]) end,
  msUntil = function(b, r, c, a) return ms_until(a[1], a[2], r, c) end,
  msUntilWithin = function(b, r, c, a) return ms_until_within(a[1], a[2], r, c, a[3]) end,
  readyAt = function(b, r, c, a) return ready_at(b, r, c, a[1]) end,
  delayUntil = function(b, r, c, a) return delay_until(b, r, c, a[1], a[2]) end,
  charge = function(b, r, c, a) charge(b, r, c, a[1], a[2]) end,
  chargeNew = function(b, r, c, a) return charge_new(c, a[1]) end,
  tryCharge = function(b, r, c, a) return try_charge(b, r, c, a[1], a[2]) end,
  refund = function(b, r, c, a) return refund(b, r, c, a[1], a[2], a[3]) end,
  credit = function(b, r, c, a) return credit(b, r, c, a[1], a[2]) end,
  rebill = function(b, r, c, a) rebill(b, r, c, a[1], a[2]) end,
  reconfigure = function(b, r, c, a) reconfigure(b, r, c, a[1], a[3]) end,
  clampToCapacity = function(b, r, c, a) clamp_to_capacity(b, c) end,
  conformsAt = function(b, r, c, a) return conforms_at(b, r, c, a[1], a[2]) end,
  timeToFullMs = function(b, r, c, a) return time_to_full_ms(a[1], r, c) end,
  startAt = function(b, r, c, a) return start_at(b, r, c, a[1], a[2], a[3], a[4]) end,
}
local out = {}
local i = 1
while i <= #ARGV do
  local nargs = tonumber(ARGV[i + 1])
  local b = { tokens = num(ARGV[i + 2]), upd = num(ARGV[i + 3]) }
  local r, c = num(ARGV[i + 4]), num(ARGV[i + 5])
  local a = {}
  for j = 1, nargs do a[j] = num(ARGV[i + 5 + j]) end
  local v = steps[ARGV[i]](b, r, c, a)
  if v == nil then out[#out + 1] = '' elseif v == true then out[#out + 1] = '1'
  elseif v == false then out[#out + 1] = '0' else out[#out + 1] = out_num(v) end
  out[#out + 1] = out_num(b.tokens)
  out[#out + 1] = out_num(b.upd)
  i = i + 6 + nargs
end
return out
`;

/** A double as a string Lua's tonumber reads back exactly (-0 kept). */
function str(x: number): string {
  if (x === Number.POSITIVE_INFINITY) return 'inf';
  if (x === Number.NEGATIVE_INFINITY) return '-inf';
  return Object.is(x, -0) ? '-0' : String(x);
}

function parse(s: string): number {
  const n = fromLua(s);
  if (n !== undefined) return n;
  if (s === 'nan') return Number.NaN;
  throw new Error(`not a number from the harness: ${JSON.stringify(s)}`);
}

interface Answer {
  value: StepResult;
  tokens: number;
  updatedAtMs: number;
}

function runTs(c: StepCall): Answer {
  const s = { tokens: c.state[0], updatedAtMs: c.state[1] };
  const value = TS_STEPS[c.step](s, c.params, c.args);
  return { value, tokens: s.tokens, updatedAtMs: s.updatedAtMs };
}

const client = new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
afterAll(() => client.disconnect());

/** The calls through the Lua harness, in batches of one EVAL each. */
async function runLua(calls: readonly StepCall[]): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let from = 0; from < calls.length; from += 200) {
    const batch = calls.slice(from, from + 200);
    const args = batch.flatMap((c) => [
      c.step,
      String(c.args.length),
      str(c.state[0]),
      str(c.state[1]),
      str(c.params.ratePerSecond),
      str(c.params.burst),
      ...c.args.map(str),
    ]);
    const reply = (await client.eval(HARNESS, 0, ...args)) as string[];
    for (let i = 0; i < batch.length; i++) {
      const [v, tokens, upd] = reply.slice(3 * i, 3 * i + 3) as [string, string, string];
      const value =
        v === '' ? undefined : typeof runTs(batch[i] as StepCall).value === 'boolean' ? v === '1' : parse(v);
      answers.push({ value, tokens: parse(tokens), updatedAtMs: parse(upd) });
    }
  }
  return answers;
}

/** Each call's Lua answer is bucket.ts's, bit for bit (toEqual compares numbers with Object.is). */
async function expectSame(calls: readonly StepCall[]): Promise<void> {
  const lua = await runLua(calls);
  for (const [i, c] of calls.entries()) {
    expect({ call: c, answer: lua[i] }).toEqual({ call: c, answer: runTs(c) });
  }
}

describe('the Lua twin of bucket.ts', () => {
  it('has a step for every step of bucket.ts, and the harness calls each', () => {
    const exported = Object.keys(bucket).filter((name) => !NOT_STEPS.includes(name));
    // A new step in bucket.ts needs its twin in src/redis/bucket-lua.ts, a StepName, and a table row.
    expect(exported.sort()).toEqual(Object.keys(TS_STEPS).sort());
    expect(new Set(tableCalls().map((c) => c.step))).toEqual(new Set(Object.keys(TS_STEPS)));
    for (const name of Object.keys(TS_STEPS)) {
      expect(BUCKET_LUA_STEPS).toContain(name.replace(/[A-Z]/g, (ch) => `_${ch.toLowerCase()}`));
    }
  });

  it("answers every row of bucket.ts's tables exactly as bucket.ts does", async () => {
    const calls = tableCalls();
    expect(calls.length).toBeGreaterThan(100);
    await expectSame(calls);
  });

  const callArb = stepCallArb();

  it('answers random calls of every step exactly as bucket.ts does', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(callArb, { minLength: 50, maxLength: 200 }), (calls) => expectSame(calls)),
      { numRuns: 40 },
    );
  });
});
