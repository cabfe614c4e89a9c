import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * The suites that need a service: a redis-server (started by the tests themselves) or the PostgreSQL
 * on 127.0.0.1:5432. Everything else is a unit test: `npm run test:unit` runs it with no service, as
 * CI does on each Node besides the primary one (scripts/runtime.sh). The Scheduler suites run their
 * Redis form only where a redis-server was started (test/helpers/scheduler-forms.ts).
 * test/unit-suites.test.ts checks that no suite reaching a service is missing here.
 */
export const serviceSuites = [
  'test/cli/pipe-fleet.test.ts',
  'test/docs-examples.test.ts',
  'test/fleet/bandwidth-faults.test.ts',
  'test/fleet/bandwidth-processes.test.ts',
  'test/fleet/bandwidth.test.ts',
  'test/fleet/contract.test.ts',
  'test/fleet/failures.test.ts',
  'test/fleet/faults.test.ts',
  'test/fleet/idempotent.test.ts',
  'test/fleet/processes.test.ts',
  'test/fleet/property.test.ts',
  'test/fleet/rate-4-processes-60s.test.ts',
  'test/http/outcomes.test.ts',
  'test/http/plans.test.ts',
  'test/http/redis.test.ts',
  'test/keyed/channels.test.ts',
  'test/keyed/contract.test.ts',
  'test/keyed/fleet-example.test.ts',
  'test/keyed/plans.test.ts',
  'test/keyed/race.test.ts',
  'test/keyed/redis-cluster.test.ts',
  'test/keyed/redis-faults.test.ts',
  'test/keyed/redis-store.test.ts',
  'test/keyed/window-store.test.ts',
  'test/peers/bottleneck/cluster.test.ts',
  'test/postgres/bucket-sql.test.ts',
  'test/postgres/faults.test.ts',
  'test/postgres/fleet-contract.test.ts',
  'test/postgres/fleet-processes.test.ts',
  'test/postgres/idle-rows.test.ts',
  'test/postgres/keyed-contract.test.ts',
  'test/postgres/race.test.ts',
  'test/redis/bucket-lua.test.ts',
  'test/redis/eviction.test.ts',
  'test/redis/faults.test.ts',
  'test/redis/keys.test.ts',
  'test/redis/probe.test.ts',
  'test/redis/window-lua.test.ts',
  'test/scheduler/examples.test.ts',
];

const major = process.versions.node.split('.')[0];

export default defineConfig({
  test: {
    ...base.test,
    exclude: [...(base.test?.exclude ?? []), ...serviceSuites],
    globalSetup: [], // no redis-server
    reporters: ['default', ['json', { outputFile: `.tmp/vitest-unit-node${major}.json` }]],
  },
});
