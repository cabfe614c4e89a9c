/**
 * One cell of the stream bench in a fresh process, for profiling (`--cpu-prof`) and for repeated,
 * interleaved runs on a loaded machine:
 *
 *   npx tsx bench/stream-probe.ts <source> [rate] [chunk] [ms] [contender]
 *
 * source: http (a real HTTP body, after a 300 ms warm-up run), mem (a synchronous source in memory),
 * socket (a socket-like source at 1.5x the rate). contender: ours (a lone Throttle; BURST=bytes sets
 * its burst), group (a one-member ThrottleGroup), throttle (the npm peer), pass (a bare PassThrough).
 * Prints achieved/rate, wake-ups and CPU per second, and (in memory) the most in 100 ms over the bound.
 *
 *   npx tsx bench/stream-probe.ts scale <members> [ms] [group|stream-throttle|tenants=T] [rate]
 *
 * N busy members (synchronous sources of 64 KiB chunks) sharing one group (100 MiB/s by default),
 * or (tenants=T) T subgroups of N / T members each under one root: first bytes, the longest gaps
 * between deliveries, the lowest Jain over 1 s windows (of members; of tenants too), CPU.
 */
import { PassThrough, type Transform } from 'node:stream';
import streamThrottle from 'stream-throttle';
import ThrottlePeer from 'throttle';
import { Throttle, ThrottleGroup } from '../src/index.js';
import { endlessServer, httpBody, KiB, MiB, makeSource, run, shortTermRun } from './stream-support.js';

const [kind = 'http', rateArg = String(MiB), chunkArg = String(64 * KiB), msArg = '2000', who = 'ours'] =
  process.argv.slice(2);
const rate = Number(rateArg);
const chunk = Number(chunkArg);
const ms = Number(msArg);

function make(): Transform {
  if (who === 'throttle') return new ThrottlePeer({ bps: rate, chunkSize: Math.max(1, Math.floor(rate / 10)) });
  if (who === 'pass') return new PassThrough();
  if (who === 'group') return new ThrottleGroup({ rate }).throttle();
  return new Throttle({ rate, ...(process.env.BURST ? { burst: Number(process.env.BURST) } : {}) });
}

async function scale(): Promise<void> {
  const members = Number(process.argv[3] ?? 1000);
  const durationMs = Number(process.argv[4] ?? 5000);
  const contender = process.argv[5] ?? 'group';
  const groupRate = Number(process.argv[6] ?? 100 * MiB);
  let transforms: Transform[];
  const tenants = contender.startsWith('tenants=') ? Number(contender.slice('tenants='.length)) : 0;
  if (contender === 'stream-throttle') {
    const group = new streamThrottle.ThrottleGroup({ rate: groupRate });
    transforms = Array.from({ length: members }, () => group.throttle());
  } else if (tenants > 0) {
    const root = new ThrottleGroup({ rate: groupRate });
    const classes = Array.from({ length: tenants }, () => root.group());
    transforms = Array.from({ length: members }, (_, i) => (classes[i % tenants] as ThrottleGroup).throttle());
  } else {
    const group = new ThrottleGroup({ rate: groupRate });
    transforms = Array.from({ length: members }, () => group.throttle());
  }
  const f = await shortTermRun(transforms, groupRate, durationMs);
  const ms = (x: number) => x.toFixed(0);
  if (tenants > 0) {
    const { recorder, readyMs, endMs } = f.result;
    const byTenant = (fromMs: number, toMs: number) => {
      const shares = recorder.shares(members, fromMs, toMs);
      const out = new Array<number>(tenants).fill(0);
      shares.forEach((bytes, i) => {
        out[i % tenants] = (out[i % tenants] as number) + bytes;
      });
      return out;
    };
    let worst = 0;
    const perWindow: string[] = [];
    for (let t = readyMs + 500; t + 1000 <= endMs; t += 100) {
      const got = byTenant(t, t + 1000);
      const share = got.reduce((a, b) => a + b, 0) / tenants;
      let w = 0;
      for (const g of got) w = Math.max(w, Math.abs(g / share - 1));
      perWindow.push((w * 100).toFixed(1));
      worst = Math.max(worst, w);
    }
    if (process.env.VERBOSE) {
      console.log(perWindow.join(' '));
      const whole = byTenant(readyMs + 500, endMs);
      const mean = whole.reduce((a, b) => a + b, 0) / tenants;
      const dev = whole.map((g) => ((g / mean - 1) * 100).toFixed(1));
      console.log('whole run, per tenant %:', dev.join(' '));
    }
    console.log(`tenants: every one within ${(worst * 100).toFixed(2)} % of its share over every 1 s window`);
  }
  console.log(
    `${contender} ${members} members at ${groupRate / MiB} MiB/s for ${durationMs} ms: aggregate ${f.aggregate.toFixed(4)}, ` +
      `first bytes p50 ${ms(f.firstP50Ms)} max ${ms(f.firstMaxMs)} ms, longest gap p50 ${ms(f.gapP50Ms)} p99 ${ms(f.gapP99Ms)} ` +
      `max ${ms(f.gapMaxMs)} ms, min Jain over 1 s ${f.minJain1s.toFixed(4)}, CPU ${f.cpuMsPerSecond.toFixed(1)} ms/s, ` +
      `wake-ups ${f.wakeupsPerSecond.toFixed(1)}/s`,
  );
}

async function main(): Promise<void> {
  if (kind === 'scale') {
    await scale();
    return;
  }
  if (kind === 'http') {
    const server = await endlessServer();
    await run([{ source: await httpBody(server.url), transform: make() }], 300);
    const r = await run([{ source: await httpBody(server.url), transform: make() }], ms);
    console.log(
      `${who} http ${rate}: achieved ${(r.recorder.steadyRate(r.startMs + 400) / rate).toFixed(4)} wake ${r.wakeupsPerSecond.toFixed(1)}/s cpu ${r.cpuMsPerSecond.toFixed(1)} ms/s`,
    );
    await server.close();
    return;
  }
  const source = makeSource(kind === 'mem' ? 'sync' : 'socket', chunk, 1.5 * rate);
  const transform = make();
  const burst =
    transform instanceof Throttle
      ? ((transform.burst ?? (transform.group as ThrottleGroup | undefined)?.burst ?? 0) as number)
      : 0;
  const bound = burst + rate * 0.1;
  const r = await run([{ source, transform }], ms);
  console.log(
    `${who} ${kind} ${rate} ${chunk}: achieved ${(r.recorder.steadyRate(r.startMs + 250) / rate).toFixed(4)} wake ${r.wakeupsPerSecond.toFixed(1)}/s cpu ${r.cpuMsPerSecond.toFixed(1)} ms/s max100/bound ${(r.recorder.maxInWindow(100) / bound).toFixed(3)}`,
  );
}
await main();
process.exit(0);
