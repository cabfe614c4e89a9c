/**
 * The SQL a PostgresStore runs: its tables, and one PL/pgSQL function that
 * makes one keyed decision, MemoryStore's steps (as RedisStore's Lua makes
 * them, src/keyed/redis-script.ts) over the SQL twin of the bucket
 * arithmetic (./bucket-sql.ts).
 *
 * Atomic: a decision is one call of `tp_keyed_decide`, one statement. It
 * locks the global bucket's row (when there is one) and then the key's row
 * (`SELECT ... FOR UPDATE`; a key with no row is inserted first, so there is
 * a row to lock), decides, and writes both or neither before it returns, so
 * two decisions from any connections never spend the same token. Every
 * decision locks in that order, global first: no deadlock.
 *
 * Time: the server's `clock_timestamp()` in ms, unless the caller passes a
 * virtual clock's time; a time before a bucket's last update re-counts from
 * it (bucket.ts `rewind`), and the bucket is then written back even when the
 * decision charges nothing, as MemoryStore keeps it.
 *
 * Idle rows: a bucket that is full again equals a new one, so its row holds
 * no information. Each row records `full_at`, when it is full again (its
 * `upd` plus the time to full, plus 1 ms). A decision that inserts a row
 * first deletes up to two rows whose `full_at` has passed (oldest first,
 * skipping rows another session holds). Rows are only ever added by such an
 * insert, so the table never holds more than the keys touched within one
 * refill time (burst / rate), plus one, whatever number of keys is sprayed at
 * it. The global bucket has one row per prefix, kept.
 *
 * Reply: text, the numbers RedisStore's script answers for one operation
 * (src/keyed/redis-script.ts: now, flag, tokens, wait, and with a global
 * bucket its tokens and wait; flag 2 for a try refused without a global
 * bucket, with the bucket's tokens and updatedAtMs), each written by float8's
 * shortest exact form (`extra_float_digits = 3`), so no ulp is lost.
 */

import { bucketSql } from './bucket-sql.js';

/** The tables and functions of a PostgresStore in `schema` (a quoted identifier). */
export function keyedSql(schema: string, unlogged: boolean): string {
  const table = unlogged ? 'unlogged table' : 'table';
  return `
create schema if not exists ${schema};

create ${table} if not exists ${schema}.tp_keyed (
  ns text not null,
  key text not null,
  tokens float8 not null,
  upd float8 not null,
  full_at float8 not null,
  primary key (ns, key)
);
create index if not exists tp_keyed_full_at on ${schema}.tp_keyed (full_at);

create ${table} if not exists ${schema}.tp_keyed_global (
  ns text primary key,
  tokens float8 not null,
  upd float8 not null
);

${bucketSql(schema)}

-- A decision: p_mode t try, r reserve (p_a: maxWaitMs, -1 any), p peek, c cancel (p_a, p_b:
-- readyAtMs, globalReadyAtMs), a credit. p_grate null: no global bucket. p_now null: the server's time.
create or replace function ${schema}.tp_keyed_decide(
  p_ns text, p_key text, p_mode text, p_cost float8, p_rate float8, p_cap float8,
  p_grate float8, p_gcap float8, p_a float8, p_b float8, p_now float8, p_lock_ms int
) returns text
language plpgsql volatile set extra_float_digits = 3 as $$
declare
  now float8 := coalesce(p_now, (extract(epoch from clock_timestamp()) * 1000)::float8);
  has_g boolean := p_grate is not null;
  kt float8; ku float8; k_rewound boolean := false; k_absent boolean := false; k_new boolean := false;
  gt float8; gu float8; g_dirty boolean := false;
  kwait float8; gwait float8 := 0; wait float8; allowed boolean; ok boolean;
  tokens float8; gtokens float8;
  x record;
begin
  if p_lock_ms is not null then
    perform set_config('lock_timeout', p_lock_ms || 'ms', true);
  end if;

  -- the global bucket (MemoryStore's read: absent = full and new at now; clamped; rewound)
  if has_g then
    select g.tokens, g.upd into gt, gu from ${schema}.tp_keyed_global g where g.ns = p_ns for update;
    if not found then
      insert into ${schema}.tp_keyed_global (ns, tokens, upd) values (p_ns, p_gcap, now) on conflict do nothing;
      if found then
        gt := p_gcap; gu := now;
      else
        select g.tokens, g.upd into gt, gu from ${schema}.tp_keyed_global g where g.ns = p_ns for update;
      end if;
    else
      select c.tokens into gt from ${schema}.tp_clamp_to_capacity(gt, gu, p_gcap) c;
      g_dirty := now < gu;
      select w.tokens, w.upd into gt, gu from ${schema}.tp_rewind(gt, gu, now) w;
    end if;
  end if;

  -- the key's bucket: locked; a try or reserve on a key with no row inserts it (full, new) to lock it
  loop
    select k.tokens, k.upd into kt, ku from ${schema}.tp_keyed k where k.ns = p_ns and k.key = p_key for update;
    if found then
      select c.tokens into kt from ${schema}.tp_clamp_to_capacity(kt, ku, p_cap) c;
      k_rewound := now < ku;
      select w.tokens, w.upd into kt, ku from ${schema}.tp_rewind(kt, ku, now) w;
      exit;
    end if;
    kt := p_cap; ku := now;
    if p_mode not in ('t', 'r') then
      k_absent := true; -- a peek, cancel or credit of a full bucket writes nothing
      exit;
    end if;
    insert into ${schema}.tp_keyed (ns, key, tokens, upd, full_at) values (p_ns, p_key, kt, ku, now)
      on conflict do nothing;
    if found then
      k_new := true;
      -- reclaim up to two rows that are full again: rows are added only here, so the table stays bounded
      delete from ${schema}.tp_keyed where ctid = any(array(
        select s.ctid from ${schema}.tp_keyed s where s.full_at < now order by s.full_at limit 2
        for update skip locked));
      exit;
    end if;
  end loop;

  if p_mode = 'c' or p_mode = 'a' then
    -- MemoryStore.refundAt (c) and creditAt (a)
    if not k_absent then
      if p_mode = 'c' then
        select f.tokens, f.upd into kt, ku from ${schema}.tp_refund(kt, ku, p_rate, p_cap, now, p_cost, p_a) f;
      else
        select f.tokens, f.upd into kt, ku from ${schema}.tp_credit(kt, ku, p_rate, p_cap, now, p_cost) f;
      end if;
      k_new := false;
      k_rewound := true; -- written below
    end if;
    if has_g then
      if p_mode = 'c' then
        select f.tokens, f.upd into gt, gu from ${schema}.tp_refund(gt, gu, p_grate, p_gcap, now, p_cost, p_b) f;
      else
        select f.tokens, f.upd into gt, gu from ${schema}.tp_credit(gt, gu, p_grate, p_gcap, now, p_cost) f;
      end if;
      g_dirty := true;
    end if;
    tokens := kt; kwait := 0; gtokens := gt; gwait := 0; allowed := true;
  elsif p_mode = 't' and not has_g then
    select f.tokens, f.upd, f.ok into kt, ku, ok from ${schema}.tp_try_charge(kt, ku, p_rate, p_cap, now, p_cost) f;
    if ok then
      k_rewound := true;
      tokens := kt; kwait := 0; allowed := true;
    else
      -- refused: the client works out the tokens and the wait from the bucket as it stands
      if k_rewound then
        update ${schema}.tp_keyed set tokens = kt, upd = ku,
          full_at = ku + ceil(${schema}.tp_time_to_full_ms(kt, p_rate, p_cap)) + 1
          where ns = p_ns and key = p_key;
      end if;
      return concat_ws(' ', now::text, '2', kt::text, ku::text);
    end if;
  else
    -- MemoryStore.decideAt: ask when (delay_until) on the state as written, then charge
    kwait := ${schema}.tp_delay_until(kt, ku, p_rate, p_cap, now, p_cost);
    wait := kwait;
    if has_g then
      gwait := ${schema}.tp_delay_until(gt, gu, p_grate, p_gcap, now, p_cost);
      if gwait > wait then wait := gwait; end if;
    end if;
    if p_mode = 'r' then
      allowed := p_a < 0 or wait <= p_a
        or (${schema}.tp_conforms_at(kt, ku, p_rate, p_cap, now + p_a, p_cost)
          and (not has_g or ${schema}.tp_conforms_at(gt, gu, p_grate, p_gcap, now + p_a, p_cost)));
    else
      allowed := wait = 0;
    end if;
    if allowed and p_mode <> 'p' then
      select f.tokens, f.upd into kt, ku from ${schema}.tp_charge(kt, ku, p_rate, p_cap, now, p_cost) f;
      k_rewound := true;
      tokens := kt;
      if has_g then
        select f.tokens, f.upd into gt, gu from ${schema}.tp_charge(gt, gu, p_grate, p_gcap, now, p_cost) f;
        gtokens := gt;
        g_dirty := true;
      end if;
    else
      tokens := ${schema}.tp_tokens_at(kt, ku, p_rate, p_cap, now);
      if has_g then gtokens := ${schema}.tp_tokens_at(gt, gu, p_grate, p_gcap, now); end if;
    end if;
  end if;

  -- write back what changed (a new row the decision left full stays as inserted)
  if (k_rewound or k_new) and not k_absent then
    update ${schema}.tp_keyed set tokens = kt, upd = ku,
      full_at = ku + ceil(${schema}.tp_time_to_full_ms(kt, p_rate, p_cap)) + 1
      where ns = p_ns and key = p_key;
  end if;
  if g_dirty then
    update ${schema}.tp_keyed_global set tokens = gt, upd = gu where ns = p_ns;
  end if;
  if has_g then
    return concat_ws(' ', now::text, case when allowed then '1' else '0' end, tokens::text, kwait::text,
      gtokens::text, gwait::text);
  end if;
  return concat_ws(' ', now::text, case when allowed then '1' else '0' end, tokens::text, kwait::text);
end $$;
`;
}
