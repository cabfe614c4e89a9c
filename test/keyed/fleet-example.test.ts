/**
 * examples/keyed-fleet.ts end to end: its own redis-server, three worker
 * processes sharing one limit, and Redis killed and restarted under each
 * failure policy. Real time and real processes on a shared machine, so the
 * bounds leave room for skew between the workers; what no timing changes is
 * asserted exactly (every request answered, the policy's direction).
 */

import { describe, expect, it } from 'vitest';
import { fleetLimits, main, type WorkerReport } from '../../examples/keyed-fleet.js';

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const fleet = (reports: WorkerReport[], second?: number) =>
  sum(reports.map((r) => (second === undefined ? sum(r.admitted) : (r.admitted[second] ?? 0))));

describe('examples/keyed-fleet.ts', () => {
  it('three processes share one limit through Redis, and each failure policy acts while Redis is down', async () => {
    const lines: string[] = [];
    const { shared, failures } = await main({ log: (line) => lines.push(line) });
    const { rate, burst, workers } = fleetLimits;

    // 1. Shared: 120 offered in 2 s; the fleet gets burst + rate * T, with T a little over 2 s when the
    // workers' starts are skewed, and far from the 60 three separate limiters would give.
    expect(shared).toHaveLength(workers);
    expect(sum(shared.map((r) => sum(r.offered)))).toBe(120);
    expect(fleet(shared)).toBeLessThanOrEqual(burst + rate * 2.5);
    expect(fleet(shared)).toBeGreaterThanOrEqual(burst + rate * 1);
    expect(lines.join('\n')).toContain('the fleet admitted');

    // 2. Redis is down for the second second of each run: every worker sees it (a 'degraded' event).
    for (const reports of Object.values(failures)) {
      expect(reports).toHaveLength(workers);
      for (const r of reports) {
        expect(sum(r.offered)).toBe(30);
        expect(r.events.some((e) => e.startsWith('degraded'))).toBe(true);
      }
    }
    // While it is down: fail-open admits nearly all of the 30 offered, fail-closed nearly none, and the
    // local buckets (a fresh burst of 10 per worker) more than the shared limit allows in a second.
    expect(fleet(failures.allow, 1)).toBeGreaterThanOrEqual(20);
    expect(fleet(failures.deny, 1)).toBeLessThanOrEqual(8);
    expect(fleet(failures.local, 1)).toBeGreaterThan(burst + rate);
  }, 40_000);
});
