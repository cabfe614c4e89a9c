/**
 * The simulator's HTML plot in a real browser: headless Chromium loads the page, its DOM keeps every
 * series, and a screenshot of it is written and is not blank. Run by `npm run test:plot`, apart from
 * `npm test`, because it needs a browser: Debian's `chromium` on PATH (`apt-get install chromium`), or
 * CHROMIUM_BIN naming another Chromium or Chrome. Without one it fails and says so; it never skips.
 */

import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { renderHtml } from '../../src/cli/plot.js';
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

describe('plot in Chromium', () => {
  beforeAll(() => {
    const probe = spawnSync(CHROMIUM, ['--version'], { encoding: 'utf8' });
    if (probe.error !== undefined || probe.status !== 0) {
      throw new Error(
        `this test renders the plot in Chromium, and \`${CHROMIUM}\` cannot be run (${probe.error?.message ?? probe.stderr.trim()}): ` +
          'install it with `apt-get install chromium` (Debian/Ubuntu), or set CHROMIUM_BIN to a Chromium or Chrome binary',
      );
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
