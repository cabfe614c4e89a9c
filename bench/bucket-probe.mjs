/**
 * One decision loop in a process of its own, for bench/bucket.ts's instruction counts under callgrind:
 *
 *   valgrind --tool=callgrind node --single-threaded bench/bucket-probe.mjs <clock|local|ours|limiter> <n>
 *
 * Plain JavaScript over the package's build (dist/, made by `npm run bench`), with no loader hooks: run
 * through tsx's, the counts moved by up to 10 % from run to run; plain, a count repeats exactly.
 * It warms the loop up (200,000 calls, so that it runs optimised), then runs it n more times. The
 * instructions per decision are the difference between two runs, n and a larger n, divided by the
 * difference of n: startup, compilation and warm-up cancel out.
 */
import { TokenBucket as LimiterBucket } from 'limiter';
import { TokenBucket } from '../dist/index.js';

const [which = 'ours', nArg = '0'] = process.argv.slice(2);
const n = Number(nArg);
let sink = 0;
// As in bench/bucket.ts: rate 1M/s, burst 1M, a mix of admits and refusals.
const ours = new TokenBucket({ rate: 1e6, burst: 1e6 });
const peer = new LimiterBucket({ bucketSize: 1e6, tokensPerInterval: 1e6, interval: 'second' });
// Each loop keeps its running result in a local and hands it to `sink` once: a double added to a
// module-level variable on every turn would box it (a heap number and its collection per turn), which
// the clock loop, whose result is a double, paid and the counting loops did not (about 110
// instructions of its 300).
/** @type {Record<string, (count: number) => void>} */
const loops = {
  clock(count) {
    // Through the global, as the system clock reads it (importing tokenpace made it a constant property).
    let acc = 0;
    for (let i = 0; i < count; i++) acc += performance.now();
    sink += acc;
  },
  local(count) {
    const perf = performance; // the cheapest read: the object in a local
    let acc = 0;
    for (let i = 0; i < count; i++) acc += perf.now();
    sink += acc;
  },
  ours(count) {
    let admitted = 0;
    for (let i = 0; i < count; i++) if (ours.tryTake()) admitted++;
    sink += admitted;
  },
  limiter(count) {
    let admitted = 0;
    for (let i = 0; i < count; i++) if (peer.tryRemoveTokens(1)) admitted++;
    sink += admitted;
  },
};
const loop = loops[which];
if (loop === undefined) throw new Error(`bucket-probe: no loop ${which}; loops: ${Object.keys(loops).join(', ')}`);
for (let round = 0; round < 20; round++) loop(10_000);
loop(n);
if (sink === -1) console.log(sink); // keeps the loops' results alive
