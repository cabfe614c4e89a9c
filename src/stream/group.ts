/**
 * ThrottleGroup: one bandwidth cap shared by many streams, served by deficit
 * round robin (Shreedhar and Varghese, 1995) by bytes.
 *
 * The group owns one token bucket (rate, burst; it starts full) and one
 * timer. A member takes what the bucket holds at once if no other member is
 * waiting; otherwise it joins the ring, served in rounds of one `quantum`
 * per member per round. A member that runs dry in the middle of its turn
 * holds it until the bucket reaches a lone stream's wake piece (pacing.ts); a
 * member with a cap of its own leaves the ring while that cap is short and
 * rejoins at the front (max-min fairness).
 *
 * Invariants: all members together pass at most burst + rate * T in any
 * window of T, and the whole rate while they have data their own caps let
 * them send; an ended or destroyed member leaves at once and is not
 * referenced again; other members are never served from inside a member's
 * own write (#schedulePass). docs/internals/streams.md gives the reasoning.
 */

import { type Clock, systemClock } from '../clock.js';
import { streamWaitChannel } from '../diagnostics.js';
import { InvalidOptionError } from '../errors.js';
import { ByteMeter } from '../meters/byte-meter.js';
import { Watchdog } from '../timer.js';
import { describeBytes, parseRateOption, parseSizeOption, type RateInput, type SizeInput } from '../units.js';
import { Progress, type ThrottleCounters } from './counters.js';
import { type GroupHandle, type GroupLink, kJoin, type MemberPort } from './link.js';
import {
  checkBurst,
  checkBurstLimit,
  checkRateLimit,
  defaultGroupBurstBytes,
  defaultQuantumBytes,
  groupWakePieceBytes,
  wakePieceBytes,
} from './pacing.js';
import { Throttle } from './throttle.js';
import type { ThrottleOptions } from './throttle-options.js';

/** Options for {@link ThrottleGroup}. */
export interface ThrottleGroupOptions {
  /** The rate all members share, bytes per second: a number or a string such as `'10MiB/s'`. */
  rate: RateInput;
  /**
   * The shared bucket's capacity, bytes. Must be at least rate x 10 ms.
   * @default rate x 50 ms, at least 1 KiB
   */
  burst?: SizeInput;
  /**
   * The deficit round robin quantum: the bytes a waiting member may send per
   * turn. At most half the burst.
   * @default rate x 5 ms, at least 1 KiB, at most half the burst and at most a wake piece (see pacing.ts)
   */
  quantum?: SizeInput;
  /** The time source, for the group and every member. @default systemClock */
  clock?: Clock;
}

/** Options for {@link ThrottleGroup.throttle}: a member's own cap (optional) and stream options. */
export type ThrottleMemberOptions = Omit<ThrottleOptions, 'group' | 'clock'>;

/**
 * One cap shared fairly by many streams.
 *
 * @example
 * const group = new ThrottleGroup({ rate: '10MiB/s' });
 * await Promise.all(urls.map((url) => download(url, group.throttle())));
 */
export class ThrottleGroup implements GroupHandle {
  readonly #clock: Clock;
  /** The whole group's progress: every byte any member passes, and the time some member waited. */
  readonly #progress = new Progress();
  readonly #meter: ByteMeter;
  #burstExplicit: boolean;
  #quantumExplicit: number | undefined;
  #quantumBytes: number;
  /** The lone stream's wake piece (see pacing.ts): a dry member's turn is held until the bucket holds this much. */
  #holdLimitBytes: number;
  /** The piece the group sleeps for while members wait (see groupWakePieceBytes in pacing.ts). */
  #wakePieceBytes: number;
  /** Members with a turn open or waiting for one, in round-robin order. */
  readonly #ring: MemberPort[] = [];
  readonly #members = new Set<MemberPort>();
  /** The round being served; a member's turn belongs to the round it was granted in. */
  #round = 0;
  /** The group's one timer. */
  readonly #watchdog: Watchdog;
  /** True while the timer waits for tokens (new data cannot be served before it fires). */
  #waitingForTokens = false;
  #serving = false;
  /** True while a service pass is scheduled (see {@link ThrottleGroup.#schedulePass}). */
  #passScheduled = false;
  readonly #link: GroupLink;

  constructor(options: ThrottleGroupOptions) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError('options', options, 'expected an options object such as { rate: "10MiB/s" }');
    }
    const clock = options.clock ?? systemClock;
    const ratePerSecond = groupRate(options.rate);
    const capacityBytes =
      options.burst === undefined ? defaultGroupBurstBytes(ratePerSecond) : groupBurst(options.burst);
    checkBurst(ratePerSecond, capacityBytes);
    this.#clock = clock;
    this.#watchdog = new Watchdog(clock, (latenessChanged) => {
      this.#waitingForTokens = false;
      if (latenessChanged) this.#updatePieces();
      if (!this.#serving) this.#serve();
    });
    this.#burstExplicit = options.burst !== undefined;
    this.#quantumExplicit = options.quantum === undefined ? undefined : parseSizeOption(options.quantum, 'quantum');
    this.#quantumBytes = quantumFor(ratePerSecond, capacityBytes, this.#quantumExplicit);
    this.#meter = new ByteMeter(ratePerSecond, capacityBytes, clock.now());
    this.#holdLimitBytes = 0;
    this.#wakePieceBytes = 0;
    this.#updatePieces();
    this.#link = {
      clock,
      tryTake: (nowMs, bytes) => this.#tryTake(nowMs, bytes),
      takeUpTo: (nowMs, bytes) => this.#takeUpTo(nowMs, bytes),
      request: (port) => this.#request(port),
      replan: () => this.#replan(),
      leave: (port) => this.#leave(port),
    };
  }

  /** A new member stream sharing this group's cap, with an optional cap of its own. */
  throttle(options: ThrottleMemberOptions = {}): Throttle {
    return new Throttle({ ...options, group: this });
  }

  /** The shared rate, bytes per second. */
  get rate(): number {
    return this.#meter.ratePerSecond;
  }

  /** The shared bucket's capacity, bytes. */
  get burst(): number {
    return this.#meter.burstBytes;
  }

  /** The round-robin quantum, bytes. */
  get quantum(): number {
    return this.#quantumBytes;
  }

  /** Members that have neither ended nor been destroyed. */
  get size(): number {
    return this.#members.size;
  }

  /** Members waiting for their turn now. */
  get waiting(): number {
    return this.#ring.length;
  }

  /**
   * The whole group's progress: bytes passed by all members together, the
   * time during which some member held data it could not pass yet, and the
   * group's current and average rate. A fresh snapshot on each read.
   */
  get counters(): ThrottleCounters {
    return this.#progress.snapshot(this.#clock.now());
  }

  /**
   * Ends every member's writable side, as `end()` on each: what they hold
   * still passes at the group's rate, then they finish.
   */
  endAll(): void {
    for (const port of [...this.#members]) port.end();
  }

  /**
   * Destroys every member, with `error` if given (each emits it, and its
   * pipeline fails with it): their timers are cleared and they leave the group.
   */
  destroyAll(error?: Error): void {
    for (const port of [...this.#members]) port.destroy(error);
  }

  /**
   * Changes the shared rate from the next piece on; no data is lost. The
   * tokens in the bucket are kept, capped at the new burst (Linux's
   * `tbf_change` refills the bucket instead; we hand out no burst on a
   * change). A default burst and quantum follow the new rate; an explicit
   * burst too small for it throws `BurstTooSmallError` and changes nothing.
   */
  setRate(rate: RateInput): void {
    const ratePerSecond = groupRate(rate);
    const capacityBytes = this.#burstExplicit ? this.#meter.burstBytes : defaultGroupBurstBytes(ratePerSecond);
    checkBurst(ratePerSecond, capacityBytes);
    const quantumBytes = quantumFor(ratePerSecond, capacityBytes, this.#quantumExplicit);
    this.#meter.reconfigure(this.#clock.now(), { ratePerSecond, burstBytes: capacityBytes });
    this.#quantumBytes = quantumBytes;
    this.#updatePieces();
    this.#clampTurns();
    this.#replan();
  }

  /**
   * Changes the shared burst from the next piece on; tokens above a smaller
   * burst are dropped. Throws `BurstTooSmallError` (and changes nothing) if it
   * cannot sustain the rate.
   */
  setBurst(burst: SizeInput): void {
    const capacity = groupBurst(burst);
    const ratePerSecond = this.#meter.ratePerSecond;
    checkBurst(ratePerSecond, capacity);
    const quantumBytes = quantumFor(ratePerSecond, capacity, this.#quantumExplicit);
    this.#meter.reconfigure(this.#clock.now(), { ratePerSecond, burstBytes: capacity });
    this.#burstExplicit = true;
    this.#quantumBytes = quantumBytes;
    this.#updatePieces();
    this.#clampTurns();
    this.#replan();
  }

  /** Recomputes the hold limit and the wake piece from the numbers and the timer's lateness. */
  #updatePieces(): void {
    const { ratePerSecond, burstBytes: capacityBytes } = this.#meter;
    const lateMs = this.#watchdog.latenessMs;
    this.#holdLimitBytes = wakePieceBytes(ratePerSecond, capacityBytes, lateMs, defaultGroupBurstBytes(ratePerSecond));
    this.#wakePieceBytes = groupWakePieceBytes(ratePerSecond, capacityBytes, this.#quantumBytes, lateMs);
  }

  /**
   * After the numbers changed: no open turn may stay larger than a new one
   * (a quantum, or a sparse member's wake piece), which fits the bucket. A
   * turn opened under a larger burst would otherwise wait for a piece the
   * smaller bucket can never hold, and the group would stall.
   */
  #clampTurns(): void {
    const most = Math.max(this.#quantumBytes, this.#holdLimitBytes);
    for (const port of this.#ring) if (port.deficit > most) port.deficit = most;
  }

  /** @internal A new member hands over its port. */
  [kJoin](port: MemberPort): GroupLink {
    this.#members.add(port);
    return this.#link;
  }

  #tryTake(nowMs: number, bytes: number): boolean {
    if (this.#ring.length > 0 || !this.#meter.tryTake(nowMs, bytes)) return false;
    this.#progress.start(nowMs);
    this.#progress.record(nowMs, bytes);
    return true;
  }

  #takeUpTo(nowMs: number, bytes: number): number {
    if (this.#ring.length > 0) return 0;
    const taken = Math.min(bytes, Math.floor(this.#meter.available(nowMs)));
    if (taken <= 0) return 0;
    this.#meter.take(nowMs, taken);
    this.#progress.start(nowMs);
    this.#progress.record(nowMs, taken);
    return taken;
  }

  #request(port: MemberPort): void {
    if (!this.#members.has(port)) return; // it has left
    if (!port.inRing) {
      if (this.#ring.length === 0) {
        const nowMs = this.#clock.now();
        this.#progress.start(nowMs);
        this.#progress.waiting(nowMs);
      }
      port.inRing = true;
      port.dry = false;
      if (port.round !== this.#round) port.deficit = 0;
      if (port.capped()) {
        // A member back from its own cap goes first, as a sparse flow does in
        // FQ-CoDel, and its turn may take all its cap allows: it asks for no
        // more than that, and waiting for a whole round would overflow its own
        // bucket and lose it rate it is owed.
        port.sparse = true;
        this.#ring.unshift(port);
        this.#replan();
        return;
      }
      this.#ring.push(port);
    }
    // While serving, the loop sees the new data; while the timer waits for
    // tokens, nothing can be served before it fires. Otherwise the member's
    // own open turn is served at once (its own callbacks only), and whatever
    // else it changed is served by a scheduled pass.
    if (this.#serving || this.#waitingForTokens) return;
    if (!this.#serveOwnTurn(port)) this.#schedulePass();
  }

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
  #serveOwnTurn(port: MemberPort): boolean {
    if (port.sparse || !port.inRing) return false;
    const meter = this.#meter;
    const nowMs = this.#clock.now();
    this.#serving = true;
    try {
      for (;;) {
        if (port.pendingBytes() === 0) {
          if (port.round === this.#round && port.deficit > 0 && !port.ended()) {
            port.dry = true;
            return true;
          }
          return false;
        }
        const want = port.sendableNow(nowMs);
        if (want === 0) return false;
        if (port.round !== this.#round) {
          port.deficit = this.#quantumBytes;
          port.round = this.#round;
        }
        if (port.deficit <= 0) return false;
        const piece = Math.min(want, port.deficit);
        if (meter.available(nowMs) < piece) return false;
        port.dry = false;
        const sent = port.send(nowMs, piece);
        meter.take(nowMs, sent);
        if (sent > 0) this.#progress.record(nowMs, sent);
        if (sent === 0 || !port.inRing) return false;
        port.deficit -= sent;
        if (port.deficit <= 0) {
          port.deficit = 0;
          const ring = this.#ring;
          ring.splice(ring.indexOf(port), 1);
          ring.push(port);
          return false;
        }
      }
    } finally {
      this.#serving = false;
      if (this.#ring.length > 0) this.#progress.waiting(nowMs);
      else this.#progress.stopWaiting(nowMs);
    }
  }

  #leave(port: MemberPort): void {
    this.#members.delete(port);
    if (!port.inRing) return;
    this.#ring.splice(this.#ring.indexOf(port), 1);
    port.inRing = false;
    port.deficit = 0;
    port.dry = false;
    port.sparse = false;
    if (this.#serving) return;
    if (this.#ring.length === 0) {
      this.#watchdog.disarm();
      this.#waitingForTokens = false;
      this.#progress.stopWaiting(this.#clock.now());
    } else {
      this.#replan(); // it may have held the round, or been the one the timer waited for
    }
  }

  /** Re-plans the timer after a change of the ring or of the numbers. */
  #replan(): void {
    if (this.#serving) return;
    this.#watchdog.disarm();
    this.#waitingForTokens = false;
    this.#schedulePass();
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
   * before it runs, there is one pass. At once run only the group's own
   * timer (nothing else is on the stack then) and a member's own open turn
   * ({@link ThrottleGroup.#serveOwnTurn}: its own callbacks only).
   */
  #schedulePass(): void {
    if (this.#passScheduled) return;
    this.#passScheduled = true;
    queueMicrotask(this.#scheduledPass);
  }

  readonly #scheduledPass = (): void => {
    this.#passScheduled = false;
    if (this.#serving || this.#waitingForTokens || this.#ring.length === 0) return;
    this.#serve();
  };

  /**
   * Serves the ring until the bucket is short, or no member can send now:
   * each pass sends one piece for the first member (in ring order) with data
   * and a turn open; when none has, either a new round starts, or the group
   * waits for a dry member's data (docs/internals/streams.md).
   */
  #serve(): void {
    this.#serving = true;
    try {
      const nowMs = this.#clock.now();
      const ring = this.#ring;
      const meter = this.#meter;
      for (;;) {
        let blocked = 0; // members with data whose turn in this round is spent
        let holding = 0; // members without data whose turn is still open
        let sentPiece = false;
        for (let i = 0; i < ring.length; ) {
          const port = ring[i] as MemberPort;
          if (port.pendingBytes() === 0) {
            if (port.round === this.#round && port.deficit > 0 && !port.ended()) {
              port.dry = true;
              holding++;
              i++;
            } else {
              this.#drop(port);
            }
            continue;
          }
          const want = port.sendableNow(nowMs);
          if (want === 0) {
            this.#drop(port); // its own cap or its reader holds it; it asks again when it can go
            continue;
          }
          port.dry = false;
          if (port.sparse) {
            // A sparse member's turn: what its own cap allows, up to a wake piece (which fits the bucket).
            port.deficit = Math.max(this.#quantumBytes, Math.min(want, this.#holdLimitBytes));
            port.round = this.#round;
            port.sparse = false;
          } else if (port.round !== this.#round) {
            port.deficit = this.#quantumBytes;
            port.round = this.#round;
          }
          if (port.deficit <= 0) {
            blocked++;
            i++;
            continue;
          }
          const piece = Math.min(want, port.deficit);
          if (meter.available(nowMs) < piece) {
            // Sleep for a wake piece, not just this piece: one wake-up then serves
            // several quantum-sized turns. Once every waiting writer has ended, only
            // what they hold is left. A capped member is served as soon as its piece conforms.
            const target =
              port.capped() || ring.every((p) => p.ended()) ? piece : Math.max(piece, this.#wakePieceBytes);
            const waitMs = meter.msUntil(nowMs, target);
            if (streamWaitChannel.hasSubscribers) streamWaitChannel.publish({ stream: this, waitMs });
            this.#watchdog.arm(nowMs, waitMs);
            this.#waitingForTokens = true;
            return;
          }
          const sent = port.send(nowMs, piece);
          meter.take(nowMs, sent);
          if (sent > 0) this.#progress.record(nowMs, sent);
          sentPiece = true;
          if (!port.inRing) break; // it left while sending
          if (sent === 0) {
            this.#drop(port);
            break;
          }
          port.deficit -= sent;
          if (port.deficit <= 0) {
            // Its turn is over: to the back of the ring.
            port.deficit = 0;
            ring.splice(ring.indexOf(port), 1);
            ring.push(port);
          }
          break;
        }
        if (sentPiece) continue;
        if (blocked === 0) {
          // Nobody has data: whoever gets some next asks for service (no timer needed).
          this.#watchdog.disarm();
          return;
        }
        if (holding > 0 && meter.available(nowMs) < this.#holdLimitBytes) {
          // Hold the dry members' turns while the bucket has room: their data is
          // served as it arrives; at the hold limit they give up their turns.
          this.#watchdog.arm(nowMs, meter.msUntil(nowMs, this.#holdLimitBytes));
          return;
        }
        for (let i = ring.length - 1; i >= 0; i--) if ((ring[i] as MemberPort).dry) this.#drop(ring[i] as MemberPort);
        this.#round++;
      }
    } finally {
      this.#serving = false;
      // Waiting time runs while some member is in the ring (a record stops it).
      const nowMs = this.#clock.now();
      if (this.#ring.length > 0) this.#progress.waiting(nowMs);
      else this.#progress.stopWaiting(nowMs);
    }
  }

  /** Takes a member out of the ring; its turn is over. */
  #drop(port: MemberPort): void {
    this.#ring.splice(this.#ring.indexOf(port), 1);
    port.inRing = false;
    port.deficit = 0;
    port.dry = false;
    port.sparse = false;
  }
}

/** The group's rate option, parsed and checked against MAX_RATE. */
function groupRate(rate: RateInput): number {
  const ratePerSecond = parseRateOption(rate, 'rate');
  checkRateLimit(ratePerSecond, rate);
  return ratePerSecond;
}

/** The group's burst option, parsed and checked against MAX_BURST. */
function groupBurst(burst: SizeInput): number {
  const capacityBytes = parseSizeOption(burst, 'burst');
  checkBurstLimit(capacityBytes, burst);
  return capacityBytes;
}

function quantumFor(ratePerSecond: number, capacityBytes: number, explicit: number | undefined): number {
  if (explicit === undefined) return defaultQuantumBytes(ratePerSecond, capacityBytes);
  if (explicit > capacityBytes / 2) {
    throw new InvalidOptionError(
      'quantum',
      explicit,
      `quantum ${describeBytes(explicit)} must be at most half the burst (${describeBytes(capacityBytes / 2)}): ` +
        'the group waits for a quantum-sized piece, and a late timer must not overflow the bucket; lower quantum or raise burst',
    );
  }
  return explicit;
}
