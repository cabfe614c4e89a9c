/**
 * The bandwidth store contract: one byte bucket shared by the processes of a
 * fleet, handed out as leases split by demand, and the in-process form of it.
 *
 * A fleet bandwidth key holds, changed in ONE atomic step per call (see
 * ./bandwidth-lua.ts for the Redis side, which this file mirrors):
 *
 * - a token bucket over bytes (`src/meters/bucket.ts`: rate, burst; it starts
 *   full), in the store's time;
 * - the members: per process (per fleet group instance), its demand (the
 *   weight of its busy streams), the most it can use (`capPerSecond`, Infinity
 *   while its streams are held back), the last sequence number it sent, and
 *   an expiry one lease after its last call.
 *
 * A member's call (`exchange`) gives back the bytes it will not spend, then
 * registers its demand, and is granted bytes from the bucket: its share of the
 * rate by max-min over the live members' demands ({@link fairShare}, water
 * filling: a member that can use less than its weight's part gets what it can
 * use, the rest is split by weight), times the lease, less what it still holds,
 * at most what the bucket holds. The member spends the grant at its share's
 * pace, within one lease of sending the call (src/stream/fleet-link.ts).
 *
 * Invariants: the bucket is charged only by grants, so the bytes the fleet
 * passes in any window of T are at most burst + rate * T plus the leases held,
 * unspent, at its start (each at most share * lease, and void a lease after
 * its call); a member whose calls stop (a killed process) leaves the split at
 * its expiry, one lease after its last call. Idempotent: a call whose `seq` is
 * not above the member's last changes nothing and grants nothing (a replay), a
 * call run after its `deadlineMs` only gives back. A call may write the
 * limits (`writeParams`): the last such call to run sets them for every
 * member, whose next call is split and granted by them.
 */

import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, checkOptions } from '../errors.js';
import {
  advance,
  type BucketParams,
  type BucketState,
  charge,
  credit,
  msUntil,
  reconfigure,
  rewind,
} from '../meters/bucket.js';

/** A fleet bandwidth key's limits, bytes. */
export interface BandwidthParams {
  ratePerSecond: number;
  /** The bucket's capacity, bytes. */
  burst: number;
}

/** One call of a member: give back, report demand, be granted a lease. */
export interface BandwidthExchangeOp {
  key: string;
  /** The member's fleet-unique id. */
  member: string;
  /** Above the member's last call's: a call at or below it is a replay and changes nothing. */
  seq: number;
  /** The weight of its streams with data (0: idle; it leaves the split). */
  demand: number;
  /** The most it can use, bytes per second (Infinity: its streams are held back by the cap). */
  capPerSecond: number;
  /**
   * The rate it is guaranteed with demand, bytes per second (its parts of its fleet classes'
   * guarantees): the split gives it this first, the rest by demand. @default 0
   */
  floorPerSecond?: number;
  /** Bytes it holds unspent and gives back now. */
  giveBackBytes: number;
  /** Bytes it still holds after the give-back: the grant tops this up to share * lease. */
  heldBytes: number;
  /** The lease: a grant lasts this long at the member's share, and the member stays registered this long. */
  leaseMs: number;
  /** The store's time after which the caller has given the call up: it then only gives back. */
  deadlineMs?: number;
  /** The limits to start with if the key has none yet (the stored ones win, unless `writeParams`). */
  params: BandwidthParams;
  /**
   * Write `params` as the key's limits (a live change, `setRate`): from this call on the bucket
   * refills at the new rate and keeps its tokens, capped at the new burst. A replay or a late call
   * writes nothing.
   */
  writeParams?: boolean;
}

/** Who answered: the store, or the failure policy of a store that could not reach its backend. */
export type BandwidthSource = 'store' | 'allow' | 'deny' | 'local';

/** The answer to an exchange. */
export interface BandwidthLease {
  /** The store's time of the call, ms. */
  nowMs: number;
  /** Bytes granted now (0 for a replay, a late call, or an empty bucket). */
  grantedBytes: number;
  /** The member's share of the rate, bytes per second: the pace to spend at. */
  sharePerSecond: number;
  /** Ms until the bucket holds the rest of the lease asked for (0 when it was granted whole). */
  retryMs: number;
  /** The bucket's tokens after the call. */
  tokens: number;
  /** The live members' demand together, and how many have some. */
  demand: number;
  members: number;
  params: BandwidthParams;
  source: BandwidthSource;
}

/** The store side of a fleet bandwidth group. `MemoryBandwidthStore` and `RedisBandwidthStore` implement it. */
export interface BandwidthStore {
  exchange(op: BandwidthExchangeOp): Promise<BandwidthLease>;
}

/** A member as the split sees it. */
export interface MemberDemand {
  demand: number;
  capPerSecond: number;
  /** Its guaranteed rate (0 or absent: none). */
  floorPerSecond?: number;
}

/**
 * `me`'s share of `ratePerSecond` among `members` (`me` among them), as HTB
 * shares a rate among classes: each member with demand first gets its floor
 * (at most its cap; floors that add up to more than the rate are scaled down
 * to it), then the rest by max-min: members are filled in order of the cap
 * left per weight; one whose cap is below its weight's part of what is left
 * gets its cap, the others split the rest by weight. 0 for a member without
 * demand. The Lua twin is `fair_share` in ./bandwidth-lua.ts.
 *
 * @example fairShare(100, [{demand: 1, cap: 10}, {demand: 1, cap: Infinity}], second) === 90
 * @example fairShare(100, [{demand: 1, cap: Infinity, floor: 60}, {demand: 3, cap: Infinity}], first) === 70
 */
export function fairShare(ratePerSecond: number, members: readonly MemberDemand[], me: MemberDemand): number {
  if (!(me.demand > 0)) return 0;
  const busy = members.filter((m) => m.demand > 0);
  let floors = 0;
  for (const m of busy) floors += Math.min(m.floorPerSecond ?? 0, m.capPerSecond);
  const scale = floors > ratePerSecond ? ratePerSecond / floors : 1;
  const floorOf = (m: MemberDemand) => Math.min(m.floorPerSecond ?? 0, m.capPerSecond) * scale;
  const capLeft = (m: MemberDemand) => m.capPerSecond - floorOf(m);
  busy.sort((a, b) => capLeft(a) / a.demand - capLeft(b) / b.demand);
  let rest = Math.max(0, ratePerSecond - floors * scale);
  let weight = 0;
  for (const m of busy) weight += m.demand;
  for (const m of busy) {
    const cap = capLeft(m);
    if (cap === Number.POSITIVE_INFINITY || cap * weight > rest * m.demand) break;
    if (m === me) return floorOf(me) + cap;
    rest -= cap;
    weight -= m.demand;
  }
  return floorOf(me) + (weight > 0 ? (rest * me.demand) / weight : 0);
}

/** The bytes a member of share `sharePerSecond` holds at most: one lease of its share, at least 1 KiB. */
export function leaseBytes(sharePerSecond: number, leaseMs: number): number {
  return sharePerSecond > 0 ? Math.max(1024, Math.floor((sharePerSecond * leaseMs) / 1000)) : 0;
}

interface MemberState extends MemberDemand {
  seq: number;
  expiresAtMs: number;
}

interface KeyState {
  params: BandwidthParams;
  bucket: BucketState;
  members: Map<string, MemberState>;
}

/**
 * A bandwidth store in this process's memory: the same contract as the Redis
 * one (tests on a fake clock, a fleet of one process). Time is the clock's.
 */
export class MemoryBandwidthStore implements BandwidthStore {
  readonly #clock: Clock;
  readonly #keys = new Map<string, KeyState>();

  constructor(options: { clock?: Clock } = {}) {
    checkOptions(options, 'MemoryBandwidthStore options ({ clock })', false);
    checkKnownOptions(options, new Set(['clock']), 'MemoryBandwidthStore options');
    this.#clock = checkClock(options.clock);
  }

  exchange(op: BandwidthExchangeOp): Promise<BandwidthLease> {
    return Promise.resolve(this.exchangeNow(op));
  }

  /** {@link exchange}, synchronously. */
  exchangeNow(op: BandwidthExchangeOp): BandwidthLease {
    const nowMs = this.#clock.now();
    let state = this.#keys.get(op.key);
    if (state === undefined) {
      const params = { ...op.params };
      state = { params, bucket: { tokens: params.burst, updatedAtMs: nowMs }, members: new Map() };
      this.#keys.set(op.key, state);
    }
    rewind(state.bucket, nowMs);
    let bucket: BucketParams = { ratePerSecond: state.params.ratePerSecond, burst: state.params.burst };
    advance(state.bucket, bucket, nowMs);
    for (const [id, m] of state.members) if (m.expiresAtMs <= nowMs) state.members.delete(id);
    const known = state.members.get(op.member);
    const replay = known !== undefined && op.seq <= known.seq;
    const late = op.deadlineMs !== undefined && nowMs > op.deadlineMs;
    if (op.writeParams === true && !replay && !late) {
      state.params = { ...op.params };
      const next = { ratePerSecond: op.params.ratePerSecond, burst: op.params.burst };
      reconfigure(state.bucket, bucket, nowMs, next);
      bucket = next;
    }
    let grantedBytes = 0;
    let sharePerSecond = 0;
    let retryMs = 0;
    if (!replay) {
      if (op.giveBackBytes > 0) credit(state.bucket, bucket, nowMs, op.giveBackBytes);
      if (!late) {
        const me: MemberState = {
          demand: op.demand,
          capPerSecond: op.capPerSecond,
          floorPerSecond: op.floorPerSecond ?? 0,
          seq: op.seq,
          expiresAtMs: nowMs + op.leaseMs,
        };
        state.members.set(op.member, me);
        sharePerSecond = fairShare(bucket.ratePerSecond, [...state.members.values()], me);
        const want = Math.max(0, leaseBytes(sharePerSecond, op.leaseMs) - op.heldBytes);
        grantedBytes = Math.min(want, Math.max(0, Math.floor(state.bucket.tokens)));
        if (grantedBytes > 0) charge(state.bucket, bucket, nowMs, grantedBytes);
        if (grantedBytes < want)
          retryMs = Math.min(op.leaseMs, msUntil(state.bucket.tokens, want - grantedBytes, bucket));
      }
    }
    let demand = 0;
    let members = 0;
    for (const m of state.members.values()) {
      demand += m.demand;
      if (m.demand > 0) members++;
    }
    return {
      nowMs,
      grantedBytes,
      sharePerSecond,
      retryMs,
      tokens: state.bucket.tokens,
      demand,
      members,
      params: { ...state.params },
      source: 'store',
    };
  }
}
