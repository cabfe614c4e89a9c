/**
 * A subgroup as a child of its parent: the methods of its port (link.ts),
 * which its parent's ring calls as it calls a member's. It sends by serving
 * its own ring, one piece per visit (so its parent interleaves its subgroups'
 * pieces within a round), within its own rate if it has one.
 *
 * When its own rate is short it sleeps on the root's timer (root.ts) for a
 * group's wake piece of that rate, below the limit its dry members may hold
 * their turns to; when it holds their turns for its own rate's sake, it
 * sleeps until its bucket reaches that limit (their data wakes it at once),
 * so its parent need not hold a round for it.
 *
 * Invariants: what it reports it can send (`sendableNow`) is its next
 * member's piece, within its own bucket, so its parent waits for no more
 * tokens than it will use; every piece it sends is charged to its own bucket
 * at the instant it was decided, done with at a clock read after it passed,
 * and counted in its progress.
 */

import type { Clock } from '../clock.js';
import type { ByteMeter } from '../meters/byte-meter.js';
import type { Progress } from './counters.js';
import type { DrrRing, TurnPolicy } from './drr.js';
import type { MemberPort, PortHooks } from './link.js';
import { defaultGroupBurstBytes, groupWakePieceBytes, guaranteeWakePieceBytes, wakePieceBytes } from './pacing.js';
import type { Pacer, Sleeper } from './root.js';

/** What a subgroup's port needs of its class (node.ts). */
export interface ServedClass extends Sleeper {
  readonly ring: DrrRing;
  readonly policy: TurnPolicy;
  readonly meter: ByteMeter | undefined;
  readonly pacer: Pacer;
  readonly progress: Progress;
  readonly clock: Clock;
  readonly destroyed: boolean;
  readonly numbers: { readonly quantumBytes: number };
  /** What its parent sees of it (its guaranteed rate, among others). */
  readonly port: MemberPort | undefined;
  /** Asks its parent for service again: members of its own still wait. */
  askParent(): void;
  endAll(): void;
  destroy(error?: Error): void;
}

/**
 * True if `node`'s own bucket is below its hold limit (the lone stream's
 * wake piece of its rate, as the root's): holding its dry members' turns then
 * loses nothing, and it wakes itself when the limit is reached.
 */
export function holdsForOwnRate(node: ServedClass, nowMs: number): boolean {
  const meter = node.meter;
  return meter !== undefined && meter.available(nowMs) < holdLimitBytes(node, meter);
}

function holdLimitBytes(node: ServedClass, meter: ByteMeter): number {
  const { ratePerSecond, burstBytes } = meter;
  return wakePieceBytes(ratePerSecond, burstBytes, node.pacer.latenessMs, defaultGroupBurstBytes(ratePerSecond));
}

function sleepUntilHoldEnds(node: ServedClass, nowMs: number): void {
  const meter = node.meter as ByteMeter;
  node.pacer.sleep(node, meter.readyAt(nowMs, holdLimitBytes(node, meter)), false);
}

/** The hooks of `node`'s port, with its share (see the file's opening comment). */
export function subgroupHooks(node: ServedClass, weight: number, guaranteedPerSecond: number): PortHooks {
  // The child its ring serves next (its turn granted) and the most it may send:
  // the parent asks three times in one step of a pass (pendingBytes,
  // sendableNow, send), at one instant, with nothing sent in between, so the
  // answer is kept for that instant while the child is still first in the
  // ring, and dropped once it has sent.
  let chosen: MemberPort | undefined;
  let chosenLimit = 0;
  let chosenAtMs = Number.NaN;
  // From a sleep for its own rate's tokens until it next sends (its port's `heldByCap`).
  let heldByCap = false;
  const choose = (nowMs: number): MemberPort | undefined => {
    if (chosen !== undefined && chosenAtMs === nowMs && chosen.inRing && node.ring.first === chosen) return chosen;
    chosen = node.ring.select(nowMs, node.policy);
    chosenLimit = node.ring.limit;
    chosenAtMs = chosen === undefined ? Number.NaN : nowMs;
    return chosen;
  };

  const pendingBytes = (): number => {
    const nowMs = node.clock.now();
    if (choose(nowMs) !== undefined) return 1;
    if (node.ring.idle === 'hold' && holdsForOwnRate(node, nowMs)) sleepUntilHoldEnds(node, nowMs);
    return 0;
  };

  const sendableNow = (nowMs: number): number => {
    const meter = node.meter;
    let available = Number.MAX_SAFE_INTEGER;
    if (meter !== undefined) {
      available = Math.floor(meter.available(nowMs));
      if (available < 1) {
        const { ratePerSecond, burstBytes } = meter;
        let piece = groupWakePieceBytes(ratePerSecond, burstBytes, node.numbers.quantumBytes, node.pacer.latenessMs);
        if ((node.port?.guaranteedPerSecond ?? 0) > 0) piece = guaranteeWakePieceBytes(ratePerSecond, piece);
        heldByCap = true;
        node.pacer.sleep(node, meter.readyAt(nowMs, piece));
        return 0;
      }
    }
    return choose(nowMs) === undefined ? 0 : Math.min(available, chosenLimit);
  };

  const send = (nowMs: number, budget: number): number => {
    const { ring, meter, progress } = node;
    let sent = 0;
    while (sent === 0) {
      const port = choose(nowMs);
      if (port === undefined) break;
      chosenAtMs = Number.NaN; // it sends now: ask the ring again next time
      sent = port.send(nowMs, Math.min(chosenLimit, budget));
      if (sent > 0) {
        heldByCap = false;
        meter?.take(nowMs, sent);
        meter?.done(node.clock.now(), sent);
        progress.start(nowMs);
        progress.record(nowMs, sent);
      }
      if (!port.inRing) continue; // it left while sending
      if (sent === 0) ring.drop(port);
      else ring.charge(port, sent);
    }
    if (ring.size > 0) progress.waiting(nowMs);
    else progress.stopWaiting(nowMs);
    return sent;
  };

  // Its parent took it out of its ring: its own dry members give up their
  // turns with it, unless it holds them for its own rate's sake; if others
  // still wait, it asks again.
  const dropped = (): void => {
    if (node.destroyed || node.pacer.asleep(node)) return;
    const nowMs = node.clock.now();
    if (node.ring.holdsBack() && holdsForOwnRate(node, nowMs)) {
      sleepUntilHoldEnds(node, nowMs);
      return;
    }
    node.ring.dropHolders();
    if (node.ring.size > 0) node.askParent();
  };

  return {
    weight,
    guaranteedPerSecond,
    pendingBytes,
    sendableNow,
    send,
    dropped,
    end: () => node.endAll(),
    destroy: (error) => node.destroy(error),
    capped: () => node.meter !== undefined,
    heldByCap: () => heldByCap,
    fullAtMs: (nowMs) => node.meter?.readyAt(nowMs, node.meter.burstBytes) ?? Number.POSITIVE_INFINITY,
    ended: () => false,
    holdsBack: () => node.ring.holdsBack() && !holdsForOwnRate(node, node.clock.now()),
  };
}
