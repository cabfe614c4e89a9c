/**
 * The Lua script a RedisStore runs: the meter's arithmetic
 * (`src/meters/token-bucket.ts`: `tokensAt`, `msUntil`, `delayUntil`,
 * `slackFor`; `src/keyed/bucket-math.ts`: `refundable`, `timeToFullMs`)
 * line by line in Lua, over a batch of decisions in one atomic call.
 *
 * Redis runs a script to completion before anything else, so each decision
 * (read the key's bucket and the global one, decide, charge both or neither)
 * is atomic, and so is the batch. Lua numbers are IEEE doubles like
 * JavaScript's, and + - * / round the same way, so the script and the memory
 * store agree to the last bit; values cross as strings in `%.17g`, which
 * round-trips a double exactly.
 *
 * Time is the server's `TIME` (microseconds), read once per call, so every
 * instance of a fleet agrees whatever their own clocks say. `ARGV[2]`, when
 * not empty, replaces it (tests and simulations on a virtual clock).
 *
 * A bucket is a string `"<tokens> <updatedAtMs>"` written with `SET ... PX`
 * so that it expires when it would be full again (time-to-full): an absent
 * key is a full bucket, so an idle key costs Redis nothing. The global bucket
 * is read once per call and written once at its end.
 *
 * Call (every decision of a batch shares one bucket and one global bucket):
 * KEYS = the global bucket (if any), then each operation's key.
 * ARGV = n, now-or-empty, least TTL in ms (0 with Redis's own time; with a
 * virtual clock, whose durations are not Redis's, a minute), rate, capacity,
 * global rate (empty = none), global capacity, then per operation its mode and
 * cost and what the mode needs: `t` try, `p` peek: nothing; `r` reserve:
 * maxWaitMs (-1 = any); `c` cancel: readyAtMs, globalReadyAtMs.
 * Reply: nowMs, then per operation: allowed (1/0), tokens, ms until the key's
 * bucket holds the cost, and with a global bucket its tokens and its wait.
 */

export const KEYED_SCRIPT = `
local n = tonumber(ARGV[1])
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local MIN_TTL = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cap = tonumber(ARGV[5])
local has_g = ARGV[6] ~= ''
local grate, gcap
if has_g then
  grate = tonumber(ARGV[6])
  gcap = tonumber(ARGV[7])
end
local EPS = 2 ^ -52
local SLACK = 2 ^ -36

local function fmt(x) return string.format('%.17g', x) end

-- tokensAt: time before updatedAt counts as none; refill is capped at capacity
local function tokens_at(tok, upd, r, c, at)
  local el = at - upd
  if not (el > 0) then return tok end
  local t = tok + (el * r) / 1000
  if t > c then return c end
  return t
end

-- delayUntil: msUntil, nudged up by ulps until reading at now + delay finds the tokens
local function delay_until(tok, upd, r, c, at, cost)
  local slack = c * SLACK
  local deficit = cost - tokens_at(tok, upd, r, c, at)
  if not (deficit > slack) then return 0 end
  local d = (deficit * 1000) / r
  local nudge = math.max(math.abs(at), d) * EPS
  while tokens_at(tok, upd, r, c, at + d) + slack < cost do
    d = d + nudge
    nudge = nudge * 2
  end
  return d
end

-- refundable: Go's cancel rule
local function refundable(tok, at, ready, cost, r)
  if ready < at then return 0 end
  local debt = 0
  if tok < 0 then debt = -tok end
  local later = debt - ((ready - at) * r) / 1000
  if later <= 0 then return cost end
  if later >= cost then return 0 end
  return cost - later
end

-- a bucket up to date at now: tokens (capped), updatedAt (never moved back)
local function load(k, r, c)
  local v = redis.call('GET', k)
  if not v then return c, now end
  local sp = string.find(v, ' ', 1, true)
  local tok = tonumber(string.sub(v, 1, sp - 1))
  local upd = tonumber(string.sub(v, sp + 1))
  tok = tokens_at(tok, upd, r, c, now)
  if tok > c then tok = c end
  if now > upd then upd = now end
  return tok, upd
end

-- write a bucket back; it expires when it would be full again (timeToFullMs),
-- as seen from upd (which may be ahead of now after time went back)
local function store(k, tok, upd, r, c)
  if not (c - tok > 0) then
    redis.call('DEL', k)
    return
  end
  local ttl = math.ceil(((c - tok) * 1000) / r)
  if ttl < MIN_TTL then ttl = MIN_TTL end
  if ttl > 1e15 then ttl = 1e15 end -- an integer Redis accepts, and 31,000 years
  redis.call('SET', k, fmt(tok) .. ' ' .. fmt(upd), 'PX', ttl + math.ceil(upd - now) + 1)
end

local out = { fmt(now) }
local ki = 1
local g, gtok, gupd
local g_dirty = false
if has_g then
  g = KEYS[1]
  ki = 2
  gtok, gupd = load(g, grate, gcap)
end
local a = 8
for i = 1, n do
  local mode = ARGV[a]
  local cost = tonumber(ARGV[a + 1])
  a = a + 2
  local k = KEYS[ki]
  ki = ki + 1
  local tok, upd = load(k, rate, cap)
  if mode == 'c' then
    local back = refundable(tok, now, tonumber(ARGV[a]), cost, rate)
    if back > 0 then
      tok = math.min(cap, tok + back)
      store(k, tok, upd, rate, cap)
    end
    if has_g then
      local gback = refundable(gtok, now, tonumber(ARGV[a + 1]), cost, grate)
      if gback > 0 then
        gtok = math.min(gcap, gtok + gback)
        g_dirty = true
      end
    end
    a = a + 2
    out[#out + 1] = '1'
    out[#out + 1] = fmt(tok)
    out[#out + 1] = '0'
    if has_g then
      out[#out + 1] = fmt(gtok)
      out[#out + 1] = '0'
    end
  else
    local kwait = delay_until(tok, upd, rate, cap, now, cost)
    local wait = kwait
    local gwait = 0
    if has_g then
      gwait = delay_until(gtok, gupd, grate, gcap, now, cost)
      if gwait > wait then wait = gwait end
    end
    local allowed
    if mode == 'r' then
      local maxwait = tonumber(ARGV[a])
      a = a + 1
      allowed = maxwait < 0 or wait <= maxwait
    else
      allowed = wait == 0
    end
    if allowed and mode ~= 'p' then
      tok = tok - cost
      store(k, tok, upd, rate, cap)
      if has_g then
        gtok = gtok - cost
        g_dirty = true
      end
    end
    out[#out + 1] = allowed and '1' or '0'
    out[#out + 1] = fmt(tok)
    out[#out + 1] = fmt(kwait)
    if has_g then
      out[#out + 1] = fmt(gtok)
      out[#out + 1] = fmt(gwait)
    end
  end
end
if g_dirty then store(g, gtok, gupd, grate, gcap) end
return out
`;
