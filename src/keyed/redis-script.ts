/**
 * The Lua a RedisStore runs (through src/redis/lua-script.ts): MemoryStore's
 * decision and refund steps over the bucket arithmetic's Lua twin
 * (src/redis/bucket-lua.ts, the steps of src/meters/bucket.ts), for one
 * decision or a batch of them in one atomic call.
 *
 * Redis runs a call to completion before anything else, so each decision
 * (read the key's bucket and the global one, decide, charge both or neither)
 * is atomic, and so is the batch. The steps agree with bucket.ts to the last
 * bit, so the Lua and the memory store do as long as they call the same
 * steps in the same order.
 *
 * A bucket is 24 bytes, its tokens, its updatedAtMs and the key's expiry as
 * three little-endian doubles (`struct.pack('<ddd')`: exact), written so that
 * it expires no sooner than when it would be full again (`time_to_full_ms`,
 * plus 1 ms) and at most half as long again (`store` below): an absent key
 * is a full bucket, so an idle key costs Redis nothing. The global bucket is
 * read once per call and written once at its end.
 *
 * Call (every decision of a batch shares one bucket and, with a global bucket, that one):
 * KEYS = the global bucket (when there is one), then each operation's key.
 * ARGV = (1: the time, lua-script.ts), 2: `rate:capacity`, 3: the global bucket's `rate:capacity`
 * or empty, then per operation its mode and cost as one word (`t1`: mode `t`, cost 1) and what the
 * mode needs: `t` try, `p` peek, `a` credit: nothing; `r` reserve: maxWaitMs (-1 = any); `c`
 * cancel: readyAtMs, globalReadyAtMs.
 * Reply: now, then per operation: allowed (1/0), tokens, ms until the key's bucket holds the cost,
 * and with a global bucket its tokens and its wait; or, for a try refused without a global bucket,
 * 2 and the bucket's tokens and updatedAtMs as the decision saw it, from which the client works out
 * the tokens and the wait with bucket.ts's `tokensAt` and `delayUntil` (the same steps as the Lua's:
 * a refusal's wait is a search, the dearest step of a decision, and it runs in the caller's process,
 * not in the one Redis every instance shares).
 */

import { bucketLua } from '../redis/bucket-lua.js';

/** The keyed store's Lua, after the prelude of src/redis/lua-script.ts. */
export const KEYED_LUA = `
${bucketLua('tokens_at', 'rewind', 'delay_until', 'conforms_at', 'charge', 'try_charge', 'refund', 'credit', 'clamp_to_capacity', 'time_to_full_ms')}

-- on a virtual clock, keys live at least a minute of Redis's own time, whose durations are not the clock's
local virtual = ARGV[1] ~= ''

-- 'rate:capacity' as two numbers
local function params(text)
  local i = string.find(text, ':', 1, true)
  return tonumber(string.sub(text, 1, i - 1)), tonumber(string.sub(text, i + 1))
end

-- MemoryStore's read of a bucket: absent = full and new at now; clamped to the capacity c; a TIME
-- earlier than its update re-counts from now (bucket.ts rewind), and then the bucket is written back
-- even when the decision charges nothing (rewound), as MemoryStore keeps it
local function load(k, c)
  local v = redis.call('GET', k)
  if not v then return { tokens = c, upd = now, exp = 0, rewound = false } end
  local b = {}
  b.tokens, b.upd, b.exp = struct.unpack('<ddd', v)
  clamp_to_capacity(b, c)
  b.rewound = now < b.upd
  rewind(b, now)
  return b
end

-- Writes a bucket back. It must not expire before it would be full again (time_to_full_ms, as seen
-- from its upd, plus 1 ms). On Redis's time the key keeps the expiry it has (KEEPTTL) while that is
-- late enough; a new one is half as long again as needed, so a key a steady flow keeps draining
-- gets a new expiry about every capacity / 2 of cost, and its time (exp, a lower bound: Redis counts
-- PX from its clock's whole ms) is stored with the bucket. On a virtual clock every write sets the
-- expiry, of at least a minute. A full bucket is written too, not deleted: it lives until just after
-- its upd, as MemoryStore keeps it, so a clock that goes back over it finds the same upd in both.
local function store(k, b, r, c)
  local ttl = math.ceil(time_to_full_ms(b.tokens, r, c))
  if ttl > 1e15 then ttl = 1e15 end -- an integer Redis accepts (31,000 years)
  ttl = ttl + math.ceil(b.upd - now) + 1
  if virtual then
    b.exp = 0
    redis.call('SET', k, struct.pack('<ddd', b.tokens, b.upd, b.exp), 'PX', math.max(ttl, 60000))
  elseif b.exp >= now + ttl then
    redis.call('SET', k, struct.pack('<ddd', b.tokens, b.upd, b.exp), 'KEEPTTL')
  else
    ttl = ttl + math.floor(ttl / 2)
    b.exp = now - 1 + ttl
    redis.call('SET', k, struct.pack('<ddd', b.tokens, b.upd, b.exp), 'PX', ttl)
  end
end

local rate, cap = params(ARGV[2])
local has_g = ARGV[3] ~= ''
local grate, gcap, g
local g_dirty = false
local first = 1 -- the first operation's key
if has_g then
  grate, gcap = params(ARGV[3])
  g = load(KEYS[1], gcap)
  g_dirty = g.rewound
  first = 2
end

local reply = { fmt(now) }
-- one operation's numbers: its flag, the key's bucket's two, and with a global bucket that one's two
local function answer(flag, x, y, gx, gy)
  reply[#reply + 1] = fmt(flag)
  reply[#reply + 1] = fmt(x)
  reply[#reply + 1] = fmt(y)
  if has_g then
    reply[#reply + 1] = fmt(gx)
    reply[#reply + 1] = fmt(gy)
  end
end

local a = 4 -- the next argument
for i = first, #KEYS do
  local k = KEYS[i]
  local mode, cost = string.sub(ARGV[a], 1, 1), tonumber(string.sub(ARGV[a], 2))
  a = a + 1
  local b = load(k, cap)
  if mode == 'c' or mode == 'a' then
    -- MemoryStore.refundAt (c) and creditAt (a)
    if mode == 'c' then refund(b, rate, cap, now, cost, tonumber(ARGV[a])) else credit(b, rate, cap, now, cost) end
    store(k, b, rate, cap)
    if has_g then
      if mode == 'c' then refund(g, grate, gcap, now, cost, tonumber(ARGV[a + 1])) else credit(g, grate, gcap, now, cost) end
      g_dirty = true
    end
    if mode == 'c' then a = a + 2 end
    answer(1, b.tokens, 0, has_g and g.tokens, 0)
  elseif mode == 't' and not has_g then
    if try_charge(b, rate, cap, now, cost) then
      -- a try that conforms: decideAt's wait is 0 and its charge is try_charge's
      store(k, b, rate, cap)
      answer(1, b.tokens, 0)
    else
      -- refused: decideAt's tokens and wait are tokens_at and delay_until of the bucket as it
      -- stands (clamped, rewound), which the reply carries for the client to run them
      if b.rewound then store(k, b, rate, cap) end
      answer(2, b.tokens, b.upd)
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
      store(k, b, rate, cap)
      tokens = b.tokens
      if has_g then
        charge(g, grate, gcap, now, cost)
        gtokens = g.tokens
        g_dirty = true
      end
    else
      tokens = tokens_at(b, rate, cap, now)
      if b.rewound then store(k, b, rate, cap) end
      if has_g then gtokens = tokens_at(g, grate, gcap, now) end
    end
    answer(allowed and 1 or 0, tokens, kwait, gtokens, gwait)
  end
end
if g_dirty then store(KEYS[1], g, grate, gcap) end
return reply
`;
