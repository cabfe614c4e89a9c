/**
 * The deficit round robin of one class of a group (Shreedhar and Varghese,
 * 1995), by bytes: which child (a member stream or a subgroup) sends next,
 * and how much of its turn is left.
 *
 * The ring is served in rounds. A child gets one turn per round (its size is
 * the class's business: `turnFor`, by weight and guarantee) and sends it in
 * pieces, one per visit, the children taking turns within the round at one
 * pace (by the part of its turn each has sent), so that each passes its
 * share all through the round; a child whose turn is spent waits for the
 * next round, and so does a child that joins back from idle while others are
 * served. A child that runs dry mid-turn holds its turn (it waits in
 * `holding`) while `mayHold` says so, and the children ahead of it wait for
 * its data meanwhile; once it does not, the next round starts and the dry
 * children give up their turns. A child back from its own cap (`sparse`)
 * goes first and its turn may take what its cap allows; a subgroup with such
 * a member below it (`urgent`) goes first too, taking its next turn early if
 * this round's is spent.
 *
 * Invariants: every child in the ring is in exactly one of `current` (turn
 * open or not yet granted this round), `next` (turn spent) and `holding`
 * (dry, turn open); `weight` and `guaranteedPerSecond` are the sums over the
 * ring; a child's `round` never runs more than one round ahead.
 */

import type { MemberPort } from './link.js';
import { MIN_TURN_BYTES } from './pacing.js';
import { Queue } from './ring.js';

/** Why {@link DrrRing.select} found no child to serve: the ring is empty; only dry children hold turns; or they hold them while others wait. */
export type Idle = 'empty' | 'dry' | 'hold';

/** What a ring asks of its class. */
export interface TurnPolicy {
  /** The turn `port` gets when one is granted to it, bytes. */
  turnFor(port: MemberPort): number;
  /** True while children that ran dry may keep their turns (see the file's opening comment). */
  mayHold(nowMs: number): boolean;
  /** A sparse child's turn may take what its own cap allows, up to this many bytes. */
  sparseLimitBytes(): number;
  /** The most a child sends in one visit, bytes (see {@link VISITS_PER_TURN}). */
  visitLimitBytes(): number;
}

/**
 * A turn is sent in at least this many visits (of at least MIN_TURN_BYTES),
 * and a visit passes at most the policy's `visitLimitBytes`: what a child
 * holds ready (its buffered bytes, which its highWaterMark sets) must not
 * decide whether its share passes all through the round or in lumps.
 */
export const VISITS_PER_TURN = 4;

/** The most `port` sends in one visit; a sparse turn's extra (what its own cap allows beyond a turn) goes at once. */
function visitBytes(port: MemberPort, policy: TurnPolicy): number {
  if (port.deficit > port.turnBytes) return port.deficit;
  const share = Math.max(MIN_TURN_BYTES, Math.ceil(port.turnBytes / VISITS_PER_TURN));
  return Math.min(share, policy.visitLimitBytes());
}

/** The ring of one class; see the file's opening comment. */
export class DrrRing {
  #current = new Queue<MemberPort>();
  #next = new Queue<MemberPort>();
  readonly #holding = new Queue<MemberPort>();
  /** The round being served; a child's turn belongs to the round it was granted in. */
  round = 0;
  /** The children's weights, summed over the ring. */
  weight = 0;
  /** The children's guaranteed rates, summed over the ring, bytes per second. */
  guaranteedPerSecond = 0;
  /** Why the last {@link select} returned no child. */
  idle: Idle = 'empty';
  /** After {@link select} returned a child: the most it may send now (what it can send, its turn left). */
  limit = 0;
  /** How long the last round lasted, ms (NaN until one was seen whole): a turn's guaranteed part is sized by it. */
  lastRoundMs = Number.NaN;
  /** When the round being served began, ms (NaN: not seen). */
  #roundStartMs = Number.NaN;

  /** The child at the front of the ring (the next to be looked at), if any. */
  get first(): MemberPort | undefined {
    return this.#current.head;
  }

  /** Children in the ring. */
  get size(): number {
    return this.#current.size + this.#next.size + this.#holding.size;
  }

  /** True if every child in the ring has ended (nothing more will come than what they hold). */
  allEnded(): boolean {
    const ended = (port: MemberPort) => port.ended();
    return this.#current.every(ended) && this.#next.every(ended) && this.#holding.every(ended);
  }

  /**
   * A child that is not in the ring joins it: first (a sparse or urgent
   * child), or last. A child back from idle (no turn in this round or the last)
   * while others are served waits for the next round: a turn granted now, in
   * what is left of a round, would come on top of its next one.
   */
  join(port: MemberPort, first: boolean): void {
    port.inRing = true;
    port.dry = false;
    if (first) this.#current.unshift(port);
    else if (this.size > 0 && port.round < this.round - 1) this.#next.push(port);
    else this.#current.push(port);
    this.weight += port.weight;
    this.guaranteedPerSecond += port.guaranteedPerSecond;
  }

  /** A child in the ring has data again: a dry one goes back to the front, and an urgent one (see the opening comment). */
  wake(port: MemberPort, urgent: boolean): void {
    const queue = port.ringQueue;
    if (queue === this.#holding) {
      queue.remove(port);
      port.dry = false;
      this.#current.unshift(port);
    } else if (urgent && queue !== undefined && port !== this.#current.head) {
      queue.remove(port);
      this.#current.unshift(port);
    }
    if (urgent) port.urgent = true;
  }

  /** The weight or the guarantee of a child in the ring changed by these. */
  reweigh(weightDelta: number, guaranteedDelta: number): void {
    this.weight += weightDelta;
    this.guaranteedPerSecond += guaranteedDelta;
  }

  /** Takes a child out of the ring (it left, or its turn is over); no hook runs. */
  remove(port: MemberPort): void {
    port.ringQueue?.remove(port);
    port.inRing = false;
    port.deficit = 0;
    port.dry = false;
    port.sparse = false;
    port.urgent = false;
    this.weight -= port.weight;
    this.guaranteedPerSecond -= port.guaranteedPerSecond;
    if (this.size === 0) {
      // No drift in the sums: an empty ring weighs nothing, and its rounds start afresh.
      this.weight = 0;
      this.guaranteedPerSecond = 0;
      this.lastRoundMs = Number.NaN;
      this.#roundStartMs = Number.NaN;
    }
  }

  /** Takes every child out of the ring (no hooks run): their class has nothing left to send. */
  clear(): void {
    for (const queue of [this.#current, this.#next, this.#holding])
      while (queue.head !== undefined) this.remove(queue.head);
  }

  /** Takes a child out of the ring: its turn is over (its `dropped` hook runs). */
  drop(port: MemberPort): void {
    this.remove(port);
    port.dropped();
  }

  /** True if children with data wait behind turns held for dry ones (a round is being held). */
  holdsBack(): boolean {
    return this.#next.size > 0 || this.#holding.some((p) => p.holdsBack());
  }

  /** The dry children give up their turns (their class's own turn is over). */
  dropHolders(): void {
    while (this.#holding.head !== undefined) this.drop(this.#holding.head);
  }

  /** Moves a child that ran dry with its turn open to `holding`. */
  hold(port: MemberPort): void {
    port.ringQueue?.remove(port);
    port.dry = true;
    this.#holding.push(port);
  }

  /** True if the child's turn in this round is open (an early turn counts). */
  turnOpen(port: MemberPort): boolean {
    return port.round >= this.round && port.deficit > 0;
  }

  /** True if the child is in the ring and its turn in this round is not over: open, or still to be granted. */
  turnAhead(port: MemberPort): boolean {
    return port.inRing && (port.round < this.round || this.turnOpen(port));
  }

  /**
   * The child to serve next, its turn granted if need be, with {@link limit}
   * set; or undefined, with {@link idle} set. Children found without data
   * hold their turns or leave; children their own caps hold back leave; a
   * round whose turns are all spent or held gives way to the next (see the
   * opening comment).
   */
  select(nowMs: number, policy: TurnPolicy): MemberPort | undefined {
    for (;;) {
      const port = this.#current.head;
      if (port === undefined) {
        if (!this.holdsBack()) {
          this.idle = this.#holding.size === 0 ? 'empty' : 'dry';
          return undefined;
        }
        if (this.#holding.size > 0 && policy.mayHold(nowMs)) {
          this.idle = 'hold';
          return undefined;
        }
        // The next round: the spent turns are renewed, and the dry children give theirs up.
        const spent = this.#next;
        this.#next = this.#current;
        this.#current = spent;
        this.round++;
        if (!Number.isNaN(this.#roundStartMs)) this.lastRoundMs = nowMs - this.#roundStartMs;
        this.#roundStartMs = nowMs;
        this.dropHolders();
        continue;
      }
      const want = port.sendableNow(nowMs);
      if (want === 0) {
        if (port.pendingBytes() === 0) {
          // It ran dry with its turn open, or (a subgroup) it holds its own data
          // back for a dry member: it holds its turn. Otherwise it leaves.
          if ((this.turnOpen(port) || port.holdsBack()) && !port.ended()) this.hold(port);
          else this.drop(port);
        } else {
          this.drop(port); // its own cap or its reader holds it; it asks again when it can go
        }
        continue;
      }
      const holder = this.#holding.head;
      if (
        holder !== undefined &&
        !port.sparse &&
        !port.urgent &&
        port.round === this.round &&
        this.#behind(holder, port) &&
        policy.mayHold(nowMs)
      ) {
        // A dry child is behind it in its turn: the tokens wait for the dry one's data.
        this.idle = 'hold';
        return undefined;
      }
      if (port.sparse) {
        // What its own cap allows, up to the sparse limit (which fits the bucket).
        const turn = policy.turnFor(port);
        port.deficit = Math.max(turn, Math.min(want, policy.sparseLimitBytes()));
        port.turnBytes = turn;
        port.round = this.round;
        port.sparse = false;
      } else if (port.round < this.round) {
        port.turnBytes = policy.turnFor(port);
        port.deficit = port.turnBytes;
        port.round = this.round;
      } else if (port.deficit > 0) {
        // A turn granted while the ring was lighter shrinks with it: the round stays short.
        const turn = policy.turnFor(port);
        if (turn < port.turnBytes) {
          port.deficit -= port.turnBytes - turn;
          port.turnBytes = turn;
          if (port.deficit <= 0) {
            port.deficit = 0;
            this.#current.remove(port);
            this.#next.push(port);
            continue;
          }
        }
      } else {
        if (!port.urgent || port.round > this.round) {
          this.#current.remove(port);
          this.#next.push(port);
          continue;
        }
        // Urgent with this round's turn spent: it takes the next round's turn now.
        port.turnBytes = policy.turnFor(port);
        port.deficit = port.turnBytes;
        port.round = this.round + 1;
      }
      this.limit = Math.min(want, port.deficit, visitBytes(port, policy));
      return port;
    }
  }

  /** The part of its turn in this round a child has sent (0 before its turn is granted). */
  #spent(port: MemberPort): number {
    return port.round < this.round || port.turnBytes <= 0 ? 0 : 1 - port.deficit / port.turnBytes;
  }

  /**
   * True if `port`, after `marginBytes` more of its turn, would still have
   * sent a smaller part of it than `next`: it goes first, so that the children
   * go through their turns at one pace, each at its share all through the
   * round, and a large turn (a large guarantee or weight) is not left for the
   * end of the round, after the small ones are spent. Equal turns alternate.
   */
  #behind(port: MemberPort, next: MemberPort | undefined, marginBytes = 0): boolean {
    return next !== undefined && this.#spent(port) + marginBytes / port.turnBytes < this.#spent(next);
  }

  /**
   * `port` sent `bytes` of its turn (so it is no longer urgent): with some
   * turn left it goes behind the others still to send in this round, and a
   * spent turn sends it to wait for the next round.
   */
  charge(port: MemberPort, bytes: number): void {
    port.urgent = false;
    port.deficit -= bytes;
    if (port.deficit > 0) {
      // Its turn goes on after the others' next pieces (the round's pieces are
      // interleaved), unless another piece like this one leaves it still behind the next child.
      const current = this.#current;
      if (port.ringQueue === current && current.size > 1 && !this.#behind(port, port.ringNext, bytes)) {
        current.remove(port);
        current.push(port);
      }
      return;
    }
    port.deficit = 0;
    if (port.ringQueue === this.#current || port.ringQueue === this.#holding) {
      port.ringQueue.remove(port);
      port.dry = false;
      this.#next.push(port);
    }
  }
}
