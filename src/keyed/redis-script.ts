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
 * A bucket is a hash `{ t = tokens, u = updatedAtMs }` that expires when it
 * would be full again (PEXPIRE at time-to-full): an absent key is a full
 * bucket, so an idle key costs Redis nothing.
 *
 * Call: KEYS = per operation, the key's bucket then (if global) the global
 * bucket. ARGV = n, now-or-empty, the least TTL in ms (0 with Redis's own
 * time; with a virtual clock, whose durations are not Redis's, a minute),
 * then 9 values per operation:
 * mode (t = try, r = reserve, p = peek, c = cancel), cost, rate, capacity,
 * global rate (empty = none), global capacity, maxWaitMs (-1 = any),
 * readyAtMs, globalReadyAtMs (for cancel).
 * Reply: 7 strings per operation: allowed (1/0), tokens, global tokens
 * ('-' = none), waitMs, nowMs, readyAtMs, globalReadyAtMs.
 */

export const ARGS_PER_OP = 9;
export const REPLY_PER_OP = 7;

export const KEYED_SCRIPT = `
local n = tonumber(ARGV[1])
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local EPS = 2 ^ -52
local SLACK = 2 ^ -36

local function fmt(x) return string.format('%.17g', x) end

-- tokensAt: time before updatedAt counts as none; refill is capped at capacity
local function tokens_at(tok, upd, rate, cap, at)
  local el = at - upd
  if not (el > 0) then return tok end
  local t = tok + (el * rate) / 1000
  if t > cap then return cap end
  return t
end

-- delayUntil: msUntil, nudged up by ulps until reading at now + delay finds the tokens
local function delay_until(tok, upd, rate, cap, at, cost)
  local slack = cap * SLACK
  local deficit = cost - tokens_at(tok, upd, rate, cap, at)
  if not (deficit > slack) then return 0 end
  local d = (deficit * 1000) / rate
  local nudge = math.max(math.abs(at), d) * EPS
  while tokens_at(tok, upd, rate, cap, at + d) + slack < cost do
    d = d + nudge
    nudge = nudge * 2
  end
  return d
end

-- refundable: Go's cancel rule
local function refundable(tok, at, ready, cost, rate)
  if not (ready > at) then return 0 end
  local debt = 0
  if tok < 0 then debt = -tok end
  local later = debt - ((ready - at) * rate) / 1000
  if later <= 0 then return cost end
  if later >= cost then return 0 end
  return cost - later
end

-- a bucket up to date at now: tokens (capped), updatedAt (never moved back)
local function load(k, rate, cap)
  local v = redis.call('HMGET', k, 't', 'u')
  if not v[1] then return cap, now end
  local tok = tokens_at(tonumber(v[1]), tonumber(v[2]), rate, cap, now)
  if tok > cap then tok = cap end
  local upd = tonumber(v[2])
  if now > upd then upd = now end
  return tok, upd
end

local MIN_TTL = tonumber(ARGV[3])

-- write a bucket back; it expires when it would be full again (timeToFullMs)
local function store(k, tok, upd, rate, cap)
  local ttl = math.ceil(((cap - tok) * 1000) / rate)
  if ttl < MIN_TTL then ttl = MIN_TTL end
  if not (ttl > 0) or not (cap - tok > 0) then
    redis.call('DEL', k)
    return
  end
  redis.call('HSET', k, 't', fmt(tok), 'u', fmt(upd))
  -- until full as seen from upd (which may be ahead of now after time went back)
  redis.call('PEXPIRE', k, ttl + math.ceil(upd - now) + 1)
end

local out = {}
local ki = 1
for i = 0, n - 1 do
  local b = 3 + i * ${ARGS_PER_OP}
  local mode = ARGV[b + 1]
  local cost = tonumber(ARGV[b + 2])
  local rate = tonumber(ARGV[b + 3])
  local cap = tonumber(ARGV[b + 4])
  local has_g = ARGV[b + 5] ~= ''
  local grate, gcap
  local k = KEYS[ki]
  ki = ki + 1
  local g
  if has_g then
    grate = tonumber(ARGV[b + 5])
    gcap = tonumber(ARGV[b + 6])
    g = KEYS[ki]
    ki = ki + 1
  end
  local tok, upd = load(k, rate, cap)
  local gtok, gupd
  if has_g then gtok, gupd = load(g, grate, gcap) end
  if mode == 'c' then
    local back = refundable(tok, now, tonumber(ARGV[b + 8]), cost, rate)
    if back > 0 then
      tok = math.min(cap, tok + back)
      store(k, tok, upd, rate, cap)
    end
    if has_g then
      local gback = refundable(gtok, now, tonumber(ARGV[b + 9]), cost, grate)
      if gback > 0 then
        gtok = math.min(gcap, gtok + gback)
        store(g, gtok, gupd, grate, gcap)
      end
    end
    out[#out + 1] = '1'
    out[#out + 1] = fmt(tok)
    out[#out + 1] = has_g and fmt(gtok) or '-'
    out[#out + 1] = '0'
    out[#out + 1] = fmt(now)
    out[#out + 1] = fmt(now)
    out[#out + 1] = fmt(now)
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
      local maxwait = tonumber(ARGV[b + 7])
      allowed = maxwait < 0 or wait <= maxwait
    else
      allowed = wait == 0
    end
    if allowed and mode ~= 'p' then
      tok = tok - cost
      store(k, tok, upd, rate, cap)
      if has_g then
        gtok = gtok - cost
        store(g, gtok, gupd, grate, gcap)
      end
    end
    out[#out + 1] = allowed and '1' or '0'
    out[#out + 1] = fmt(tok)
    out[#out + 1] = has_g and fmt(gtok) or '-'
    out[#out + 1] = fmt(wait)
    out[#out + 1] = fmt(now)
    out[#out + 1] = fmt(now + kwait)
    out[#out + 1] = fmt(now + gwait)
  end
end
return out
`;
