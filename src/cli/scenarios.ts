/**
 * Traffic traces for `tokenpace simulate`: the built-in scenarios and CSV
 * files. A trace is a sorted list of arrival times (ms from 0), each a
 * request of cost 1. Arrivals within a second are drawn from a seeded
 * pseudo-random generator (`variant`), so a trace, and everything simulated
 * from it, is the same on every run.
 *
 * The built-in scenarios scale with the rate, so they describe a shape of
 * traffic rather than absolute numbers; at 100/s they are:
 *
 * - campaign: a public API at 70-90/s, with campaign bursts to 180/s lasting
 *   3, 4 and 5 seconds (at 10, 25 and 42 s); 60 s.
 * - steady: 90/s for 30 s: under the rate, everyone should pass it all.
 * - spike: 50/s, and one client's flood of 300 calls straddling the 10 s
 *   mark (150 in the 0.2 s before it, 150 in the 0.2 s after); 30 s.
 * - ramp: from 0 to 200/s, linearly over 40 s.
 */

import { UsageError } from './io.js';

/** A trace of requests. */
export interface Trace {
  /** The scenario's name or the CSV file's name. */
  name: string;
  /** One line on what the traffic is. */
  description: string;
  /** Arrival times, ms, sorted. */
  arrivalsMs: number[];
  /** The trace's length, whole seconds. */
  durationS: number;
  /** Times (s) worth pointing at: the bursts, the spike. */
  marksS: number[];
  /** What the marks are, for a legend: "bursts", "the flood". */
  marksLabel: string;
}

/** The names of the built-in scenarios. */
export const SCENARIOS = ['campaign', 'steady', 'spike', 'ramp'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/** mulberry32: a small, fast, seeded generator of numbers in [0, 1). */
export function prng(variant: number): () => number {
  let a = (variant * 0x9e3779b9) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` arrivals spread at random over [fromMs, toMs), sorted, each rounded to a microsecond. */
function spread(count: number, fromMs: number, toMs: number, random: () => number): number[] {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(Math.round((fromMs + random() * (toMs - fromMs)) * 1000) / 1000);
  return out.sort((a, b) => a - b);
}

function fromCounts(counts: number[], random: () => number): number[] {
  const out: number[] = [];
  counts.forEach((n, second) => {
    for (const t of spread(n, second * 1000, (second + 1) * 1000, random)) out.push(t);
  });
  return out;
}

/** A built-in scenario at `ratePerSecond`. */
export function scenario(name: ScenarioName, ratePerSecond: number, variant = 1): Trace {
  const random = prng(variant);
  const r = ratePerSecond;
  const rate = Number(r.toPrecision(6));
  switch (name) {
    case 'campaign': {
      const bursts: [number, number][] = [
        [10, 3],
        [25, 4],
        [42, 5],
      ];
      const counts = Array.from({ length: 60 }, () => Math.round(r * (0.7 + 0.2 * random())));
      for (const [start, length] of bursts)
        for (let s = start; s < start + length; s++) counts[s] = Math.round(1.8 * r);
      return {
        name,
        description: `a public API at ${Math.round(0.7 * r)}-${Math.round(0.9 * r)}/s with campaign bursts to ${Math.round(1.8 * r)}/s for 3, 4 and 5 s`,
        arrivalsMs: fromCounts(counts, random),
        durationS: 60,
        marksS: bursts.map(([start]) => start),
        marksLabel: 'the bursts begin',
      };
    }
    case 'steady': {
      const counts = Array.from({ length: 30 }, () => Math.round(0.9 * r));
      return {
        name,
        description: `steady traffic at ${Math.round(0.9 * r)}/s, under the rate of ${rate}/s`,
        arrivalsMs: fromCounts(counts, random),
        durationS: 30,
        marksS: [],
        marksLabel: '',
      };
    }
    case 'spike': {
      const base = fromCounts(
        Array.from({ length: 30 }, () => Math.round(0.5 * r)),
        random,
      );
      const flood = Math.round(1.5 * r);
      const arrivalsMs = [...base, ...spread(flood, 9800, 10_000, random), ...spread(flood, 10_000, 10_200, random)];
      return {
        name,
        description: `${Math.round(0.5 * r)}/s, and a flood of ${2 * flood} calls straddling the 10 s mark (${flood} in the 0.2 s before it, ${flood} after)`,
        arrivalsMs: arrivalsMs.sort((a, b) => a - b),
        durationS: 30,
        marksS: [10],
        marksLabel: 'the flood straddles this mark',
      };
    }
    case 'ramp': {
      const counts = Array.from({ length: 40 }, (_, s) => Math.round((2 * r * (s + 0.5)) / 40));
      return {
        name,
        description: `a ramp from 0 to ${Math.round(2 * r)}/s over 40 s (the rate is crossed at 20 s)`,
        arrivalsMs: fromCounts(counts, random),
        durationS: 40,
        marksS: [20],
        marksLabel: 'the ramp crosses the rate',
      };
    }
  }
}

/**
 * Parses a CSV trace. Two forms, told apart by the number of columns:
 *
 *   time_s            one request per line, at that time (seconds, fractions allowed)
 *   second,count      `count` requests in that whole second, spread pseudo-randomly
 *
 * A first line that is not numbers is a header; blank lines and lines starting
 * with `#` are skipped.
 */
export function parseCsvTrace(text: string, name: string, variant = 1): Trace {
  const random = prng(variant);
  const arrivalsMs: number[] = [];
  let form: 1 | 2 | undefined;
  const lines = text.split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const cells = line.split(/\s*[,;\t]\s*/);
    const numbers = cells.map(Number);
    if (numbers.some((n) => !Number.isFinite(n))) {
      if (
        form === undefined &&
        arrivalsMs.length === 0 &&
        index === lines.findIndex((l) => l.trim() !== '' && !l.trim().startsWith('#'))
      ) {
        continue; // a header
      }
      throw new UsageError(`${name}:${index + 1}: expected numbers, got ${JSON.stringify(line)}`);
    }
    const columns = cells.length === 1 ? 1 : 2;
    if (cells.length > 2)
      throw new UsageError(`${name}:${index + 1}: expected "time_s" or "second,count", got ${cells.length} columns`);
    if (form !== undefined && form !== columns) {
      throw new UsageError(`${name}:${index + 1}: mixes one-column and two-column lines`);
    }
    form = columns;
    const [first = 0, second = 0] = numbers;
    if (first < 0) throw new UsageError(`${name}:${index + 1}: a negative time ${first}`);
    if (form === 1) arrivalsMs.push(first * 1000);
    else {
      if (!(Number.isInteger(second) && second >= 0)) {
        throw new UsageError(`${name}:${index + 1}: the count must be a whole number >= 0, got ${second}`);
      }
      if (!Number.isInteger(first))
        throw new UsageError(`${name}:${index + 1}: the second must be whole, got ${first}`);
      for (const t of spread(second, first * 1000, (first + 1) * 1000, random)) arrivalsMs.push(t);
    }
  }
  if (arrivalsMs.length === 0) throw new UsageError(`${name}: no requests in the trace`);
  arrivalsMs.sort((a, b) => a - b);
  const last = arrivalsMs[arrivalsMs.length - 1] ?? 0;
  if (last > 24 * 3600 * 1000) throw new UsageError(`${name}: the trace is longer than a day; cut it shorter`);
  return {
    name,
    description: `${arrivalsMs.length} requests from ${name}`,
    arrivalsMs,
    durationS: Math.max(1, Math.floor(last / 1000) + 1),
    marksS: [],
    marksLabel: '',
  };
}
