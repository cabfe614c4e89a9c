/**
 * The SQL twin of the bucket arithmetic (src/postgres/bucket-sql.ts) held to
 * bucket.ts on the real PostgreSQL server: every row of bucket.ts's test
 * tables (test/meters/bucket-cases.ts), and random calls of every step, go
 * through the PL/pgSQL functions and must give bucket.ts's answers exactly:
 * the same doubles, sign of zero included. Numbers go in as text JavaScript
 * writes exactly and come back as float8's shortest round-trip text.
 */

import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as bucket from '../../src/meters/bucket.js';
import { BUCKET_SQL_STEPS, bucketSql } from '../../src/postgres/bucket-sql.js';
import { dropSchema, PG_URL, schemaName } from '../helpers/postgres.js';
import {
  NOT_STEPS,
  type StepCall,
  type StepName,
  type StepResult,
  stepCallArb,
  TS_STEPS,
  tableCalls,
} from '../meters/bucket-cases.js';

/** Per step: the SQL that calls it on (t, u, r, c, a[]) and yields (v text, t, u). */
const CALLS: Record<StepName, string> = {
  slackFor: 'select @.tp_slack_for(c)::text, t, u',
  conforms: 'select @.tp_conforms(a[1], a[2], c)::text, t, u',
  largestConforming: 'select @.tp_largest_conforming(a[1], c)::text, t, u',
  tokensAt: 'select @.tp_tokens_at(t, u, r, c, a[1])::text, t, u',
  advance: 'select null, x.tokens, x.upd from @.tp_advance(t, u, r, c, a[1]) x',
  rewind: 'select null, x.tokens, x.upd from @.tp_rewind(t, u, a[1]) x',
  msUntil: 'select @.tp_ms_until(a[1], a[2], r, c)::text, t, u',
  msUntilWithin: 'select @.tp_ms_until_within(a[1], a[2], r, c, a[3])::text, t, u',
  readyAt: 'select @.tp_ready_at(t, u, r, c, a[1])::text, t, u',
  delayUntil: 'select @.tp_delay_until(t, u, r, c, a[1], a[2])::text, t, u',
  charge: 'select null, x.tokens, x.upd from @.tp_charge(t, u, r, c, a[1], a[2]) x',
  chargeNew: 'select @.tp_charge_new(c, a[1])::text, t, u',
  tryCharge: 'select x.ok::text, x.tokens, x.upd from @.tp_try_charge(t, u, r, c, a[1], a[2]) x',
  refund: 'select x.back::text, x.tokens, x.upd from @.tp_refund(t, u, r, c, a[1], a[2], a[3]) x',
  credit: 'select x.added::text, x.tokens, x.upd from @.tp_credit(t, u, r, c, a[1], a[2]) x',
  rebill: 'select null, x.tokens, x.upd from @.tp_rebill(t, u, r, c, a[1], a[2]) x',
  reconfigure: 'select null, x.tokens, x.upd from @.tp_reconfigure(t, u, r, c, a[1], a[3]) x',
  clampToCapacity: 'select null, x.tokens, x.upd from @.tp_clamp_to_capacity(t, u, c) x',
  conformsAt: 'select @.tp_conforms_at(t, u, r, c, a[1], a[2])::text, t, u',
  timeToFullMs: 'select @.tp_time_to_full_ms(a[1], r, c)::text, t, u',
  startAt: 'select @.tp_start_at(t, u, r, c, a[1], a[2], a[3], a[4])::text, t, u',
};

/** A double as text float8in reads back exactly (-0 kept). */
function str(x: number): string {
  return Object.is(x, -0) ? '-0' : String(x);
}

function parse(s: string): number {
  if (s === 'NaN') return Number.NaN;
  const x = Number(s);
  if (Number.isNaN(x)) throw new Error(`not a number from the server: ${JSON.stringify(s)}`);
  return x;
}

interface Answer {
  value: StepResult;
  tokens: number;
  updatedAtMs: number;
}

function runTs(c: StepCall): Answer {
  const s = { tokens: c.state[0], updatedAtMs: c.state[1] };
  const value = TS_STEPS[c.step](s, c.params, c.args);
  return { value, tokens: s.tokens, updatedAtMs: s.updatedAtMs };
}

const schema = schemaName();
const client = new pg.Client({ connectionString: PG_URL });

beforeAll(async () => {
  await client.connect();
  await client.query('set extra_float_digits = 3');
  await client.query(`create schema "${schema}"`);
  await client.query(bucketSql(`"${schema}"`));
  // One dispatcher: the step's call on the bucket (t, u), the params (r, c) and the arguments a[].
  const branches = Object.entries(CALLS)
    .map(([step, sql]) => `when '${step}' then return query ${sql.replaceAll('@.', `"${schema}".`)};`)
    .join('\n    ');
  await client.query(`
create function "${schema}".harness(step text, t float8, u float8, r float8, c float8, a float8[])
returns table (v text, tokens float8, upd float8) language plpgsql as $$
begin
  case step
    ${branches}
  end case;
end $$;`);
});
afterAll(async () => {
  await client.end();
  await dropSchema(schema);
});

/** The calls through the SQL harness, in batches of one statement each. */
async function runSql(calls: readonly StepCall[]): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let from = 0; from < calls.length; from += 200) {
    const batch = calls.slice(from, from + 200);
    const rows = batch.map((c) => [
      c.step,
      str(c.state[0]),
      str(c.state[1]),
      str(c.params.ratePerSecond),
      str(c.params.burst),
      `{${c.args.map(str).join(',')}}`,
    ]);
    const { rows: out } = await client.query<{ v: string | null; tokens: string; upd: string }>(
      `select h.v, h.tokens::text as tokens, h.upd::text as upd
         from jsonb_array_elements($1::jsonb) with ordinality as j(x, i),
         lateral "${schema}".harness(x->>0, (x->>1)::float8, (x->>2)::float8, (x->>3)::float8, (x->>4)::float8, (x->>5)::float8[]) h
        order by j.i`,
      [JSON.stringify(rows)],
    );
    for (const [i, row] of out.entries()) {
      const ts = runTs(batch[i] as StepCall);
      const value = row.v === null ? undefined : typeof ts.value === 'boolean' ? row.v === 'true' : parse(row.v);
      answers.push({ value, tokens: parse(row.tokens), updatedAtMs: parse(row.upd) });
    }
  }
  return answers;
}

async function expectSame(calls: readonly StepCall[]): Promise<void> {
  const sql = await runSql(calls);
  expect(sql.length).toBe(calls.length);
  for (const [i, c] of calls.entries()) {
    expect({ call: c, answer: sql[i] }).toEqual({ call: c, answer: runTs(c) });
  }
}

describe('the SQL twin of bucket.ts', () => {
  it('has a function for every step of bucket.ts', () => {
    const exported = Object.keys(bucket).filter((name) => !NOT_STEPS.includes(name));
    // A new step in bucket.ts needs its twin in src/postgres/bucket-sql.ts too.
    expect(exported.sort()).toEqual(Object.keys(TS_STEPS).sort());
    for (const name of Object.keys(TS_STEPS)) {
      expect(BUCKET_SQL_STEPS).toContain(name.replace(/[A-Z]/g, (ch) => `_${ch.toLowerCase()}`));
    }
  });

  it("answers every row of bucket.ts's tables exactly as bucket.ts does", async () => {
    const calls = tableCalls();
    expect(calls.length).toBeGreaterThan(100);
    await expectSame(calls);
  });

  // PostgreSQL raises an error where a product of non-zero doubles underflows to 0 (JavaScript gives 0):
  // the stores' numbers never come near it, so the random numbers here stay clear of it too.
  const callArb = stepCallArb((v) => (Math.abs(v) < 2 ** -900 ? 0 : v));

  it('answers random calls of every step exactly as bucket.ts does', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(callArb, { minLength: 50, maxLength: 200 }), (calls) => expectSame(calls)),
      { numRuns: 20 },
    );
  }, 60_000);
});
