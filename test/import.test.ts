/**
 * Importing tokenpace leaves the process as it found it: no global, prototype or property outside
 * the package changed, no timer or handle opened, no instance of its classes built and kept. Checked
 * in a fresh process (test/fixtures/import-probe.mjs), since this one has long since imported it.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const probe = fileURLToPath(new URL('fixtures/import-probe.mjs', import.meta.url));

interface ProbeReport {
  imported: { specifier: string; exports: number }[];
  changes: string[];
  opened: string[];
  instances: string[];
}

function runProbe(specifiers: string[]): Promise<{ report: ProbeReport; exitCode: number | null }> {
  return new Promise((resolve, reject) => {
    // The probe never calls process.exit: the timeout catches a process that an import keeps alive.
    // tsx's cache is off: from Node 22 on, its writes are still pending (FSReqPromise) when the probe
    // lists what is open, and would read as handles the import opened. Uncached, a probe of src/ costs
    // about 11 s of CPU on Node 24 (6 s on Node 20), hence the room in the timeout.
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', probe, ...specifiers],
      { cwd: root, timeout: 60_000, env: { ...process.env, TSX_DISABLE_CACHE: '1' } },
      (error, stdout, stderr) => {
        if (error && child.exitCode === null) {
          reject(new Error(`the probe did not end by itself: ${error.message}\n${stderr}`));
          return;
        }
        try {
          resolve({ report: JSON.parse(stdout) as ProbeReport, exitCode: child.exitCode });
        } catch {
          reject(new Error(`the probe printed no report (exit ${child.exitCode}):\n${stdout}\n${stderr}`));
        }
      },
    );
  });
}

describe('importing the package', { timeout: 120_000 }, () => {
  it('changes no global, prototype or listener, opens nothing and keeps no instance', async () => {
    const { report, exitCode } = await runProbe(['./src/index.ts']);
    expect(report.imported[0]?.exports).toBeGreaterThan(20);
    expect(report.changes).toEqual([]);
    expect(report.opened).toEqual([]);
    expect(report.instances).toEqual([]);
    expect(exitCode).toBe(0);
  });

  it('the probe sees a change when there is one', async () => {
    // A module that redefines the global performance as a data property, as tokenpace once did, and
    // arms a timer: the probe must report both, or its empty reports above prove nothing.
    const { report } = await runProbe(['./test/fixtures/import-probe-culprit.mjs']);
    expect(report.changes).toContain('globalThis.performance: accessor -> data object');
    expect(report.opened.some((r) => r.startsWith('Timeout'))).toBe(true);
    expect(report.instances).toEqual(['./test/fixtures/import-probe-culprit.mjs Kept x1']);
  });
});
