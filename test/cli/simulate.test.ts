/**
 * The simulator: deterministic for a trace, the contenders' bounds hold on
 * every scenario (both sides), the totals add up, the CSV forms parse, and the
 * virtual clock fires timers in order.
 */

import { describe, expect, it } from 'vitest';
import {
  formatChart,
  formatHeader,
  formatLookAt,
  formatSummary,
  formatTable,
  formatWait,
} from '../../src/cli/report.js';
import { parseCsvTrace, prng, SCENARIOS, scenario } from '../../src/cli/scenarios.js';
import { ALGORITHMS, type AlgorithmResult, simulate } from '../../src/cli/simulate.js';
import { VirtualClock } from '../../src/cli/virtual-clock.js';

function result(results: AlgorithmResult[], name: string): AlgorithmResult {
  const r = results.find((x) => x.algorithm === name);
  if (!r) throw new Error(`no result for ${name}`);
  return r;
}

describe('scenarios', () => {
  it('campaign at 100/s: 70-90/s, with bursts of 180/s for 3, 4 and 5 s', () => {
    const t = scenario('campaign', 100);
    const perSecond = Array.from(
      { length: 60 },
      (_, s) => t.arrivalsMs.filter((a) => a >= s * 1000 && a < (s + 1) * 1000).length,
    );
    const bursts = perSecond.map((n, s) => (n === 180 ? s : -1)).filter((s) => s >= 0);
    expect(bursts).toEqual([10, 11, 12, 25, 26, 27, 28, 42, 43, 44, 45, 46]);
    for (const [s, n] of perSecond.entries()) if (!bursts.includes(s)) expect(n >= 70 && n <= 90).toBe(true);
    expect(t.arrivalsMs.every((a, i) => i === 0 || a >= (t.arrivalsMs[i - 1] as number))).toBe(true);
  });

  it('the same variant gives the same trace; another variant gives another spread', () => {
    for (const name of SCENARIOS) expect(scenario(name, 100, 7)).toEqual(scenario(name, 100, 7));
    expect(scenario('campaign', 100, 1).arrivalsMs).not.toEqual(scenario('campaign', 100, 2).arrivalsMs);
    const a = prng(1);
    const values = Array.from({ length: 1000 }, a);
    expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
    expect(Math.abs(values.reduce((s, v) => s + v, 0) / 1000 - 0.5)).toBeLessThan(0.05);
  });

  it('CSV: one column of times or two of second,count; header and comments skipped; mistakes named by line', () => {
    const times = parseCsvTrace('time_s\n# a comment\n0.5\n0.25\n\n2\n', 'a.csv');
    expect(times.arrivalsMs).toEqual([250, 500, 2000]);
    expect(times.durationS).toBe(3);
    const counts = parseCsvTrace('second,count\n0,3\n1,0\n2,5\n', 'b.csv');
    expect(counts.arrivalsMs).toHaveLength(8);
    expect(counts.arrivalsMs.filter((a) => a >= 2000 && a < 3000)).toHaveLength(5);
    expect(parseCsvTrace('0,3\n2,5\n', 'b.csv', 4)).toEqual(parseCsvTrace('0,3\n2,5\n', 'b.csv', 4));
    expect(() => parseCsvTrace('1\nx\n', 'c.csv')).toThrow('c.csv:2: expected numbers');
    expect(() => parseCsvTrace('1\n2,3\n', 'c.csv')).toThrow('mixes one-column and two-column');
    expect(() => parseCsvTrace('0,1.5\n', 'c.csv')).toThrow('whole number');
    expect(() => parseCsvTrace('-1\n', 'c.csv')).toThrow('negative');
    expect(() => parseCsvTrace('header\n', 'c.csv')).toThrow('no requests');
  });
});

describe('simulate', () => {
  it('is deterministic for a trace', async () => {
    const t = scenario('campaign', 100, 3);
    const a = await simulate(t, 100, 200, ALGORITHMS);
    const b = await simulate(scenario('campaign', 100, 3), 100, 200, ALGORITHMS);
    expect(b).toEqual(a);
    expect(formatTable(a) + formatSummary(a) + formatChart(a)).toBe(formatTable(b) + formatSummary(b) + formatChart(b));
  });

  for (const name of SCENARIOS) {
    it(`${name}: every contender's totals add up and its bound holds`, async () => {
      const rate = 100;
      const burst = 200;
      const t = scenario(name, rate);
      const sim = await simulate(t, rate, burst, ALGORITHMS);
      for (const r of sim.results) {
        expect(r.totals.offered).toBe(t.arrivalsMs.length);
        expect(r.totals.admitted + r.totals.rejected + r.totals.queuedAtEnd).toBe(t.arrivalsMs.length);
        const rows = r.seconds;
        expect(rows.reduce((s, x) => s + x.offered, 0)).toBe(t.arrivalsMs.length);
        expect(rows.reduce((s, x) => s + x.admitted, 0)).toBe(r.totals.admitted);
        expect(rows.reduce((s, x) => s + x.rejected, 0)).toBe(r.totals.rejected);
      }
      const tb = result(sim.results, 'token-bucket');
      expect(tb.totals.mostInAnySecond).toBeLessThanOrEqual(burst + rate);
      expect(tb.totals.admitted).toBeLessThanOrEqual(burst + rate * t.durationS);
      expect(tb.totals.maxWaitMs).toBe(0);
      const fw = result(sim.results, 'fixed-window');
      for (const row of fw.seconds) expect(row.admitted).toBeLessThanOrEqual(rate);
      for (const row of fw.seconds) expect(row.admitted).toBe(Math.min(row.offered, rate)); // nothing conforming refused
      expect(result(sim.results, 'sliding-window').totals.mostInAnySecond).toBeLessThanOrEqual(rate);
      const lb = result(sim.results, 'leaky-bucket');
      expect(lb.totals.peakQueued).toBeLessThanOrEqual(burst);
      expect(lb.totals.maxWaitMs).toBeLessThanOrEqual(((burst - 1) * 1000) / rate + 1e-6);
      expect(lb.totals.mostInAnySecond).toBeLessThanOrEqual(rate + 1);
      const q = result(sim.results, 'queue');
      expect(q.totals.rejected).toBe(0);
      expect(q.totals.mostInAnySecond).toBeLessThanOrEqual(rate + 1);
    });
  }

  it('campaign: the bucket absorbs what the windows refuse; the unbounded queue refuses nothing but makes the longest waits', async () => {
    const sim = await simulate(scenario('campaign', 100), 100, 200, ALGORITHMS);
    const tb = result(sim.results, 'token-bucket');
    const fw = result(sim.results, 'fixed-window');
    const q = result(sim.results, 'queue');
    const lb = result(sim.results, 'leaky-bucket');
    // Each burst's excess is 80/s; the reserve of 200 (refilled between bursts) covers 2.5 s of it.
    expect(tb.seconds[10]?.admitted).toBe(180);
    expect(tb.seconds[11]?.admitted).toBe(180);
    expect(fw.seconds[10]?.admitted).toBe(100);
    expect(tb.totals.rejected).toBeLessThan(fw.totals.rejected / 2);
    expect(q.totals.admitted + q.totals.queuedAtEnd).toBe(q.totals.offered);
    expect(q.totals.maxWaitMs).toBeGreaterThan(lb.totals.maxWaitMs);
    expect(q.totals.peakQueued).toBeGreaterThan(lb.totals.peakQueued);
  });

  it('spike: a fixed window lets up to twice its limit through across a window edge; a sliding window does not', async () => {
    const sim = await simulate(scenario('spike', 100), 100, 200, ['fixed-window', 'sliding-window']);
    const fixed = result(sim.results, 'fixed-window').totals.mostInAnySecond;
    expect(fixed).toBeGreaterThan(150); // its limit is 100 a window; the baseline took some of window 9
    expect(fixed).toBeLessThanOrEqual(200);
    expect(result(sim.results, 'sliding-window').totals.mostInAnySecond).toBe(100);
  });

  it('the text says time is simulated and names what to look at', async () => {
    const sim = await simulate(scenario('steady', 100), 100, 200, ['token-bucket']);
    expect(formatHeader(sim)).toContain('Time is simulated');
    const look = formatLookAt(sim);
    expect(look).toContain('What to look at');
    expect(look).toContain('--compare all');
    expect(formatTable(sim).split('\n')).toHaveLength(3 + sim.seconds + 1);
    expect(result(sim.results, 'token-bucket').totals.rejected).toBe(0); // 90/s under 100/s: all pass
  });

  it('waits are written one way everywhere: the table, the chart, the summary and what to look at agree', async () => {
    const sim = await simulate(scenario('campaign', 100), 100, 200, ALGORITHMS);
    const text = [formatTable(sim), formatChart(sim), formatSummary(sim), formatLookAt(sim)].join('\n');
    const leaky = formatWait(result(sim.results, 'leaky-bucket').totals.maxWaitMs);
    const queue = formatWait(result(sim.results, 'queue').totals.maxWaitMs);
    expect([leaky, queue]).toEqual(['1.99 s', '4.92 s']);
    expect(formatChart(sim)).toContain(`up to ${leaky}`);
    expect(formatSummary(sim)).toContain(` ${leaky}`);
    expect(formatLookAt(sim)).toContain(`waits up to ${leaky}`);
    expect(formatLookAt(sim)).toContain(`(up to ${queue},`);
    // No second spelling: no "2.0s" or "411ms" beside "1.99 s".
    expect(text).not.toMatch(/[0-9](ms|s)\b/);
    expect(formatWait(0)).toBe('0');
    expect(formatWait(411.4)).toBe('411 ms');
    expect(formatWait(1234)).toBe('~1.23 s');
  });
});

describe('VirtualClock', () => {
  it('fires timers in due order (ties in arming order), moves time to each, and honours clearTimeout', () => {
    const clock = new VirtualClock();
    const fired: string[] = [];
    clock.setTimeout(() => fired.push(`b@${clock.now()}`), 20);
    const c = clock.setTimeout(() => fired.push('c'), 5);
    clock.setTimeout(() => fired.push(`a@${clock.now()}`), 10);
    clock.setTimeout(() => fired.push(`a2@${clock.now()}`), 10);
    clock.clearTimeout(c);
    expect(clock.pending).toBe(3);
    expect(clock.nextTimerAtMs()).toBe(10);
    while (clock.fireNext()) {}
    expect(fired).toEqual(['a@10', 'a2@10', 'b@20']);
    clock.set(5); // never backwards
    expect(clock.now()).toBe(20);
    expect(clock.nextTimerAtMs()).toBe(Number.POSITIVE_INFINITY);
  });
});
