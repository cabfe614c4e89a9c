/**
 * The scheduler's examples, run for real: db-jobs against the PostgreSQL this
 * machine runs (DATABASE_URL, or postgres://postgres@127.0.0.1:5432/test), and
 * api-client against the local server it starts. Neither asserts speed.
 */

import { describe, expect, it } from 'vitest';
import { main as apiClient } from '../../examples/api-client.js';
import { main as dbJobs, unreachableMessage } from '../../examples/db-jobs.js';

const quiet = (): void => {};

describe('examples/db-jobs.ts', () => {
  it('runs heavy and light queries against PostgreSQL without exceeding the weighted concurrency', async () => {
    const result = await dbJobs({ heavy: 4, light: 12, overload: 80, heavySleepSeconds: 0.05, log: quiet });
    expect(result.mostCostAtOnce).toBeLessThanOrEqual(result.concurrency);
    expect(result.mostCostAtOnce).toBeGreaterThanOrEqual(3); // heavy queries did run alongside others
    expect(result.turnedAway).toBeGreaterThan(0); // the bounded queue turned the burst away
  }, 30_000);

  it('says how to start PostgreSQL when none is reachable', async () => {
    const error = await dbJobs({ databaseUrl: 'postgres://postgres@127.0.0.1:1/test', log: quiet }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain('no PostgreSQL reachable at postgres://postgres@127.0.0.1:1/test');
    expect((error as Error).message).toContain('pg_ctlcluster --skip-systemctl-redirect');
    expect(unreachableMessage('postgres://u:secret@h/db', new Error('x'))).not.toContain('secret');
  }, 30_000);
});

describe('examples/api-client.ts', () => {
  it('gets 429s when unpaced and none through throttleInterceptor', async () => {
    const { unpaced, paced } = await apiClient({ requests: 40, log: quiet });
    expect(unpaced.tooMany).toBeGreaterThan(0);
    expect(paced).toMatchObject({ ok: 40, tooMany: 0 });
  }, 30_000);
});
