/**
 * The private protocol between a class of a `ThrottleGroup` tree and what it
 * serves: its member `Throttle`s and its subgroups.
 *
 * A child hands its class a {@link MemberPort}: closures over its own state,
 * so neither side reaches into the other's private fields. A subgroup is a
 * child like a member: its port sends by serving its own members (node.ts).
 * The class hands a member back a {@link GroupLink}. A `Throttle` knows its
 * group only as a {@link GroupHandle}, so throttle.ts does not import
 * group.ts (group.ts imports throttle.ts to make members). The DRR fields
 * (`deficit`, `round`, `inRing`, `dry`, `sparse`, `urgent`, `turnBytes` and
 * the ring links) live on the port but belong to the class; the member only
 * reads `inRing`. Nothing here is exported from the package root.
 */

import type { Clock } from '../clock.js';
import type { RingLinks } from './ring.js';

/** The symbol under which a group accepts a new member (keeps the method off the public surface). */
export const kJoin: unique symbol = Symbol('tokenpace.ThrottleGroup.join');

/** What a class sees of one child: a member stream, or a subgroup. */
export interface MemberPort extends RingLinks<MemberPort> {
  /** Bytes the child holds ready to send (a subgroup: more than 0 if one of its members would send now). */
  pendingBytes(): number;
  /**
   * Bytes the child could send now within its own cap (and a member's
   * reader's backpressure). 0 when its own cap is short: it then arranges to
   * be woken (a member arms its own timer, a subgroup asks the root's) and
   * asks its class again when the tokens are there.
   */
  sendableNow(nowMs: number): number;
  /** Ends the child's writable side (a subgroup: every member below it); what it holds still passes, in turn. */
  end(): void;
  /** Destroys the child, with `error` if given. */
  destroy(error?: Error): void;
  /** True if the child has a cap of its own (it then leaves the ring whenever that cap is short). */
  capped(): boolean;
  /**
   * True if its own cap held it since it last sent (a member's own bucket, a
   * subgroup's own rate): it comes back from its cap, not from idle or its
   * reader, and goes first (see node.ts's `request`).
   */
  heldByCap(): boolean;
  /** When its own bucket will be full (what it earns after that is lost), ms; Infinity without a cap of its own. */
  fullAtMs(nowMs: number): number;
  /** True once the child will send nothing more than it holds (a member whose writer has ended). */
  ended(): boolean;
  /** Sends up to `bytes` now (the class has the tokens); returns the bytes sent. */
  send(nowMs: number, bytes: number): number;
  /**
   * True if the child holds data back for a member of its own that ran dry
   * mid-turn (a subgroup holding a turn): its class then waits at most until
   * the hold limit, as for its own dry members.
   */
  holdsBack(): boolean;
  /** The class took it out of its ring (its turn is over); a subgroup then lets its own dry members give up theirs. */
  dropped(): void;
  /** Its share under contention relative to its siblings'. Owned by the child. */
  weight: number;
  /** Its guaranteed rate, bytes per second (a subgroup: at least its children's together; 0: none). Owned by the child. */
  guaranteedPerSecond: number;
  /** Bytes left in its current DRR turn (0: no turn open). Owned by the class. */
  deficit: number;
  /** The class's round in which its current turn was granted (-1: none yet). Owned by the class. */
  round: number;
  /** The size of its current turn, bytes (a subgroup sizes its own rounds by it). Owned by the class. */
  turnBytes: number;
  /** True while it is in its class's round-robin ring. Owned by the class. */
  inRing: boolean;
  /** It ran out of data in the middle of its turn; the class holds the turn for it a while. Owned by the class. */
  dry: boolean;
  /** It came back from its own cap: its next turn may take all its own cap allows. Owned by the class. */
  sparse: boolean;
  /** A capped member below it came back: it is served first, taking its next turn early if need be. Owned by the class. */
  urgent: boolean;
}

/** What a child provides of a {@link MemberPort}: its methods and its share. */
export type PortHooks = Pick<
  MemberPort,
  | 'pendingBytes'
  | 'sendableNow'
  | 'end'
  | 'destroy'
  | 'capped'
  | 'heldByCap'
  | 'fullAtMs'
  | 'ended'
  | 'send'
  | 'holdsBack'
  | 'dropped'
  | 'weight'
  | 'guaranteedPerSecond'
>;

/**
 * A new child's port, its DRR fields fresh. Every port is made here, by one
 * object literal, so members' and subgroups' ports share one shape: the ring
 * touches them all, and ports of many shapes (an object spread gives each its
 * own) made every ring step a lookup, 200 ns instead of 5 with 1,000 members.
 */
export function makePort(hooks: PortHooks): MemberPort {
  return {
    pendingBytes: hooks.pendingBytes,
    sendableNow: hooks.sendableNow,
    end: hooks.end,
    destroy: hooks.destroy,
    capped: hooks.capped,
    heldByCap: hooks.heldByCap,
    fullAtMs: hooks.fullAtMs,
    ended: hooks.ended,
    send: hooks.send,
    holdsBack: hooks.holdsBack,
    dropped: hooks.dropped,
    weight: hooks.weight,
    guaranteedPerSecond: hooks.guaranteedPerSecond,
    deficit: 0,
    round: -1,
    turnBytes: 0,
    inRing: false,
    dry: false,
    sparse: false,
    urgent: false,
    ringQueue: undefined,
    ringPrev: undefined,
    ringNext: undefined,
  };
}

/**
 * What a `Throttle` needs of the `group` it is given: a way to join (a
 * `ThrottleGroup` is one). Its shared numbers are there for callers that read
 * `throttle.group`.
 */
export interface GroupHandle {
  /** @internal A new member hands over its port. */
  [kJoin](port: MemberPort): GroupLink;
  /** The shared rate, bytes per second. */
  readonly rate: number;
  /** The shared bucket's capacity, bytes. */
  readonly burst: number;
}

/** What a member sees of its group. */
export interface GroupLink {
  /** The group's clock; members use it too. */
  readonly clock: Clock;
  /**
   * If no member is waiting on the member's path to the root and `bytes`
   * conform to every bucket on it now, takes them and returns true; false
   * (taking nothing) otherwise.
   */
  tryTake(nowMs: number, bytes: number): boolean;
  /**
   * If no member is waiting on the member's path, takes up to `bytes` (as
   * many whole tokens as every bucket on it holds) and returns how many it
   * took; 0 (taking nothing) otherwise.
   */
  takeUpTo(nowMs: number, bytes: number): number;
  /** `bytes` taken by {@link tryTake} or {@link takeUpTo} have passed, at `nowMs` (see meters/byte-meter.ts's `done`). */
  done(nowMs: number, bytes: number): void;
  /**
   * The member has data it could not send: join the ring (if not in it) and
   * be served in turn. A member already in the ring calls it when new data
   * arrives, so the group serves it at once if its turn is open and the
   * tokens are there.
   */
  request(port: MemberPort): void;
  /** Something changed that may shorten the group's sleep (a member's writer ended): plan the timer again. */
  replan(): void;
  /** The member ended or was destroyed: forget it at once. */
  leave(port: MemberPort): void;
  /**
   * The member's `weight` or `guaranteedPerSecond` is to change to these:
   * throws (changing nothing) if the guarantees would add up to more than a
   * rate above it, else applies them.
   */
  reweigh(port: MemberPort, weight: number, guaranteedPerSecond: number): void;
}
