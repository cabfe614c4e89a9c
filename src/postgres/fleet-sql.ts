/**
 * The SQL a PostgresFleetStore runs: the fleet script of src/fleet/script.ts
 * ported to PL/pgSQL, the same protocol (arguments and reply as the Lua's
 * ARGV and reply; read that file for each operation), so the shared fleet
 * store (src/fleet/shared-fleet-store.ts) drives both backends alike.
 *
 * Atomic: one call of `tp_fleet_call` per operation. It locks the fleet
 * key's state row (`FOR UPDATE`; a key with no row is inserted first), so the
 * bucket, the leases and the claims of one fleet key change in one step,
 * serialized with every other call on that key from any connection.
 *
 * Tables: `tp_fleet` (per fleet key: parameters, bucket, in-flight weight,
 * claim counter, when the idle key may go), `tp_fleet_lease` (lease id,
 * weight, expiry), `tp_fleet_claim` (claim id, order, cost, last asked).
 * Expired leases are purged at the start of every call. A key idle for
 * `idleTtl` after its last lease expires is deleted, with its leases and
 * claims, by the call that next inserts a new fleet key (up to two per
 * insert), so the tables stay bounded without a cron.
 *
 * The bucket steps are the SQL twin of bucket.ts (./bucket-sql.ts); the time
 * is the server's `clock_timestamp()` unless a virtual clock's is passed.
 */

/** The fleet tables and `tp_fleet_call` in `schema` (a quoted identifier); needs ./bucket-sql.ts's steps. */
export function fleetSql(schema: string, unlogged: boolean): string {
  const table = unlogged ? 'unlogged table' : 'table';
  const s = schema;
  return `
create ${table} if not exists ${s}.tp_fleet (
  ns text not null,
  key text not null,
  rate float8 not null,
  burst float8 not null,
  conc float8 not null,
  tok float8 not null,
  upd float8 not null,
  inf float8 not null,
  cseq bigint not null default 0,
  idle_at float8 not null,
  primary key (ns, key)
);
create index if not exists tp_fleet_idle_at on ${s}.tp_fleet (idle_at);

create ${table} if not exists ${s}.tp_fleet_lease (
  ns text not null,
  key text not null,
  id text not null,
  weight float8 not null,
  expiry float8 not null,
  primary key (ns, key, id)
);
create index if not exists tp_fleet_lease_expiry on ${s}.tp_fleet_lease (ns, key, expiry);

create ${table} if not exists ${s}.tp_fleet_claim (
  ns text not null,
  key text not null,
  id text not null,
  seq bigint not null,
  cost float8 not null,
  last float8 not null,
  primary key (ns, key, id)
);
create index if not exists tp_fleet_claim_seq on ${s}.tp_fleet_claim (ns, key, seq);

-- argv is the Lua's ARGV (argv[1], the time, unused: p_now); p_now null: the server's time
create or replace function ${s}.tp_fleet_call(p_ns text, p_key text, argv text[], p_now float8, p_lock_ms int)
returns text
language plpgsql volatile set extra_float_digits = 3 as $$
<<fc>>
declare
  now float8 := coalesce(p_now, (extract(epoch from clock_timestamp()) * 1000)::float8);
  op text := argv[2];
  ttl float8 := argv[3]::float8;
  late boolean := case when argv[7] <> '' then now > argv[7]::float8 else false end;
  nargs int := coalesce(array_length(argv, 1), 0);
  rate float8; burst float8; conc float8; bt float8; bu float8; inf float8; cseq bigint;
  status float8 := 1; delay float8 := 0; ready float8 := now;
  grants text[] := '{}';
  w float8; n int; i int; j int;
  leasems float8; claimttl float8; nrel int; granted int; stop boolean;
  cost float8; wt float8; maxwait float8; me text; st float8; d float8; r float8; held float8; ahead float8;
  hid text; hcost float8; hlast float8;
  nrate float8; nburst float8; expiry float8; shown float8; untilexp float8 := -1; last_expiry float8;
begin
  if p_lock_ms is not null then
    perform set_config('lock_timeout', p_lock_ms || 'ms', true);
  end if;

  -- the parameters and the bucket (rate -1: none; then the bucket is kept but not used)
  loop
    select f.rate, f.burst, f.conc, f.tok, f.upd, f.inf, f.cseq into rate, burst, conc, bt, bu, inf, cseq
      from ${s}.tp_fleet f where f.ns = p_ns and f.key = p_key for update;
    if found then
      select x.tokens, x.upd into bt, bu from ${s}.tp_rewind(bt, bu, now) x; -- bucket.ts rewind
      exit;
    end if;
    rate := argv[4]::float8; burst := argv[5]::float8; conc := argv[6]::float8;
    bt := burst; bu := now; inf := 0; cseq := 0;
    insert into ${s}.tp_fleet (ns, key, rate, burst, conc, tok, upd, inf, idle_at)
      values (p_ns, p_key, rate, burst, conc, bt, bu, inf, now + ttl) on conflict do nothing;
    if found then
      -- a new fleet key: reclaim up to two keys idle past their time, with their leases and claims
      with gone as (
        delete from ${s}.tp_fleet where ctid = any(array(
          select g.ctid from ${s}.tp_fleet g where g.idle_at < now order by g.idle_at limit 2 for update skip locked))
        returning ns, key
      ), l as (
        delete from ${s}.tp_fleet_lease x using gone where x.ns = gone.ns and x.key = gone.key
      )
      delete from ${s}.tp_fleet_claim x using gone where x.ns = gone.ns and x.key = gone.key;
      -- leases or claims left by a key deleted earlier belong to no one now
      delete from ${s}.tp_fleet_lease x where x.ns = p_ns and x.key = p_key;
      delete from ${s}.tp_fleet_claim x where x.ns = p_ns and x.key = p_key;
      exit;
    end if;
  end loop;

  -- purge the leases whose expiry has passed
  for w in delete from ${s}.tp_fleet_lease x where x.ns = p_ns and x.key = p_key and x.expiry <= now
    returning x.weight loop
    inf := inf - w;
  end loop;

  if op = 'b' then
    leasems := argv[8]::float8;
    claimttl := argv[9]::float8;
    nrel := argv[10]::int;
    if nrel > 0 then
      for w in delete from ${s}.tp_fleet_lease x where x.ns = p_ns and x.key = p_key and x.id = any(argv[11 : 10 + nrel])
        returning x.weight loop
        inf := inf - w;
      end loop;
    end if;
    granted := 0;
    stop := late;
    if late then status := 5; end if;
    i := 11 + nrel;
    while i <= nargs loop
      -- 'cost' or 'cost:weight': tokens from the bucket, and units its lease holds (the cost unless told)
      cost := split_part(argv[i], ':', 1)::float8;
      wt := coalesce(nullif(split_part(argv[i], ':', 2), '')::float8, cost);
      maxwait := argv[i + 1]::float8;
      me := argv[i + 2];
      st := 4; d := 0; r := now;
      select x.expiry into held from ${s}.tp_fleet_lease x where x.ns = p_ns and x.key = p_key and x.id = me;
      if stop then
        st := 4;
      elsif found then
        -- a replay of a grant (its first answer was lost): answered from the lease, counted once
        st := 1;
        r := held - leasems;
        if r < now then r := now; end if;
        d := r - now;
        granted := granted + 1;
        if d > 0 then stop := true; end if;
      elsif (conc >= 0 and wt > conc) or (rate >= 0 and cost > burst) then
        st := 3;
      else
        -- the oldest live claim on the budget: later acquires leave room for it
        ahead := 0;
        if conc >= 0 then
          for j in 1 .. 64 loop
            select c.id, c.cost, c.last into hid, hcost, hlast from ${s}.tp_fleet_claim c
              where c.ns = p_ns and c.key = p_key order by c.seq limit 1;
            exit when not found;
            if hlast >= now - claimttl then
              if hid <> me then ahead := hcost; end if;
              exit;
            end if;
            delete from ${s}.tp_fleet_claim c where c.ns = p_ns and c.key = p_key and c.id = hid;
          end loop;
        end if;
        if conc >= 0 and inf + wt + ahead > conc + ${s}.tp_slack_for(conc) then
          st := 2;
          stop := true;
          -- claims in order of first refusal (a counter, not the time: two in one ms keep their order)
          update ${s}.tp_fleet_claim c set cost = wt, last = now
            where c.ns = p_ns and c.key = p_key and c.id = me;
          if not found then
            cseq := cseq + 1;
            insert into ${s}.tp_fleet_claim (ns, key, id, seq, cost, last) values (p_ns, p_key, me, cseq, wt, now);
          end if;
        else
          if rate >= 0 then d := ${s}.tp_delay_until(bt, bu, rate, burst, now, cost); end if;
          if d > 0 and granted > 0 then
            st := 4;
            d := 0;
            stop := true;
          elsif maxwait >= 0 and d > maxwait then
            st := 0;
          else
            st := 1;
            r := now + d;
            if rate >= 0 then
              select x.tokens, x.upd into bt, bu from ${s}.tp_charge(bt, bu, rate, burst, now, cost) x;
            end if;
            insert into ${s}.tp_fleet_lease (ns, key, id, weight, expiry) values (p_ns, p_key, me, wt, r + leasems)
              on conflict (ns, key, id) do update set weight = excluded.weight, expiry = excluded.expiry;
            inf := inf + wt;
            if conc >= 0 then
              delete from ${s}.tp_fleet_claim c where c.ns = p_ns and c.key = p_key and c.id = me;
            end if;
            granted := granted + 1;
            if d > 0 then stop := true; end if;
          end if;
        end if;
      end if;
      grants := grants || st::text || d::text || r::text;
      i := i + 3;
    end loop;
  elsif op = 'c' then
    n := 0;
    for w in delete from ${s}.tp_fleet_lease x where x.ns = p_ns and x.key = p_key and x.id = argv[8]
      returning x.weight loop
      inf := inf - w;
      n := n + 1;
    end loop;
    if n > 0 and rate >= 0 then
      select x.tokens, x.upd into bt, bu from ${s}.tp_refund(bt, bu, rate, burst, now, argv[9]::float8, argv[10]::float8) x;
    end if;
  elsif op = 'r' then
    nrel := argv[9]::int;
    if nrel > 0 then
      for w in delete from ${s}.tp_fleet_lease x where x.ns = p_ns and x.key = p_key and x.id = any(argv[10 : 9 + nrel])
        returning x.weight loop
        inf := inf - w;
      end loop;
    end if;
    expiry := now + argv[8]::float8;
    if late then status := 5; end if;
    i := 10 + nrel;
    while i <= nargs and not late loop
      update ${s}.tp_fleet_lease x set expiry = fc.expiry
        where x.ns = p_ns and x.key = p_key and x.id = argv[i];
      if not found then
        insert into ${s}.tp_fleet_lease (ns, key, id, weight, expiry) values (p_ns, p_key, argv[i], argv[i + 1]::float8, expiry);
        inf := inf + argv[i + 1]::float8;
      end if;
      i := i + 2;
    end loop;
  elsif op = 'j' and late then
    status := 5;
  elsif op = 'j' then
    if rate >= 0 then
      select x.tokens, x.upd into bt, bu from ${s}.tp_rebill(bt, bu, rate, burst, now, argv[8]::float8) x;
    end if;
  elsif op = 's' then
    nrate := rate; nburst := burst;
    if argv[8] <> '' then nrate := argv[8]::float8; end if;
    if argv[9] <> '' then nburst := argv[9]::float8; end if;
    if argv[10] <> '' then conc := argv[10]::float8; end if;
    if rate >= 0 then
      select x.tokens, x.upd into bt, bu from ${s}.tp_reconfigure(bt, bu, rate, burst, now, nburst) x;
    else
      -- a first rate: the bucket starts full (at the burst it had), then takes the new one
      if nrate >= 0 then bt := burst; bu := now; end if;
      select x.tokens into bt from ${s}.tp_clamp_to_capacity(bt, bu, nburst) x;
    end if;
    rate := nrate;
    burst := nburst;
  end if;

  select min(x.expiry), max(x.expiry) into untilexp, last_expiry from ${s}.tp_fleet_lease x
    where x.ns = p_ns and x.key = p_key;
  if untilexp is null then
    inf := 0;
    untilexp := -1;
    last_expiry := now;
  else
    untilexp := untilexp - now;
  end if;
  update ${s}.tp_fleet f set rate = fc.rate, burst = fc.burst, conc = fc.conc,
    tok = bt, upd = bu, inf = fc.inf, cseq = fc.cseq,
    idle_at = greatest(now, last_expiry) + ttl
    where f.ns = p_ns and f.key = p_key;
  shown := bt;
  if rate >= 0 then shown := ${s}.tp_tokens_at(bt, bu, rate, burst, now); end if;
  return concat_ws(' ', now::text, status::text, delay::text, ready::text, shown::text, inf::text, rate::text,
    burst::text, conc::text, untilexp::text, nullif(array_to_string(grants, ' '), ''));
end fc $$;
`;
}
