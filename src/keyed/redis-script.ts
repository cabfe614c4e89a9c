/**
 * The Lua a RedisStore runs: MemoryStore's decision and refund steps over the
 * bucket arithmetic's Lua twin (src/redis/bucket-lua.ts, the steps of
 * `src/meters/bucket.ts`), for one decision or a batch of them in one atomic
 * call. It is one program (src/redis/functions.ts) with two entry points, `keyed`
 * (no global bucket) and `keyed_g` (KEYS[1] is the global bucket): a Redis
 * Function library loaded once, whose steps are defined once, or, where Redis
 * has no functions or refuses `FUNCTION LOAD`, one script per entry point.
 *
 * Redis runs a call to completion before anything else, so each decision
 * (read the key's bucket and the global one, decide, charge both or neither)
 * is atomic, and so is the batch. The steps agree with bucket.ts to the last
 * bit, so the Lua and the memory store do as long as they call the same
 * steps in the same order. Values cross as strings in `%.17g`, which
 * round-trips a double exactly.
 *
 * Time is the server's `TIME`, read once per call (luaNow, src/redis/client.ts),
 * so every instance of a fleet agrees whatever their own clocks say; the
 * reply carries TIME's two integers as Redis wrote them, and the client forms
 * the same double from them (timeMs). `ARGV[1]`, when not empty, replaces it
 * (tests and simulations on a virtual clock); keys then live at least a
 * minute of Redis's real time, whose durations are not the virtual clock's.
 *
 * A bucket is a string `"<tokens> <updatedAtMs>"` written with `SET ... PX`
 * so that it expires when it would be full again (`timeToFullMs`, counted
 * from `updatedAtMs`, plus 1 ms): an absent key is a full bucket, so an idle
 * key costs Redis nothing. A bucket written full lives that 1 ms (a
 * cost-0 decision, a refund): until then it keeps its `updatedAtMs`, as the
 * memory store does, which matters only to a clock that goes back. The global bucket
 * is read once per call and written once at its end.
 *
 * Call (every decision of a batch shares one bucket and, for `keyed_g`, one global bucket):
 * KEYS = the global bucket (`keyed_g`), then each operation's key.
 * ARGV = now-or-empty, rate, capacity, (`keyed_g`: global rate, global capacity), then per
 * operation its mode and cost and what the mode needs: `t` try, `p` peek: nothing; `r` reserve:
 * maxWaitMs (-1 = any); `c` cancel: readyAtMs, globalReadyAtMs; `a` credit: nothing.
 * Reply: one string of words separated by spaces: TIME's seconds and microseconds (`- -` on a
 * virtual clock), then per operation: allowed (1/0), tokens, ms until the key's bucket holds the
 * cost, and with a global bucket its tokens and its wait.
 */

import { bucketLua } from '../redis/bucket-lua.js';
import { luaNow } from '../redis/client.js';
import { type RedisProgram, redisProgram } from '../redis/functions.js';

const BODY = `
-- set by each call (Redis runs one call at a time)
local now, MIN_TTL, now_text
${bucketLua('fmt', 'tokens_at', 'rewind', 'delay_until', 'conforms_at', 'charge', 'refund', 'credit', 'clamp_to_capacity', 'time_to_full_ms')}

-- MemoryStore: a bucket as written (absent = full and new at now), clamped to the capacity
local function load(k, c)
  local v = redis.call('GET', k)
  if not v then return { tokens = c, upd = now } end
  local sp = string.find(v, ' ', 1, true)
  local b = { tokens = tonumber(string.sub(v, 1, sp - 1)), upd = tonumber(string.sub(v, sp + 1)) }
  clamp_to_capacity(b, c)
  -- TIME went backwards: re-count from now (bucket.ts rewind), as MemoryStore does, and keep it
  -- even on a refusal (b.rewound), so refill runs from the earlier time
  if now < b.upd then rewind(b, now); b.rewound = true end
  return b
end

-- write a bucket back; it expires when it would be full again (time_to_full_ms),
-- as seen from upd (which may be ahead of now after time went back), plus 1 ms. A full
-- bucket is written too, not deleted: it lives until just after its upd, as MemoryStore
-- keeps it, so a clock that goes back over it finds the same upd in both stores.
-- Returns the tokens as written (fmt), which the reply reuses. upd is almost always now,
-- written once per call.
local function store(k, b, r, c)
  local ttl = math.ceil(time_to_full_ms(b.tokens, r, c))
  if ttl < MIN_TTL then ttl = MIN_TTL end
  if ttl > 1e15 then ttl = 1e15 end -- an integer Redis accepts, and 31,000 years
  local tokens = fmt(b.tokens)
  local upd
  if b.upd == now then
    if not now_text then now_text = fmt(now) end
    upd = now_text
  else
    upd = fmt(b.upd)
  end
  redis.call('SET', k, tokens .. ' ' .. upd, 'PX', ttl + math.ceil(b.upd - now) + 1)
  return tokens
end

local function keyed(KEYS, ARGV, has_g)
  ${luaNow(1, { declare: false, parts: true })}
  now_text = nil
  MIN_TTL = 0
  if ARGV[1] ~= '' then MIN_TTL = 60000 end
  local rate = tonumber(ARGV[2])
  local cap = tonumber(ARGV[3])
  local out = { now_sec, now_usec }
  local o = 2 -- #out, kept by hand (the length operator searches)
  local ki = 1
  local a = 4
  local g, grate, gcap
  local g_dirty = false
  if has_g then
    grate = tonumber(ARGV[4])
    gcap = tonumber(ARGV[5])
    ki = 2
    a = 6
    g = load(KEYS[1], gcap)
    g_dirty = g.rewound == true
  end
  local k = KEYS[ki]
  while k do
    ki = ki + 1
    local mode = ARGV[a]
    local cost = tonumber(ARGV[a + 1])
    a = a + 2
    local b = load(k, cap)
    if mode == 'c' or mode == 'a' then
      -- MemoryStore.refundAt (c) and creditAt (a)
      if mode == 'c' then refund(b, rate, cap, now, cost, tonumber(ARGV[a])) else credit(b, rate, cap, now, cost) end
      local tokens = store(k, b, rate, cap)
      if has_g then
        if mode == 'c' then refund(g, grate, gcap, now, cost, tonumber(ARGV[a + 1])) else credit(g, grate, gcap, now, cost) end
        g_dirty = true
      end
      if mode == 'c' then a = a + 2 end
      o = o + 1; out[o] = '1'
      o = o + 1; out[o] = tokens
      o = o + 1; out[o] = '0'
      if has_g then
        o = o + 1; out[o] = fmt(g.tokens)
        o = o + 1; out[o] = '0'
      end
    else
      -- MemoryStore.decideAt: ask when (delay_until) on the state as written, then charge
      local kwait = delay_until(b, rate, cap, now, cost)
      local wait = kwait
      local gwait = 0
      if has_g then
        gwait = delay_until(g, grate, gcap, now, cost)
        if gwait > wait then wait = gwait end
      end
      local allowed
      if mode == 'r' then
        local maxwait = tonumber(ARGV[a])
        a = a + 1
        allowed = maxwait < 0 or wait <= maxwait
          or (conforms_at(b, rate, cap, now + maxwait, cost)
            and (not has_g or conforms_at(g, grate, gcap, now + maxwait, cost)))
      else
        allowed = wait == 0
      end
      local tokens, gtokens
      if allowed and mode ~= 'p' then
        charge(b, rate, cap, now, cost)
        tokens = store(k, b, rate, cap)
        if has_g then
          charge(g, grate, gcap, now, cost)
          gtokens = g.tokens
          g_dirty = true
        end
      else
        tokens = fmt(tokens_at(b, rate, cap, now))
        if b.rewound then store(k, b, rate, cap) end
        if has_g then gtokens = tokens_at(g, grate, gcap, now) end
      end
      o = o + 1; out[o] = allowed and '1' or '0'
      o = o + 1; out[o] = tokens
      o = o + 1; out[o] = fmt(kwait)
      if has_g then
        o = o + 1; out[o] = fmt(gtokens)
        o = o + 1; out[o] = fmt(gwait)
      end
    end
    k = KEYS[ki]
  end
  if g_dirty then store(KEYS[1], g, grate, gcap) end
  return table.concat(out, ' ')
end
`;

/** The keyed store's Lua: entry `keyed` without a global bucket, `keyed_g` with one. */
export const KEYED_PROGRAM: RedisProgram<'keyed' | 'keyed_g'> = redisProgram('tokenpace_keyed', BODY, {
  keyed: 'keyed(KEYS, ARGV, false)',
  keyed_g: 'keyed(KEYS, ARGV, true)',
});
