/**
 * Turns at a limit over many schedulers: one token bucket (`rate`, `burst`)
 * shared by the schedulers of a KeyedScheduler's keys, served by deficit
 * round robin by cost (Shreedhar and Varghese, 1995), so that when the shared
 * bucket is what holds jobs back, the keys waiting for it take turns.
 *
 * A member is one key's admission (./local-admission.ts). Its head job asks
 * {@link Turns.pass} once the key's own limits let it start; the shared bucket
 * is charged only when the answer is yes, so neither bucket is charged when
 * either refuses. While nobody waits, a job passes as soon as the shared
 * bucket holds its cost. Once one is refused, the members that ask join a
 * ring in arrival order and wait for their turn: a visit adds the quantum to
 * the member's deficit, and the member starts jobs while their cost fits its
 * deficit and the shared bucket holds them; a member whose next job costs
 * more than its deficit goes to the back of the ring (keeping its deficit),
 * and one that stops asking (nothing waits, or its own limits hold it back)
 * leaves the ring and its deficit goes to zero. So a key with 10,000 jobs
 * waiting and a key with one start within one round of each other.
 *
 * Invariants: a member is in the ring iff `inRing`; a turn is open for at most
 * one member, only while it is woken; the ring is served from one timer (for
 * the first member's cost) and never from inside a member's own call, so a
 * scheduler is never re-entered.
 */

import type { Clock } from '../clock.js';
import {
  type BucketParams,
  type BucketState,
  charge,
  msUntil,
  readyAt,
  rebill,
  startAt,
  tokensAt,
  tryCharge,
} from '../meters/bucket.js';
import { catchUpAllowanceMs, Watchdog } from '../timer.js';

/**
 * The Scheduler option, known only inside the package, that makes a scheduler a member of
 * {@link Turns}: a KeyedScheduler gives it to each key's Scheduler.
 */
export const TURNS: unique symbol = Symbol('tokenpace.turns');

/** What a cost above the shared bucket's capacity is refused by, in `CostExceedsCapacityError`'s message. */
export const GLOBAL_CAPACITY = "the global bucket's capacity (global.burst)";

/** One member of the ring: a key's admission, as {@link Turns} sees it. */
export class TurnsMember {
  /** Cost it may still start in its current visit. */
  deficit = 0;
  /** The cost of the job it last asked for and was refused. */
  wantCost = 0;
  inRing = false;
  /** A visit is open: the quantum for it has been added. */
  visiting = false;
  /** It asked during its turn and was refused. */
  asked = false;
  /** Starts what the member may start (the Scheduler's pump), at `now`. */
  readonly wake: (now: number) => void;
  readonly turns: Turns;

  constructor(turns: Turns, wake: (now: number) => void) {
    this.turns = turns;
    this.wake = wake;
  }

  /** True if a job of `cost` may start at `now`: the shared bucket is charged then. */
  pass(cost: number, now: number): boolean {
    return this.turns.pass(this, cost, now);
  }

  /** An estimate of when it could start a job of `cost`, ms from `now` (see {@link Turns.waitMs}). */
  waitMs(cost: number, now: number): number {
    return this.turns.waitMs(this, cost, now);
  }

  /** A running job's bill changed by `deltaCost` at `now` (see {@link Turns.rebill}). */
  rebill(deltaCost: number, now: number): void {
    this.turns.rebill(deltaCost, now);
  }
}

/** What {@link Turns} is built with. */
export interface TurnsOptions {
  readonly clock: Clock;
  /** The shared bucket. */
  readonly params: BucketParams;
  /** The cost a visit adds to a member's deficit (a job that costs more starts after as many visits as it needs). */
  readonly quantum: number;
  /** The most timer lateness made up for, ms (the Scheduler's `catchUp`). */
  readonly catchUpMs: number;
}

/** The shared bucket and its ring; see the file's opening comment. */
export class Turns {
  readonly #clock: Clock;
  readonly #params: BucketParams;
  readonly #bucket: BucketState;
  readonly #quantum: number;
  readonly #catchUpMs: number;
  /** Members waiting for a turn, in the order they are served (a Set keeps insertion order). */
  readonly #ring = new Set<TurnsMember>();
  /** The member whose turn is open (it is being woken). */
  #turn: TurnsMember | undefined = undefined;
  /** Since when members have waited: no job is charged before it (it could not have started earlier). */
  #waitingSinceMs = Number.NEGATIVE_INFINITY;
  #serving = false;
  readonly #watchdog: Watchdog;

  constructor(options: TurnsOptions) {
    this.#clock = options.clock;
    this.#params = options.params;
    this.#bucket = { tokens: options.params.burst, updatedAtMs: options.clock.now() };
    this.#quantum = options.quantum;
    this.#catchUpMs = options.catchUpMs;
    this.#watchdog = new Watchdog(options.clock, () => this.#serve(this.#clock.now()));
  }

  /** The shared bucket's rate and burst. */
  get params(): Readonly<BucketParams> {
    return this.#params;
  }

  /** The shared bucket's capacity: the largest cost a job may have. */
  get burst(): number {
    return this.#params.burst;
  }

  /** Members waiting for a turn. */
  get waiting(): number {
    return this.#ring.size;
  }

  /** A new member, woken with `wake(now)` when its turn comes. */
  member(wake: (now: number) => void): TurnsMember {
    return new TurnsMember(this, wake);
  }

  /** Every member is closed and idle: lets go of the ring and the timer. */
  close(): void {
    for (const member of this.#ring) this.#leave(member);
    this.#waitingSinceMs = Number.NEGATIVE_INFINITY;
    this.#watchdog.disarm();
  }

  /**
   * An estimate, in ms from `now`, of when `member` could start a job of `cost` at the shared
   * bucket: once the bucket has paid for the cost every member ahead of it in the ring waits for,
   * and this one (a round, the deficits aside). For a retry hint, not a promise.
   */
  waitMs(member: TurnsMember, cost: number, now: number): number {
    let ahead = 0;
    for (const other of this.#ring) {
      if (other === member) break;
      ahead += other.wantCost;
    }
    return msUntil(tokensAt(this.#bucket, this.#params, now), ahead + cost, this.#params);
  }

  /** See {@link TurnsMember.pass}. */
  pass(member: TurnsMember, cost: number, now: number): boolean {
    if (this.#turn === member) {
      if (cost > member.deficit || !this.#charge(cost, now)) {
        member.asked = true;
        member.wantCost = cost;
        return false;
      }
      member.deficit -= cost;
      return true;
    }
    if (this.#ring.size === 0 && this.#turn === undefined && this.#charge(cost, now)) return true;
    member.wantCost = cost;
    if (!member.inRing) {
      if (this.#ring.size === 0) this.#waitingSinceMs = now;
      member.inRing = true;
      member.deficit = 0;
      this.#ring.add(member);
    }
    // Served from the timer, never from here: the member's own scheduler is in the middle of a call.
    if (!this.#serving) this.#armFor(this.#first(), now);
    return false;
  }

  /**
   * A running job's bill changed by `deltaCost` (already checked against {@link burst}) at `now`:
   * the shared bucket is charged (in debt if need be) or credited by the same rule as a key's own
   * bucket ({@link rebill}), and the ring's timer moves with the first member's start.
   */
  rebill(deltaCost: number, now: number): void {
    rebill(this.#bucket, this.#params, now, deltaCost);
    if (!this.#serving) this.#armFor(this.#first(), now);
  }

  /**
   * Charges `cost` if the shared bucket holds it at `now`: at once while nobody waits; for a turn, at
   * its theoretical start (as the local admission does), no earlier than when the first member waited.
   */
  #charge(cost: number, now: number): boolean {
    const bucket = this.#bucket;
    const params = this.#params;
    if (this.#ring.size === 0) return tryCharge(bucket, params, now, cost);
    const notBeforeMs = this.#waitingSinceMs;
    const atMs = startAt(bucket, params, now, cost, notBeforeMs, catchUpAllowanceMs(this.#catchUpMs, this.#watchdog));
    if (atMs > now) return false;
    charge(bucket, params, atMs, cost);
    return true;
  }

  #first(): TurnsMember | undefined {
    for (const member of this.#ring) return member;
    return undefined;
  }

  /** Arms the timer for when the shared bucket holds the first member's cost (at once, if it does). */
  #armFor(member: TurnsMember | undefined, now: number): void {
    if (member === undefined) {
      this.#watchdog.disarm();
      return;
    }
    this.#watchdog.armAt(Math.max(readyAt(this.#bucket, this.#params, member.wantCost), now), now);
  }

  #leave(member: TurnsMember): void {
    this.#ring.delete(member);
    member.inRing = false;
    member.visiting = false;
    member.deficit = 0;
  }

  /** Serves the ring: visits members in turn while the shared bucket holds the cost of the one whose turn it is. */
  #serve(now: number): void {
    const ring = this.#ring;
    this.#serving = true;
    try {
      let skipped = 0; // members passed over in a row, their next job costing more than their deficit
      for (let member = this.#first(); member !== undefined; member = this.#first()) {
        if (!member.visiting) {
          member.visiting = true;
          member.deficit += this.#quantum;
        }
        if (member.deficit < member.wantCost) {
          this.#toBack(member);
          if (++skipped >= ring.size) {
            this.#skipRounds();
            skipped = 0;
          }
          continue;
        }
        skipped = 0;
        const read = this.#clock.now();
        if (read > now) now = read;
        if (readyAt(this.#bucket, this.#params, member.wantCost) > now) break; // its visit waits for the tokens
        this.#turn = member;
        member.asked = false;
        try {
          member.wake(now);
        } finally {
          this.#turn = undefined;
        }
        if (!member.asked) this.#leave(member);
        else if (member.deficit < member.wantCost) this.#toBack(member);
        else break; // refused for the shared bucket's tokens: its visit stays open until the timer
      }
    } finally {
      this.#serving = false;
    }
    if (ring.size === 0) this.#waitingSinceMs = Number.NEGATIVE_INFINITY;
    this.#armFor(this.#first(), now);
  }

  /** Ends `member`'s visit: to the back of the ring, its deficit kept. */
  #toBack(member: TurnsMember): void {
    this.#ring.delete(member);
    member.visiting = false;
    this.#ring.add(member);
  }

  /**
   * A whole round passed with no member able to start its next job: gives every member at once the
   * quantum of the rounds that would pass the same way, so that a cost far above the quantum costs
   * one step, not a round per quantum.
   */
  #skipRounds(): void {
    const quantum = this.#quantum;
    let rounds = Number.POSITIVE_INFINITY;
    for (const member of this.#ring) rounds = Math.min(rounds, Math.ceil((member.wantCost - member.deficit) / quantum));
    if (!(rounds > 1)) return;
    for (const member of this.#ring) member.deficit += (rounds - 1) * quantum;
  }
}
