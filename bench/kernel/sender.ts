/**
 * The sending end of the kernel comparison, run in the sender's network
 * namespace: one TCP connection per flow of a scenario, each fed by a source
 * that is always ready (16 KiB chunks, read on demand) but in the flow's
 * pauses.
 *
 * - `kernel`: the source is piped straight into the socket; the qdisc on the
 *   sender's veth does the shaping.
 * - `ours`: the source is piped through a Throttle (the `tbf` case) or a
 *   member of the scenario's ThrottleGroup tree, then into the socket; the
 *   veth has no qdisc. What the Throttle passes is recorded as it passes
 *   (the sender's output).
 *
 * Every connection is made before the run starts; a flow starts at its
 * `startMs` and all end at `durationMs`. Prints one JSON line: the run's
 * start, each flow's start, the event loop's delays over the run (how late
 * a timer of ours could fire) and, for ours, each flow's output.
 *
 * `node sender.ts HOST SCENARIO ours|kernel`
 */

import { connect, type Socket } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Readable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Throttle, ThrottleGroup } from '../../src/index.js';
import { type FlowSpec, KiB, rootQuantumBytes, type Scenario, scenarioById } from './scenarios.js';
import { monotonicMs, type Reads } from './windows.js';

const [host, scenarioId, side] = process.argv.slice(2);
if (host === undefined || scenarioId === undefined || (side !== 'ours' && side !== 'kernel')) {
  throw new Error('usage: sender.ts HOST SCENARIO ours|kernel');
}
const scenario = scenarioById(scenarioId);

/**
 * A source that is always ready, except in its flow's pauses: a 16 KiB chunk whenever it is read,
 * yielding to the event loop every 64.
 */
function busySource(flow: FlowSpec): Readable {
  const chunk = Buffer.alloc(16 * KiB, 0x61);
  let count = 0;
  let paused = false;
  let asked = false;
  const produce = () => {
    if (++count % 64 === 0) setImmediate(() => source.push(chunk));
    else source.push(chunk);
  };
  const source = new Readable({
    read() {
      if (paused) asked = true;
      else produce();
    },
  });
  for (const pause of flow.pauses ?? []) {
    setTimeout(() => {
      paused = true;
    }, pause.atMs - flow.startMs);
    setTimeout(
      () => {
        paused = false;
        if (asked) {
          asked = false;
          produce();
        }
      },
      pause.atMs + pause.forMs - flow.startMs,
    );
  }
  return source;
}

/** Our side's shaper for each flow: a lone Throttle, or a member of its class in one tree. */
function ourShapers(s: Scenario): Map<FlowSpec, Transform> {
  const shapers = new Map<FlowSpec, Transform>();
  if (s.classes.length === 0) {
    for (const flow of s.flows) shapers.set(flow, new Throttle({ rate: s.rate, burst: s.burst }));
    return shapers;
  }
  const root = new ThrottleGroup({ rate: s.rate, burst: s.burst, quantum: rootQuantumBytes(s) });
  for (const spec of s.classes) {
    const group = root.group({
      weight: spec.weight,
      guaranteed: spec.guaranteed,
      ...(spec.ceiling === undefined ? {} : { rate: spec.ceiling, burst: spec.ceilingBurst }),
    });
    for (const flow of s.flows) if (flow.className === spec.name) shapers.set(flow, group.throttle());
  }
  return shapers;
}

function connectTo(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, noDelay: true }, () => resolve(socket));
    socket.once('error', reject);
  });
}

const sockets = new Map(await Promise.all(scenario.flows.map(async (f) => [f, await connectTo(f.port)] as const)));
const shapers = side === 'ours' ? ourShapers(scenario) : new Map<FlowSpec, Transform>();
const startedAtMs: Record<number, number> = {};
const output: Record<number, Reads> = {};
const sources: Readable[] = [];

function start(flow: FlowSpec): void {
  startedAtMs[flow.port] = monotonicMs();
  const socket = sockets.get(flow) as Socket;
  const source = busySource(flow);
  sources.push(source);
  const shaper = shapers.get(flow);
  if (shaper === undefined) {
    pipeline(source, socket).catch(() => {});
    return;
  }
  const passed: Reads = { atMs: [], bytes: [] };
  output[flow.port] = passed;
  shaper.on('data', (chunk: Buffer) => {
    passed.atMs.push(monotonicMs());
    passed.bytes.push(chunk.length);
  });
  pipeline(source, shaper, socket).catch(() => {});
}

const loopDelay = monitorEventLoopDelay({ resolution: 1 });
loopDelay.enable();
const runStartMs = monotonicMs();
for (const flow of scenario.flows) {
  if (flow.startMs === 0) start(flow);
  else setTimeout(() => start(flow), flow.startMs - (monotonicMs() - runStartMs));
}
await new Promise((resolve) => setTimeout(resolve, scenario.durationMs));
for (const source of sources) source.destroy();
for (const shaper of shapers.values()) shaper.destroy();
for (const socket of sockets.values()) socket.end();
loopDelay.disable();
const delayMs = { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 };
// Exit once the line is written: a pipe may take a long line in several writes, and exiting at once
// can cut it (seen on Node 24 at about 140 KB).
process.stdout.write(`${JSON.stringify({ runStartMs, startedAtMs, delayMs, output })}\n`, () => process.exit(0));
