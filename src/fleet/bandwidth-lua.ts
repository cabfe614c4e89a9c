/**
 * The Lua script of a fleet bandwidth group: one byte bucket and the members'
 * demands, changed in ONE atomic step per call. It mirrors
 * `MemoryBandwidthStore.exchangeNow` (./bandwidth-store.ts) step for step; the
 * bucket is the meter's arithmetic by its Lua twin (src/redis/bucket-lua.ts),
 * the split is `fair_share`, the twin of `fairShare`.
 *
 * Keys (a hash tag keeps them in one cluster slot): KEYS[1] the state hash
 * (`rate burst tok upd`), KEYS[2] the members (hash),
 * KEYS[3] the members' expiries (sorted set, ms in the store's time); a
 * member's entry is "seq demand cap floor".
 *
 * ARGV: (1: the time, src/redis/lua-script.ts), idle TTL ms, default rate,
 * default burst, deadline ('' = none), member, seq, demand, cap (-1 = none),
 * give-back bytes, held bytes, lease ms, write ('1': the default rate and
 * burst replace the stored ones), floor (bytes per second). An empty member reads the key only (the
 * store's probe).
 *
 * Reply, numbers written by `fmt`: now, granted bytes, share per second,
 * retry ms, tokens, total demand, members with demand, rate, burst.
 */

import { bucketLua } from '../redis/bucket-lua.js';

/** The bandwidth store's Lua, after the prelude of src/redis/lua-script.ts. */
export const BANDWIDTH_LUA = `
local KS, KM, KE = KEYS[1], KEYS[2], KEYS[3]
local TTL = tonumber(ARGV[2])
local late = ARGV[5] ~= '' and now > tonumber(ARGV[5])
${bucketLua('rewind', 'advance', 'charge', 'credit', 'ms_until', 'reconfigure')}

local rate, burst, b
local v = redis.call('HMGET', KS, 'rate', 'burst', 'tok', 'upd')
if not v[1] then
  rate = tonumber(ARGV[3]); burst = tonumber(ARGV[4])
  b = { tokens = burst, upd = now }
else
  rate = tonumber(v[1]); burst = tonumber(v[2])
  b = { tokens = tonumber(v[3]), upd = tonumber(v[4]) }
  rewind(b, now) -- TIME went backwards: re-count from the earlier time (bucket.ts rewind)
end
advance(b, rate, burst, now)

-- members whose expiry has passed leave the split
local expired = redis.call('ZRANGEBYSCORE', KE, '-inf', now)
if #expired > 0 then
  redis.call('ZREM', KE, unpack(expired))
  redis.call('HDEL', KM, unpack(expired))
end

-- bandwidth-store.ts fairShare: floors first (scaled to the rate), then max-min by the cap left
-- per weight, the rest by weight
local function fair_share(all, me)
  if not (me.demand > 0) then return 0 end
  local busy = {}
  local weight = 0
  local floors = 0
  for _, m in ipairs(all) do
    if m.demand > 0 then
      busy[#busy + 1] = m
      weight = weight + m.demand
      floors = floors + math.min(m.floor, m.cap)
    end
  end
  local scale = 1
  if floors > rate then scale = rate / floors end
  for _, m in ipairs(busy) do
    m.fl = math.min(m.floor, m.cap) * scale
    m.left = m.cap - m.fl
  end
  table.sort(busy, function(x, y) return x.left / x.demand < y.left / y.demand end)
  local rest = math.max(0, rate - floors * scale)
  for _, m in ipairs(busy) do
    if m.left == math.huge or m.left * weight > rest * m.demand then break end
    if m == me then return me.fl + m.left end
    rest = rest - m.left
    weight = weight - m.demand
  end
  if weight > 0 then return me.fl + rest * me.demand / weight end
  return me.fl
end

local granted, share, retry = 0, 0, 0
local member = ARGV[6]
if member ~= '' then
  local seq = tonumber(ARGV[7])
  local leasems = tonumber(ARGV[12])
  local known = redis.call('HGET', KM, member)
  local replay = known and seq <= tonumber(string.match(known, '^(%S+)'))
  if not replay and not late and ARGV[13] == '1' then
    -- a live change of the limits: the bucket keeps its tokens, capped at the new burst
    local nrate, nburst = tonumber(ARGV[3]), tonumber(ARGV[4])
    reconfigure(b, rate, burst, now, nburst)
    rate = nrate; burst = nburst
  end
  if not replay then
    local giveback = tonumber(ARGV[10])
    if giveback > 0 then credit(b, rate, burst, now, giveback) end
    if not late then
      local demand = tonumber(ARGV[8])
      local cap = tonumber(ARGV[9])
      if cap < 0 then cap = math.huge end
      local floor = tonumber(ARGV[14])
      redis.call('HSET', KM, member, fmt(seq) .. ' ' .. fmt(demand) .. ' ' .. fmt(cap < math.huge and cap or -1) .. ' ' .. fmt(floor))
      redis.call('ZADD', KE, now + leasems, member)
      local all = {}
      local me
      local raw = redis.call('HGETALL', KM)
      for i = 1, #raw, 2 do
        -- an entry of three fields has a floor of 0
        local _, d, c, f = string.match(raw[i + 1], '^(%S+) (%S+) (%S+) ?(%S*)$')
        local m = { demand = tonumber(d), cap = tonumber(c), floor = tonumber(f) or 0 }
        if m.cap < 0 then m.cap = math.huge end
        if raw[i] == member then me = m end
        all[#all + 1] = m
      end
      share = fair_share(all, me)
      local want = 0
      if share > 0 then want = math.max(1024, math.floor(share * leasems / 1000)) end
      want = math.max(0, want - tonumber(ARGV[11]))
      granted = math.min(want, math.max(0, math.floor(b.tokens)))
      if granted > 0 then charge(b, rate, burst, now, granted) end
      if granted < want then retry = math.min(leasems, ms_until(b.tokens, want - granted, rate, burst)) end
      local keep = math.ceil(leasems) + TTL
      redis.call('PEXPIRE', KM, keep)
      redis.call('PEXPIRE', KE, keep)
    end
  end
end

local demand, members = 0, 0
for i, s in ipairs(redis.call('HVALS', KM)) do
  local _, d = string.match(s, '^(%S+) (%S+)')
  d = tonumber(d)
  demand = demand + d
  if d > 0 then members = members + 1 end
end
redis.call('HSET', KS, 'rate', fmt(rate), 'burst', fmt(burst), 'tok', fmt(b.tokens), 'upd', fmt(b.upd))
redis.call('PEXPIRE', KS, TTL)
return { fmt(now), fmt(granted), fmt(share), fmt(retry), fmt(b.tokens), fmt(demand), fmt(members), fmt(rate), fmt(burst) }
`;
