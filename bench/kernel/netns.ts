/**
 * The two network namespaces of the kernel comparison and the qdiscs on the
 * sender's side of their veth pair. Everything here runs `ip` and `tc` as
 * root and throws with the command's own message when one fails.
 *
 * The sender's namespace has TCP timestamps off, so a full segment carries
 * 1460 bytes of payload in a 1514-byte frame (Ethernet 14, IP 20, TCP 20):
 * the kernel's qdiscs count frames, so their rates and buckets are our
 * payload figures times {@link FRAME_FACTOR}.
 */

import { execFileSync } from 'node:child_process';
import { rootQuantumBytes, type Scenario } from './scenarios.js';

export const SENDER_NS = 'tpk-send';
export const RECEIVER_NS = 'tpk-recv';
export const SENDER_DEV = 'tpk-s';
export const RECEIVER_DEV = 'tpk-r';
export const SENDER_ADDRESS = '10.235.35.1';
export const RECEIVER_ADDRESS = '10.235.35.2';
/**
 * The sender's TCP settings: no timestamps (1460 bytes of payload a frame); no slow start after a
 * pause, so that a flow resumes at once, on both sides; a send buffer of at most 512 KiB, so that a
 * kernel-shaped flow's pause is a pause at the qdisc too (the socket holds at most ~120 ms of 4 MiB/s).
 */
const SENDER_SYSCTLS = {
  tcp_timestamps: '0',
  tcp_slow_start_after_idle: '0',
  tcp_wmem: '4096 65536 524288',
};
/** Frame bytes per payload byte of a full TCP segment without timestamps. */
export const FRAME_FACTOR = 1514 / 1460;

function run(command: string, args: readonly string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr.trim() || String(error)}`);
  }
}

function inSender(command: string, args: readonly string[]): string {
  return run('ip', ['netns', 'exec', SENDER_NS, command, ...args]);
}

/** The namespaces, the veth pair between them, addresses and links up; a leftover of an earlier run is removed first. */
export function setUp(): void {
  tearDown();
  run('ip', ['netns', 'add', SENDER_NS]);
  run('ip', ['netns', 'add', RECEIVER_NS]);
  run('ip', [
    'link',
    'add',
    SENDER_DEV,
    'netns',
    SENDER_NS,
    'type',
    'veth',
    'peer',
    'name',
    RECEIVER_DEV,
    'netns',
    RECEIVER_NS,
  ]);
  run('ip', ['-n', SENDER_NS, 'addr', 'add', `${SENDER_ADDRESS}/24`, 'dev', SENDER_DEV]);
  run('ip', ['-n', RECEIVER_NS, 'addr', 'add', `${RECEIVER_ADDRESS}/24`, 'dev', RECEIVER_DEV]);
  for (const [ns, dev] of [
    [SENDER_NS, SENDER_DEV],
    [RECEIVER_NS, RECEIVER_DEV],
  ] as const) {
    run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    run('ip', ['-n', ns, 'link', 'set', dev, 'up']);
  }
  for (const [name, value] of Object.entries(SENDER_SYSCTLS)) {
    inSender('sh', ['-c', `echo '${value}' > /proc/sys/net/ipv4/${name}`]);
  }
}

/** Removes both namespaces (and with them the veth pair); quiet when they are not there. */
export function tearDown(): void {
  const present = run('ip', ['netns', 'list']);
  for (const ns of [SENDER_NS, RECEIVER_NS]) {
    if (new RegExp(`^${ns}\\b`, 'm').test(present)) run('ip', ['netns', 'del', ns]);
  }
}

const bits = (bytesPerSecond: number) => `${Math.round(bytesPerSecond * FRAME_FACTOR * 8)}bit`;
const frameBytes = (bytes: number) => `${Math.round(bytes * FRAME_FACTOR)}`;

/**
 * The kernel's side of `scenario` on the sender's veth: TBF for a lone flow;
 * otherwise HTB, a root class at the scenario's rate and burst, one class per
 * class of the scenario (`rate` its guarantee, `ceil` its ceiling or the
 * root's rate, `cburst` its ceiling's burst, `quantum` its weight times our
 * root's quantum, one `prio` for all) and a u32 filter on each flow's port.
 * Returns the commands, as `tc` arguments.
 */
export function kernelQdisc(scenario: Scenario): string[][] {
  const dev = ['dev', SENDER_DEV];
  if (scenario.classes.length === 0) {
    return [
      [
        'qdisc',
        'add',
        ...dev,
        'root',
        'tbf',
        'rate',
        bits(scenario.rate),
        'burst',
        frameBytes(scenario.burst),
        'latency',
        '200ms',
      ],
    ];
  }
  const rate = bits(scenario.rate);
  const commands = [
    ['qdisc', 'add', ...dev, 'root', 'handle', '1:', 'htb'],
    [
      'class',
      'add',
      ...dev,
      'parent',
      '1:',
      'classid',
      '1:1',
      'htb',
      'rate',
      rate,
      'ceil',
      rate,
      'burst',
      frameBytes(scenario.burst),
      'cburst',
      frameBytes(scenario.burst),
    ],
  ];
  scenario.classes.forEach((spec, i) => {
    const classId = `1:${10 + i}`;
    commands.push([
      'class',
      'add',
      ...dev,
      'parent',
      '1:1',
      'classid',
      classId,
      'htb',
      'rate',
      bits(spec.guaranteed),
      'ceil',
      bits(spec.ceiling ?? scenario.rate),
      ...(spec.ceilingBurst === undefined ? [] : ['cburst', frameBytes(spec.ceilingBurst)]),
      'quantum',
      frameBytes(spec.weight * rootQuantumBytes(scenario)),
      'prio',
      '0',
    ]);
    for (const flow of scenario.flows) {
      if (flow.className !== spec.name) continue;
      commands.push([
        'filter',
        'add',
        ...dev,
        'parent',
        '1:',
        'protocol',
        'ip',
        'prio',
        '1',
        'u32',
        'match',
        'ip',
        'dport',
        String(flow.port),
        '0xffff',
        'flowid',
        classId,
      ]);
    }
  });
  return commands;
}

export function applyQdisc(commands: readonly (readonly string[])[]): void {
  for (const args of commands) inSender('tc', args);
}

/** Removes the sender's root qdisc, if it has one of ours. */
export function clearQdisc(): void {
  const shown = inSender('tc', ['qdisc', 'show', 'dev', SENDER_DEV]);
  if (/qdisc (tbf|htb)/.test(shown)) inSender('tc', ['qdisc', 'del', 'dev', SENDER_DEV, 'root']);
}

/** Frame bytes the sender's root qdisc has sent. */
export function qdiscSentBytes(): number {
  const shown = JSON.parse(inSender('tc', ['-s', '-j', 'qdisc', 'show', 'dev', SENDER_DEV])) as {
    root?: boolean;
    bytes: number;
  }[];
  return shown.find((q) => q.root === true)?.bytes ?? Number.NaN;
}

/** `tc class show`, for the record (the bursts tc chose where we gave none). */
export function classesShown(): string {
  return inSender('tc', ['class', 'show', 'dev', SENDER_DEV]).trim();
}
