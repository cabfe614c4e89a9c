/**
 * The stream examples, run for real against the local servers they start,
 * with small transfers. None asserts speed; each checks what the example
 * shows (bytes intact, the cap held, the shares max-min fair).
 */

import { describe, expect, it } from 'vitest';
import { main as downloadCap, progressLine } from '../../examples/download-cap.js';
import { main as groupDownloads } from '../../examples/group-downloads.js';
import { main as uploadCap } from '../../examples/upload-cap.js';

const quiet = (): void => {};

describe('examples/download-cap.ts', () => {
  it('downloads through the cap into a file, never faster than burst + rate * T', async () => {
    const lines: string[] = [];
    const result = await downloadCap({ sizeBytes: 400_000, rate: '1MiB/s', log: (line) => lines.push(line) });
    expect(result.bytes).toBe(400_000);
    expect(result.counters.bytes).toBe(400_000);
    const burst = 131072; // the default at 1 MiB/s: two 64 KiB chunks
    // The transfer cannot beat the cap; a timer may fire just under a ms early.
    expect(result.elapsedMs).toBeGreaterThanOrEqual(((400_000 - burst) / 1048576) * 1000 - 2);
    expect(lines.at(-1)).toMatch(/^done: /);
  }, 15_000);

  it('formats a progress line from the counters', () => {
    const line = progressLine(
      {
        bytes: 1048576,
        waitedMs: 1500,
        currentBytesPerSecond: 1048576,
        averageBytesPerSecond: 524288,
        elapsedMs: 2000,
      },
      2 * 1048576,
    );
    expect(line).toBe('1.00 MiB of 2.00 MiB  50%  1.00 MiB/s now, 0.50 MiB/s average, waited 1.5 s');
  });
});

describe('examples/upload-cap.ts', () => {
  it('uploads a paced body that arrives intact', async () => {
    const { report, sentSha256 } = await uploadCap({ sizeBytes: 300_000, rate: '1MiB/s', log: quiet });
    expect(report.bytes).toBe(300_000);
    expect(report.sha256).toBe(sentSha256);
  }, 15_000);
});

describe('examples/group-downloads.ts', () => {
  it('shares the group max-min fairly: the capped download gets its cap, the others the rest', async () => {
    const reports = await groupDownloads({ sizeBytes: 300_000, rate: '1MiB/s', capRate: '128KiB/s', log: quiet });
    const [a, b, c] = reports;
    expect(a?.bytes).toBe(300_000);
    expect(b?.bytes).toBe(300_000);
    expect(c?.bytes).toBe(150_000);
    // While all three ran (until A or B was done), C passed its cap's worth, no more than its own
    // bucket allows (a burst of 250 ms of its rate, then the rate) and no less than the rate less
    // a fifth (the connections' start), and A and B split the rest.
    const seconds = Math.min(a?.elapsedMs ?? 0, b?.elapsedMs ?? 0) / 1000;
    const cap = 128 * 1024;
    const cBytes = (c?.sharedBytesPerSecond ?? 0) * seconds;
    expect(cBytes).toBeLessThanOrEqual(cap * 0.25 + cap * seconds);
    expect(cBytes).toBeGreaterThan(0.8 * cap * seconds);
    expect(a?.sharedBytesPerSecond).toBeGreaterThan((c?.sharedBytesPerSecond ?? 0) * 2);
    expect(b?.sharedBytesPerSecond).toBeGreaterThan((c?.sharedBytesPerSecond ?? 0) * 2);
  }, 15_000);
});
