/**
 * The root of a `ThrottleGroup` tree: its bucket's one timer and the passes
 * that serve the tree.
 *
 * A pass serves the root's ring (drr.ts) piece by piece while the root's
 * bucket holds the next piece; a subgroup's piece is passed on to its own
 * members (node.ts). When the bucket is short the root sleeps for a group
 * wake piece (pacing.ts), so one wake-up serves many turns; while children
 * with guaranteed rates wait, for at most GUARANTEE_WAKE_MS of its rate.
 * Subgroups whose own rate (their ceiling) is short leave their ring and
 * sleep on this same timer: the root keeps their wake-up instants and arms
 * for the earliest.
 *
 * Invariants: one timer per tree, armed for the earliest of (the root's
 * piece, the hold limit, a sleeping subgroup's piece), or none when nothing
 * waits; no piece is larger than {@link Pacer.maxPieceBytes}, which fits the
 * bucket; other members are never served from inside a member's own write
 * (every such request becomes one pass from the microtask queue, see
 * {@link Pacer.schedulePass}); only the timer and a member's own open turn
 * ({@link Pacer.serveOwnTurn}) serve at once.
 */

import type { Clock } from '../clock.js';
import { streamWaitChannel } from '../diagnostics.js';
import type { ByteMeter } from '../meters/byte-meter.js';
import { expectedLatenessMs, TIMER_STEP_MS, Watchdog } from '../timer.js';
import type { Progress } from './counters.js';
import type { DrrRing, TurnPolicy } from './drr.js';
import type { MemberPort } from './link.js';
import {
  defaultGroupBurstBytes,
  groupWakePieceBytes,
  guaranteeWakePieceBytes,
  visitLimitBytes,
  wakePieceBytes,
} from './pacing.js';

/** What the pacer needs of the root class. */
export interface PacedClass {
  readonly ring: DrrRing;
  readonly meter: ByteMeter;
  readonly progress: Progress;
  readonly policy: TurnPolicy;
  /** The root's quantum, bytes (a piece may always be that large). */
  readonly quantumBytes: number;
  /** What `tokenpace:stream:wait` names as the stream that waits: the root `ThrottleGroup`. */
  readonly publicObject: object;
}

/** A subgroup asleep on its own rate: until its piece conforms, or until its dry members' turns are held long enough. */
export interface Sleeper {
  wake(): void;
}

/** How a child came to ask for service: it went first (sparse, urgent), it joined, or it has new data. */
export type Request = 'first' | 'joined' | 'data';

/** The root's timer and passes; see the file's opening comment. */
export class Pacer {
  readonly #root: PacedClass;
  readonly #clock: Clock;
  readonly #watchdog: Watchdog;
  /** True while the timer waits for the root's tokens (new data cannot be served before it fires). */
  #waitingForTokens = false;
  #serving = false;
  /** True while a pass is scheduled (see {@link schedulePass}). */
  #passScheduled = false;
  /** Subgroups asleep on their own rate, the instants they wake, and whether they wait for tokens (or for a hold to end). */
  readonly #sleepers = new Map<Sleeper, { dueMs: number; forTokens: boolean }>();
  /** The lone stream's wake piece (pacing.ts): a dry member's turn is held until the bucket holds this much. */
  holdLimitBytes = 0;
  /** The piece the root sleeps for while members wait (groupWakePieceBytes in pacing.ts). */
  wakePieceBytes = 0;
  /** The largest piece sent at once: the hold limit (the quantum if larger), which fits the bucket with the timer's margin. */
  maxPieceBytes = 1;
  /** The most a child sends in one visit of a ring: VISIT_MS of the root's rate, at least MIN_TURN_BYTES (pacing.ts). */
  visitLimitBytes = 1;
  /** The piece the root sleeps for while children with guaranteed rates wait: at most GUARANTEE_WAKE_MS of its rate (pacing.ts). */
  guaranteeWakeBytes = 1;

  constructor(root: PacedClass, clock: Clock) {
    this.#root = root;
    this.#clock = clock;
    this.#watchdog = new Watchdog(clock, (latenessChanged) => {
      this.#waitingForTokens = false;
      if (latenessChanged) this.updatePieces();
      if (!this.#serving) this.#serve();
    });
  }

  /** How late the timer's wake-ups have been coming lately, ms. */
  get latenessMs(): number {
    return this.#watchdog.latenessMs;
  }

  /** When the timer wakes the root for its tokens, ms (Infinity while it does not wait for them). */
  get tokensDueMs(): number {
    return this.#waitingForTokens ? this.#watchdog.dueMs : Number.POSITIVE_INFINITY;
  }

  /** True while a pass (or a member's own turn) is being served. */
  get serving(): boolean {
    return this.#serving;
  }

  /** Recomputes the hold limit, the wake piece and the largest piece from the root's numbers and the timer's lateness. */
  updatePieces(): void {
    const { ratePerSecond, burstBytes: capacityBytes } = this.#root.meter;
    const lateMs = this.#watchdog.latenessMs;
    const quantumBytes = this.#root.quantumBytes;
    this.holdLimitBytes = wakePieceBytes(ratePerSecond, capacityBytes, lateMs, defaultGroupBurstBytes(ratePerSecond));
    this.wakePieceBytes = groupWakePieceBytes(ratePerSecond, capacityBytes, quantumBytes, lateMs);
    this.maxPieceBytes = Math.max(1, quantumBytes, this.holdLimitBytes);
    this.guaranteeWakeBytes = guaranteeWakePieceBytes(ratePerSecond, this.wakePieceBytes);
    this.visitLimitBytes = visitLimitBytes(ratePerSecond);
  }

  /** True while dry members may keep their turns: the root's bucket is below the hold limit. */
  mayHold(nowMs: number): boolean {
    return this.#root.meter.available(nowMs) < this.holdLimitBytes;
  }

  /**
   * A child of the root asked for service (`port`; for a request from deeper
   * in the tree, the subgroup on its path). A child that went first is
   * served as soon as its piece conforms; otherwise, while serving or waiting
   * for tokens, the loop or the timer sees the new data, and else a member's
   * own open turn (`own`) is served at once, the rest in a scheduled pass.
   */
  requested(port: MemberPort, how: Request, own: boolean): void {
    if (how === 'first') {
      this.replan();
      return;
    }
    if (this.#serving || this.#waitingForTokens) return;
    if (!own || !this.serveOwnTurn(port)) this.schedulePass();
  }

  /** Re-plans the timer after a change of the ring or of the numbers. */
  replan(): void {
    if (this.#serving) return;
    this.#watchdog.disarm();
    this.#waitingForTokens = false;
    this.schedulePass();
  }

  /** The root's ring emptied (a child left): nothing to wait for but sleeping subgroups. */
  emptied(nowMs: number): void {
    if (this.#serving) return;
    this.#arm(nowMs, undefined, false);
    this.#root.progress.stopWaiting(nowMs);
  }

  /**
   * `sleeper` (a subgroup) sleeps until `dueMs`: its own rate is short
   * (`forTokens`; its members' requests wait for it), or it holds its dry
   * members' turns until its own bucket reaches its hold limit (their data
   * wakes it at once).
   */
  sleep(sleeper: Sleeper, dueMs: number, forTokens = true): void {
    this.#sleepers.set(sleeper, { dueMs, forTokens });
    if (!this.#serving) this.replan();
  }

  /** `sleeper` no longer sleeps (it left, or its numbers changed). */
  unsleep(sleeper: Sleeper): void {
    this.#sleepers.delete(sleeper);
  }

  /** True if `sleeper` is asleep. */
  asleep(sleeper: Sleeper): boolean {
    return this.#sleepers.has(sleeper);
  }

  /** True if `sleeper` is asleep for its own rate's tokens. */
  asleepForTokens(sleeper: Sleeper): boolean {
    return this.#sleepers.get(sleeper)?.forTokens === true;
  }

  /**
   * Serves the ring soon, not now. A member asks for service from inside its
   * own `_transform`, `end()` or `_destroy()`, and serving sends other
   * members' bytes: their write callbacks and 'data' events would run inside
   * this member's write. An HTTP client whose body parser wrote that chunk
   * would then see a second parser resume while the first is still running
   * (undici asserts `currentParser === null`). So every service of other
   * members that a member (or a setter) asks for runs in one pass from the
   * microtask queue, once the caller's stack has unwound; however many ask
   * before it runs, there is one pass.
   */
  schedulePass(): void {
    if (this.#passScheduled) return;
    this.#passScheduled = true;
    queueMicrotask(this.#scheduledPass);
  }

  readonly #scheduledPass = (): void => {
    this.#passScheduled = false;
    if (this.#serving || this.#waitingForTokens) return;
    if (this.#root.ring.size === 0 && this.#sleepers.size === 0) return;
    this.#serve();
  };

  /**
   * Serves `port`'s turn now, from inside its own write: only its own bytes
   * are sent, so only its own callbacks run (as on a lone stream's fast
   * path). It sends while its turn in this round is open (granting it one if
   * it has not had it) and the bucket holds its piece. Returns true if that
   * changed nothing for the others: it sent all it holds and its turn is
   * still open (it holds it, dry). Otherwise a pass must run: its turn is
   * spent (a new round may start), the bucket is short (the timer must be
   * armed), or its own cap or reader holds it (it leaves the ring).
   */
  serveOwnTurn(port: MemberPort): boolean {
    if (port.sparse || !port.inRing) return false;
    const { ring, meter, policy, progress } = this.#root;
    const nowMs = this.#clock.now();
    this.#serving = true;
    try {
      for (;;) {
        if (port.pendingBytes() === 0) {
          if (ring.turnOpen(port) && !port.ended()) {
            if (!port.dry) ring.hold(port);
            return true;
          }
          return false;
        }
        const want = port.sendableNow(nowMs);
        if (want === 0) return false;
        if (port.round < ring.round) {
          port.turnBytes = policy.turnFor(port);
          port.deficit = port.turnBytes;
          port.round = ring.round;
        }
        if (port.deficit <= 0) return false;
        const piece = Math.min(want, port.deficit, this.maxPieceBytes);
        if (meter.available(nowMs) < piece) return false;
        if (port.dry) ring.wake(port, false);
        const sent = port.send(nowMs, piece);
        meter.take(nowMs, sent);
        if (sent > 0) progress.record(nowMs, sent);
        this.#passed(sent);
        if (sent === 0 || !port.inRing) return false;
        ring.charge(port, sent);
        if (port.deficit === 0) return false;
      }
    } finally {
      this.#serving = false;
      this.#bookWaiting(nowMs);
    }
  }

  /**
   * Serves the ring until the bucket is short, or no child can send now:
   * each step sends one piece for the child the ring picks; when there is
   * none, the root waits for a dry member's data, for the hold limit, or for
   * a sleeping subgroup (docs/internals/streams.md).
   */
  #serve(): void {
    this.#serving = true;
    const nowMs = this.#clock.now();
    try {
      this.#wakeSleepers(nowMs);
      const { ring, meter, policy, progress } = this.#root;
      for (;;) {
        const port = ring.select(nowMs, policy);
        if (port === undefined) {
          // Hold the dry members' turns while the bucket has room: their data is
          // served as it arrives; at the hold limit they give up their turns.
          const holdMs = ring.idle === 'hold' ? meter.msUntil(nowMs, this.holdLimitBytes) : undefined;
          this.#arm(nowMs, holdMs, false);
          return;
        }
        let piece = Math.min(ring.limit, this.maxPieceBytes);
        const available = meter.available(nowMs);
        if (available < piece && port.capped()) piece = this.#pieceBeforeFull(port, nowMs, available, piece);
        if (available < piece) {
          // Sleep for a wake piece, not just this piece: one wake-up then serves
          // several turns (a smaller one while children with guarantees wait, see
          // pacing.ts). Once every waiting writer has ended, only what they
          // hold is left. A capped child is served as soon as its piece conforms.
          const wakePiece = ring.guaranteedPerSecond > 0 ? this.guaranteeWakeBytes : this.wakePieceBytes;
          const target = port.capped() || port.urgent || ring.allEnded() ? piece : Math.max(piece, wakePiece);
          const waitMs = meter.msUntil(nowMs, target);
          if (streamWaitChannel.hasSubscribers) {
            streamWaitChannel.publish({ stream: this.#root.publicObject, waitMs });
          }
          this.#arm(nowMs, waitMs, true);
          return;
        }
        const sent = port.send(nowMs, piece);
        meter.take(nowMs, sent);
        if (sent > 0) progress.record(nowMs, sent);
        this.#passed(sent);
        if (!port.inRing) continue; // it left while sending
        if (sent === 0) ring.drop(port);
        else ring.charge(port, sent);
      }
    } finally {
      this.#serving = false;
      this.#bookWaiting(nowMs);
    }
  }

  /**
   * The piece of a capped child that `available` root tokens do not cover:
   * the child waits with its own bucket filling, and what that bucket earns
   * once full is lost. So the piece is at most what the root's bucket holds
   * by the instant the child's bucket is full (less the timer's step and its
   * expected lateness), at least 1 byte: the child is served before it loses
   * anything, however much it holds ready (its buffered bytes, which its
   * highWaterMark sets, make its piece as large as its own tokens).
   */
  #pieceBeforeFull(port: MemberPort, nowMs: number, available: number, piece: number): number {
    const lateMs = TIMER_STEP_MS + expectedLatenessMs(this.#watchdog.latenessMs);
    const untilFullMs = Math.max(0, port.fullAtMs(nowMs) - lateMs - nowMs);
    const byThen = Math.floor(available + (this.#root.meter.ratePerSecond * untilFullMs) / 1000);
    return Math.max(1, Math.min(piece, byThen));
  }

  /**
   * A piece of `sent` bytes, taken at the pass's clock read, has passed: the
   * root's bucket is done with it at a clock read now (meters/byte-meter.ts).
   */
  #passed(sent: number): void {
    if (sent > 0) this.#root.meter.done(this.#clock.now(), sent);
  }

  /** Waiting time runs while some child is in the ring (a record stops it). */
  #bookWaiting(nowMs: number): void {
    const progress = this.#root.progress;
    if (this.#root.ring.size > 0) progress.waiting(nowMs);
    else progress.stopWaiting(nowMs);
  }

  /** Wakes the sleeping subgroups whose pieces conform by now: they ask their classes for service. */
  #wakeSleepers(nowMs: number): void {
    if (this.#sleepers.size === 0) return;
    for (const [sleeper, { dueMs }] of [...this.#sleepers]) {
      if (dueMs > nowMs) continue;
      this.#sleepers.delete(sleeper);
      sleeper.wake();
    }
  }

  /**
   * Arms the one timer for `waitMs` from now (undefined: nothing to wait for
   * but sleeping subgroups), or for the earliest sleeping subgroup if that
   * comes first; disarms it when there is nothing at all.
   */
  #arm(nowMs: number, waitMs: number | undefined, forTokens: boolean): void {
    let sleeperDueMs = Number.POSITIVE_INFINITY;
    for (const { dueMs } of this.#sleepers.values()) if (dueMs < sleeperDueMs) sleeperDueMs = dueMs;
    const watchdog = this.#watchdog;
    if (waitMs !== undefined && nowMs + waitMs <= sleeperDueMs) watchdog.arm(nowMs, waitMs);
    else if (sleeperDueMs !== Number.POSITIVE_INFINITY) watchdog.armAt(Math.max(sleeperDueMs, nowMs), nowMs);
    else watchdog.disarm();
    this.#waitingForTokens = forTokens;
  }
}
