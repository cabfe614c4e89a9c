/**
 * The plot `tokenpace simulate --svg FILE | --html FILE` writes: three
 * panels over the same time axis (let through per second against what was
 * offered and the rate; rejected per second; the longest wait), one colour
 * per contender. Plain SVG with no scripts or external resources, so it
 * opens anywhere; the HTML page wraps it with the summary table.
 */

import { formatRate } from '../units.js';
import { formatLookAt, formatWait, pct } from './report.js';
import type { Algorithm, AlgorithmResult, Simulation } from './simulate.js';

/** One colour per contender (readable on white, distinct for common colour blindness). */
export const COLORS: Record<Algorithm, string> = {
  'token-bucket': '#2563eb',
  'fixed-window': '#dc2626',
  'sliding-window': '#d97706',
  'leaky-bucket': '#059669',
  queue: '#7c3aed',
};

/**
 * One dash pattern per contender on the shared panels (refusals, waits). Two contenders can give
 * the same numbers every second (the token bucket and the leaky bucket refuse alike): the later
 * line, dashed and narrower, is drawn over the earlier, solid and wider, which shows in its gaps.
 */
export const DASHES: Record<Algorithm, string> = {
  'token-bucket': 'none',
  'fixed-window': '10 4',
  'sliding-window': '3 3',
  'leaky-bucket': '7 5',
  queue: '14 4 3 4',
};

/** The shared panels' stroke widths: the first contender's widest, each later one narrower. */
function strokeWidth(index: number, count: number): number {
  return 1.8 + (count - 1 - index) * 1.2;
}

/** Groups of contenders whose series are equal second by second (groups of two or more only). */
function coinciding(series: { label: string; values: number[] }[]): string[][] {
  const groups: { values: number[]; labels: string[] }[] = [];
  for (const { label, values } of series) {
    const same = groups.find((g) => g.values.length === values.length && g.values.every((v, i) => v === values[i]));
    if (same) same.labels.push(label);
    else groups.push({ values, labels: [label] });
  }
  return groups.filter((g) => g.labels.length > 1).map((g) => g.labels);
}

function listed(labels: string[]): string {
  return labels.length <= 1 ? (labels[0] ?? '') : `${labels.slice(0, -1).join(', ')} and ${labels.at(-1)}`;
}

const WIDTH = 1000;
const LEFT = 72;
const RIGHT = 24;
const PANEL_HEIGHT = 170;
const PANEL_GAP = 58;
/** The line under a shared panel that names coinciding lines and contenders with no line. */
const NOTE_HEIGHT = 18;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A round step for about `count` ticks up to `max`. */
function niceStep(max: number, count = 4): number {
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = raw / power;
  return (unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 2.5 ? 2.5 : unit <= 5 ? 5 : 10) * power;
}

function num(n: number): string {
  return Number(n.toFixed(2)).toString();
}

interface Panel {
  title: string;
  unit: (v: number) => string;
  top: number;
  max: number;
}

function panelFrame(
  p: Panel,
  seconds: number,
  x: (s: number) => number,
  marks: number[],
  height: number,
  ticks: number,
  titleColor?: string,
): string {
  const parts: string[] = [];
  const step = niceStep(p.max, ticks);
  const y = (v: number): number => p.top + height - (v / p.max) * height;
  const fill = titleColor ? ` style="fill:${titleColor}"` : '';
  parts.push(`<text x="${LEFT}" y="${p.top - 9}" class="panel-title"${fill}>${esc(p.title)}</text>`);
  for (let v = 0; v <= p.max + 1e-9; v += step) {
    parts.push(`<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${num(y(v))}" y2="${num(y(v))}" class="grid"/>`);
    parts.push(`<text x="${LEFT - 8}" y="${num(y(v) + 4)}" class="tick" text-anchor="end">${esc(p.unit(v))}</text>`);
  }
  const tStep = niceStep(seconds, 10);
  for (let s = 0; s <= seconds + 1e-9; s += tStep) {
    parts.push(
      `<text x="${num(x(s))}" y="${p.top + height + 15}" class="tick" text-anchor="middle">${num(s)} s</text>`,
    );
  }
  for (const m of marks) {
    parts.push(`<line x1="${num(x(m))}" x2="${num(x(m))}" y1="${p.top}" y2="${p.top + height}" class="mark"/>`);
  }
  parts.push(`<rect x="${LEFT}" y="${p.top}" width="${WIDTH - LEFT - RIGHT}" height="${height}" class="frame"/>`);
  return parts.join('\n');
}

/** A step line through per-second values. */
function steps(values: number[], x: (s: number) => number, y: (v: number) => number): string {
  const points: string[] = [];
  values.forEach((v, s) => {
    points.push(`${num(x(s))},${num(y(v))}`, `${num(x(s + 1))},${num(y(v))}`);
  });
  return points.join(' ');
}

function summaryOf(r: AlgorithmResult): string {
  const t = r.totals;
  const refused = t.offered ? `${pct(t.rejected, t.offered)} refused` : '';
  const wait = t.maxWaitMs > 0 ? `waits up to ${formatWait(t.maxWaitMs)}` : 'no waiting';
  return `${refused}, ${wait}`;
}

/** A panel's top edge for its maximum, rounded up to a whole number of ticks. */
function roundUp(max: number): number {
  const step = niceStep(max * 1.08);
  return step * Math.ceil((max * 1.08) / step);
}

/**
 * The plot as a standalone SVG document: one small panel per contender (what
 * was offered in grey, what it let through in its colour, the rate dashed),
 * then refusals and waits side by side on shared axes.
 */
export function renderSvg(sim: Simulation): string {
  const seconds = sim.seconds;
  const x = (s: number): number => LEFT + (s / seconds) * (WIDTH - LEFT - RIGHT);
  const offered = sim.results[0]?.seconds.map((r) => r.offered) ?? [];
  const maxPass = Math.max(
    sim.ratePerSecond,
    ...offered,
    ...sim.results.flatMap((r) => r.seconds.map((s) => s.admitted)),
  );
  const maxRej = Math.max(1, ...sim.results.flatMap((r) => r.seconds.map((s) => s.rejected)));
  const maxWait = Math.max(1000, ...sim.results.map((r) => r.totals.maxWaitMs));
  const small = 96;
  const smallGap = 44;
  const out: string[] = [];
  const body: string[] = [];
  let top = 128;
  body.push(
    `<text x="${LEFT}" y="${top - 30}" class="section">${esc('Requests let through to the service, per second, one panel per limiter (grey: offered)')}</text>`,
  );
  top += 6;
  const yOf = (p: Panel, height: number) => (v: number) => p.top + height - (v / p.max) * height;

  // One panel per contender.
  const passMax = roundUp(maxPass);
  for (const r of sim.results) {
    const p: Panel = { title: `${r.label}: ${summaryOf(r)}`, unit: (v) => num(v), top, max: passMax };
    body.push(panelFrame(p, seconds, x, sim.trace.marksS, small, 2, COLORS[r.algorithm]));
    const y = yOf(p, small);
    body.push(
      `<polygon points="${num(x(0))},${num(y(0))} ${steps(offered, x, y)} ${num(x(offered.length))},${num(y(0))}" fill="#e5e7eb"/>`,
    );
    const passed = r.seconds.map((s) => s.admitted);
    body.push(
      `<polygon points="${num(x(0))},${num(y(0))} ${steps(passed, x, y)} ${num(x(passed.length))},${num(y(0))}" fill="${COLORS[r.algorithm]}" fill-opacity="0.22"/>`,
    );
    body.push(`<polyline points="${steps(passed, x, y)}" class="series" stroke="${COLORS[r.algorithm]}"/>`);
    body.push(
      `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${num(y(sim.ratePerSecond))}" y2="${num(y(sim.ratePerSecond))}" class="rate"/>`,
    );
    top += small + smallGap;
  }

  // Refusals and waits, all contenders on one axis each.
  const shared: [string, (r: AlgorithmResult) => number[], number, (v: number) => string, string][] = [
    ['Requests refused, per second', (r) => r.seconds.map((s) => s.rejected), roundUp(maxRej), num, 'refused none'],
    [
      'Longest wait before being let through, per second',
      (r) => r.seconds.map((s) => s.maxWaitMs),
      roundUp(maxWait),
      formatWait,
      'made no one wait',
    ],
  ];
  const n = sim.results.length;
  // The contenders' colours and dashes, as the shared panels below draw them.
  let cx = LEFT;
  sim.results.forEach((r, i) => {
    const dash = DASHES[r.algorithm] === 'none' ? '' : ` stroke-dasharray="${DASHES[r.algorithm]}"`;
    body.push(
      `<line x1="${num(cx)}" x2="${num(cx + 28)}" y1="${top - 4}" y2="${top - 4}" stroke="${COLORS[r.algorithm]}" stroke-width="${num(Math.max(2.4, strokeWidth(i, n)))}"${dash}/>`,
    );
    body.push(`<text x="${num(cx + 34)}" y="${top}" class="legend">${esc(r.label)}</text>`);
    cx += 34 + r.label.length * 6.8 + 18;
  });
  top += 42;
  for (const [title, values, max, unit, nothing] of shared) {
    if (sim.results.every((r) => values(r).every((v) => v === 0))) {
      // Nothing to draw: say so in one line instead of an empty panel.
      body.push(`<text x="${LEFT}" y="${top - 9}" class="panel-title">${esc(`${title}: none`)}</text>`);
      top += 30;
      continue;
    }
    const p: Panel = { title, unit, top, max };
    body.push(panelFrame(p, seconds, x, sim.trace.marksS, PANEL_HEIGHT, 4));
    const y = yOf(p, PANEL_HEIGHT);
    // A limiter that never refused (or never made anyone wait) has no line here; the note says so, and
    // names the contenders whose lines lie on one another.
    const drawn = sim.results.filter((r) => values(r).some((v) => v !== 0));
    const idle = sim.results.filter((r) => !drawn.includes(r)).map((r) => r.label);
    const notes = coinciding(drawn.map((r) => ({ label: r.label, values: values(r) }))).map(
      (labels) => `${listed(labels)}: the same every second, one line over the other`,
    );
    if (idle.length > 0) notes.push(`no line: ${listed(idle)} ${nothing}`);
    if (notes.length > 0) {
      // Under the time axis, on a line of its own.
      body.push(`<text x="${LEFT}" y="${p.top + PANEL_HEIGHT + 33}" class="note">${esc(notes.join('; '))}</text>`);
    }
    sim.results.forEach((r, i) => {
      if (!drawn.includes(r)) return;
      const dash = DASHES[r.algorithm] === 'none' ? '' : ` stroke-dasharray="${DASHES[r.algorithm]}"`;
      body.push(
        `<polyline points="${steps(values(r), x, y)}" class="series" stroke="${COLORS[r.algorithm]}" style="stroke-width:${num(strokeWidth(i, n))}px"${dash}><title>${esc(r.label)}</title></polyline>`,
      );
    });
    top += PANEL_HEIGHT + PANEL_GAP + (notes.length > 0 ? NOTE_HEIGHT : 0);
  }
  const height = Math.max(top - PANEL_GAP + 44, top + 20);

  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" role="img" aria-label="${esc(`tokenpace simulate, scenario ${sim.trace.name}`)}">`,
  );
  out.push(`<style>
    text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; fill: #1f2937; }
    .title { font-size: 20px; font-weight: 600; }
    .subtitle { font-size: 13px; fill: #4b5563; }
    .panel-title { font-size: 13.5px; font-weight: 600; }
    .tick { font-size: 11px; fill: #6b7280; }
    .legend { font-size: 12.5px; }
    .note { font-size: 11.5px; fill: #4b5563; font-style: italic; }
    .section { font-size: 15px; font-weight: 600; }
    .grid { stroke: #eef0f3; stroke-width: 1; }
    .frame { fill: none; stroke: #cbd0d6; stroke-width: 1; }
    .mark { stroke: #f59e0b; stroke-width: 1; stroke-dasharray: 3 3; }
    .rate { stroke: #111827; stroke-width: 1; stroke-dasharray: 6 4; }
    .series { fill: none; stroke-width: 1.8; stroke-linejoin: round; stroke-opacity: 0.9; }
  </style>`);
  out.push('<rect width="100%" height="100%" fill="#ffffff"/>');
  out.push(
    `<text x="${LEFT}" y="32" class="title">${esc(`Rate ${formatRate(sim.ratePerSecond)}, burst ${sim.burst}: scenario "${sim.trace.name}"`)}</text>`,
  );
  out.push(
    `<text x="${LEFT}" y="52" class="subtitle">${esc(`${sim.trace.description}. Simulated time: ${sim.trace.durationS} s replayed on a virtual clock.`)}</text>`,
  );
  const legend: { color: string; label: string; dash?: boolean; fill?: boolean }[] = [
    { color: '#e5e7eb', label: 'offered', fill: true },
    { color: '#111827', label: `the rate, ${formatRate(sim.ratePerSecond)}`, dash: true },
  ];
  if (sim.trace.marksS.length > 0) legend.push({ color: '#f59e0b', label: sim.trace.marksLabel, dash: true });
  let lx = LEFT;
  const ly = 76;
  for (const item of legend) {
    out.push(
      item.fill
        ? `<rect x="${num(lx)}" y="${ly - 10}" width="18" height="11" fill="${item.color}"/>`
        : `<line x1="${num(lx)}" x2="${num(lx + 18)}" y1="${ly - 4}" y2="${ly - 4}" stroke="${item.color}" stroke-width="${item.dash ? 1.4 : 3}"${item.dash ? ' stroke-dasharray="5 3"' : ''}/>`,
    );
    out.push(`<text x="${num(lx + 24)}" y="${ly}" class="legend">${esc(item.label)}</text>`);
    lx += 24 + item.label.length * 6.6 + 16;
  }
  out.push(...body);
  out.push(
    `<text x="${WIDTH - RIGHT}" y="${height - 12}" class="tick" text-anchor="end">simulated time; every value is per second of it</text>`,
  );
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** A standalone HTML page: the plot, the summary and what to look at. */
export function renderHtml(sim: Simulation): string {
  const rows = sim.results
    .map((r) => {
      const t = r.totals;
      const cells = [
        `<td><span class="swatch" style="background:${COLORS[r.algorithm]}"></span>${esc(r.label)}</td>`,
        `<td>${t.admitted}</td>`,
        `<td>${t.rejected} (${pct(t.rejected, t.offered)})</td>`,
        `<td>${t.mostInAnySecond}</td>`,
        `<td>${t.peakQueued}</td>`,
        `<td>${formatWait(t.waitP99Ms)}</td>`,
        `<td>${formatWait(t.maxWaitMs)}</td>`,
        `<td><code>${esc(r.config)}</code></td>`,
      ];
      return `<tr>${cells.join('')}</tr>`;
    })
    .join('\n');
  const look = formatLookAt(sim)
    .split('\n')
    .filter((l) => l.startsWith('  - ') && !l.includes('"admit" columns')) // the table is not on the page
    .map((l) => `<li>${esc(l.slice(4))}</li>`)
    .join('\n');
  const title = `tokenpace simulate: rate ${formatRate(sim.ratePerSecond)}, burst ${sim.burst}, scenario ${sim.trace.name}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>
  body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2937; max-width: 1040px; margin: 24px auto; padding: 0 16px; line-height: 1.45; }
  h1 { font-size: 22px; margin-bottom: 4px; }
  p.note { color: #4b5563; margin-top: 0; }
  svg { max-width: 100%; height: auto; border: 1px solid #e5e7eb; border-radius: 6px; }
  table { border-collapse: collapse; margin: 12px 0 20px; font-size: 14px; }
  th, td { padding: 4px 10px; border-bottom: 1px solid #e5e7eb; text-align: right; }
  th:first-child, td:first-child, th:last-child, td:last-child { text-align: left; }
  td { white-space: nowrap; }
  code { font-size: 12px; color: #374151; }
  .swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
</style>
</head>
<body>
<h1>${esc(title)}</h1>
<p class="note">${esc(`${sim.trace.description}. Time is simulated: ${sim.trace.durationS} s of traffic (${sim.trace.requests} requests) replayed through tokenpace's own limiters on a virtual clock; the same flags always give the same numbers.`)}</p>
${renderSvg(sim)}
<h2>Summary</h2>
<table>
<thead><tr><th></th><th>admitted</th><th>refused</th><th>most in any 1 s</th><th>peak queue</th><th>wait p99</th><th>longest wait</th><th>configured as</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>
<h2>What to look at</h2>
<ul>
${look}
</ul>
</body>
</html>
`;
}
