/**
 * The Lua twin of the window counters of src/meters/windows.ts (the fixed
 * window and the sliding counter), and the script a RedisWindowStore runs
 * with them.
 *
 * {@link WINDOW_STEPS} are windows.ts's steps in the same order of float
 * operations: `fixedWindowTake` and `slidingCounterTake`, with the roll and
 * the estimate they call, each one Lua local function. Like the bucket's twin
 * (./bucket-lua.ts), a step and its windows.ts namesake agree to the last bit:
 * change them together. test/redis/window-lua.test.ts runs windows.ts's test
 * tables (test/meters/window-cases.ts) through these steps on a real
 * redis-server and compares every result exactly.
 *
 * Conventions: a fixed window is a table `s = { start = ..., count = ... }`
 * (FixedWindowState; `start` is `windowStartMs`), a sliding counter
 * `s = { start = ..., previous = ..., current = ... }`
 * (SlidingCounterState); `limit` and `w` are WindowParams' `limit` and
 * `windowMs`; `at` is a time in ms. A take returns the Decision's fields:
 * allowed, remaining, retryAfterMs, resetAfterMs. The exact sliding log is
 * not here: it would need a sorted set per key, and RedisWindowStore refuses it.
 */

/** windows.ts's fixed window and sliding counter steps, in Lua. */
export const WINDOW_STEPS = `
-- windows.ts windowStart
local function window_start(at, w)
  return math.floor(at / w) * w
end

-- windows.ts fixedRoll: the window at, or after a clock that went back, the window as it was
local function fixed_roll(s, w, at)
  local t = math.max(at, s.start)
  local start = window_start(t, w)
  if start > s.start then
    s.start = start
    s.count = 0
  end
  return t
end

-- windows.ts fixedWindowTake
local function fixed_window_take(s, limit, w, at, cost)
  local t = fixed_roll(s, w, at)
  local allowed = s.count + cost <= limit
  if allowed then s.count = s.count + cost end
  local reset_after = s.start + w - t
  local retry_after = 0
  if not allowed then retry_after = reset_after end
  if s.count == 0 then reset_after = 0 end
  return allowed, math.floor(limit - s.count), retry_after, reset_after
end

-- windows.ts rollCounter: on a boundary the current window becomes the previous one
local function roll_counter(s, w, at)
  local t = math.max(at, s.start)
  local start = window_start(t, w)
  if start > s.start then
    if start - s.start == w then s.previous = s.current else s.previous = 0 end
    s.current = 0
    s.start = start
  end
  return t
end

-- windows.ts counterEstimate
local function counter_estimate(s, w, t)
  local elapsed = (t - s.start) / w
  return s.previous * (1 - elapsed) + s.current
end

-- windows.ts slidingCounterTake
local function sliding_counter_take(s, limit, w, at, cost)
  local t = roll_counter(s, w, at)
  local allowed = counter_estimate(s, w, t) + cost <= limit
  if allowed then s.current = s.current + cost end
  local retry_after = 0
  if not allowed then
    local ends = s.start + w
    if s.current + cost > limit then
      -- not in this window: in the next one, once enough of this one has slid out
      local share = 0
      if s.current > 0 then share = 1 - (limit - cost) / s.current end
      retry_after = ends + math.max(0, share) * w - t
    else
      local share = 1 - (limit - cost - s.current) / s.previous
      retry_after = math.max(0, s.start + share * w - t)
    end
  end
  local estimate = counter_estimate(s, w, t)
  local reset_after = 0
  if s.current > 0 then
    reset_after = s.start + 2 * w - t
  elseif s.previous > 0 then
    reset_after = s.start + w - t
  end
  return allowed, math.max(0, math.floor(limit - estimate)), retry_after, reset_after
end
`;

/**
 * A RedisWindowStore's Lua, after the prelude of src/redis/lua-script.ts: one decision on one key.
 *
 * KEYS[1] = the key. ARGV = (1: the time), 2: kind (`f` fixed, `c` counter), 3: mode (`t` try,
 * `p` peek), 4: cost, 5: limit, 6: windowMs.
 * State: fixed `"<start> <count>"`, counter `"<start> <previous> <current>"`, written on a try
 * that counts, with an expiry at the end of its window (for the counter, of the next one: until
 * then it still counts), at least a minute of Redis's own time on a virtual clock.
 * Reply: allowed (1/0), remaining, retryAfterMs, resetAfterMs.
 */
export const WINDOW_LUA = `${WINDOW_STEPS}
local kind, mode = ARGV[2], ARGV[3]
local cost, limit, w = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local stored = {}
local raw = redis.call('GET', KEYS[1])
if raw then
  for part in string.gmatch(raw, '%S+') do stored[#stored + 1] = tonumber(part) end
end
local s, take, span
if kind == 'f' then
  s = { start = stored[1] or -math.huge, count = stored[2] or 0 }
  take, span = fixed_window_take, w
else
  s = { start = stored[1] or -math.huge, previous = stored[2] or 0, current = stored[3] or 0 }
  take, span = sliding_counter_take, 2 * w
end
local allowed, remaining, retry_after, reset_after = take(s, limit, w, now, cost)
if allowed and mode == 't' then
  local ttl = math.ceil(s.start + span - now) + 1
  if ARGV[1] ~= '' then ttl = math.max(ttl, 60000) end
  local text
  if kind == 'f' then
    text = fmt(s.start) .. ' ' .. fmt(s.count)
  else
    text = fmt(s.start) .. ' ' .. fmt(s.previous) .. ' ' .. fmt(s.current)
  end
  redis.call('SET', KEYS[1], text, 'PX', ttl)
end
return { fmt(allowed and 1 or 0), fmt(remaining), fmt(retry_after), fmt(reset_after) }
`;
