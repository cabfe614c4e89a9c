/**
 * The three cases of the kernel comparison, shared by the sender (which
 * builds our side from them) and the main script (which builds the kernel's
 * qdiscs and the bounds). Rates are bytes of payload per second; the kernel
 * counts whole frames, so its side is configured at these figures times the
 * frame factor (kernel.ts).
 *
 * - `tbf`: one flow through a Throttle at 4 MiB/s, burst 256 KiB, against TBF.
 * - `ceiling`: under an 8 MiB/s root, X (guaranteed 1 MiB/s, ceiling 3 MiB/s,
 *   burst 64 KiB) beside a busy Y (guaranteed 1 MiB/s): X's share (4 MiB/s) is
 *   above its ceiling, so the ceiling binds; against HTB's `ceil` and `cburst`.
 *   In both the shaped flow is busy for 2.5 s, then pauses twice for 400 ms
 *   (its bucket fills) and resumes for 600 ms: a window that starts with a
 *   full bucket is where burst + rate * T is tested.
 * - `tree`: root 8 MiB/s; A guaranteed 1 MiB/s, weight 1; B guaranteed 3,
 *   weight 3; C guaranteed 2, ceiling 3, weight 2. B and C are busy from the
 *   start, A joins at 1.5 s; against HTB.
 */

export const KiB = 1024;
export const MiB = 1024 * KiB;

/** A busy flow: one TCP connection to `port`, from `startMs` after the run's start to its end. */
export interface FlowSpec {
  name: string;
  port: number;
  startMs: number;
  /** The class it belongs to, by name (the tree's classes), or none (a lone Throttle). */
  className?: string;
  /** Spells without data: from `atMs` after the run's start, for `forMs`. */
  pauses?: { atMs: number; forMs: number }[];
}

const PAUSES = [
  { atMs: 2500, forMs: 400 },
  { atMs: 3500, forMs: 400 },
];

/** A class under the root: ours is a subgroup, the kernel's an HTB class. */
export interface ClassSpec {
  name: string;
  weight: number;
  guaranteed: number;
  /** The ceiling, bytes per second (ours: the subgroup's `rate`; HTB's `ceil`); none: the root's rate. */
  ceiling?: number;
  /** The ceiling's bucket, bytes (ours: the subgroup's `burst`; HTB's `cburst`). */
  ceilingBurst?: number;
}

export interface Scenario {
  id: 'tbf' | 'ceiling' | 'tree';
  durationMs: number;
  /** The busy spell over which the achieved rate is measured, ms after the run's start. */
  steadyMs: [number, number];
  /** The root's rate and burst (the Throttle's, or the root group's and HTB's root class). */
  rate: number;
  burst: number;
  classes: ClassSpec[];
  flows: FlowSpec[];
}

/** Our root group's quantum: 5 ms of its rate (its default); HTB's quantum is this times the weight. */
export function rootQuantumBytes(scenario: Scenario): number {
  return Math.ceil((scenario.rate * 5) / 1000);
}

export const scenarios: readonly Scenario[] = [
  {
    id: 'tbf',
    durationMs: 4500,
    steadyMs: [1000, 2500],
    rate: 4 * MiB,
    burst: 256 * KiB,
    classes: [],
    flows: [{ name: 'flow', port: 5351, startMs: 0, pauses: PAUSES }],
  },
  {
    id: 'ceiling',
    durationMs: 4500,
    steadyMs: [1000, 2500],
    rate: 8 * MiB,
    burst: (8 * MiB * 50) / 1000,
    classes: [
      { name: 'X', weight: 1, guaranteed: MiB, ceiling: 3 * MiB, ceilingBurst: 64 * KiB },
      { name: 'Y', weight: 1, guaranteed: MiB },
    ],
    flows: [
      { name: 'X', port: 5352, startMs: 0, className: 'X', pauses: PAUSES },
      { name: 'Y', port: 5353, startMs: 0, className: 'Y' },
    ],
  },
  {
    id: 'tree',
    durationMs: 2600,
    steadyMs: [1500, 2500],
    rate: 8 * MiB,
    burst: (8 * MiB * 50) / 1000,
    classes: [
      { name: 'A', weight: 1, guaranteed: MiB },
      { name: 'B', weight: 3, guaranteed: 3 * MiB },
      { name: 'C', weight: 2, guaranteed: 2 * MiB, ceiling: 3 * MiB, ceilingBurst: (3 * MiB * 50) / 1000 },
    ],
    flows: [
      { name: 'A', port: 5354, startMs: 1500, className: 'A' },
      { name: 'B', port: 5355, startMs: 0, className: 'B' },
      { name: 'C', port: 5356, startMs: 0, className: 'C' },
    ],
  },
];

export function scenarioById(id: string): Scenario {
  const found = scenarios.find((s) => s.id === id);
  if (found === undefined)
    throw new Error(`no kernel scenario ${id}; scenarios: ${scenarios.map((s) => s.id).join(', ')}`);
  return found;
}
