/**
 * The link between a root `ThrottleGroup` and a fleet bandwidth store: one
 * cap for the streams of many processes (docs/fleets.md, the internals in
 * docs/internals/fleet-bandwidth.md).
 *
 * The root's bucket is a {@link LeasedMeter}: the local byte bucket, paced at
 * this process's share of the fleet's rate, which also passes no byte it has
 * not leased. Leases come from the store in exchanges (src/fleet/bandwidth-store.ts):
 * one call reports this process's demand (the group's live streams while it
 * is busy, and what it can use when its streams, not the cap, hold it back),
 * gives back what it will not spend, and is granted bytes up to one lease of
 * its share. The link asks again when less than half a lease is left (so a
 * busy process calls about twice per lease), every half lease while busy,
 * once more when its streams go idle (giving back its balance), and when the
 * store said the bucket would hold the rest (`retryMs`).
 *
 * A fleet class (a subgroup with a `key`, group.ts) has a link of its own on
 * its own key: its bucket leases the class's ceiling the same way, and its
 * answers give this process's part of the class's streams. The root's link
 * then reports each busy class as its weight and guarantee times that part
 * (the store gives guarantees first, the rest by weight), and gives the
 * classes the same parts in this process's tree ({@link FleetLink.applyClasses}).
 *
 * The limits are the store's: every answer brings them, and {@link
 * FleetLink.params} follows. A live change (`setRate`, `setBurst`) is written
 * by this process's next call, and again by each call until an answer from
 * the store shows it (a call given up on, or answered by the failure policy,
 * wrote nothing); the others learn it at their next call, within one lease.
 *
 * Invariants: a byte passes only against a lease, within one lease of the
 * call that granted it (timed from the send, so never later than the store
 * thinks); at most one exchange is in flight; an idle group holds no balance,
 * and no timer unless a change of the limits is still to be written; a
 * destroyed group gives its balance back and calls no more.
 */

import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { BandwidthLease, BandwidthParams, BandwidthSource, BandwidthStore } from '../fleet/bandwidth-store.js';
import { ByteMeter } from '../meters/byte-meter.js';
import type { MemberPort } from './link.js';
import type { ClassNode } from './node.js';
import { defaultGroupBurstBytes, minBurstBytes } from './pacing.js';

/** The default lease: a grant lasts this long at the share, ms. */
export const DEFAULT_LEASE_MS = 200;

/** What a process not held back by the cap reports it can use: what it used, and this much more (it asks for all once the cap holds it). */
const CAP_HEADROOM = 1.5;

/** A busy group calls at least this often, in leases (its registration lasts one lease). */
const TICK_OF_LEASE = 0.8;

/** The least time between two exchanges asked for by a short balance, ms (a store that grants nothing is not hammered). */
const MIN_GAP_MS = 5;

/** What a fleet group reports of its link (`ThrottleGroup.fleet`). */
export interface FleetGroupState {
  /** The store's key. */
  readonly key: string;
  /** This process's id among the members. */
  readonly member: string;
  /** The lease, ms. */
  readonly leaseMs: number;
  /** This process's share of the fleet's rate, bytes per second, as the last exchange gave it. */
  readonly sharePerSecond: number;
  /** Leased bytes not spent yet. */
  readonly balanceBytes: number;
  /** Exchanges made (answered by the store or by its failure policy). */
  readonly exchanges: number;
  /** Who answered the last exchange. */
  readonly source: BandwidthSource | undefined;
  /** The live members with demand and their demand together, as the last exchange saw them. */
  readonly members: number;
  readonly demand: number;
}

/**
 * The root's bucket in a fleet: a {@link ByteMeter} at this process's share
 * that also holds the leased balance. A piece conforms only if both hold it.
 */
export class LeasedMeter extends ByteMeter {
  balanceBytes = 0;
  /** The balance may be spent until then (this process's clock). */
  validUntilMs = Number.NEGATIVE_INFINITY;
  /** Bytes taken since the last exchange. */
  spentBytes = 0;
  /** Something waited for this bucket since the last exchange: the cap, not the streams, held the group back. */
  limited = false;
  /** Called when the balance is below {@link lowBytes}. */
  onLow: () => void = () => {};
  /** Half a lease of the share (before the first grant, any balance short of a byte). */
  lowBytes = 1;

  /** The balance at `nowMs`: none once its lease has run out. */
  balanceAt(nowMs: number): number {
    if (nowMs >= this.validUntilMs && this.balanceBytes > 0) {
      this.voidedBytes += this.balanceBytes;
      this.balanceBytes = 0;
      this.voided = true;
    }
    return this.balanceBytes;
  }

  /** The balance ran out by its lease, not by spending: a shortage then says nothing of the demand. */
  voided = false;
  /** Bytes of leases that ran out unspent: never passed, so they go back to the store at the next exchange. */
  voidedBytes = 0;

  override tryTake(nowMs: number, bytes: number): boolean {
    if (this.#short(nowMs, bytes) || !super.tryTake(nowMs, bytes)) return false;
    this.#spend(bytes);
    return true;
  }

  override available(nowMs: number): number {
    const balance = this.balanceAt(nowMs);
    if (balance < this.lowBytes) {
      // (a member that then waits is seen by readyAt)
      this.onLow();
    }
    return Math.min(super.available(nowMs), balance);
  }

  override take(nowMs: number, bytes: number): void {
    super.take(nowMs, bytes);
    this.#spend(bytes);
  }

  /** When `bytes` conform: Infinity while the balance lacks them (a grant, not time, brings them). */
  override readyAt(nowMs: number, bytes: number): number {
    if (this.#short(nowMs, bytes)) return Number.POSITIVE_INFINITY;
    const at = super.readyAt(nowMs, bytes);
    if (at > nowMs) this.limited = true;
    return at;
  }

  #short(nowMs: number, bytes: number): boolean {
    if (this.balanceAt(nowMs) >= bytes) return false;
    if (!this.voided) this.limited = true;
    this.onLow();
    return true;
  }

  #spend(bytes: number): void {
    this.balanceBytes = Math.max(0, this.balanceBytes - bytes);
    this.spentBytes += bytes;
  }
}

/** What a fleet group is given: its store, key, lease and limits. */
export interface FleetLinkOptions {
  store: BandwidthStore;
  key: string;
  leaseMs: number;
  params: BandwidthParams;
  clock: Clock;
  /** A fleet class's: the fleet group's link, told after each of the class's answers. */
  root?: FleetLink;
}

/**
 * A fleet class of a fleet group (group.ts registers it with the root's link):
 * its link and class, and its guarantee and weight among the fleet group's
 * children, as given (the same in every process).
 */
export interface FleetClass {
  readonly link: FleetLink;
  readonly node: ClassNode;
  /** Its guaranteed rate fleet-wide, bytes per second (0: none). */
  guaranteedPerSecond: number;
  weight: number;
}

/** The least part of a class's demand a process is counted for while it has streams in it (a weight must be above 0). */
const MIN_FRACTION = 1e-3;

/** Local guarantees stay this much below the rate they share (sums of floats). */
const GUARANTEE_ROOM = 1 - 1e-6;

/** One root group's exchanges with its store; see the file's opening comment. */
export class FleetLink implements FleetGroupState {
  readonly key: string;
  readonly member = randomUUID();
  readonly leaseMs: number;
  readonly meter: LeasedMeter;
  readonly store: BandwidthStore;
  /** The fleet's limits: the store's, as its last answer gave them (before one, or while a change is written, this process's). */
  params: BandwidthParams;
  /** Called when the store's answer changes {@link params} (another process changed them; the group's numbers follow). */
  onParams: (params: BandwidthParams) => void = () => {};
  /** {@link params} are to be written to the store: a change not yet seen in an answer. */
  #writing = false;
  readonly #clock: Clock;
  #node: ClassNode | undefined;
  #seq = 0;
  #inFlight = false;
  /** Another exchange was asked for while one was in flight. */
  #again = false;
  /** When the last exchange was sent, and whether the group was busy then (registered with demand). */
  #lastSentMs = Number.NEGATIVE_INFINITY;
  #registered = false;
  /** The interval before the last exchange's: its length and the bytes taken in it. */
  #previous = { ms: 0, bytes: 0 };
  /** When the group last took bytes or waited for them. */
  #activeAtMs = Number.NEGATIVE_INFINITY;
  #timer: unknown;
  #timerDueMs = Number.POSITIVE_INFINITY;
  /** The timer waits for the store's `retryMs`. */
  #retryArmed = false;
  #closed = false;
  sharePerSecond = 0;
  exchanges = 0;
  source: BandwidthSource | undefined;
  members = 0;
  demand = 0;
  /** A fleet group's classes (empty for a class's link). */
  readonly classes = new Set<FleetClass>();
  readonly #root: FleetLink | undefined;
  /** A class's link: this process's part of the class's demand, as its last answer from the store gave it (1 before one). */
  fraction = 1;

  constructor(options: FleetLinkOptions) {
    this.#root = options.root;
    this.key = options.key;
    this.leaseMs = options.leaseMs;
    this.store = options.store;
    this.params = options.params;
    this.#clock = options.clock;
    // Until the first answer, paced at the fleet's rate with a group's burst (it holds no lease yet).
    const { ratePerSecond } = options.params;
    this.meter = new LeasedMeter(ratePerSecond, defaultGroupBurstBytes(ratePerSecond), this.#clock.now());
    this.meter.onLow = () => this.#low();
  }

  get balanceBytes(): number {
    return this.meter.balanceAt(this.#clock.now());
  }

  /** The root class this link feeds (set once, right after the class is made). */
  attach(node: ClassNode): void {
    this.#node = node;
  }

  /**
   * A live change of the fleet's limits: this process's next call writes them (now, or as soon as
   * the call in flight is answered); calls write them again until the store's answer shows them.
   */
  setParams(params: BandwidthParams): void {
    this.params = { ...params };
    this.#writing = true;
    if (this.#closed) return;
    if (this.#inFlight) this.#again = true;
    else this.#send(false);
  }

  /** The group is destroyed: no more calls, the balance goes back. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#cancelTimer();
    if (this.#registered || this.meter.balanceBytes > 0) this.#send(true);
  }

  /** The balance runs short: ask now, unless a call is in flight or one was just sent. */
  #low(): void {
    if (this.#closed) return;
    if (this.#inFlight) {
      this.#again = true;
      return;
    }
    // The store said when its bucket would hold the rest: asking sooner would get crumbs.
    if (this.#retryArmed) return;
    const nowMs = this.#clock.now();
    if (nowMs - this.#lastSentMs < MIN_GAP_MS) {
      this.#arm(this.#lastSentMs + MIN_GAP_MS - nowMs);
      return;
    }
    this.#send(false);
  }

  /** Every half lease while busy: report, top up; once idle, one last call that gives the balance back. */
  #tick(): void {
    this.#timer = undefined;
    this.#retryArmed = false;
    this.#timerDueMs = Number.POSITIVE_INFINITY;
    if (this.#closed) return;
    if (this.#inFlight) {
      this.#again = true;
      return;
    }
    this.#send(false);
  }

  /** True while the group has work: live streams that took bytes or waited within the last lease. */
  #busy(nowMs: number): boolean {
    const node = this.#node;
    if (node === undefined || node.streams === 0) return false;
    if (this.meter.spentBytes > 0 || this.meter.limited || node.ring.size > 0) this.#activeAtMs = nowMs;
    return nowMs - this.#activeAtMs < this.leaseMs;
  }

  #send(closing: boolean): void {
    const nowMs = this.#clock.now();
    const meter = this.meter;
    const busy = !closing && this.#busy(nowMs);
    const balance = meter.balanceAt(nowMs);
    // What the streams could use when the cap did not hold them back: what they used over this
    // interval and the one before (at least a lease, once there is one), and more.
    const elapsedMs = nowMs - this.#lastSentMs;
    const spanMs = elapsedMs + this.#previous.ms;
    const spanBytes = meter.spentBytes + this.#previous.bytes;
    const usedPerSecond = spanMs > 0 && spanMs < Number.POSITIVE_INFINITY ? (spanBytes * 1000) / spanMs : 0;
    const capPerSecond =
      meter.limited || usedPerSecond === 0 || spanMs < this.leaseMs
        ? Number.POSITIVE_INFINITY
        : usedPerSecond * CAP_HEADROOM + 8192;
    this.#previous =
      meter.limited || elapsedMs === Number.POSITIVE_INFINITY
        ? { ms: 0, bytes: 0 }
        : { ms: elapsedMs, bytes: meter.spentBytes };
    const demand = busy ? this.#demandOf(this.#node as ClassNode) : 0;
    const floorPerSecond = busy ? this.#floor() : 0;
    const giveBackBytes = (busy ? 0 : balance) + meter.voidedBytes;
    meter.voidedBytes = 0;
    if (!busy) meter.balanceBytes = 0;
    meter.spentBytes = 0;
    meter.limited = false;
    this.#inFlight = true;
    this.#again = false;
    this.#lastSentMs = nowMs;
    this.#registered = busy;
    this.exchanges++;
    this.store
      .exchange({
        key: this.key,
        member: this.member,
        seq: ++this.#seq,
        demand,
        capPerSecond,
        floorPerSecond,
        giveBackBytes,
        heldBytes: busy ? balance : 0,
        leaseMs: this.leaseMs,
        params: this.params,
        writeParams: this.#writing,
      })
      .then(
        (lease) => this.#answered(lease, nowMs, busy, demand),
        () => this.#answered(undefined, nowMs, busy, demand),
      );
  }

  /**
   * The demand this process reports: its streams, except that a fleet class
   * counts as its weight times this process's part of the class's demand, as
   * a class counts by its weight among its siblings in one tree.
   */
  #demandOf(node: ClassNode): number {
    let demand = node.streams;
    for (const c of this.classes) {
      if (c.node.streams > 0) demand += c.weight * Math.max(MIN_FRACTION, c.link.fraction) - c.node.streams;
    }
    return demand;
  }

  /** This process's floor: its parts of its busy fleet classes' guarantees. */
  #floor(): number {
    let floor = 0;
    for (const c of this.classes) if (c.node.streams > 0) floor += c.guaranteedPerSecond * c.link.fraction;
    return floor;
  }

  /**
   * A fleet group's classes get, in this process's tree, their parts of
   * their guarantees and weights (the fleet's split gave this process their
   * sum): guarantees scaled down, if need be, to fit the share the tree runs
   * at now, and lowered before any is raised, so that no step passes it.
   */
  applyClasses(): void {
    const node = this.#node;
    if (node === undefined || this.classes.size === 0 || node.destroyed) return;
    let fleetGuarantees = 0;
    let wanted = 0;
    for (const c of this.classes) {
      fleetGuarantees += (c.node.port as MemberPort).guaranteedPerSecond;
      if (c.node.streams > 0) wanted += c.guaranteedPerSecond * c.link.fraction;
    }
    const room = Math.max(0, node.ceilingPerSecond() * GUARANTEE_ROOM - (node.guarantees.children - fleetGuarantees));
    const scale = wanted > room ? room / wanted : 1;
    const changes: { c: FleetClass; weight: number; guaranteed: number; delta: number }[] = [];
    for (const c of this.classes) {
      if (c.node.destroyed) continue;
      const busy = c.node.streams > 0;
      const fraction = busy ? Math.max(MIN_FRACTION, c.link.fraction) : 1;
      const own = busy ? c.guaranteedPerSecond * c.link.fraction * scale : 0;
      const guaranteed = Math.min(own, c.node.ceilingPerSecond() * GUARANTEE_ROOM);
      changes.push({ c, weight: c.weight * fraction, guaranteed, delta: guaranteed - c.node.guarantees.own });
    }
    changes.sort((a, b) => a.delta - b.delta);
    for (const { c, weight, guaranteed } of changes) c.node.setShare(weight, guaranteed);
  }

  #answered(lease: BandwidthLease | undefined, sentAtMs: number, busy: boolean, demandSent: number): void {
    this.#inFlight = false;
    if (this.#closed) return;
    const nowMs = this.#clock.now();
    const meter = this.meter;
    if (lease !== undefined) {
      this.source = lease.source;
      this.members = lease.members;
      this.demand = lease.demand;
      if (lease.source === 'store') {
        this.#storeParams(lease.params);
        this.fraction = demandSent > 0 && lease.demand > 0 ? Math.min(1, demandSent / lease.demand) : 1;
      }
      if (busy && lease.grantedBytes > 0) {
        meter.balanceBytes = meter.balanceAt(nowMs) + lease.grantedBytes;
        meter.validUntilMs = sentAtMs + this.leaseMs;
        meter.voided = false;
      }
      if (lease.sharePerSecond > 0) this.#setShare(nowMs, lease.sharePerSecond);
    }
    const node = this.#node;
    (this.#root ?? this).applyClasses();
    node?.refilled();
    if (this.#again || (busy && meter.balanceAt(nowMs) < meter.lowBytes && lease?.retryMs === 0)) {
      this.#arm(MIN_GAP_MS);
    } else if (busy) {
      const retryMs = lease === undefined ? this.leaseMs / 2 : lease.retryMs;
      if (retryMs > 0) {
        this.#arm(Math.max(this.leaseMs / 10, retryMs));
        this.#retryArmed = true;
      } else this.#arm(this.leaseMs * TICK_OF_LEASE);
    } else if (node !== undefined && node.streams > 0 && (meter.limited || node.ring.size > 0)) {
      this.#arm(MIN_GAP_MS); // work came while the idle call was out
    } else if (this.#writing) {
      this.#arm(this.leaseMs); // a change the store has not shown yet: write it again
    }
  }

  /** The store's limits: a change being written ends when they show it; else they are the fleet's. */
  #storeParams(params: BandwidthParams): void {
    const same = params.ratePerSecond === this.params.ratePerSecond && params.burst === this.params.burst;
    if (this.#writing) {
      if (same) this.#writing = false;
      return;
    }
    if (same) return;
    this.params = { ...params };
    this.onParams(this.params);
  }

  /** The local bucket paces at the share; its burst fits the root's pieces. */
  #setShare(nowMs: number, sharePerSecond: number): void {
    const meter = this.meter;
    this.sharePerSecond = sharePerSecond;
    meter.lowBytes = (sharePerSecond * this.leaseMs) / 2000;
    if (Math.abs(meter.ratePerSecond - sharePerSecond) <= meter.ratePerSecond * 0.01) return;
    // At least two of the root's quanta (sized by the fleet's rate): a piece must always fit.
    const quantum = this.#node?.numbers.quantumBytes ?? 0;
    const burstBytes = Math.max(defaultGroupBurstBytes(sharePerSecond), minBurstBytes(sharePerSecond), 2 * quantum);
    meter.reconfigure(nowMs, { ratePerSecond: sharePerSecond, burstBytes });
    this.#node?.pacer.updatePieces();
  }

  #arm(ms: number): void {
    const nowMs = this.#clock.now();
    if (this.#timer !== undefined && this.#timerDueMs <= nowMs + ms) return;
    this.#cancelTimer();
    this.#timerDueMs = nowMs + ms;
    this.#timer = this.#clock.setTimeout(() => this.#tick(), ms);
  }

  #cancelTimer(): void {
    this.#retryArmed = false;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerDueMs = Number.POSITIVE_INFINITY;
  }
}
