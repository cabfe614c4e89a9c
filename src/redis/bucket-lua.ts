/**
 * The Lua twin of src/meters/bucket.ts: the same steps, in the same order of
 * float operations, for the scripts that keep buckets in Redis (the keyed
 * store's, src/keyed/redis-script.ts, and the fleet's, src/fleet/script.ts).
 * Each step is one Lua local function, written once here; a script takes the
 * steps it calls with {@link bucketLua}, and writes no bucket sum of its own.
 *
 * Lua's numbers are IEEE doubles like JavaScript's and + - * / round the
 * same way, so a step here and its bucket.ts namesake agree to the last bit
 * as long as both do the same operations in the same order: change them
 * together. test/redis/bucket-lua.test.ts runs bucket.ts's test tables
 * through these steps on a real redis-server and compares every result
 * exactly.
 *
 * Conventions: a bucket is a table `b = { tokens = ..., upd = ... }`
 * (BucketState; `upd` is `updatedAtMs`); `r` and `c` are its rate per second
 * and capacity (BucketParams); `at` is a time in ms. A step that takes "next
 * params" in bucket.ts takes the next capacity here (the only part it reads).
 */

interface Step {
  /** The Lua local it defines: bucket.ts's name in snake case. */
  name: string;
  /** The steps its body calls (defined before it). */
  uses: readonly string[];
  lua: string;
}

/** Every step, each after the ones it uses. */
const STEPS = [
  {
    name: 'slack_for',
    uses: [],
    lua: `-- bucket.ts slackFor
local function slack_for(c)
  return c * 2 ^ -36
end`,
  },
  {
    name: 'conforms',
    uses: ['slack_for'],
    lua: `-- bucket.ts conforms
local function conforms(available, cost, c)
  return available + slack_for(c) >= cost
end`,
  },
  {
    name: 'largest_conforming',
    uses: ['slack_for'],
    lua: `-- bucket.ts largestConforming
local function largest_conforming(available, c)
  return available + slack_for(c)
end`,
  },
  {
    name: 'tokens_at',
    uses: [],
    lua: `-- bucket.ts tokensAt
local function tokens_at(b, r, c, at)
  local elapsed = at - b.upd
  if not (elapsed > 0) then return b.tokens end
  local tokens = b.tokens + (elapsed * r) / 1000
  if c < tokens then return c end
  return tokens
end`,
  },
  {
    name: 'advance',
    uses: ['tokens_at'],
    lua: `-- bucket.ts advance
local function advance(b, r, c, at)
  b.tokens = tokens_at(b, r, c, at)
  if at > b.upd then b.upd = at end
end`,
  },
  {
    name: 'rewind',
    uses: [],
    lua: `-- bucket.ts rewind
local function rewind(b, at)
  if at < b.upd then b.upd = at end
end`,
  },
  {
    name: 'ms_until',
    uses: ['slack_for'],
    lua: `-- bucket.ts msUntil
local function ms_until(tokens, cost, r, c)
  local deficit = cost - tokens
  if deficit > slack_for(c) then return (deficit * 1000) / r end
  return 0
end`,
  },
  {
    name: 'ms_until_within',
    uses: ['ms_until'],
    lua: `-- bucket.ts msUntilWithin
local function ms_until_within(tokens, cost, r, c, within)
  if within > 0 and ms_until(tokens + (within * r) / 1000, cost, r, c) == 0 then return 0 end
  return ms_until(tokens, cost, r, c)
end`,
  },
  {
    name: 'first_conforming',
    uses: ['conforms', 'tokens_at'],
    lua: `-- bucket.ts firstConforming (2^-52: Number.EPSILON)
local function first_conforming(b, r, c, cost, from, estimate)
  local delay = estimate
  local nudge = math.max(math.abs(from), delay) * 2 ^ -52
  local i = 0
  while i < 64 and not conforms(tokens_at(b, r, c, from + delay), cost, c) do
    delay = delay + nudge
    nudge = nudge * 2
    i = i + 1
  end
  return delay
end`,
  },
  {
    name: 'ready_at',
    uses: ['first_conforming', 'ms_until'],
    lua: `-- bucket.ts readyAt
local function ready_at(b, r, c, cost)
  local from = b.upd
  return from + first_conforming(b, r, c, cost, from, ms_until(b.tokens, cost, r, c))
end`,
  },
  {
    name: 'delay_until',
    uses: ['conforms', 'tokens_at', 'first_conforming', 'ready_at'],
    lua: `-- bucket.ts delayUntil
local function delay_until(b, r, c, at, cost)
  if conforms(tokens_at(b, r, c, at), cost, c) then return 0 end
  return first_conforming(b, r, c, cost, at, ready_at(b, r, c, cost) - at)
end`,
  },
  {
    name: 'charge',
    uses: ['tokens_at'],
    lua: `-- bucket.ts charge
local function charge(b, r, c, at, cost)
  b.tokens = tokens_at(b, r, c, at) - cost
  if at > b.upd then b.upd = at end
end`,
  },
  {
    name: 'charge_new',
    uses: [],
    lua: `-- bucket.ts chargeNew
local function charge_new(c, cost)
  return c - cost
end`,
  },
  {
    name: 'try_charge',
    uses: ['conforms', 'tokens_at'],
    lua: `-- bucket.ts tryCharge
local function try_charge(b, r, c, at, cost)
  local tokens = tokens_at(b, r, c, at)
  if not conforms(tokens, cost, c) then return false end
  b.tokens = tokens - cost
  if at > b.upd then b.upd = at end
  return true
end`,
  },
  {
    name: 'credit',
    uses: ['advance'],
    lua: `-- bucket.ts credit
local function credit(b, r, c, at, amount)
  advance(b, r, c, at)
  local before = b.tokens
  b.tokens = math.min(c, before + amount)
  return math.max(0, b.tokens - before)
end`,
  },
  {
    name: 'refund',
    uses: ['tokens_at', 'credit'],
    lua: `-- bucket.ts refund (x/time's CancelAt)
local function refund(b, r, c, at, cost, ready)
  if ready < at then return 0 end
  local debt_at_ready = -tokens_at(b, r, c, ready)
  local back = cost
  if debt_at_ready > 0 then back = cost - debt_at_ready end
  if not (back > 0) then return 0 end
  return credit(b, r, c, at, back)
end`,
  },
  {
    name: 'rebill',
    uses: ['charge', 'credit'],
    lua: `-- bucket.ts rebill
local function rebill(b, r, c, at, delta)
  if delta > 0 then charge(b, r, c, at, delta)
  elseif delta < 0 then credit(b, r, c, at, -delta) end
end`,
  },
  {
    name: 'reconfigure',
    uses: ['advance'],
    lua: `-- bucket.ts reconfigure (nc: the next capacity)
local function reconfigure(b, r, c, at, nc)
  advance(b, r, c, at)
  if b.tokens > nc then b.tokens = nc end
end`,
  },
  {
    name: 'clamp_to_capacity',
    uses: [],
    lua: `-- bucket.ts clampToCapacity
local function clamp_to_capacity(b, c)
  if b.tokens > c then b.tokens = c end
end`,
  },
  {
    name: 'conforms_at',
    uses: ['conforms', 'tokens_at'],
    lua: `-- bucket.ts conformsAt
local function conforms_at(b, r, c, at, cost)
  return conforms(tokens_at(b, r, c, at), cost, c)
end`,
  },
  {
    name: 'time_to_full_ms',
    uses: [],
    lua: `-- bucket.ts timeToFullMs
local function time_to_full_ms(tokens, r, c)
  local missing = c - tokens
  if missing > 0 then return (missing * 1000) / r end
  return 0
end`,
  },
  {
    name: 'start_at',
    uses: ['ready_at', 'conforms', 'tokens_at'],
    lua: `-- bucket.ts startAt
local function start_at(b, r, c, at, cost, not_before, catch_up)
  local ready = ready_at(b, r, c, cost)
  if not conforms(tokens_at(b, r, c, at), cost, c) then return ready end
  local lag = catch_up - ((c - cost) * 1000) / r
  local earliest = at
  if lag > 0 then earliest = at - lag end
  return math.min(at, math.max(ready, not_before, earliest))
end`,
  },
] as const satisfies readonly Step[];

/** The name of a Lua step: bucket.ts's in snake case. */
export type BucketLuaStep = (typeof STEPS)[number]['name'];

/** Every step's name, in order. */
export const BUCKET_LUA_STEPS: readonly BucketLuaStep[] = STEPS.map((s) => s.name);

/**
 * The Lua that defines the steps `names` and the steps they use, each once, in dependency order:
 * a script includes what it calls.
 */
export function bucketLua(...names: readonly BucketLuaStep[]): string {
  const wanted = new Set<string>();
  const want = (name: string): void => {
    if (wanted.has(name)) return;
    const step = STEPS.find((s) => s.name === name) as Step;
    wanted.add(name);
    for (const used of step.uses) want(used);
  };
  for (const name of names) want(name);
  return STEPS.filter((s) => wanted.has(s.name))
    .map((s) => s.lua)
    .join('\n\n');
}
