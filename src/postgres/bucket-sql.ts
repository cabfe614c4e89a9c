/**
 * The SQL twin of src/meters/bucket.ts: the same steps, in the same order of
 * float operations, as PL/pgSQL functions for the stores that keep buckets in
 * PostgreSQL (./keyed-sql.ts, ./fleet-sql.ts). Each step is one function,
 * written once here, named as bucket.ts's step in snake case with the prefix
 * `tp_` (`tp_tokens_at`), in the store's schema.
 *
 * Invariants (bucket.ts's, kept here by doing the same operations in the same
 * order):
 *
 * - `double precision` is an IEEE double and + - * / round as JavaScript's
 *   do, so a step agrees with its bucket.ts namesake to the last bit;
 *   test/postgres/bucket-sql.test.ts runs bucket.ts's test tables through
 *   these functions on a real server and compares every result exactly.
 * - refill is lazy: `tokens(t) = min(capacity, tokens + (t - upd) * rate / 1000)`;
 *   time before `upd` counts as none, and `upd` never moves back except by
 *   `tp_rewind` (a clock that stepped back: re-count from the earlier time).
 * - one tolerance rule: an amount conforms when short by at most
 *   `capacity * 2^-36`; every computed instant is the first at which the
 *   bucket holds the cost.
 * - `least`/`greatest` keep the first of equal arguments, as Lua's
 *   `math.min`/`math.max` do; `Math.min(c, x)` is written as bucket-lua.ts
 *   writes it (`if c < x`), so a signed zero comes out as in JavaScript.
 *
 * Two differences from JavaScript that the steps never meet: PostgreSQL
 * raises an error where a finite operation overflows or underflows (JavaScript
 * gives Infinity or 0), and it orders NaN above every number. The stores'
 * rates and bursts (at most 2^53, a rate above 0) and times keep every step
 * finite and far from the underflow.
 *
 * Conventions: a bucket is the pair `(tokens, upd)` (BucketState; `upd` is
 * `updatedAtMs`), passed as two arguments and, where a step changes it, given
 * back as INOUT parameters; `r` and `c` are its rate per second and capacity
 * (BucketParams); `at` is a time in ms. A step that takes "next params" in
 * bucket.ts takes the next capacity here (the only part it reads).
 */

/** One step: bucket.ts's name in snake case, and its definition with `@` for the schema. */
interface Step {
  name: string;
  sql: string;
}

const STEPS: readonly Step[] = [
  {
    name: 'slack_for',
    sql: `-- bucket.ts slackFor
create or replace function @.tp_slack_for(c float8) returns float8
language sql immutable parallel safe as $$ select c * (2::float8 ^ -36) $$;`,
  },
  {
    name: 'conforms',
    sql: `-- bucket.ts conforms
create or replace function @.tp_conforms(available float8, cost float8, c float8) returns boolean
language sql immutable parallel safe as $$ select available + @.tp_slack_for(c) >= cost $$;`,
  },
  {
    name: 'largest_conforming',
    sql: `-- bucket.ts largestConforming
create or replace function @.tp_largest_conforming(available float8, c float8) returns float8
language sql immutable parallel safe as $$ select available + @.tp_slack_for(c) $$;`,
  },
  {
    name: 'tokens_at',
    sql: `-- bucket.ts tokensAt
create or replace function @.tp_tokens_at(tokens float8, upd float8, r float8, c float8, at float8) returns float8
language plpgsql immutable parallel safe as $$
declare
  elapsed float8 := at - upd;
  t float8;
begin
  if not (elapsed > 0) then return tokens; end if;
  t := tokens + (elapsed * r) / 1000;
  if c < t then return c; end if;
  return t;
end $$;`,
  },
  {
    name: 'advance',
    sql: `-- bucket.ts advance
create or replace function @.tp_advance(inout tokens float8, inout upd float8, r float8, c float8, at float8)
language plpgsql immutable parallel safe as $$
begin
  tokens := @.tp_tokens_at(tokens, upd, r, c, at);
  if at > upd then upd := at; end if;
end $$;`,
  },
  {
    name: 'rewind',
    sql: `-- bucket.ts rewind
create or replace function @.tp_rewind(inout tokens float8, inout upd float8, at float8)
language plpgsql immutable parallel safe as $$
begin
  if at < upd then upd := at; end if;
end $$;`,
  },
  {
    name: 'ms_until',
    sql: `-- bucket.ts msUntil
create or replace function @.tp_ms_until(tokens float8, cost float8, r float8, c float8) returns float8
language plpgsql immutable parallel safe as $$
declare
  deficit float8 := cost - tokens;
begin
  if deficit > @.tp_slack_for(c) then return (deficit * 1000) / r; end if;
  return 0;
end $$;`,
  },
  {
    name: 'ms_until_within',
    sql: `-- bucket.ts msUntilWithin
create or replace function @.tp_ms_until_within(tokens float8, cost float8, r float8, c float8, within float8) returns float8
language plpgsql immutable parallel safe as $$
begin
  if within > 0 and @.tp_ms_until(tokens + (within * r) / 1000, cost, r, c) = 0 then return 0; end if;
  return @.tp_ms_until(tokens, cost, r, c);
end $$;`,
  },
  {
    name: 'first_conforming',
    sql: `-- bucket.ts firstConforming (2^-52: Number.EPSILON)
create or replace function @.tp_first_conforming(tokens float8, upd float8, r float8, c float8, cost float8, "from" float8, estimate float8) returns float8
language plpgsql immutable parallel safe as $$
declare
  delay float8 := estimate;
  nudge float8 := greatest(abs("from"), delay) * (2::float8 ^ -52);
  i int := 0;
begin
  while i < 64 and not @.tp_conforms(@.tp_tokens_at(tokens, upd, r, c, "from" + delay), cost, c) loop
    delay := delay + nudge;
    nudge := nudge * 2;
    i := i + 1;
  end loop;
  return delay;
end $$;`,
  },
  {
    name: 'ready_at',
    sql: `-- bucket.ts readyAt
create or replace function @.tp_ready_at(tokens float8, upd float8, r float8, c float8, cost float8) returns float8
language plpgsql immutable parallel safe as $$
begin
  return upd + @.tp_first_conforming(tokens, upd, r, c, cost, upd, @.tp_ms_until(tokens, cost, r, c));
end $$;`,
  },
  {
    name: 'delay_until',
    sql: `-- bucket.ts delayUntil
create or replace function @.tp_delay_until(tokens float8, upd float8, r float8, c float8, at float8, cost float8) returns float8
language plpgsql immutable parallel safe as $$
begin
  if @.tp_conforms(@.tp_tokens_at(tokens, upd, r, c, at), cost, c) then return 0; end if;
  return @.tp_first_conforming(tokens, upd, r, c, cost, at, @.tp_ready_at(tokens, upd, r, c, cost) - at);
end $$;`,
  },
  {
    name: 'charge',
    sql: `-- bucket.ts charge
create or replace function @.tp_charge(inout tokens float8, inout upd float8, r float8, c float8, at float8, cost float8)
language plpgsql immutable parallel safe as $$
begin
  tokens := @.tp_tokens_at(tokens, upd, r, c, at) - cost;
  if at > upd then upd := at; end if;
end $$;`,
  },
  {
    name: 'charge_new',
    sql: `-- bucket.ts chargeNew
create or replace function @.tp_charge_new(c float8, cost float8) returns float8
language sql immutable parallel safe as $$ select c - cost $$;`,
  },
  {
    name: 'try_charge',
    sql: `-- bucket.ts tryCharge
create or replace function @.tp_try_charge(inout tokens float8, inout upd float8, r float8, c float8, at float8, cost float8, out ok boolean)
language plpgsql immutable parallel safe as $$
declare
  t float8 := @.tp_tokens_at(tokens, upd, r, c, at);
begin
  if not @.tp_conforms(t, cost, c) then ok := false; return; end if;
  tokens := t - cost;
  if at > upd then upd := at; end if;
  ok := true;
end $$;`,
  },
  {
    name: 'credit',
    sql: `-- bucket.ts credit
create or replace function @.tp_credit(inout tokens float8, inout upd float8, r float8, c float8, at float8, amount float8, out added float8)
language plpgsql immutable parallel safe as $$
declare
  before float8;
begin
  select a.tokens, a.upd into tokens, upd from @.tp_advance(tokens, upd, r, c, at) a;
  before := tokens;
  tokens := least(c, before + amount);
  added := greatest(0, tokens - before);
end $$;`,
  },
  {
    name: 'refund',
    sql: `-- bucket.ts refund (x/time's CancelAt)
create or replace function @.tp_refund(inout tokens float8, inout upd float8, r float8, c float8, at float8, cost float8, ready float8, out back float8)
language plpgsql immutable parallel safe as $$
declare
  debt_at_ready float8;
  give float8 := cost;
begin
  back := 0;
  if ready < at then return; end if;
  debt_at_ready := -@.tp_tokens_at(tokens, upd, r, c, ready);
  if debt_at_ready > 0 then give := cost - debt_at_ready; end if;
  if not (give > 0) then return; end if;
  select x.tokens, x.upd, x.added into tokens, upd, back from @.tp_credit(tokens, upd, r, c, at, give) x;
end $$;`,
  },
  {
    name: 'rebill',
    sql: `-- bucket.ts rebill
create or replace function @.tp_rebill(inout tokens float8, inout upd float8, r float8, c float8, at float8, delta float8)
language plpgsql immutable parallel safe as $$
begin
  if delta > 0 then
    select x.tokens, x.upd into tokens, upd from @.tp_charge(tokens, upd, r, c, at, delta) x;
  elsif delta < 0 then
    select x.tokens, x.upd into tokens, upd from @.tp_credit(tokens, upd, r, c, at, -delta) x;
  end if;
end $$;`,
  },
  {
    name: 'reconfigure',
    sql: `-- bucket.ts reconfigure (nc: the next capacity)
create or replace function @.tp_reconfigure(inout tokens float8, inout upd float8, r float8, c float8, at float8, nc float8)
language plpgsql immutable parallel safe as $$
begin
  select x.tokens, x.upd into tokens, upd from @.tp_advance(tokens, upd, r, c, at) x;
  if tokens > nc then tokens := nc; end if;
end $$;`,
  },
  {
    name: 'clamp_to_capacity',
    sql: `-- bucket.ts clampToCapacity
create or replace function @.tp_clamp_to_capacity(inout tokens float8, inout upd float8, c float8)
language plpgsql immutable parallel safe as $$
begin
  if tokens > c then tokens := c; end if;
end $$;`,
  },
  {
    name: 'conforms_at',
    sql: `-- bucket.ts conformsAt
create or replace function @.tp_conforms_at(tokens float8, upd float8, r float8, c float8, at float8, cost float8) returns boolean
language sql immutable parallel safe as $$ select @.tp_conforms(@.tp_tokens_at(tokens, upd, r, c, at), cost, c) $$;`,
  },
  {
    name: 'time_to_full_ms',
    sql: `-- bucket.ts timeToFullMs
create or replace function @.tp_time_to_full_ms(tokens float8, r float8, c float8) returns float8
language plpgsql immutable parallel safe as $$
declare
  missing float8 := c - tokens;
begin
  if missing > 0 then return (missing * 1000) / r; end if;
  return 0;
end $$;`,
  },
  {
    name: 'start_at',
    sql: `-- bucket.ts startAt
create or replace function @.tp_start_at(tokens float8, upd float8, r float8, c float8, at float8, cost float8, not_before float8, catch_up float8) returns float8
language plpgsql immutable parallel safe as $$
declare
  ready float8 := @.tp_ready_at(tokens, upd, r, c, cost);
  lag float8;
  earliest float8 := at;
begin
  if not @.tp_conforms(@.tp_tokens_at(tokens, upd, r, c, at), cost, c) then return ready; end if;
  lag := catch_up - ((c - cost) * 1000) / r;
  if lag > 0 then earliest := at - lag; end if;
  return least(at, greatest(ready, not_before, earliest));
end $$;`,
  },
];

/** Every step's name, in order (bucket.ts's names in snake case). */
export const BUCKET_SQL_STEPS: readonly string[] = STEPS.map((s) => s.name);

/** The SQL that defines every step in `schema` (a quoted identifier), each after the ones it uses. */
export function bucketSql(schema: string): string {
  return STEPS.map((s) => s.sql.replaceAll('@.', `${schema}.`)).join('\n\n');
}
