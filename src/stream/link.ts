/**
 * The private protocol between a `ThrottleGroup` and its member `Throttle`s.
 *
 * A member hands the group a {@link MemberPort}: closures over its own state,
 * so neither class reaches into the other's private fields. The group hands
 * back a {@link GroupLink}. A `Throttle` knows its group only as a
 * {@link GroupHandle}, so throttle.ts does not import group.ts (group.ts
 * imports throttle.ts to make members). The DRR fields (`deficit`, `round`, `inRing`, `dry`, `sparse`) live
 * on the port but belong to the group; the member only reads `inRing`.
 * Nothing here is exported from the package root.
 */

import type { Clock } from '../clock.js';

/** The symbol under which a group accepts a new member (keeps the method off the public surface). */
export const kJoin: unique symbol = Symbol('tokenpace.ThrottleGroup.join');

/** What the group sees of one member. */
export interface MemberPort {
  /** Bytes the member holds ready to send: the rest of its current chunk plus the writes queued behind it. */
  pendingBytes(): number;
  /**
   * Bytes the member could send now within its own cap (and its reader's
   * backpressure). 0 when its own cap is short: it then arms its own timer and
   * asks the group again when the tokens are there.
   */
  sendableNow(nowMs: number): number;
  /** Ends the member's writable side (what it holds still passes, in turn). */
  end(): void;
  /** Destroys the member, with `error` if given. */
  destroy(error?: Error): void;
  /** True if the member has a cap of its own (it then leaves the ring whenever that cap is short). */
  capped(): boolean;
  /** True once the member's writer has ended: what it holds is all it will send. */
  ended(): boolean;
  /** Sends up to `bytes` now (the group has the tokens); returns the bytes sent. */
  send(nowMs: number, bytes: number): number;
  /** Bytes left in the member's current DRR turn (0: no turn open). Owned by the group. */
  deficit: number;
  /** The group's round in which the member's current turn was granted (-1: none yet). Owned by the group. */
  round: number;
  /** True while the member is in the group's round-robin ring. Owned by the group. */
  inRing: boolean;
  /** It ran out of data in the middle of its turn; the group holds the turn for it a while. Owned by the group. */
  dry: boolean;
  /** It came back from its own cap: its next turn may take all its own cap allows. Owned by the group. */
  sparse: boolean;
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
  /** If no member is waiting and `bytes` conform now, takes them and returns true; false (taking nothing) otherwise. */
  tryTake(nowMs: number, bytes: number): boolean;
  /**
   * If no member is waiting, takes up to `bytes` (as many whole tokens as the
   * group holds) and returns how many it took; 0 (taking nothing) otherwise.
   */
  takeUpTo(nowMs: number, bytes: number): number;
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
}
