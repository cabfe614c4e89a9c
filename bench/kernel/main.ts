/**
 * `npm run bench:kernel`: tokenpace's Throttle and ThrottleGroup tree against
 * the Linux kernel's TBF and HTB, on the same traffic, measured at a real
 * receiver. Needs root (it makes two network namespaces joined by a veth
 * pair, and puts qdiscs on the sender's side); it always removes them, also
 * when a run fails or is interrupted.
 *
 * Each case (scenarios.ts) runs three ways per round: ours (the senders'
 * bytes through our shaper, no qdisc), at the machine's usual priority and
 * with the sender at a real-time one, and the kernel's (the senders write as
 * fast as they can, the qdisc shapes). A receiver in the other
 * namespace timestamps every read of each flow, and a capture on its veth
 * (capture.py) every packet as the kernel takes it in. `BENCH_KERNEL_ROUNDS` rounds
 * (default 3), each with the load average beside it; the sides' order
 * alternates from round to round. Prints markdown.
 */

import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { table } from '../harness.js';
import {
  applyQdisc,
  classesShown,
  clearQdisc,
  FRAME_FACTOR,
  kernelQdisc,
  qdiscSentBytes,
  RECEIVER_ADDRESS,
  RECEIVER_DEV,
  RECEIVER_NS,
  SENDER_NS,
  setUp,
  tearDown,
} from './netns.js';
import { KiB, MiB, rootQuantumBytes, type Scenario, scenarios } from './scenarios.js';
import { bytesBetween, fullestWindowRatio, leanestWindow, type Reads } from './windows.js';

/**
 * Ours (the sender at the machine's usual priority, as a deployment runs it), ours with the sender at
 * a real-time priority (what the same code does when the machine's load cannot delay its timers),
 * and the kernel's.
 */
type Side = 'ours' | 'ours, real-time' | 'kernel';
const SIDES: readonly Side[] = ['ours', 'ours, real-time', 'kernel'];
const REAL_TIME = ['chrt', '--fifo', '10'];
const RECEIVER_PRIORITY = ['chrt', '--fifo', '20'];

/** One side's run of one case: where each flow's bytes were seen, and when each flow started. */
interface Measured {
  side: Side;
  round: number;
  runStartMs: number;
  startedAtMs: Record<number, number>;
  /** Reads at the receiver, by port. */
  received: Record<number, Reads>;
  /** Packets as they reach the receiver's veth (capture.py), by port. */
  wire: Record<number, Reads>;
  /** Ours only: the shaper's output at the sender, by port. */
  output: Record<number, Reads>;
  /** The sender's event loop delays over the run, ms (p99, max): how late a timer could fire. */
  delayMs: { p99: number; max: number };
  /** The kernel's only: frame bytes its qdisc sent per payload byte received. */
  frameFactor?: number;
}

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function lines(child: ReturnType<typeof spawn>): AsyncIterator<string> {
  return createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
}

/** A Node child in `ns`, with this process's flags (the TypeScript loader). */
function nodeIn(ns: string, script: string, args: readonly string[], prefix: readonly string[] = []) {
  const command = [...prefix, process.execPath, ...process.execArgv, here(script), ...args];
  const child = spawn('ip', ['netns', 'exec', ns, ...command], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
}

const children = new Set<ReturnType<typeof spawn>>();
/** Every run of each case, in order. */
const results = new Map<Scenario, Measured[]>();

async function runOnce(scenario: Scenario, side: Side, round: number): Promise<Measured> {
  clearQdisc();
  if (side === 'kernel') applyQdisc(kernelQdisc(scenario));
  const ports = scenario.flows.map((f) => String(f.port));
  // The receiver runs at a real-time priority above the sender's, so that a loaded machine delays
  // its reads (and so the flows' acknowledgements) as little as possible.
  const receiver = nodeIn(RECEIVER_NS, 'receiver.ts', [RECEIVER_ADDRESS, ...ports], RECEIVER_PRIORITY);
  const receiverLines = lines(receiver);
  if ((await receiverLines.next()).value !== 'ready') throw new Error('the receiver did not start');
  const capture = spawn('ip', ['netns', 'exec', RECEIVER_NS, 'python3', here('capture.py'), RECEIVER_DEV, ...ports], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.add(capture);
  capture.on('exit', () => children.delete(capture));
  const captureLines = lines(capture);
  if ((await captureLines.next()).value !== 'ready') throw new Error('the capture did not start');
  const sender = nodeIn(
    SENDER_NS,
    'sender.ts',
    [RECEIVER_ADDRESS, scenario.id, side === 'kernel' ? 'kernel' : 'ours'],
    side === 'ours, real-time' ? REAL_TIME : [],
  );
  const sent = JSON.parse(((await lines(sender).next()).value as string | undefined) ?? 'null');
  if (sent === null) throw new Error(`the sender of ${scenario.id} (${side}) printed nothing`);
  await sleep(500); // what the qdisc still holds drains
  const frameBytes = side === 'kernel' ? qdiscSentBytes() : Number.NaN;
  receiver.stdin?.write('done\n');
  capture.stdin?.write('done\n');
  const received = JSON.parse((await receiverLines.next()).value as string) as Record<number, Reads>;
  const wire = JSON.parse((await captureLines.next()).value as string) as Record<number, Reads>;
  clearQdisc();
  const payload = Object.values(received).reduce((sum, r) => sum + r.bytes.reduce((a, b) => a + b, 0), 0);
  return {
    side,
    round,
    runStartMs: sent.runStartMs,
    startedAtMs: sent.startedAtMs,
    delayMs: sent.delayMs,
    received,
    wire,
    output: sent.output,
    ...(side === 'kernel' ? { frameFactor: frameBytes / payload } : {}),
  };
}

/**
 * Each way a side's bytes were seen: on the wire (the receiver's veth, stamped by the kernel as the
 * packet leaves the sender's qdisc or socket), by the receiving process, and for ours at the sender's
 * output too.
 */
function views(m: Measured): { at: string; reads: Record<number, Reads> }[] {
  const all = [
    { at: 'wire', reads: m.wire },
    { at: 'receiver', reads: m.received },
  ];
  if (m.side !== 'kernel') all.push({ at: 'sender output', reads: m.output });
  return all;
}

const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : '-');
const kib = (bytes: number) => `${(bytes / KiB).toFixed(0)} KiB`;
const WINDOWS_MS = [5, 20, 100, 1000];
const LOOP_HEADER = "sender's loop delay p99 / max";
const loop = (m: Measured) => `${m.delayMs.p99.toFixed(0)} / ${m.delayMs.max.toFixed(0)} ms`;

const NUMBER = /-?\d+(?:\.\d+)?/g;

/**
 * The rounds' table, then one row per side and place of measure giving each figure's range over the
 * rounds (`low-high`, or the one value when they agree); the first column is the round.
 */
function tables(headers: readonly string[], rows: readonly string[][]): string {
  const groups = new Map<string, string[][]>();
  for (const row of rows) {
    const key = `${row[1]}\u0000${row[2]}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  const ranges = [...groups.values()].map((group) => {
    const first = group[0] as string[];
    return [
      first[1] as string,
      first[2] as string,
      ...first.slice(3).map((cell, col) => {
        const values = group.map((row) => (row[col + 3] ?? '').match(NUMBER)?.map(Number) ?? []);
        let i = 0;
        return cell.replace(NUMBER, (text) => {
          const at = i++;
          const digits = text.includes('.') ? (text.split('.')[1] as string).length : 0;
          const seen = values.map((v) => v[at] ?? Number.NaN);
          const low = Math.min(...seen).toFixed(digits);
          const high = Math.max(...seen).toFixed(digits);
          return low === high ? low : `${low}-${high}`;
        });
      }),
    ];
  });
  return `${table(headers, rows)}\n\nOver the rounds:\n\n${table(headers.slice(1), ranges)}`;
}

/** Item 8: the most any window of T carried against burst + rate * T, and the rate achieved after the first second. */
function boundTable(scenario: Scenario): string {
  const runs = results.get(scenario) ?? [];
  const flow = scenario.flows[0];
  if (flow === undefined) throw new Error('no flow');
  const shaped = scenario.classes[0];
  const rate = shaped?.ceiling ?? scenario.rate;
  const burst = shaped?.ceilingBurst ?? scenario.burst;
  const rows = runs.flatMap((m) =>
    views(m).map(({ at, reads }) => {
      const r = reads[flow.port] ?? { atMs: [], bytes: [] };
      const [fromMs, toMs] = scenario.steadyMs;
      const achieved = bytesBetween(r, m.runStartMs + fromMs, m.runStartMs + toMs);
      return [
        String(m.round),
        m.side,
        at,
        loop(m),
        fixed(achieved / ((rate * (toMs - fromMs)) / 1000), 4),
        ...WINDOWS_MS.map((t) => fixed(fullestWindowRatio(r, t, burst + (rate * t) / 1000), 4)),
      ];
    }),
  );
  return tables(
    [
      'round',
      'side',
      'measured at',
      LOOP_HEADER,
      'achieved / rate (busy, 1-2.5 s)',
      ...WINDOWS_MS.map((t) => `most in ${t} ms / bound`),
    ],
    rows,
  );
}

/** Item 9: A's first 20 and 100 ms, B's and C's leanest 100 ms over A's return and the second after, each class's rate in that second. */
function treeTable(scenario: Scenario): string {
  const runs = results.get(scenario) ?? [];
  const [a, b, c] = scenario.flows;
  const [, cb, cc] = scenario.classes;
  if (a === undefined || b === undefined || c === undefined || cb === undefined || cc === undefined) {
    throw new Error('the tree has three flows');
  }
  const rows = runs.flatMap((m) =>
    views(m).map(({ at, reads }) => {
      const joinMs = m.startedAtMs[a.port] as number;
      const of = (port: number) => reads[port] ?? { atMs: [], bytes: [] };
      const lean = (port: number, guaranteed: number) =>
        leanestWindow(of(port), joinMs - 100, joinMs + 1000, 100) / (guaranteed * 0.1);
      const second = (port: number) => fixed(bytesBetween(of(port), joinMs, joinMs + 1000) / MiB, 2);
      return [
        String(m.round),
        m.side,
        at,
        loop(m),
        kib(bytesBetween(of(a.port), joinMs, joinMs + 20)),
        kib(bytesBetween(of(a.port), joinMs, joinMs + 100)),
        fixed(lean(b.port, cb.guaranteed), 2),
        fixed(lean(c.port, cc.guaranteed), 2),
        `${second(a.port)} / ${second(b.port)} / ${second(c.port)}`,
      ];
    }),
  );
  return tables(
    [
      'round',
      'side',
      'measured at',
      LOOP_HEADER,
      "A's first 20 ms",
      "A's first 100 ms",
      "B's leanest 100 ms / guarantee",
      "C's leanest 100 ms / guarantee",
      "A / B / C in A's first second (MiB/s)",
    ],
    rows,
  );
}

async function main(): Promise<void> {
  const rounds = Number(process.env.BENCH_KERNEL_ROUNDS ?? 3);
  const named = process.argv.slice(2);
  const chosen = named.length === 0 ? scenarios : scenarios.filter((s) => named.includes(s.id));
  if (chosen.length === 0)
    throw new Error(`no case named ${named.join(', ')}; cases: ${scenarios.map((s) => s.id).join(', ')}`);
  for (const s of chosen) results.set(s, []);
  const loads: string[] = [];
  setUp();
  const classes: string[] = [];
  for (let round = 1; round <= rounds; round++) {
    const [one, five, fifteen] = loadavg().map((x) => x.toFixed(2));
    loads.push(
      `round ${round}: ${new Date().toISOString().slice(11, 19)} UTC, load average ${one}, ${five}, ${fifteen}`,
    );
    const order = round % 2 === 1 ? SIDES : [...SIDES].reverse();
    for (const scenario of chosen) {
      for (const side of order) {
        const measured = await runOnce(scenario, side, round);
        (results.get(scenario) as Measured[]).push(measured);
      }
      if (round === 1 && scenario.classes.length > 0) {
        applyQdisc(kernelQdisc(scenario));
        classes.push(`${scenario.id}:\n${classesShown()}`);
        clearQdisc();
      }
    }
  }
  const kernelRelease = execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim();
  const total = (flows: Record<number, Reads>) =>
    Object.values(flows).reduce((sum, r) => sum + r.bytes.reduce((a, b) => a + b, 0), 0);
  const seen = [...results.values()].flat().map((m) => total(m.wire) / total(m.received));
  const factors = [...results.values()].flat().flatMap((m) => (m.frameFactor === undefined ? [] : [m.frameFactor]));
  const sections: Record<Scenario['id'], (s: Scenario) => string[]> = {
    tbf: (s) => [`## A Throttle against TBF: ${s.rate / MiB} MiB/s, burst ${kib(s.burst)}`, '', boundTable(s)],
    ceiling: (s) => [
      `## A ceiling against HTB's ceil: X ceiling ${(s.classes[0]?.ceiling ?? 0) / MiB} MiB/s, burst ${kib(s.classes[0]?.ceilingBurst ?? 0)}, beside a busy Y under ${s.rate / MiB} MiB/s`,
      '',
      boundTable(s),
    ],
    tree: (s) => [
      `## A class back from idle against HTB: root ${s.rate / MiB} MiB/s; A guaranteed 1 MiB/s weight 1, B 3 weight 3, C 2 ceiling 3 weight 2; A joins at ${s.flows[0]?.startMs} ms`,
      '',
      `A's share plus a quantum in 100 ms: ${kib((MiB + (s.rate - 6 * MiB) / 6) * 0.1 + rootQuantumBytes(s))}; HTB's fluid shares with all three busy: A ${fixed((MiB + (2 * MiB) / 6) / MiB, 2)}, B ${fixed((3 * MiB + MiB) / MiB, 2)}, C ${fixed((2 * MiB + (2 * MiB) / 3) / MiB, 2)} MiB/s.`,
      '',
      treeTable(s),
    ],
  };
  const out = [
    `# tokenpace against the kernel's TBF and HTB (Node ${process.version}, Linux ${kernelRelease}, ${new Date().toISOString().slice(0, 10)})`,
    '',
    ...loads.map((line) => `- ${line}`),
    `- the kernel's qdiscs are set at our figures times ${FRAME_FACTOR.toFixed(4)} (a 1514-byte frame per 1460 bytes of payload); measured frame bytes per payload byte: ${fixed(Math.min(...factors), 4)} to ${fixed(Math.max(...factors), 4)}`,
    `- payload bytes on the wire per byte the receiving process read: ${fixed(Math.min(...seen), 4)} to ${fixed(Math.max(...seen), 4)}`,
    ...chosen.flatMap((s) => ['', ...sections[s.id](s)]),
    ...(classes.length === 0 ? [] : ['', "The kernel's HTB classes:", '', '```text', ...classes, '```']),
  ];
  console.log(out.join('\n'));
}

if (typeof process.getuid === 'function' && process.getuid() !== 0) {
  console.error(
    'bench:kernel needs root: it creates the network namespaces tpk-send and tpk-recv, a veth pair between them, and qdiscs with tc. Run it as root (sudo npm run bench:kernel).',
  );
  process.exit(1);
}
for (const [tool, args, from] of [
  ['ip', ['-V'], 'iproute2'],
  ['tc', ['-V'], 'iproute2'],
  ['chrt', ['--version'], 'util-linux'],
  ['python3', ['--version'], 'python3'],
] as const) {
  const found = spawnSync(tool, args, { encoding: 'utf8' });
  if (found.error !== undefined || found.status !== 0) {
    console.error(
      `bench:kernel needs \`${tool}\`, which is not installed here (Debian/Ubuntu: apt-get install ${from}).`,
    );
    process.exit(1);
  }
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    for (const child of children) child.kill();
    tearDown();
    process.exit(1);
  });
}
try {
  await main();
} finally {
  for (const child of children) child.kill();
  tearDown();
}
