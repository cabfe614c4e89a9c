/**
 * One class of a `ThrottleGroup` tree: a group, or a subgroup of one (HTB's
 * classes; docs/per-tenant-bandwidth.md maps the vocabulary).
 *
 * A class serves its children, member streams and subgroups, by deficit
 * round robin (drr.ts). A child's turn is its guaranteed rate for the length
 * of the last round plus its weight's part of the rest (pacing.ts's roundPlan
 * and turnBytes), so under contention a child gets its guarantee and a share
 * of the rest by weight, and what an idle child leaves goes to the others. A
 * subgroup is a child like a member (subgroup.ts): its port sends by serving
 * its own ring, and it shares the turn its parent gave it among all its
 * children, so its members are served once per round of the root.
 *
 * A piece for a member passes every class on its path to the root; a class
 * with a rate of its own (its ceiling; the root's is the tree's rate)
 * charges its bucket. A subgroup whose ceiling is short leaves its parent's
 * ring and sleeps on the root's one timer (root.ts) until its piece conforms.
 *
 * Invariants: every class passes at most burst + rate * T in any window of
 * T, for its own rate (ceiling) and every rate above it; the guaranteed rates
 * of a class's children add up to at most its rate (its own, or the nearest
 * one above it), checked before any change is made; a subgroup is guaranteed
 * at least what its children are together; a child that leaves (a member
 * that ends, a subgroup destroyed) is out of its ring and its guarantee out of
 * every sum at once, and is not referenced again.
 */

import type { Clock } from '../clock.js';
import { ClosedError } from '../errors.js';
import { ByteMeter } from '../meters/byte-meter.js';
import { Progress } from './counters.js';
import { DrrRing, type TurnPolicy } from './drr.js';
import { ClassGuarantees, checkSum } from './guarantees.js';
import { type GroupLink, type MemberPort, makePort } from './link.js';
import { MAX_ROUND_MS, MIN_TURN_BYTES, type RoundPlan, roundPlan, turnBytes } from './pacing.js';
import { doneOnPath, takeUpToOnPath, tryTakeOnPath } from './path.js';
import { Pacer, type Request } from './root.js';
import { holdsForOwnRate, type ServedClass, subgroupHooks } from './subgroup.js';

/** A class's numbers, parsed and checked by group.ts. */
export interface ClassNumbers {
  /** Its own rate (its ceiling), bytes per second; required for the root. */
  ratePerSecond: number | undefined;
  /** Its own bucket's capacity, bytes (with a rate of its own). */
  capacityBytes: number | undefined;
  burstExplicit: boolean;
  /** The quantum given, bytes, if one was. */
  quantumExplicit: number | undefined;
  /** The quantum: the one given, or the default for its rate. */
  quantumBytes: number;
}

/** One class of the tree; see the file's opening comment. */
export class ClassNode implements ServedClass {
  readonly parent: ClassNode | undefined;
  readonly root: ClassNode;
  readonly pacer: Pacer;
  readonly clock: Clock;
  readonly ring = new DrrRing();
  /** This class's progress: every byte any member below it passes, and the time some member waited. */
  readonly progress = new Progress();
  /** Every child: members' ports and subgroups' ports. */
  readonly #children = new Set<MemberPort>();
  /** Direct member streams. */
  readonly members = new Set<MemberPort>();
  readonly subgroups = new Set<ClassNode>();
  /** Its own bucket (rate, burst): the root's always, a subgroup's if it has a rate of its own. */
  meter: ByteMeter | undefined;
  numbers: ClassNumbers;
  /** Its guaranteed rate: its own, its children's together, and the rule that they fit (guarantees.ts). */
  readonly guarantees: ClassGuarantees;
  /** Its children's weights together, in the ring or not. */
  #childrenWeight = 0;
  /** The root's round plan and what it was computed from (see {@link #plan}). */
  readonly #planKey = {
    weight: Number.NaN,
    guaranteed: Number.NaN,
    rate: Number.NaN,
    numbers: undefined as ClassNumbers | undefined,
    plan: { roundMs: 0, excessBytes: 0 } as RoundPlan,
  };
  /** What the parent sees of a subgroup (undefined for the root). */
  readonly port: MemberPort | undefined;
  /** Member streams below it (in it and its subgroups) that have neither ended nor been destroyed. */
  streams = 0;
  destroyed = false;
  /** What its members see of it. */
  readonly link: GroupLink;
  readonly policy: TurnPolicy;
  /** The `ThrottleGroup` this class is (what messages name). */
  readonly publicObject: object;

  constructor(
    publicObject: object,
    numbers: ClassNumbers,
    parent: ClassNode | undefined,
    clock: Clock,
    weight = 1,
    guaranteedPerSecond = 0,
    meter?: ByteMeter,
  ) {
    this.publicObject = publicObject;
    this.parent = parent;
    this.root = parent?.root ?? this;
    this.clock = clock;
    this.numbers = numbers;
    this.guarantees = new ClassGuarantees(
      parent?.guarantees,
      () => this.ceilingPerSecond(),
      (change) => {
        const port = this.port as MemberPort;
        if (port.inRing) (this.parent as ClassNode).ring.reweigh(0, change);
        port.guaranteedPerSecond += change;
      },
    );
    const nowMs = clock.now();
    if (meter !== undefined) this.meter = meter;
    else if (numbers.ratePerSecond !== undefined) {
      this.meter = new ByteMeter(numbers.ratePerSecond, numbers.capacityBytes as number, nowMs);
    }
    const node = this;
    this.policy = {
      turnFor: (port) => this.#turnFor(port),
      mayHold: (atMs) => this.#mayHold(atMs),
      sparseLimitBytes: () => this.pacer.holdLimitBytes,
      visitLimitBytes: () => this.pacer.visitLimitBytes,
    };
    if (parent === undefined) {
      this.pacer = new Pacer(
        {
          ring: this.ring,
          get meter() {
            return node.meter as ByteMeter;
          },
          progress: this.progress,
          policy: this.policy,
          get quantumBytes() {
            return node.numbers.quantumBytes;
          },
          publicObject,
        },
        clock,
      );
      this.pacer.updatePieces();
      this.port = undefined;
    } else {
      this.pacer = parent.pacer;
      this.guarantees.own = guaranteedPerSecond;
      this.port = makePort(subgroupHooks(this, weight, guaranteedPerSecond));
    }
    this.link = {
      clock,
      tryTake: (atMs, bytes) => tryTakeOnPath(this, atMs, bytes),
      takeUpTo: (atMs, bytes) => takeUpToOnPath(this, atMs, bytes),
      done: (atMs, bytes) => doneOnPath(this, atMs, bytes),
      request: (port) => this.request(port),
      replan: () => this.pacer.replan(),
      leave: (port) => this.leave(port),
      reweigh: (port, w, g) => this.reweigh(port, w, g),
    };
  }

  /** The rate that bounds this class: its own, or the nearest one above it. */
  ceilingPerSecond(): number {
    return this.meter?.ratePerSecond ?? (this.parent as ClassNode).ceilingPerSecond();
  }

  /** The bucket that bounds this class: its own, or the nearest one above it. */
  ceilingMeter(): ByteMeter {
    return this.meter ?? (this.parent as ClassNode).ceilingMeter();
  }

  // ---- children joining, asking, leaving ----

  /** A new child (a member's port, or a subgroup) joins; throws if its guarantee does not fit. */
  adopt(port: MemberPort, subgroup?: ClassNode): void {
    if (this.destroyed) {
      throw new ClosedError('this ThrottleGroup was destroyed: it takes no new members or subgroups');
    }
    const refusal = this.root.memberGuaranteeError;
    if (subgroup === undefined && port.guaranteedPerSecond > 0 && refusal !== undefined) throw refusal();
    this.guarantees.check(port.guaranteedPerSecond, 'guaranteed', port.guaranteedPerSecond);
    this.#children.add(port);
    this.#childrenWeight += port.weight;
    if (subgroup === undefined) {
      this.members.add(port);
      for (let n: ClassNode | undefined = this; n !== undefined; n = n.parent) n.streams++;
    } else {
      this.subgroups.add(subgroup);
    }
    this.guarantees.add(port.guaranteedPerSecond);
  }

  /** A member of this class has data it could not send: it joins the ring, or is served in turn. */
  request(port: MemberPort): void {
    if (!this.#children.has(port)) return; // it has left
    const ring = this.ring;
    let how: Request;
    if (!port.inRing) {
      this.#startWaiting();
      if (port.heldByCap()) {
        // A member back from its own cap goes first, as a sparse flow does in
        // FQ-CoDel, and its turn may take all its cap allows: it asks for no
        // more than that, and waiting for a whole round would overflow its own
        // bucket and lose it rate it is owed. One back from idle (it ran dry,
        // or its reader was full) is owed nothing saved: it joins as any does.
        port.sparse = true;
        ring.join(port, true);
        how = 'first';
      } else {
        ring.join(port, false);
        how = 'joined';
      }
    } else {
      how = this.#overflows(port) ? 'first' : 'data';
      if (port.dry || how === 'first') ring.wake(port, how === 'first');
    }
    this.#forward(port, how, true);
  }

  /**
   * True if `port` has a cap of its own that would be full before the root
   * wakes for its tokens: its new data must then be served as soon as its
   * piece conforms (as a capped child back from its own cap), not at the
   * root's next wake piece, or what its bucket earns meanwhile is lost.
   */
  #overflows(port: MemberPort): boolean {
    if (!port.capped()) return false;
    const wakeMs = this.pacer.tokensDueMs;
    return wakeMs !== Number.POSITIVE_INFINITY && port.fullAtMs(this.clock.now()) < wakeMs;
  }

  /** Passes a request on towards the root: the root serves; a subgroup makes sure it waits at its parent. */
  #forward(port: MemberPort, how: Request, own: boolean): void {
    const parent = this.parent;
    if (parent === undefined) {
      this.pacer.requested(port, how, own);
      return;
    }
    if (this.pacer.asleepForTokens(this)) return; // its own rate is short: it comes back when it wakes
    this.pacer.unsleep(this); // it held its dry members' turns: one has data
    parent.#childAsks(this.port as MemberPort, how);
  }

  /** A subgroup of this class (its port `port`) has a member asking for service. */
  #childAsks(port: MemberPort, how: Request): void {
    const ring = this.ring;
    let up: Request;
    if (!port.inRing) {
      this.#startWaiting();
      if (port.heldByCap()) {
        port.sparse = true; // a subgroup back from its own rate, as a member back from its cap
        ring.join(port, true);
        up = 'first';
      } else if (how === 'first') {
        port.urgent = true; // a capped member below it must not wait a round
        ring.join(port, true);
        up = 'first';
      } else {
        ring.join(port, false);
        up = 'joined';
      }
    } else {
      up = how === 'first' || this.#overflows(port) ? 'first' : 'data';
      ring.wake(port, up === 'first');
    }
    this.#forward(port, up, false);
  }

  /** Asks its parent for service again: members of its own still wait (subgroup.ts). */
  askParent(): void {
    (this.parent as ClassNode).#childAsks(this.port as MemberPort, 'joined');
  }

  /** A sleeping subgroup's piece conforms, or its hold is over: it asks its parent for service again. */
  wake(): void {
    if (this.destroyed || this.ring.size === 0 || this.port === undefined) return;
    (this.parent as ClassNode).#childAsks(this.port, this.port.inRing ? 'data' : 'joined');
  }

  /** A member of this class ended or was destroyed: it leaves at once. */
  leave(port: MemberPort): void {
    if (!this.#children.delete(port)) return;
    this.#childrenWeight -= port.weight;
    this.members.delete(port);
    for (let n: ClassNode | undefined = this; n !== undefined; n = n.parent) n.streams--;
    this.guarantees.add(-port.guaranteedPerSecond);
    if (port.inRing) this.ring.remove(port);
    // Classes with no member left below them wait for nothing: out of every
    // ring and off the root's timer at once (their subgroups' ports left in a
    // ring are empty too).
    let top: ClassNode = this;
    for (let n: ClassNode | undefined = this; n !== undefined && n.streams === 0; n = n.parent) {
      n.ring.clear();
      this.pacer.unsleep(n);
      top = n;
    }
    if (top.streams === 0 && top.port?.inRing) (top.parent as ClassNode).ring.remove(top.port);
    (top.streams === 0 && top.parent !== undefined ? top.parent : top).#afterRemoval();
  }

  /** A child was taken out of the ring from outside a pass: re-plan, or empty the ring upwards. */
  #afterRemoval(): void {
    // An empty subgroup has nothing to wake for.
    const wasAsleep = this.ring.size === 0 && this.pacer.asleep(this);
    if (wasAsleep) this.pacer.unsleep(this);
    if (this.pacer.serving) return; // the pass sees it
    const nowMs = this.clock.now();
    if (this.ring.size > 0) {
      this.pacer.replan(); // it may have held the round, or been the one the timer waited for
      return;
    }
    const parent = this.parent;
    if (parent === undefined) {
      this.pacer.emptied(nowMs);
      return;
    }
    this.progress.stopWaiting(nowMs);
    const port = this.port as MemberPort;
    if (port.inRing) {
      parent.ring.remove(port);
      parent.#afterRemoval();
    } else if (wasAsleep) {
      this.pacer.replan(); // the timer may have been armed for it
    }
  }

  /** A member's weight or guarantee changes: checked against every rate above it first. */
  reweigh(port: MemberPort, weight: number, guaranteedPerSecond: number): void {
    const refusal = this.root.memberGuaranteeError;
    if (guaranteedPerSecond > 0 && refusal !== undefined && this.members.has(port)) throw refusal();
    const delta = guaranteedPerSecond - port.guaranteedPerSecond;
    if (delta > 0) this.guarantees.check(delta, 'guaranteed', guaranteedPerSecond);
    if (port.inRing) this.ring.reweigh(weight - port.weight, delta);
    this.#childrenWeight += weight - port.weight;
    port.weight = weight;
    port.guaranteedPerSecond = guaranteedPerSecond;
    this.guarantees.add(delta);
  }

  /** Sets this subgroup's own weight and guaranteed rate (checked first). */
  setShare(weight: number, guaranteedPerSecond: number): void {
    checkSum(guaranteedPerSecond, this.ceilingPerSecond(), 'guaranteed', guaranteedPerSecond);
    const effective = Math.max(guaranteedPerSecond, this.guarantees.children);
    (this.parent as ClassNode).reweigh(this.port as MemberPort, weight, effective); // checks the guarantees above first
    this.guarantees.own = guaranteedPerSecond;
    this.pacer.replan();
  }

  /**
   * Throws if a rate of `ratePerSecond` for this class would be below the
   * guarantees it holds: its own, its children's, and those of subgroups
   * below it that have no rate of their own.
   */
  checkRate(ratePerSecond: number, option: string, value: unknown): void {
    checkSum(this.guarantees.own, ratePerSecond, option, value);
    const check = (node: ClassNode) => {
      checkSum(node.guarantees.children, ratePerSecond, option, value);
      for (const sub of node.subgroups) if (sub.meter === undefined) check(sub);
    };
    check(this);
  }

  /** New numbers for this class (checked by group.ts; guarantees by {@link checkRate}): its bucket is reconfigured, keeping its tokens. */
  reconfigure(numbers: ClassNumbers): void {
    const nowMs = this.clock.now();
    if (numbers.ratePerSecond !== undefined) {
      const params = { ratePerSecond: numbers.ratePerSecond, burstBytes: numbers.capacityBytes as number };
      if (this.meter === undefined) this.meter = new ByteMeter(params.ratePerSecond, params.burstBytes, nowMs);
      else this.meter.reconfigure(nowMs, params);
    }
    this.renumber(numbers);
  }

  /** New numbers for this class, its bucket left as it is (a fleet root's is paced at its share by its link). */
  renumber(numbers: ClassNumbers): void {
    this.numbers = numbers;
    if (this.parent === undefined) this.pacer.updatePieces();
    this.refilled();
  }

  /** Its bucket changed from outside the tree (new numbers, a fleet class's lease): a class asleep on it plans again. */
  refilled(): void {
    if (this.parent !== undefined && this.pacer.asleep(this)) {
      this.pacer.unsleep(this);
      this.wake();
    }
    this.pacer.replan();
  }

  /** Called once, when the class is destroyed (a fleet class's link gives its balance back). */
  onDestroyed: () => void = () => {};

  /** The root's: the error for a member's guarantee, where one would hold per process only (a fleet group's tree). */
  memberGuaranteeError: (() => Error) | undefined;

  // ---- serving ----

  /** The round this class's children are served in now. */
  #plan(): RoundPlan {
    const { quantumBytes, quantumExplicit } = this.numbers;
    const ring = this.ring;
    const parent = this.parent;
    if (parent === undefined) {
      // Asked on every grant; the same while the ring's sums and the numbers are.
      const rate = (this.meter as ByteMeter).ratePerSecond;
      const key = this.#planKey;
      if (
        key.weight !== ring.weight ||
        key.guaranteed !== ring.guaranteedPerSecond ||
        key.rate !== rate ||
        key.numbers !== this.numbers
      ) {
        key.plan = roundPlan(rate, ring.weight, ring.guaranteedPerSecond, quantumBytes, quantumExplicit !== undefined);
        key.weight = ring.weight;
        key.guaranteed = ring.guaranteedPerSecond;
        key.rate = rate;
        key.numbers = this.numbers;
      }
      return key.plan;
    }
    const roundMs = parent.#plan().roundMs;
    if (quantumExplicit !== undefined) return { roundMs, excessBytes: quantumExplicit * ring.weight };
    // Its own round shares what its parent gives it per round (at most its own rate's worth).
    const port = this.port as MemberPort;
    let budget = port.turnBytes > 0 ? port.turnBytes : parent.#turnFor(port);
    if (this.meter !== undefined) budget = Math.min(budget, (this.meter.ratePerSecond * roundMs) / 1000);
    const guaranteedBytes = (ring.guaranteedPerSecond * this.#guaranteeMs(roundMs)) / 1000;
    return { roundMs, excessBytes: Math.max(0, budget - guaranteedBytes) };
  }

  #turnFor(port: MemberPort): number {
    const plan = this.#plan();
    const guaranteeMs = this.#guaranteeMs(plan.roundMs);
    const { weight, guaranteedPerSecond } = port;
    // The root's round grows with the weight waiting (a quantum each) up to its
    // longest; a subgroup's is its turn at its parent, shared by weight among
    // all its children, in the ring or not: one that is out for a moment (a
    // socket between two chunks) must not hand the others a whole round each.
    const sharing = this.parent === undefined ? this.ring.weight : Math.max(this.ring.weight, this.#childrenWeight);
    if (this.numbers.quantumExplicit !== undefined) {
      return turnBytes(plan, sharing, weight, guaranteedPerSecond, guaranteeMs, 1);
    }
    const floor = Math.min(MIN_TURN_BYTES, this.root.numbers.quantumBytes);
    // While rounds are as long as they get (many members), a child's first turn
    // is the smallest: a crowd that arrives together gets its first bytes
    // within one short round, then its turns of the full size.
    if (port.round < 0 && plan.roundMs >= MAX_ROUND_MS) return Math.max(1, Math.floor(floor * weight));
    return turnBytes(plan, sharing, weight, guaranteedPerSecond, guaranteeMs, floor);
  }

  /**
   * How long a turn's guaranteed part lasts: the last round, measured, so
   * that a child that leaves part of its turn unused shortens the rounds for
   * the guarantees too and its share goes to the others by weight; the plan's
   * round when none was measured or the numbers changed since (the measure is
   * then off by more than half or twice: the plan's is where rounds of full
   * turns settle).
   */
  #guaranteeMs(roundMs: number): number {
    const measuredMs = this.ring.lastRoundMs;
    return measuredMs >= roundMs / 2 && measuredMs <= 2 * roundMs ? measuredMs : roundMs;
  }

  /**
   * Dry members may hold their turns while this class's own turn is not over
   * (open, or still to be granted) and a bucket that bounds it has room: its own (below the piece it sleeps
   * for), or one above it (the root's below the hold limit). Its ceiling or
   * the root's rate is then what they share, and the tokens wait for them.
   */
  #mayHold(nowMs: number): boolean {
    const parent = this.parent;
    if (parent === undefined) return this.pacer.mayHold(nowMs);
    if (!parent.ring.turnAhead(this.port as MemberPort)) return false;
    return holdsForOwnRate(this, nowMs) || parent.#mayHold(nowMs);
  }

  #startWaiting(): void {
    if (this.ring.size > 0) return;
    const nowMs = this.clock.now();
    this.progress.start(nowMs);
    this.progress.waiting(nowMs);
  }

  // ---- lifecycle ----

  /** Ends every member stream below this class. */
  endAll(): void {
    for (const port of [...this.members]) port.end();
    for (const sub of [...this.subgroups]) sub.endAll();
  }

  /** Destroys every member stream below this class (the subgroups stay). */
  destroyAll(error?: Error): void {
    for (const port of [...this.members]) port.destroy(error);
    for (const sub of [...this.subgroups]) sub.destroyAll(error);
  }

  /** Destroys every member below, then leaves the parent: its share is freed at once. */
  destroy(error?: Error): void {
    if (this.destroyed) return;
    this.destroyAll(error);
    for (const sub of [...this.subgroups]) sub.destroy(error);
    this.destroyed = true;
    this.onDestroyed();
    this.pacer.unsleep(this);
    const parent = this.parent;
    const port = this.port;
    if (parent === undefined || port === undefined) {
      this.pacer.emptied(this.clock.now());
      return;
    }
    parent.#children.delete(port);
    parent.#childrenWeight -= port.weight;
    parent.subgroups.delete(this);
    parent.guarantees.add(-port.guaranteedPerSecond);
    if (port.inRing) {
      parent.ring.remove(port);
      parent.#afterRemoval();
    }
  }
}
