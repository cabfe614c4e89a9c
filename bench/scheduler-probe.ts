/**
 * The queued burst of bench/scheduler.ts (200,000 no-op jobs at once, concurrency 16) in a process
 * of its own, for profiling (`--cpu-prof`, `--trace-gc`) and for callgrind's instruction counts:
 *
 *   npx tsx bench/scheduler-probe.ts <ours|pool|pqueue> [bursts] [jobs]
 *
 * It runs one burst to warm up, then `bursts` more; prints the wall time and the CPU time (user +
 * system) of each. bench/scheduler.ts runs it bundled into plain JavaScript, also under callgrind:
 * the instructions per job are the difference between two runs (more bursts and fewer) divided by
 * the difference in jobs, so that startup, compilation and warm-up cancel out.
 */
import PQueue from 'p-queue';
import { Scheduler } from '../src/index.js';
import { barePool } from './scheduler.js';

const [who = 'ours', burstsArg = '10', jobsArg = '200000'] = process.argv.slice(2);
const bursts = Number(burstsArg);
const jobs = Number(jobsArg);
const asyncNoop = async (): Promise<void> => {};

function make(): () => Promise<unknown> {
  if (who === 'pool') {
    const pool = barePool(16);
    return () => pool(asyncNoop);
  }
  if (who === 'pqueue') {
    const q = new PQueue({ concurrency: 16 });
    return () => q.add(asyncNoop);
  }
  if (who !== 'ours') throw new Error(`scheduler-probe: no contender ${who}; contenders: ours, pool, pqueue`);
  const s = new Scheduler({ concurrency: 16, maxQueue: jobs });
  return () => s.schedule(asyncNoop);
}

const gc = (globalThis as { gc?: () => void }).gc;

async function burst(submit: () => Promise<unknown>): Promise<{ cpuMs: number; wallMs: number }> {
  if (gc !== undefined) {
    // As the bench does between bursts: the heap as the previous burst left it does not count here.
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
    }
  }
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const promises = new Array<Promise<unknown>>(jobs);
  for (let i = 0; i < jobs; i++) promises[i] = submit();
  await Promise.all(promises);
  const used = process.cpuUsage(cpu);
  return { cpuMs: (used.user + used.system) / 1000, wallMs: performance.now() - t0 };
}

await burst(make());
const times: { cpuMs: number; wallMs: number }[] = [];
for (let i = 0; i < bursts; i++) times.push(await burst(make()));
const list = (key: 'cpuMs' | 'wallMs') => times.map((t) => t[key].toFixed(0)).join(' ');
console.log(`${who}: ${bursts} bursts of ${jobs}, wall ms ${list('wallMs')}, CPU ms ${list('cpuMs')}`);
