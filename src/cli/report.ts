/**
 * Text output of `tokenpace simulate`: the plain-words header, the per-second
 * table, the terminal chart and the summary.
 */

import { formatDuration, formatRate } from '../units.js';
import type { AlgorithmResult, SecondStats, Simulation } from './simulate.js';

const BLOCKS = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/** One character per value: blank for 0, then eight heights up to `max`. */
export function sparkline(values: number[], max: number): string {
  return values
    .map((v) => {
      if (!(v > 0) || !(max > 0)) return ' ';
      const index = Math.min(BLOCKS.length - 1, Math.max(0, Math.ceil((v / max) * BLOCKS.length) - 1));
      return BLOCKS[index];
    })
    .join('');
}

/** Averages `values` into at most `width` buckets. */
function squeeze(values: number[], width: number, how: 'mean' | 'max'): number[] {
  if (values.length <= width) return values;
  const per = Math.ceil(values.length / width);
  const out: number[] = [];
  for (let i = 0; i < values.length; i += per) {
    const slice = values.slice(i, i + per);
    out.push(how === 'max' ? Math.max(...slice) : slice.reduce((s, v) => s + v, 0) / slice.length);
  }
  return out;
}

/**
 * A wait, as every part of simulate's output writes it (tables, chart, summary, plot): to the
 * millisecond, by formatDuration (`411 ms`, `1.99 s`, `~1.23 s`); `0` for no wait at all.
 */
export function formatWait(ms: number): string {
  return ms === 0 ? '0' : formatDuration(Math.round(ms));
}

/** A share in per cent with one decimal: `6.2%`. */
export function pct(part: number, whole: number): string {
  return whole === 0 ? '0%' : `${((100 * part) / whole).toFixed(1)}%`;
}

type Column = { head: string; width: number; get: (row: SecondStats) => string; used: boolean };

function columnsFor(result: AlgorithmResult): Column[] {
  const any = (pick: (r: SecondStats) => number): boolean => result.seconds.some((r) => pick(r) > 0);
  const all: Column[] = [
    { head: 'admit', width: 6, get: (r) => String(r.admitted), used: true },
    { head: 'rej', width: 5, get: (r) => String(r.rejected), used: any((r) => r.rejected) },
    { head: 'queue', width: 6, get: (r) => String(r.queued), used: any((r) => r.queued) },
    { head: 'wait', width: 8, get: (r) => formatWait(r.maxWaitMs), used: any((r) => r.maxWaitMs) },
  ];
  const used = all.filter((c) => c.used);
  // Wide enough for the contender's name.
  const width = used.reduce((w, c) => w + c.width, 0);
  if (used[0] && width < result.label.length) used[0].width += result.label.length - width;
  return used;
}

/** The per-second table: offered, then for each contender what it let through, refused, queued, and the longest wait. */
export function formatTable(sim: Simulation): string {
  const cols = sim.results.map(columnsFor);
  const blockWidth = cols.map((cs) => cs.reduce((w, c) => w + c.width, 0));
  const labels = sim.results.map((r, i) => r.label.padEnd(blockWidth[i] as number).slice(0, blockWidth[i]));
  const lines: string[] = [];
  lines.push(`${''.padStart(6)}${''.padStart(8)} │ ${labels.join(' │ ')}`);
  lines.push(
    `${'t'.padStart(6)}${'offered'.padStart(8)} │ ${cols.map((cs) => cs.map((c) => c.head.padStart(c.width)).join('')).join(' │ ')}`,
  );
  lines.push(`${'─'.repeat(15)}┼${blockWidth.map((w) => '─'.repeat(w + 2)).join('┼')}`);
  const offered = sim.results[0]?.seconds ?? [];
  for (let s = 0; s < sim.seconds; s++) {
    const cells = sim.results.map((r, i) => {
      const row = r.seconds[s] as SecondStats;
      return (cols[i] as Column[]).map((c) => c.get(row).padStart(c.width)).join('');
    });
    lines.push(`${`${s} s`.padStart(6)}${String(offered[s]?.offered ?? 0).padStart(8)} │ ${cells.join(' │ ')}`);
  }
  return `${lines.map((line) => line.trimEnd()).join('\n')}\n`;
}

/** The terminal chart: offered and let through per second, rejections, and waits, one row per contender. */
export function formatChart(sim: Simulation, width = 100): string {
  const span = Math.max(10, width - 24);
  const offered = sim.results[0]?.seconds.map((r) => r.offered) ?? [];
  const top = Math.max(1, ...offered, ...sim.results.flatMap((r) => r.seconds.map((s) => s.admitted)));
  const lines: string[] = [];
  const row = (label: string, values: number[], max: number, how: 'mean' | 'max', note: string): void => {
    lines.push(`  ${label.padEnd(16)}│${sparkline(squeeze(values, span, how), max)}│ ${note}`);
  };
  const perChar = Math.ceil(sim.seconds / span);
  const scale = perChar > 1 ? ` (one column = ${perChar} s)` : ' (one column = 1 s)';
  lines.push(`  Requests per second let through${scale}, full height = ${top}/s:`);
  row('offered', offered, top, 'mean', `peak ${Math.max(0, ...offered)}/s`);
  for (const r of sim.results) {
    const values = r.seconds.map((s) => s.admitted);
    row(r.label, values, top, 'mean', `peak ${Math.max(0, ...values)}/s`);
  }
  const rejecting = sim.results.filter((r) => r.totals.rejected > 0);
  if (rejecting.length > 0) {
    const maxRej = Math.max(1, ...rejecting.flatMap((r) => r.seconds.map((s) => s.rejected)));
    lines.push('');
    lines.push(`  Rejected per second, full height = ${maxRej}/s:`);
    for (const r of rejecting)
      row(
        r.label,
        r.seconds.map((s) => s.rejected),
        maxRej,
        'mean',
        `${r.totals.rejected} in all`,
      );
  }
  const waiting = sim.results.filter((r) => r.totals.maxWaitMs > 0);
  if (waiting.length > 0) {
    const maxWait = Math.max(1, ...waiting.map((r) => r.totals.maxWaitMs));
    lines.push('');
    lines.push(`  Longest wait per second, full height = ${formatWait(maxWait)}:`);
    for (const r of waiting)
      row(
        r.label,
        r.seconds.map((s) => s.maxWaitMs),
        maxWait,
        'max',
        `up to ${formatWait(r.totals.maxWaitMs)}`,
      );
  }
  const ticks = `  ${''.padEnd(16)} 0 s${''.padEnd(Math.max(0, Math.min(span, Math.ceil(sim.seconds / perChar)) - 3 - String(sim.seconds).length - 2))}${sim.seconds} s`;
  lines.push(ticks);
  return `${lines.join('\n')}\n`;
}

/** The summary table: totals per contender. */
export function formatSummary(sim: Simulation): string {
  const head = ['', 'admitted', 'rejected', 'most in 1 s', 'peak queue', 'wait p50', 'p99', 'max'];
  const rows = sim.results.map((r) => {
    const t = r.totals;
    return [
      r.label,
      `${t.admitted}`,
      `${t.rejected} (${pct(t.rejected, t.offered)})`,
      `${t.mostInAnySecond}`,
      `${t.peakQueued}`,
      formatWait(t.waitP50Ms),
      formatWait(t.waitP99Ms),
      formatWait(t.maxWaitMs),
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const fmt = (cells: string[]): string =>
    `  ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join('  ')}`;
  const lines = [fmt(head), ...rows.map(fmt)];
  const stuck = sim.results.filter((r) => r.totals.queuedAtEnd > 0);
  for (const r of stuck) {
    lines.push(
      `  ${r.label}: ${r.totals.queuedAtEnd} requests were still waiting when the simulation stopped at ${sim.seconds} s.`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The opening lines: what was simulated, that time is simulated, and what to look at. */
export function formatHeader(sim: Simulation): string {
  const rate = formatRate(sim.ratePerSecond);
  const t = sim.trace;
  const lines = [
    `tokenpace simulate: rate ${rate}, burst ${sim.burst}, scenario "${t.name}": ${t.description}.`,
    `Time is simulated: ${t.durationS} s of traffic (${t.requests} requests) replayed through the real limiter code on a`,
    'virtual clock, so nothing waits for real and every run with the same flags gives the same numbers.',
  ];
  return `${lines.join('\n')}\n`;
}

/** "What to look at": the differences that matter, with this run's numbers. */
export function formatLookAt(sim: Simulation): string {
  const by = new Map(sim.results.map((r) => [r.algorithm, r]));
  const lines: string[] = ['What to look at:'];
  const marks = sim.trace.marksS.length ? ` (around ${sim.trace.marksS.map((s) => `${s} s`).join(', ')})` : '';
  lines.push(`  - the "admit" columns during the bursts${marks}: who lets the burst through and who cuts it;`);
  const tb = by.get('token-bucket');
  if (tb) {
    lines.push(
      `  - token bucket: its reserve of ${sim.burst} absorbs the start of a burst, then it holds ${formatRate(sim.ratePerSecond)};` +
        ` it refused ${tb.totals.rejected} (${pct(tb.totals.rejected, tb.totals.offered)}) and never made anyone wait;`,
    );
  }
  const fw = by.get('fixed-window');
  const sw = by.get('sliding-window');
  if (fw || sw) {
    const parts = [fw, sw]
      .filter((r): r is AlgorithmResult => r !== undefined)
      .map((r) => `${r.label} refused ${r.totals.rejected}, and at most ${r.totals.mostInAnySecond} passed in any 1 s`);
    lines.push(
      `  - windows have no reserve: every request over ${formatRate(sim.ratePerSecond)} in a window is refused (${parts.join('; ')});`,
    );
  }
  const lb = by.get('leaky-bucket');
  if (lb) {
    lines.push(
      `  - leaky bucket: smooth output, but a burst waits in its queue (up to ${lb.totals.peakQueued}, waits up to ${formatWait(lb.totals.maxWaitMs)}) and it refused ${lb.totals.rejected} when full;`,
    );
  }
  const q = by.get('queue');
  if (q) {
    lines.push(
      `  - unbounded queue: refuses nothing, but the wait grows with every burst (up to ${formatWait(q.totals.maxWaitMs)}, ` +
        `${q.totals.peakQueued} requests held in memory at the worst moment${q.totals.queuedAtEnd ? `, ${q.totals.queuedAtEnd} still waiting at the end` : ''}).`,
    );
  }
  if (sim.results.length === 1) {
    lines.push(
      '  - add --compare all to see a fixed window, a sliding window, a leaky bucket and an unbounded queue beside it.',
    );
  }
  lines.push('');
  lines.push(
    `All of this ran on simulated time (${sim.trace.durationS} s of traffic, computed at once). For a picture add --html plot.html;`,
  );
  lines.push(
    `for the numbers behind a configuration: tokenpace explain --rate ${formatRate(sim.ratePerSecond)} --burst ${sim.burst}.`,
  );
  return `${lines.join('\n')}\n`;
}
