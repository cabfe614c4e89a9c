/**
 * The Lua script a RedisStore runs: MemoryStore's decision and refund
 * steps over the bucket arithmetic's Lua twin (src/redis/bucket-lua.ts, the
 * steps of `src/meters/bucket.ts`), for a batch of decisions in one atomic
 * call.
 *
 * Redis runs a script to completion before anything else, so each decision
 * (read the key's bucket and the global one, decide, charge both or neither)
 * is atomic, and so is the batch. The steps agree with bucket.ts to the last
 * bit, so the script and the memory store do as long as they call the same
 * steps in the same order. Values cross as strings in `%.17g`, which
 * round-trips a double exactly.
 *
 * Time is the server's `TIME` (microseconds), read once per call, so every
 * instance of a fleet agrees whatever their own clocks say. `ARGV[2]`, when
 * not empty, replaces it (tests and simulations on a virtual clock).
 *
 * A bucket is a string `"<tokens> <updatedAtMs>"` written with `SET ... PX`
 * so that it expires when it would be full again (`timeToFullMs`, counted
 * from `updatedAtMs`, plus 1 ms): an absent key is a full bucket, so an idle
 * key costs Redis nothing. A bucket written full lives that 1 ms (a
 * cost-0 decision, a refund): until then it keeps its `updatedAtMs`, as the
 * memory store does, which matters only to a clock that goes back. The global bucket
 * is read once per call and written once at its end.
 *
 * Call (every decision of a batch shares one bucket and one global bucket):
 * KEYS = the global bucket (if any), then each operation's key.
 * ARGV = n, now-or-empty, least TTL in ms (0 with Redis's own time; with a
 * virtual clock, whose durations are not Redis's, a minute), rate, capacity,
 * global rate (empty = none), global capacity, then per operation its mode and
 * cost and what the mode needs: `t` try, `p` peek: nothing; `r` reserve:
 * maxWaitMs (-1 = any); `c` cancel: readyAtMs, globalReadyAtMs; `a` credit: nothing.
 * Reply: nowMs, then per operation: allowed (1/0), tokens, ms until the key's
 * bucket holds the cost, and with a global bucket its tokens and its wait.
 */

import { bucketLua } from '../redis/bucket-lua.js';
import { luaNow } from '../redis/client.js';

export const KEYED_SCRIPT = `
local n = tonumber(ARGV[1])
${luaNow(2)}
local MIN_TTL = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cap = tonumber(ARGV[5])
local has_g = ARGV[6] ~= ''
local grate, gcap
if has_g then
  grate = tonumber(ARGV[6])
  gcap = tonumber(ARGV[7])
end
${bucketLua('fmt', 'tokens_at', 'rewind', 'delay_until', 'conforms_at', 'charge', 'refund', 'credit', 'clamp_to_capacity', 'time_to_full_ms')}

-- MemoryStore: a bucket as written (absent = full and new at now), clamped to the capacity
local function load(k, r, c)
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
-- Returns the tokens as written (fmt), which the reply reuses.
local function store(k, b, r, c)
  local ttl = math.ceil(time_to_full_ms(b.tokens, r, c))
  if ttl < MIN_TTL then ttl = MIN_TTL end
  if ttl > 1e15 then ttl = 1e15 end -- an integer Redis accepts, and 31,000 years
  local tokens = fmt(b.tokens)
  redis.call('SET', k, tokens .. ' ' .. fmt(b.upd), 'PX', ttl + math.ceil(b.upd - now) + 1)
  return tokens
end

local out = { fmt(now) }
local o = 1 -- #out, kept by hand (the length operator searches)
local ki = 1
local g
local g_dirty = false
if has_g then
  ki = 2
  g = load(KEYS[1], grate, gcap)
  g_dirty = g.rewound == true
end
local a = 8
for i = 1, n do
  local mode = ARGV[a]
  local cost = tonumber(ARGV[a + 1])
  a = a + 2
  local k = KEYS[ki]
  ki = ki + 1
  local b = load(k, rate, cap)
  if mode == 'c' or mode == 'a' then
    -- MemoryStore.refundAt (c) and creditAt (a)
    if mode == 'c' then refund(b, rate, cap, now, cost, tonumber(ARGV[a])) else credit(b, rate, cap, now, cost) end
    store(k, b, rate, cap)
    if has_g then
      if mode == 'c' then refund(g, grate, gcap, now, cost, tonumber(ARGV[a + 1])) else credit(g, grate, gcap, now, cost) end
      g_dirty = true
    end
    if mode == 'c' then a = a + 2 end
    o = o + 1; out[o] = '1'
    o = o + 1; out[o] = fmt(b.tokens)
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
end
if g_dirty then store(KEYS[1], g, grate, gcap) end
return out
`;
