/**
 * The SVG/HTML plot's content: every contender, the rate, the bursts, well-formed markup, coinciding
 * series told apart. That a real browser renders it is plot.chromium.test.ts (`npm run test:plot`).
 */

import { describe, expect, it } from 'vitest';
import { COLORS, DASHES, renderHtml, renderSvg } from '../../src/cli/plot.js';
import { scenario } from '../../src/cli/scenarios.js';
import { ALGORITHMS, simulate } from '../../src/cli/simulate.js';

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
});
