/**
 * `npm run bench [-- id ...]`: every section, or only those named, in one
 * process run. Prints markdown to paste into the README.
 */

import { bucketSection } from './bucket.js';
import type { Section } from './harness.js';
import { schedulerSection } from './scheduler.js';
import { streamSection } from './stream.js';

const sections: Section[] = [bucketSection, schedulerSection, streamSection];

const wanted = process.argv.slice(2);
const chosen = wanted.length ? sections.filter((s) => wanted.includes(s.id)) : sections;
if (chosen.length === 0) {
  console.error(`no bench section named ${wanted.join(', ')}; sections: ${sections.map((s) => s.id).join(', ')}`);
  process.exit(2);
}
console.log(`# tokenpace bench (Node ${process.version}, ${new Date().toISOString().slice(0, 10)})\n`);
for (const section of chosen) {
  console.log(`## ${section.title}\n`);
  console.log(await section.run());
  console.log('');
}
