/**
 * TokenBucket.tryTake against limiter's TokenBucket.tryRemoveTokens and
 * against a bare `performance.now()` loop: a decision needs one clock read,
 * so the bare loop is the physical limit. Two measures:
 *
 * - wall clock, in-process, interleaved rounds after a warm-up: each round's
 *   ratio is taken within the round, shown as the median and the range;
 * - instructions per decision under callgrind (valgrind), which do not move
 *   with the machine's load: each contender's loop runs in a process of its
 *   own (bench/bucket-probe.mjs) at two lengths, and the difference of the
 *   instruction counts over the difference of the lengths is the cost of one
 *   decision (startup, compilation and warm-up cancel out). Skipped, with a
 *   note, where valgrind is not installed.
 */

import { fileURLToPath } from 'node:url';
import { TokenBucket as LimiterBucket } from 'limiter';
import { TokenBucket } from '../src/index.js';
import {
  callgrindCount,
  compare,
  formatOps,
  median,
  missingTool,
  ratioSpread,
  type Section,
  table,
} from './harness.js';

/** Through the global, as the system clock reads it (importing tokenpace made it a constant property, not Node's getter). */
const CLOCK = 'performance.now() loop';
/** The cheapest read: the object in a local, which fake timers that replace the global would not reach. */
const LOCAL = 'performance.now() loop, object in a local';
const OURS = 'tokenpace TokenBucket.tryTake';
const LIMITER = 'limiter TokenBucket.tryRemoveTokens';
/** The probe's loops, by the names above. */
const PROBES: [string, string][] = [
  [CLOCK, 'clock'],
  [LOCAL, 'local'],
  [OURS, 'ours'],
  [LIMITER, 'limiter'],
];

/** Repetitions of each instruction count: their range shows that a count repeats. */
const REPEATS = 3;

/**
 * Instructions per decision of each probe loop, {@link REPEATS} times (runs two at a time: the
 * count does not depend on the load), or why there are none.
 */
async function instructionCounts(): Promise<Map<string, number[]> | string> {
  const missing = missingTool(['valgrind'], 'the instruction counts');
  if (missing !== undefined) return missing;
  const probe = fileURLToPath(new URL('./bucket-probe.mjs', import.meta.url));
  const [short, long] = [200_000, 2_200_000];
  const jobs: (() => Promise<void>)[] = [];
  const counts = new Map<string, number[]>(PROBES.map(([name]) => [name, []]));
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const [name, loop] of PROBES) {
      jobs.push(async () => {
        const [a, b] = [
          await callgrindCount(probe, [loop, String(short)]),
          await callgrindCount(probe, [loop, String(long)]),
        ];
        (counts.get(name) as number[])[repeat] = (b - a) / (long - short);
      });
    }
  }
  const next = async (): Promise<void> => {
    for (let job = jobs.shift(); job !== undefined; job = jobs.shift()) await job();
  };
  await Promise.all([next(), next()]);
  return counts;
}

export const bucketSection: Section = {
  id: 'bucket',
  title: 'TokenBucket decisions per second',
  async run() {
    // A rate high enough that every decision is an admit after the first
    // second's refill would not exercise refusals; a modest rate with a big
    // burst gives the realistic mix: mostly refusals once the burst is spent.
    const ours = new TokenBucket({ rate: 1e6, burst: 1e6 });
    const peer = new LimiterBucket({ bucketSize: 1e6, tokensPerInterval: 1e6, interval: 'second' });
    const rounds = 15;
    const measured = await compare(
      [
        {
          name: CLOCK,
          run(n) {
            let acc = 0;
            for (let i = 0; i < n; i++) acc += performance.now();
            return acc;
          },
        },
        {
          name: LOCAL,
          run(n) {
            let acc = 0;
            const perf = performance;
            for (let i = 0; i < n; i++) acc += perf.now();
            return acc;
          },
        },
        {
          name: OURS,
          run(n) {
            let admitted = 0;
            for (let i = 0; i < n; i++) if (ours.tryTake()) admitted++;
            return admitted;
          },
        },
        {
          name: LIMITER,
          run(n) {
            let admitted = 0;
            for (let i = 0; i < n; i++) if (peer.tryRemoveTokens(1)) admitted++;
            return admitted;
          },
        },
      ],
      { rounds, sampleMs: 50, warmupMs: 500, sameSizeAs: CLOCK },
    );
    const samplesOf = (name: string) => measured.find((m) => m.name === name)?.samples ?? [];
    const spread = (name: string, base: string) => {
      const baseline = samplesOf(base);
      return ratioSpread(samplesOf(name).map((ops, round) => ops / (baseline[round] as number)));
    };
    const counts = await instructionCounts();
    const irOf = (name: string) => (typeof counts === 'string' ? [] : (counts.get(name) ?? []));
    const clockIr = irOf(CLOCK);
    const rows = measured.map((m) => {
      const ir = irOf(m.name);
      return [
        m.name,
        formatOps(m.opsPerSecond),
        spread(m.name, CLOCK),
        spread(m.name, LIMITER),
        typeof counts === 'string'
          ? 'skipped'
          : `${median(ir).toFixed(0)} (${Math.min(...ir).toFixed(0)}-${Math.max(...ir).toFixed(0)})`,
        // each run against the clock loop's run of the same repetition
        typeof counts === 'string' ? 'skipped' : ratioSpread(ir.map((x, i) => x / (clockIr[i] as number))),
      ];
    });
    return [
      table(
        [
          'contender',
          'decisions (median)',
          `vs ${CLOCK} (median, range)`,
          'vs limiter (median, range)',
          'instructions per decision (median, range)',
          'vs the clock loop (median, range)',
        ],
        rows,
      ),
      '',
      `Each decision reads the clock once; the bare loop only reads it. Rate 1M/s, burst 1M: a mix of admits and refusals. Wall clock: ${rounds} interleaved rounds of 50 ms samples after a 500 ms warm-up, each ratio taken within its round. Instructions: callgrind's count for a loop of 2,200,000 decisions minus one of 200,000, over 2,000,000, each in a fresh process (\`node --single-threaded\`, fixed hash and random seeds, plain JavaScript over dist/: bench/bucket-probe.mjs), ${REPEATS} times, each run compared with the clock loop's run of the same repetition. Under callgrind a loop runs so slowly that every decision admits.`,
      ...(typeof counts === 'string' ? ['', counts] : []),
    ].join('\n');
  },
};
