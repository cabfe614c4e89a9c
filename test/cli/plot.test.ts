/**
 * The SVG/HTML plot: its content (every contender, the rate, the bursts,
 * well-formed markup, coinciding series told apart), and that a real browser
 * renders it: headless Chromium (Debian's `chromium`, which
 * scripts/ensure-test-deps.sh installs before `npm test` where it is missing;
 * CHROMIUM_BIN names another) loads the page, its DOM keeps the SVG's series,
 * and a screenshot of it is written and is not blank.
 */

import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { COLORS, DASHES, renderHtml, renderSvg } from '../../src/cli/plot.js';
import { scenario } from '../../src/cli/scenarios.js';
import { ALGORITHMS, simulate } from '../../src/cli/simulate.js';

const run = promisify(execFile);

/** The browser binary: `chromium` on Debian; CHROMIUM_BIN overrides. */
const CHROMIUM = process.env.CHROMIUM_BIN ?? 'chromium';

function chromiumArgs(profile: string): string[] {
  return [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--hide-scrollbars',
    `--user-data-dir=${profile}`,
  ];
}

/** Counts tags well enough to catch unbalanced markup (no XML parser in Node). */
function balanced(svg: string, tag: string): boolean {
  const open = svg.match(new RegExp(`<${tag}[\\s>]`, 'g'))?.length ?? 0;
  const close = svg.match(new RegExp(`</${tag}>`, 'g'))?.length ?? 0;
  const selfClosed = svg.match(new RegExp(`<${tag}[^>]*/>`, 'g'))?.length ?? 0;
  return open === close + selfClosed;
}

describe('plot', () => {
  it('the SVG has a panel per contender, the rate, the bursts, and balanced markup', async () => {
    const sim = await simulate(scenario('campaign', 100), 100, 200, ALGORITHMS);
    const svg = renderSvg(sim);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    for (const algorithm of ALGORITHMS) expect(svg).toContain(`stroke="${COLORS[algorithm]}"`);
    expect(svg).toContain('token bucket: 6.2% refused, no waiting');
    expect(svg).toContain('class="rate"');
    expect(svg.match(/class="mark"/g)?.length).toBe(3 * (ALGORITHMS.length + 2)); // 3 bursts, on every panel
    for (const tag of ['svg', 'text', 'polyline', 'polygon', 'style']) expect(balanced(svg, tag)).toBe(true);
    expect(svg).not.toMatch(/NaN|undefined|Infinity/);
    const html = renderHtml(sim);
    expect(html).toContain('<!doctype html>');
    expect(html).toContain('Time is simulated');
    expect(html).toContain(svg.trim());
  });

  it('coinciding series stay visible: each contender has its own dash and width, and a note names lines that lie on one another', async () => {
    const sim = await simulate(scenario('campaign', 100), 100, 200, ALGORITHMS);
    // The token bucket and the leaky bucket refuse the same number every second in this scenario.
    const refused = (label: string): number[] =>
      sim.results.find((r) => r.label === label)?.seconds.map((s) => s.rejected) ?? [];
    expect(refused('token bucket')).toEqual(refused('leaky bucket'));
    const svg = renderSvg(sim);
    expect(new Set(Object.values(DASHES)).size).toBe(ALGORITHMS.length);
    const shared = [
      ...svg.matchAll(/<polyline [^>]*style="stroke-width:([0-9.]+)px"([^>]*)><title>([^<]+)<\/title>/g),
    ].map(([, width, rest, label]) => ({
      width: Number(width),
      dash: /stroke-dasharray="([^"]+)"/.exec(rest ?? '')?.[1],
      label,
    }));
    // Refusals: the three that refuse; waits: the two that queue.
    expect(shared.map((l) => l.label)).toEqual([
      'token bucket',
      'fixed window',
      'sliding window',
      'leaky bucket',
      'leaky bucket',
      'unbounded queue',
    ]);
    const [tokenBucket, , , leakyBucket] = shared;
    // The solid, wider token bucket lies under the dashed, narrower leaky bucket: it shows in the gaps.
    expect(tokenBucket?.dash).toBeUndefined();
    expect(leakyBucket?.dash).toBe(DASHES['leaky-bucket']);
    expect(tokenBucket?.width).toBeGreaterThan(leakyBucket?.width ?? Number.POSITIVE_INFINITY);
    expect(svg.indexOf('<title>token bucket</title>')).toBeLessThan(svg.indexOf('<title>leaky bucket</title>'));
    // The notes: who coincides, and who has no line (so no one reads the token bucket as waiting).
    expect(svg).toContain('token bucket and leaky bucket: the same every second, one line over the other');
    expect(svg).toContain('no line: unbounded queue refused none');
    expect(svg).toContain('no line: token bucket, fixed window and sliding window made no one wait');
    // The legend above the shared panels draws each contender as its lines are drawn.
    for (const algorithm of ALGORITHMS) {
      if (DASHES[algorithm] !== 'none') {
        expect(svg).toMatch(
          new RegExp(`stroke="${COLORS[algorithm]}" stroke-width="[0-9.]+" stroke-dasharray="${DASHES[algorithm]}"/>`),
        );
      }
    }
  });

  it('renders in headless Chromium: the DOM keeps every series, and the screenshot is a real picture', async () => {
    const sim = await simulate(scenario('campaign', 100), 100, 200, ALGORITHMS);
    const dir = mkdtempSync(join(tmpdir(), 'tokenpace-plot-'));
    try {
      const page = join(dir, 'plot.html');
      writeFileSync(page, renderHtml(sim));
      const dom = await run(CHROMIUM, [...chromiumArgs(join(dir, 'profile-a')), '--dump-dom', `file://${page}`], {
        timeout: 90_000,
        maxBuffer: 64 * 1024 * 1024,
      });
      const polylines = dom.stdout.match(/<polyline /g)?.length ?? 0;
      // One per contender panel, plus the refusals of the three that refuse and the waits of the two that queue.
      expect(polylines).toBe(ALGORITHMS.length + 4 + 2);
      expect(dom.stdout).toContain('unbounded queue: 0.0% refused, waits up to 4.92 s');

      const png = join(dir, 'plot.png');
      await run(
        CHROMIUM,
        [...chromiumArgs(join(dir, 'profile-b')), '--window-size=1100,1500', `--screenshot=${png}`, `file://${page}`],
        { timeout: 90_000 },
      );
      const bytes = readFileSync(png);
      expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
      expect(bytes.readUInt32BE(16)).toBe(1100); // width from the IHDR chunk
      // A blank page compresses to a few KiB; the plot's lines and text do not.
      expect(statSync(png).size).toBeGreaterThan(40 * 1024);
      if (process.env.TOKENPACE_KEEP_SCREENSHOT) writeFileSync(process.env.TOKENPACE_KEEP_SCREENSHOT, bytes);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
