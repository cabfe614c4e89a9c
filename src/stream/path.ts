/**
 * A member's fast path through a group tree: while nobody waits on its way to
 * the root, a member passes what every bucket on that way holds at once, as a
 * lone stream does, charged to each of them.
 *
 * Invariant: a piece is taken only if every class on the path has an empty
 * ring (taking it then overtakes no one) and it conforms to every bucket on
 * the path; it is then charged to all of them at the same instant, and done
 * with in all of them once it has passed.
 */

import type { ByteMeter } from '../meters/byte-meter.js';
import type { Progress } from './counters.js';

/** A class on a member's path to the root, as the fast path sees it. */
export interface PathClass {
  readonly parent: PathClass | undefined;
  readonly ring: { readonly size: number };
  readonly meter: ByteMeter | undefined;
  readonly progress: Progress;
}

/** Takes `bytes` at `nowMs` from every bucket from `first` to the root if nobody waits there and all hold them; false (taking nothing) otherwise. */
export function tryTakeOnPath(first: PathClass, nowMs: number, bytes: number): boolean {
  for (let n: PathClass | undefined = first; n !== undefined; n = n.parent) {
    if (n.ring.size > 0 || (n.meter !== undefined && n.meter.available(nowMs) < bytes)) return false;
  }
  charge(first, nowMs, bytes);
  return true;
}

/** Takes up to `bytes` (whole tokens every bucket on the path holds) if nobody waits there; returns how many (0: none). */
export function takeUpToOnPath(first: PathClass, nowMs: number, bytes: number): number {
  let taken = bytes;
  for (let n: PathClass | undefined = first; n !== undefined; n = n.parent) {
    if (n.ring.size > 0) return 0;
    if (n.meter !== undefined) taken = Math.min(taken, Math.floor(n.meter.available(nowMs)));
  }
  if (taken <= 0) return 0;
  charge(first, nowMs, taken);
  return taken;
}

/** `bytes` taken on the path have passed, at `nowMs`: each bucket on it is done with them. */
export function doneOnPath(first: PathClass, nowMs: number, bytes: number): void {
  for (let n: PathClass | undefined = first; n !== undefined; n = n.parent) n.meter?.done(nowMs, bytes);
}

function charge(first: PathClass, nowMs: number, bytes: number): void {
  for (let n: PathClass | undefined = first; n !== undefined; n = n.parent) {
    n.meter?.take(nowMs, bytes);
    n.progress.start(nowMs);
    n.progress.record(nowMs, bytes);
  }
}
