/**
 * Helpers for the bandwidth-class tests: a tree of groups and busy members
 * built from a plain description, the pieces each class passed, and the
 * shares a class tree should give (HTB's allocation, computed as a fluid: each
 * class first its guaranteed rate, then the rest by weight, never above a
 * ceiling, what one child cannot take going to the others).
 */

import { getDefaultHighWaterMark, setDefaultHighWaterMark } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Throttle, ThrottleGroup } from '../../src/index.js';
import type { FakeClock } from '../helpers/fake-clock.js';
import { type Piece, recordingSink, timedSource } from './support.js';

export const MiB = 1048576;

/** Runs `fn` with the default buffers of byte streams at `bytes` (Node 20's 16 KiB, or 64 KiB from Node 22 on), then puts them back. */
export async function withStreamBuffers<T>(bytes: number, fn: () => Promise<T>): Promise<T> {
  const before = getDefaultHighWaterMark(false);
  setDefaultHighWaterMark(false, bytes);
  try {
    return await fn();
  } finally {
    setDefaultHighWaterMark(false, before);
  }
}

/** A busy member: its own cap, weight and guarantee (all optional). */
export interface MemberSpec {
  rate?: number;
  weight?: number;
  guaranteed?: number;
}

/** A class: its ceiling, weight and guarantee (all optional), its members and its subgroups. */
export interface ClassSpec {
  rate?: number;
  weight?: number;
  guaranteed?: number;
  members: MemberSpec[];
  groups: ClassSpec[];
}

/** Bytes a sink received at times in (fromMs, toMs]. */
export function between(pieces: readonly Piece[], fromMs: number, toMs: number): number {
  let sum = 0;
  for (const piece of pieces) if (piece.atMs > fromMs && piece.atMs <= toMs) sum += piece.bytes;
  return sum;
}

export function jain(values: readonly number[]): number {
  const sum = values.reduce((a, b) => a + b, 0);
  const squares = values.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 1 : (sum * sum) / (values.length * squares);
}

/** A member of `group` fed by a socket-like source at `bytesPerSecond` (`chunkBytes` every 2 ms). */
export function busyMember(
  fake: FakeClock,
  group: ThrottleGroup,
  bytesPerSecond: number,
  options: MemberSpec = {},
  chunkBytes = 16384,
) {
  const throttle: Throttle = group.throttle(options);
  const sink = recordingSink(() => fake.timers.now);
  const source = timedSource(fake, { bytesPerSecond, chunkBytes, intervalMs: 2 });
  pipeline(source, throttle, sink).catch(() => {});
  return {
    throttle,
    sink,
    source,
    stop() {
      source.destroy();
      throttle.destroy();
    },
  };
}

export type BusyMember = ReturnType<typeof busyMember>;

/** A class of a built tree: its group, its spec, its busy members and its subclasses. */
export interface BuiltClass {
  group: ThrottleGroup;
  spec: ClassSpec;
  members: { spec: MemberSpec; member: BusyMember }[];
  groups: BuiltClass[];
}

/** Builds `spec` under `group` (the root, or a subgroup already made), every member fed at `sourceRate`. */
export function buildTree(
  fake: FakeClock,
  group: ThrottleGroup,
  spec: ClassSpec,
  sourceRate: number,
  chunkBytes = 16384,
): BuiltClass {
  return {
    group,
    spec,
    members: spec.members.map((m) => ({ spec: m, member: busyMember(fake, group, sourceRate, m, chunkBytes) })),
    groups: spec.groups.map((g) => {
      const sub = group.group({ rate: g.rate, weight: g.weight, guaranteed: g.guaranteed });
      return buildTree(fake, sub, g, sourceRate, chunkBytes);
    }),
  };
}

/** Every piece the members of a class and its subclasses passed, in time order. */
export function piecesOf(built: BuiltClass): Piece[] {
  const out: Piece[] = [];
  const collect = (c: BuiltClass) => {
    for (const m of c.members) out.push(...m.member.sink.pieces);
    for (const g of c.groups) collect(g);
  };
  collect(built);
  return out.sort((a, b) => a.atMs - b.atMs);
}

/** Stops every member of a built tree. */
export function stopTree(built: BuiltClass): void {
  for (const m of built.members) m.member.stop();
  for (const g of built.groups) stopTree(g);
}

type Node = ClassSpec | MemberSpec;
const isClass = (node: Node): node is ClassSpec => 'members' in node;

/** The most a busy class or member can take: its ceiling, or what its members can take together. */
function maxRate(node: Node): number {
  const own = node.rate ?? Number.POSITIVE_INFINITY;
  if (!isClass(node)) return own;
  const below = [...node.members, ...node.groups].reduce((sum, child) => sum + maxRate(child), 0);
  return Math.min(own, below);
}

/** A class's guarantee as its parent counts it: its own, and at least its children's together. */
export function effectiveGuaranteed(node: Node): number {
  const own = node.guaranteed ?? 0;
  if (!isClass(node)) return own;
  return Math.max(
    own,
    [...node.members, ...node.groups].reduce((sum, child) => sum + effectiveGuaranteed(child), 0),
  );
}

/**
 * The long-run rate of every class and member of `root` (a root of rate
 * `rootRate`) when every member is busy: HTB's allocation as a fluid.
 */
export function fluidShares(rootRate: number, root: ClassSpec): Map<Node, number> {
  const out = new Map<Node, number>();
  const allocate = (node: Node, capacity: number) => {
    out.set(node, capacity);
    if (!isClass(node)) return;
    const children: Node[] = [...node.members, ...node.groups];
    const caps = children.map(maxRate);
    const given = children.map((child, i) => Math.min(effectiveGuaranteed(child), caps[i] as number));
    let left = capacity - given.reduce((a, b) => a + b, 0);
    // Water-filling by weight over the children with room left.
    let open = children.map((_, i) => i).filter((i) => (caps[i] as number) > (given[i] as number));
    while (left > 1e-9 && open.length > 0) {
      const weight = open.reduce((sum, i) => sum + ((children[i] as Node).weight ?? 1), 0);
      const full = open.filter(
        (i) => (caps[i] as number) - (given[i] as number) <= (left * ((children[i] as Node).weight ?? 1)) / weight,
      );
      if (full.length === 0) {
        for (const i of open) given[i] = (given[i] as number) + (left * ((children[i] as Node).weight ?? 1)) / weight;
        left = 0;
        break;
      }
      for (const i of full) {
        left -= (caps[i] as number) - (given[i] as number);
        given[i] = caps[i] as number;
      }
      open = open.filter((i) => !full.includes(i));
    }
    for (const [i, child] of children.entries()) allocate(child, given[i] as number);
  };
  allocate(root, Math.min(rootRate, maxRate(root)));
  return out;
}

/** A class's shape before its numbers: fractions of the rates above it. */
export interface Shape {
  weight: number | undefined;
  ceiling: number | undefined;
  guaranteed: number | undefined;
  members: { weight: number | undefined; cap: number | undefined; guaranteed: number | undefined }[];
  groups: Shape[];
}

/**
 * Numbers for a shape under a rate of `ceilingAbove`, guarantees within
 * `budget`: each of n children may be guaranteed (with what is below it) at
 * most min(budget, 0.9 x its class's rate) / n, so no refusal is due.
 */
export function materialize(s: Shape, ceilingAbove: number, budget: number, isRoot: boolean): ClassSpec {
  const rate = isRoot || s.ceiling === undefined ? undefined : Math.ceil(s.ceiling * ceilingAbove);
  const ceiling = rate ?? ceilingAbove;
  const room = Math.min(budget, 0.9 * ceiling);
  const n = Math.max(1, s.members.length + s.groups.length);
  const each = room / n;
  const members: MemberSpec[] = s.members.map((m) => {
    const cap = m.cap === undefined ? undefined : Math.ceil(m.cap * ceiling);
    const guaranteed =
      m.guaranteed === undefined ? undefined : Math.floor(m.guaranteed * Math.min(each, 0.9 * (cap ?? ceiling)));
    return { rate: cap, weight: m.weight, guaranteed };
  });
  return {
    rate,
    weight: isRoot ? undefined : s.weight,
    guaranteed: isRoot || s.guaranteed === undefined ? undefined : Math.floor(s.guaranteed * room),
    members,
    groups: s.groups.map((g) => materialize(g, ceiling, each, false)),
  };
}

export function countMembers(spec: ClassSpec): number {
  return spec.members.length + spec.groups.reduce((sum, g) => sum + countMembers(g), 0);
}
