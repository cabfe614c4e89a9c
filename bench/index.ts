/**
 * `npm run bench [-- id ...]`: every section (but those run on request), or only those named, in one run.
 * Prints markdown to paste into docs/benchmarks.md.
 *
 * Within a section every contender runs side by side in one process, in
 * interleaved rounds. Each section gets a fresh process of its own: what one
 * section leaves behind (a peer's lingering timers, a heap grown by a flood)
 * would otherwise count against the next one's CPU and memory figures.
 *
 * `npm run bench` builds dist/ and runs on it (bench/on-dist.mjs), the code the package ships;
 * `tsx bench/index.ts` runs on src/ through tsx.
 */

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { adaptiveSection } from './adaptive.js';
import { bucketSection } from './bucket.js';
import { fleetSection } from './fleet.js';
import { fleetBandwidthSection } from './fleet-bandwidth.js';
import type { Section } from './harness.js';
import { httpSection } from './http.js';
import { keyedPlansSection, keyedRedisSection, keyedSection } from './keyed.js';
import { keyedPostgresSection, keyedPostgresSpraySection } from './keyed-postgres.js';
import { keyedSchedulerSection } from './keyed-scheduler.js';
import { schedulerSection } from './scheduler.js';
import { streamSection } from './stream.js';

const sections: Section[] = [
  bucketSection,
  streamSection,
  schedulerSection,
  keyedSection,
  keyedPlansSection,
  keyedRedisSection,
  keyedPostgresSection,
  keyedPostgresSpraySection,
  keyedSchedulerSection,
  fleetSection,
  fleetBandwidthSection,
  httpSection,
  adaptiveSection,
];

const args = process.argv.slice(2);
if (args[0] === '--section') {
  const section = sections.find((s) => s.id === args[1]);
  if (!section) throw new Error(`no bench section ${args[1]}`);
  console.log(`## ${section.title}\n`);
  console.log(await section.run());
  console.log('');
} else {
  const chosen = args.length ? sections.filter((s) => args.includes(s.id)) : sections.filter((s) => !s.onRequest);
  if (chosen.length === 0) {
    console.error(`no bench section named ${args.join(', ')}; sections: ${sections.map((s) => s.id).join(', ')}`);
    process.exit(2);
  }
  console.log(`# tokenpace bench (Node ${process.version}, ${new Date().toISOString().slice(0, 10)})\n`);
  for (const section of chosen) {
    const child = spawnSync(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), '--section', section.id],
      {
        stdio: 'inherit',
      },
    );
    if (child.status !== 0) process.exit(child.status ?? 1);
  }
}
