/**
 * The Lua a RedisStore runs: MemoryStore's decision and refund steps over the
 * bucket arithmetic's Lua twin (src/redis/bucket-lua.ts, the steps of
 * `src/meters/bucket.ts`), for one decision or a batch of them in one atomic
 * call. It is one program (src/redis/functions.ts) with four entry points:
 * `keyed` (no global bucket), `keyed_g` (KEYS[1] is the global bucket), and
 * `keyed_at` and `keyed_g_at`, their twins on a virtual clock. It runs as a
 * Redis Function library, loaded once, whose steps are defined once, or,
 * where Redis has no functions or refuses `FUNCTION LOAD`, as one script per
 * entry point.
 *
 * Redis runs a call to completion before anything else, so each decision
 * (read the key's bucket and the global one, decide, charge both or neither)
 * is atomic, and so is the batch. The steps agree with bucket.ts to the last
 * bit, so the Lua and the memory store do as long as they call the same
 * steps in the same order. Numbers go in as JavaScript's shortest round-trip
 * text and come back as doubles' bytes (the `_b` entries) or as `%.17g` text
 * (`fmt`): each way a double arrives exactly. The usual call, one try without
 * a global bucket, takes a path of its own (`try_one`): the bucket in locals
 * and its steps written in place (bucket-lua.ts's `bucketInline`), the same
 * operations in the same order as the general path's.
 *
 * Time is the server's `TIME`, read once per call (luaNow, src/redis/client.ts),
 * so every instance of a fleet agrees whatever their own clocks say; the
 * reply carries TIME's two integers as Redis wrote them, and the client forms
 * the same double from them (timeMs). The `_at` entries take the time from
 * `ARGV[1]` instead (tests and simulations on a virtual clock); keys then live
 * at least a minute of Redis's real time, whose durations are not the virtual
 * clock's.
 *
 * A bucket is 24 bytes, its tokens, its updatedAtMs and the key's expiry as
 * three little-endian doubles (`struct.pack('<ddd')`: exact, with no decimal
 * text to write or parse; 16 bytes, without the expiry, from earlier versions,
 * are read too), written so that it expires no sooner than when it would be
 * full again (`timeToFullMs`, counted from `updatedAtMs`, plus 1 ms) and at
 * most half as long again (`store`): an absent key is a full bucket, so an idle
 * key costs Redis nothing. A bucket written full
 * lives that 1 ms (a cost-0 decision, a refund): until then it keeps its
 * `updatedAtMs`, as the memory store does, which matters only to a clock that
 * goes back. The global bucket is read once per call and written once at its end.
 *
 * Call (every decision of a batch shares one bucket and, with a global bucket, that one):
 * KEYS = the global bucket (`keyed_g`), then each operation's key.
 * ARGV = (`_at`: now), `rate:capacity`, (`keyed_g`: the global `rate:capacity`), then per
 * operation its mode and cost as one word (`t1`: mode `t`, cost 1) and what the mode needs: `t` try,
 * `p` peek: nothing; `r` reserve: maxWaitMs (-1 = any); `c` cancel: readyAtMs, globalReadyAtMs;
 * `a` credit: nothing.
 * Reply: one string of words separated by spaces: TIME's seconds and microseconds (`- -` on a
 * virtual clock), then per operation: allowed (1/0), tokens, ms until the key's bucket holds the
 * cost, and with a global bucket its tokens and its wait; or, for a try refused without a global
 * bucket, 2 and the bucket's tokens and updatedAtMs as the decision saw it, from which the client
 * works out the tokens and the wait with bucket.ts's `tokensAt` and `delayUntil` (the same steps
 * as the Lua's, in JavaScript: a refusal's wait, a search, is the dearest part of a decision in
 * Lua). The `_b` entries reply in bytes, for a client that can take them (no `%.17g` to write and
 * parse): now as a little-endian double, then per operation the flag as one byte and the same
 * numbers as little-endian doubles.
 */

import { bucketInline, bucketLua } from '../redis/bucket-lua.js';
import { luaNow } from '../redis/client.js';
import { type RedisProgram, redisProgram } from '../redis/functions.js';

/** Lua names for a bucket: a table's fields (the general path) or locals (the one-try path). */
interface BucketNames {
  tokens: string;
  upd: string;
  exp: string;
}

/**
 * MemoryStore's read of a bucket as Redis holds it, into `v`'s names: absent = full and new at now;
 * clamped to the capacity `c`; `rewound` set when TIME went backwards (re-counted from now, bucket.ts
 * rewind, as MemoryStore does, and kept even on a refusal, so refill runs from the earlier time).
 */
const loadLua = (key: string, c: string, v: BucketNames, rewound: string): string => `do
  local v = rcall('GET', ${key})
  ${rewound} = false
  if not v then
    ${v.tokens} = ${c}; ${v.upd} = now; ${v.exp} = 0
  else
    -- 16 bytes: an earlier version's, its expiry unknown
    if #v == 24 then ${v.tokens}, ${v.upd}, ${v.exp} = sunpack('<ddd', v)
    else ${v.tokens}, ${v.upd} = sunpack('<dd', v); ${v.exp} = 0 end
    ${bucketInline.clampToCapacity({ tokens: v.tokens, c })}
    if now < ${v.upd} then ${bucketInline.rewind({ upd: v.upd, at: 'now' })}; ${rewound} = true end
  end
end`;

/**
 * Writes a bucket back (the reasons are at `store` in the script); `exp` is the one name it writes.
 */
const storeLua = (key: string, r: string, c: string, v: BucketNames): string => `do
  local ttl
  ${bucketInline.timeToFullMs({ out: 'ttl', tokens: v.tokens, r, c })}
  ttl = ceil(ttl)
  if ttl < MIN_TTL then ttl = MIN_TTL end
  if ttl > 1e15 then ttl = 1e15 end -- an integer Redis accepts, and 31,000 years
  local ahead = ${v.upd} - now -- 0 after a charge at now (ceil(0) is 0: no call)
  if ahead ~= 0 then ahead = ceil(ahead) end
  ttl = ttl + ahead + 1
  if MIN_TTL > 0 then
    ${v.exp} = 0
    rcall('SET', ${key}, spack('<ddd', ${v.tokens}, ${v.upd}, ${v.exp}), 'PX', ttl)
  elseif ${v.exp} >= now + ttl then
    rcall('SET', ${key}, spack('<ddd', ${v.tokens}, ${v.upd}, ${v.exp}), 'KEEPTTL')
  else
    ttl = ttl + floor(ttl / 2)
    ${v.exp} = now - 1 + ttl
    rcall('SET', ${key}, spack('<ddd', ${v.tokens}, ${v.upd}, ${v.exp}), 'PX', ttl)
  end
end`;

const FIELDS: BucketNames = { tokens: 'b.tokens', upd: 'b.upd', exp: 'b.exp' };
const LOCALS: BucketNames = { tokens: 'tokens', upd: 'upd', exp: 'exp' };

const BODY = `
-- set by each call (Redis runs one call at a time)
local now, MIN_TTL
-- kept between calls of the Function (a script starts afresh each time): TIME's seconds, and the
-- last text and number of each parameter, so that what repeats from call to call (a limiter's
-- rate and capacity, a cost of 1) is parsed once (tonumber runs strtod)
local now_sec_text, now_sec_ms
local par_text, rate, cap, gpar_text, grate, gcap, op_text, mode, cost
-- the C functions a decision calls, kept from the first call on (a library may read no global
-- while it loads; a global's field looked up costs about as much as the call itself)
local rcall, spack, sunpack, ceil, floor
local function init()
  rcall, spack, sunpack, ceil, floor = redis.call, struct.pack, struct.unpack, math.ceil, math.floor
end

-- 'rate:capacity' as two numbers
local function params(text)
  local i = string.find(text, ':', 1, true)
  return tonumber(string.sub(text, 1, i - 1)), tonumber(string.sub(text, i + 1))
end

-- an operation's mode and cost from its word (called only when the word is not the last one's)
local function read_op(text)
  op_text = text; mode = string.sub(text, 1, 1); cost = tonumber(string.sub(text, 2))
end
${bucketLua('fmt', 'tokens_at', 'delay_until', 'conforms_at', 'charge', 'try_charge', 'refund', 'credit')}

-- MemoryStore: a bucket as written (absent = full and new at now), clamped to the capacity
-- the two buckets a call works on, reused from call to call (fewer tables for Lua's collector);
-- a call reads each of its decisions' buckets afresh into kb, the global one once into gb
local kb, gb = {}, {}

local function load(b, k, c)
  ${loadLua('k', 'c', FIELDS, 'b.rewound')}
  return b
end

-- write a bucket back; it must not expire before it would be full again (time_to_full_ms,
-- as seen from upd, which may be ahead of now after time went back, plus 1 ms). On Redis's
-- time the key keeps the expiry it has (KEEPTTL, half the cost of a new one) while that is
-- late enough; a new one is half as long again as needed (so a key a steady flow keeps
-- draining gets one about every capacity / 2 of cost), and its time (b.exp, a lower bound:
-- Redis counts PX from its clock's whole ms, read after TIME) is stored with the bucket.
-- On a virtual clock every write sets the expiry, and stores none. A full bucket is written
-- too, not deleted: it lives until just after its upd, as MemoryStore keeps it, so a clock
-- that goes back over it finds the same upd in both stores.
local function store(k, b, r, c)
  ${storeLua('k', 'r', 'c', FIELDS)}
end

-- one decision's words of the reply: as text (fmt), or as bytes (bin: the flag as one byte, then
-- little-endian doubles), with a global bucket its tokens and wait too; with_now: bytes led by
-- now, the whole reply of a call of one decision. flag: 1 allowed, 0 refused (x, y: tokens and
-- wait), 2 a try refused without a global bucket (x, y: the bucket's tokens and upd, from which
-- the client works out the tokens and the wait with bucket.ts's own steps)
local function word(bin, has_g, with_now, flag, x, y, gtokens, gwait)
  if bin then
    if with_now then
      if has_g then return spack('<dBdddd', now, flag, x, y, gtokens, gwait) end
      return spack('<dBdd', now, flag, x, y)
    end
    if has_g then return spack('<Bdddd', flag, x, y, gtokens, gwait) end
    return spack('<Bdd', flag, x, y)
  end
  local w = flag .. ' ' .. fmt(x) .. ' ' .. fmt(y)
  if has_g then return w .. ' ' .. fmt(gtokens) .. ' ' .. fmt(gwait) end
  return w
end

-- a batch's reply starts with now: TIME's two integers as Redis wrote them, or a double
local function header(bin, sec, usec)
  if bin then return spack('<d', now) end
  return sec .. ' ' .. usec
end

-- The usual call, one try without a global bucket: the general loop's 't' branch below, with the
-- bucket in locals and its steps in place (in Redis's Lua a call, or a table's field, costs about
-- as much as a step; docs/internals/redis.md). The same steps in the same order: the same doubles.
local function try_one(k, bin, sec, usec)
  local tokens, upd, exp, rewound, ok
  ${loadLua('k', 'cap', LOCALS, 'rewound')}
  ${bucketInline.tryCharge({ ok: 'ok', tokens: 'tokens', upd: 'upd', r: 'rate', c: 'cap', at: 'now', cost: 'cost' })}
  -- written back when charged, or (refused) when rewound, as the general path does
  if ok or rewound then
    ${storeLua('k', 'rate', 'cap', LOCALS)}
  end
  local flag, y = 1, 0
  if not ok then flag, y = 2, upd end
  if bin then return spack('<dBdd', now, flag, tokens, y) end
  return sec .. ' ' .. usec .. ' ' .. word(false, false, false, flag, tokens, y)
end

local function keyed(KEYS, ARGV, has_g, at, bin)
  if not rcall then init() end
  ${luaNow(1, { declare: false, parts: true, keep: true, given: 'at', call: 'rcall' })}
  MIN_TTL = 0
  local a = 1 -- the next argument
  if at then MIN_TTL = 60000; a = 2 end
  if ARGV[a] ~= par_text then par_text = ARGV[a]; rate, cap = params(par_text) end
  a = a + 1
  if not has_g and KEYS[2] == nil then
    if ARGV[a] ~= op_text then read_op(ARGV[a]) end
    if mode == 't' then return try_one(KEYS[1], bin, now_sec, now_usec) end
  end
  local first, out -- the first decision's words; a table only for a batch
  local o = 0 -- the decisions so far (#out, kept by hand: the length operator searches)
  local ki = 1
  local g
  local g_dirty = false
  if has_g then
    if ARGV[a] ~= gpar_text then gpar_text = ARGV[a]; grate, gcap = params(gpar_text) end
    ki = 2
    a = a + 1
    g = load(gb, KEYS[1], gcap)
    g_dirty = g.rewound == true
  end
  local k = KEYS[ki]
  while k do
    ki = ki + 1
    if ARGV[a] ~= op_text then read_op(ARGV[a]) end
    a = a + 1
    local b = load(kb, k, cap)
    local last = bin and o == 0 and KEYS[ki] == nil -- the call's only decision: its bytes lead with now
    local w -- this decision's words of the reply
    if mode == 'c' or mode == 'a' then
      -- MemoryStore.refundAt (c) and creditAt (a)
      if mode == 'c' then refund(b, rate, cap, now, cost, tonumber(ARGV[a])) else credit(b, rate, cap, now, cost) end
      store(k, b, rate, cap)
      if has_g then
        if mode == 'c' then refund(g, grate, gcap, now, cost, tonumber(ARGV[a + 1])) else credit(g, grate, gcap, now, cost) end
        g_dirty = true
      end
      if mode == 'c' then a = a + 2 end
      w = word(bin, has_g, last, 1, b.tokens, 0, has_g and g.tokens, 0)
    elseif mode == 't' and not has_g then
      if try_charge(b, rate, cap, now, cost) then
        -- a try that conforms (the usual decision): decideAt's wait is 0 and its charge is try_charge's
        store(k, b, rate, cap)
        w = word(bin, false, last, 1, b.tokens, 0)
      else
        -- refused: decideAt's tokens and wait are tokens_at and delay_until of the bucket as it stands
        -- (clamped, rewound), which the reply carries; the client runs those steps (bucket.ts)
        if b.rewound then store(k, b, rate, cap) end
        w = word(bin, false, last, 2, b.tokens, b.upd)
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
      w = word(bin, has_g, last, allowed and 1 or 0, tokens, kwait, gtokens, gwait)
    end
    o = o + 1
    if o == 1 then first = w elseif o == 2 then out = { header(bin, now_sec, now_usec), first, w } else out[o + 1] = w end
    k = KEYS[ki]
  end
  if g_dirty then store(KEYS[1], g, grate, gcap) end
  if o == 1 then -- one decision
    if bin then return first end
    return now_sec .. ' ' .. now_usec .. ' ' .. first
  end
  return table.concat(out, bin and '' or ' ')
end
`;

/** The keyed store's Lua: `keyed` without a global bucket, `keyed_g` with one; `_at` on a virtual clock. */
export const KEYED_PROGRAM: RedisProgram<KeyedEntry> = redisProgram('tokenpace_keyed', BODY, {
  keyed: 'keyed(KEYS, ARGV, false, false, false)',
  keyed_g: 'keyed(KEYS, ARGV, true, false, false)',
  keyed_at: 'keyed(KEYS, ARGV, false, true, false)',
  keyed_g_at: 'keyed(KEYS, ARGV, true, true, false)',
  keyed_b: 'keyed(KEYS, ARGV, false, false, true)',
  keyed_g_b: 'keyed(KEYS, ARGV, true, false, true)',
  keyed_at_b: 'keyed(KEYS, ARGV, false, true, true)',
  keyed_g_at_b: 'keyed(KEYS, ARGV, true, true, true)',
});

/** The entry points of {@link KEYED_PROGRAM}: `_g` with a global bucket, `_at` on a virtual clock, `_b` with a reply in bytes. */
export type KeyedEntry =
  | 'keyed'
  | 'keyed_g'
  | 'keyed_at'
  | 'keyed_g_at'
  | 'keyed_b'
  | 'keyed_g_b'
  | 'keyed_at_b'
  | 'keyed_g_at_b';
