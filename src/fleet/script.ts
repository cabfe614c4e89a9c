/**
 * The Lua script of a fleet: one shared rate bucket and one shared weighted
 * concurrency budget, changed in ONE atomic step per call.
 *
 * The bucket is the meter's arithmetic (`src/meters/bucket.ts`: `tokensAt`,
 * `delayUntil`, `charge`, `refund`, `rebill`, `reconfigure`, `slackFor`), by
 * its Lua twin (src/redis/bucket-lua.ts), with the time from Redis's `TIME`,
 * so workers with skewed clocks agree; a `TIME` earlier than the last update
 * re-counts from it (`rewind`: no token created, no key shut for the step).
 * The concurrency budget is a set of leases: a sorted set of lease ids
 * scored by expiry (ms, Redis time) and a hash of their weights; the sum of
 * the weights is kept in the state hash (`inf`), and leases whose expiry has
 * passed are purged at the start of every call, so a crashed worker's units
 * come back when its leases expire, with nobody doing anything.
 *
 * The parameters (rate, burst, concurrency) live in the state hash beside the
 * variables: the first call writes the caller's, later calls use the stored
 * ones, and `s` (set) changes them for the whole fleet.
 *
 * Fairness of the budget. A job refused for lack of units leaves a claim
 * (id, cost, when first refused, when last asked); while the oldest claim is
 * live (asked again within `claimTtlMs`), other acquires are granted only if
 * they leave room for it, so a job of cost 4 is not starved by a stream of
 * cost-1 jobs from other workers. A claim not renewed (its worker gave up or
 * died) lapses after `claimTtlMs`.
 *
 * Keys (a hash tag keeps them in one cluster slot): KEYS[1] state hash
 * (`rate burst conc tok upd inf`), KEYS[2] lease expiries (sorted set),
 * KEYS[3] lease weights (hash), KEYS[4] claims by order of first refusal (sorted set),
 * KEYS[5] claims' "cost lastAskedMs" (hash).
 *
 * ARGV: (1: the time, src/redis/lua-script.ts), op, idle TTL ms, default
 * rate (-1 = none), burst, concurrency (-1 = none), deadline ('' = none: the
 * store's time after which the caller has given the call up), then per op:
 *
 * - `b` exchange: leaseMs, claimTtlMs, n, then n lease ids to release, then
 *   (cost or `cost:weight`, maxWaitMs (-1 = any), leaseId) per job: drops the n leases, then
 *   (unless late: status 5, every job 4) tries the jobs in order (see `ExchangeOp` in ./store.ts). A job is granted
 *   if the budget has room for its weight (the cost unless given; and for the oldest claim) and the bucket
 *   would hold `cost` within its maxWaitMs: the bucket is charged `cost` (into debt)
 *   and a lease of that weight is held until now + delay + leaseMs. Only the
 *   first job granted may have a delay; the exchange stops after it, at the
 *   first job that would need one after a grant, and at the first refused for
 *   lack of units (which records its claim). Per job: 1 ok, 0 wait too long,
 *   2 budget full, 3 cost above the burst or the concurrency, 4 not tried.
 * - `c` cancel: leaseId, cost, readyAtMs: drops the lease and, if it was
 *   held, gives back what Go's cancel rule allows (bucket.ts `refund`).
 * - `r` renew: leaseMs, n, n lease ids to release (dropped first, even when
 *   late), then (leaseId, weight) pairs (skipped when late): pushes each lease's
 *   expiry to now + leaseMs; a lease Redis no longer has (it restarted, or
 *   the lease expired while its job still ran) is added back, so the budget
 *   counts what really runs.
 * - `j` adjust: delta: a running job's charge changes by delta tokens
 *   (bucket.ts `rebill`): taken now (into debt) when positive, given back now
 *   (never above the burst) when negative, as the Scheduler's `ctx.adjust`.
 * - `s` set: rate, burst, concurrency ('' = unchanged): `reconfigure`.
 * - `g` get: nothing.
 *
 * Idempotence (a call the worker gave up on may still run: a paused server
 * resumes, a client replays its queue into a restarted one). A call run after
 * its deadline grants nothing, re-adds nothing and rebills nothing (its
 * releases and cancels still apply: they only give back). Every step is
 * idempotent per lease id: a grant of a lease already held is answered from
 * the lease (no second charge, no second weight), a renewal adds a lease only
 * if it is missing, a release or cancel of a lease not held does nothing (a
 * cancel refunds only a lease it drops), and a lease named twice in one
 * release list is dropped once. So a lease id is counted once, whatever is
 * replayed.
 *
 * Reply (every op), numbers written by `fmt`: now, status, delayMs, readyAtMs,
 * tokens, in-flight weight, rate, burst, concurrency, ms until the earliest
 * lease expires (-1 = none); for `b`, then status, delayMs, readyAtMs per job.
 */

import { bucketLua } from '../redis/bucket-lua.js';

/** The fleet store's Lua, after the prelude of src/redis/lua-script.ts. */
export const FLEET_LUA = `
local KS, KL, KW, KQ, KC = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op = ARGV[2]
local TTL = tonumber(ARGV[3])
local late = ARGV[7] ~= '' and now > tonumber(ARGV[7])
${bucketLua('slack_for', 'tokens_at', 'rewind', 'delay_until', 'charge', 'refund', 'rebill', 'reconfigure', 'clamp_to_capacity')}

-- the parameters, and the bucket b (rate -1: none; then b is kept but not used)
local rate, burst, conc, b, inf
local v = redis.call('HMGET', KS, 'rate', 'burst', 'conc', 'tok', 'upd', 'inf')
if not v[1] then
  rate = tonumber(ARGV[4]); burst = tonumber(ARGV[5]); conc = tonumber(ARGV[6])
  b = { tokens = burst, upd = now }; inf = 0
else
  rate = tonumber(v[1]); burst = tonumber(v[2]); conc = tonumber(v[3])
  b = { tokens = tonumber(v[4]), upd = tonumber(v[5]) }; inf = tonumber(v[6])
  rewind(b, now) -- TIME went backwards: re-count from the earlier time (bucket.ts rewind)
end

-- drops the leases named (each once, however often named) and returns how many were held
local function drop(named)
  local n, seen, ids = 0, {}, {}
  for _, id in ipairs(named) do
    if not seen[id] then seen[id] = true; ids[#ids + 1] = id end
  end
  for i = 1, #ids, 1000 do
    local chunk = {}
    for j = i, math.min(i + 999, #ids) do chunk[#chunk + 1] = ids[j] end
    local ws = redis.call('HMGET', KW, unpack(chunk))
    for j, w in ipairs(ws) do
      if w then inf = inf - tonumber(w); n = n + 1 end
    end
    redis.call('ZREM', KL, unpack(chunk))
    redis.call('HDEL', KW, unpack(chunk))
  end
  return n
end

-- purge the leases whose expiry has passed
local expired = redis.call('ZRANGEBYSCORE', KL, '-inf', now)
if #expired > 0 then drop(expired) end

local status, delay, ready = 1, 0, now
local grants = {}
if op == 'b' then
  local leasems = tonumber(ARGV[8])
  local claimttl = tonumber(ARGV[9])
  local nrel = tonumber(ARGV[10])
  if nrel > 0 then
    local ids = {}
    for i = 11, 10 + nrel do ids[#ids + 1] = ARGV[i] end
    drop(ids)
  end
  local granted, stop = 0, late
  if late then status = 5 end
  for i = 11 + nrel, #ARGV, 3 do
    -- 'cost' or 'cost:weight': tokens from the bucket, and units its lease holds (the cost unless told)
    local cost, w = tonumber(ARGV[i]), nil
    if not cost then
      local colon = string.find(ARGV[i], ':', 1, true)
      cost = tonumber(string.sub(ARGV[i], 1, colon - 1))
      w = tonumber(string.sub(ARGV[i], colon + 1))
    end
    w = w or cost
    local maxwait = tonumber(ARGV[i + 1])
    local me = ARGV[i + 2]
    local st, d, r = 4, 0, now
    local held = redis.call('ZSCORE', KL, me)
    if stop then
      st = 4
    elseif held then
      -- a replay of a grant (its first answer was lost): answered from the lease, counted once
      st = 1
      r = tonumber(held) - leasems
      if r < now then r = now end
      d = r - now
      granted = granted + 1
      if d > 0 then stop = true end
    elseif (conc >= 0 and w > conc) or (rate >= 0 and cost > burst) then
      st = 3
    else
      -- the oldest live claim on the budget: later acquires leave room for it
      local ahead = 0
      if conc >= 0 then
        for j = 1, 64 do
          local head = redis.call('ZRANGE', KQ, 0, 0)
          if #head == 0 then break end
          local c = redis.call('HGET', KC, head[1])
          local sp = c and string.find(c, ' ', 1, true)
          if sp and tonumber(string.sub(c, sp + 1)) >= now - claimttl then
            if head[1] ~= me then ahead = tonumber(string.sub(c, 1, sp - 1)) end
            break
          end
          redis.call('ZREM', KQ, head[1])
          redis.call('HDEL', KC, head[1])
        end
      end
      if conc >= 0 and inf + w + ahead > conc + slack_for(conc) then
        st = 2
        stop = true
        -- claims in order of first refusal (a counter, not the time: two in one ms keep their order)
        if not redis.call('ZSCORE', KQ, me) then
          redis.call('ZADD', KQ, redis.call('HINCRBY', KS, 'cseq', 1), me)
        end
        redis.call('HSET', KC, me, fmt(w) .. ' ' .. fmt(now))
      else
        if rate >= 0 then d = delay_until(b, rate, burst, now, cost) end
        if d > 0 and granted > 0 then
          st = 4
          d = 0
          stop = true
        elseif maxwait >= 0 and d > maxwait then
          st = 0
        else
          st = 1
          r = now + d
          if rate >= 0 then charge(b, rate, burst, now, cost) end
          redis.call('ZADD', KL, r + leasems, me)
          redis.call('HSET', KW, me, fmt(w))
          inf = inf + w
          if conc >= 0 then
            redis.call('ZREM', KQ, me)
            redis.call('HDEL', KC, me)
          end
          granted = granted + 1
          if d > 0 then stop = true end
        end
      end
    end
    grants[#grants + 1] = fmt(st)
    grants[#grants + 1] = fmt(d)
    grants[#grants + 1] = fmt(r)
  end
elseif op == 'c' then
  if drop({ ARGV[8] }) > 0 and rate >= 0 then refund(b, rate, burst, now, tonumber(ARGV[9]), tonumber(ARGV[10])) end
elseif op == 'r' then
  local nrel = tonumber(ARGV[9])
  if nrel > 0 then
    local ids = {}
    for i = 10, 9 + nrel do ids[#ids + 1] = ARGV[i] end
    drop(ids)
  end
  local expiry = now + tonumber(ARGV[8])
  if late then status = 5 end
  for i = 10 + nrel, #ARGV, 2 do
    if late then break end
    local id, w = ARGV[i], ARGV[i + 1]
    if not redis.call('ZSCORE', KL, id) then
      redis.call('HSET', KW, id, w)
      inf = inf + tonumber(w)
    end
    redis.call('ZADD', KL, expiry, id)
  end
elseif op == 'j' and late then
  status = 5
elseif op == 'j' then
  if rate >= 0 then rebill(b, rate, burst, now, tonumber(ARGV[8])) end
elseif op == 's' then
  local nrate, nburst = rate, burst
  if ARGV[8] ~= '' then nrate = tonumber(ARGV[8]) end
  if ARGV[9] ~= '' then nburst = tonumber(ARGV[9]) end
  if ARGV[10] ~= '' then conc = tonumber(ARGV[10]) end
  if rate >= 0 then
    reconfigure(b, rate, burst, now, nburst)
  else
    -- a first rate: the bucket starts full (at the burst it had), then takes the new one
    if nrate >= 0 then b = { tokens = burst, upd = now } end
    clamp_to_capacity(b, nburst)
  end
  rate = nrate
  burst = nburst
end

if redis.call('ZCARD', KL) == 0 then inf = 0 end
redis.call('HSET', KS, 'rate', fmt(rate), 'burst', fmt(burst), 'conc', fmt(conc), 'tok', fmt(b.tokens), 'upd', fmt(b.upd), 'inf', fmt(inf))
redis.call('PEXPIRE', KS, TTL)
local first = redis.call('ZRANGE', KL, 0, 0, 'WITHSCORES')
local untilexp = -1
if #first > 0 then
  untilexp = tonumber(first[2]) - now
  local last = redis.call('ZRANGE', KL, -1, -1, 'WITHSCORES')
  local keep = math.ceil(tonumber(last[2]) - now) + TTL
  redis.call('PEXPIRE', KL, keep)
  redis.call('PEXPIRE', KW, keep)
end
if redis.call('EXISTS', KQ) == 1 then
  redis.call('PEXPIRE', KQ, TTL)
  redis.call('PEXPIRE', KC, TTL)
end
local shown = b.tokens
if rate >= 0 then shown = tokens_at(b, rate, burst, now) end
local reply = { fmt(now), fmt(status), fmt(delay), fmt(ready), fmt(shown), fmt(inf), fmt(rate), fmt(burst), fmt(conc), fmt(untilexp) }
for i = 1, #grants do reply[10 + i] = grants[i] end
return reply
`;
