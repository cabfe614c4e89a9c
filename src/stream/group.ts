/**
 * ThrottleGroup: one bandwidth cap shared by many streams, served by deficit
 * round robin (Shreedhar and Varghese, 1995) by bytes.
 *
 * The group owns one token bucket (rate, burst; it starts full) and one timer.
 * A member that has bytes to send takes what the bucket holds at once if no
 * other member is waiting (the conforming prefix, as a lone Throttle does);
 * otherwise, or for the rest, it joins the ring of waiting members.
 * The ring is served in turns: a member's turn gives it a deficit of one
 * `quantum` of bytes, and it sends pieces of min(deficit, bytes it has ready)
 * as the bucket allows; when the deficit is spent its turn ends and it goes
 * to the back of the ring. The group sleeps on its one timer, armed for the
 * exact time until a wake piece conforms (the burst less 10 ms of the rate,
 * as for a lone Throttle; see pacing.ts), and each wake-up serves as many quantum-sized
 * turns as the tokens allow. So N busy members each get
 * about rate / N, whatever their chunk sizes: a member of 1 KiB chunks sends
 * many of them in its turn (they are handed over synchronously from its write
 * queue), a member of 64 KiB chunks sends a quantum-sized piece of one.
 *
 * A member with a cap of its own (`group.throttle({ rate })`) leaves the ring
 * whenever its own bucket is short and sleeps on its own timer, so its unused
 * share goes to the others: max-min fairness. When its own tokens are back it
 * rejoins at the front of the ring and is served as soon as its piece
 * conforms (FQ-CoDel serves new, sparse flows first for the same reason):
 * made to wait a whole round, its own bucket would fill up and the rate it is
 * owed would be lost. A member that runs out of data
 * in the middle of its turn keeps the turn until the group's next wake-up (a
 * source refills in far less time than the bucket takes to earn a piece);
 * found empty again, it leaves the ring and its deficit is reset, as in DRR.
 *
 * Members join at any time. An ended or destroyed member leaves at once: it
 * is taken out of the ring (the timer is re-planned if it was the head) and
 * the group keeps no reference to it.
 *
 * The quantum is 5 ms of the group's rate (at least 1 KiB, at most half the
 * burst and a wake piece): small enough that a round of 16 members is short, large enough that
 * a wake-up passes a useful piece.
 */

import { type Clock, systemClock } from '../clock.js';
import { InvalidOptionError } from '../errors.js';
import { bucketParams } from '../meters/token-bucket.js';
import { parseSizeOption, type RateInput, type SizeInput } from '../units.js';
import { type GroupLink, kJoin, type MemberPort } from './link.js';
import {
  ByteMeter,
  checkBurst,
  defaultBurstBytes,
  defaultQuantumBytes,
  describeBytes,
  Watchdog,
  wakePieceBytes,
} from './pacing.js';
import { Throttle, type ThrottleOptions } from './throttle.js';

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
export class ThrottleGroup {
  readonly #clock: Clock;
  readonly #meter: ByteMeter;
  #burstExplicit: boolean;
  #quantumExplicit: number | undefined;
  #quantumBytes: number;
  /** The piece the group sleeps for (see wakePieceBytes in pacing.ts). */
  #wakePieceBytes: number;
  /** Waiting members in round-robin order; the head is index 0. */
  readonly #ring: MemberPort[] = [];
  readonly #members = new Set<MemberPort>();
  /** The group's one timer. */
  readonly #watchdog: Watchdog;
  #serving = false;
  readonly #link: GroupLink;

  constructor(options: ThrottleGroupOptions) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError('options', options, 'expected an options object such as { rate: "10MiB/s" }');
    }
    const clock = options.clock ?? systemClock;
    const { ratePerSecond, capacity } = bucketParams(options.rate, options.burst ?? 1);
    const burstBytes = options.burst === undefined ? defaultBurstBytes(ratePerSecond) : capacity;
    checkBurst(ratePerSecond, burstBytes);
    this.#clock = clock;
    this.#watchdog = new Watchdog(clock, (latenessChanged) => {
      if (latenessChanged) {
        const { ratePerSecond, burstBytes } = this.#meter;
        this.#wakePieceBytes = wakePieceBytes(ratePerSecond, burstBytes, this.#watchdog.latenessMs);
      }
      if (!this.#serving) this.#serve();
    });
    this.#burstExplicit = options.burst !== undefined;
    this.#quantumExplicit = options.quantum === undefined ? undefined : parseSizeOption(options.quantum, 'quantum');
    this.#quantumBytes = quantumFor(ratePerSecond, burstBytes, this.#quantumExplicit);
    this.#wakePieceBytes = wakePieceBytes(ratePerSecond, burstBytes);
    this.#meter = new ByteMeter(ratePerSecond, burstBytes, clock.now());
    this.#link = {
      clock,
      coversUnread: (bytes) => this.#ring.length === 0 && this.#meter.coversUnread(bytes),
      takeUnread: (bytes) => this.#meter.takeUnread(bytes),
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
   * Changes the shared rate from the next piece on (like `tc change`); no data
   * is lost. A default burst and quantum follow the new rate; an explicit burst
   * too small for it throws `BurstTooSmallError` and changes nothing.
   */
  setRate(rate: RateInput): void {
    const { ratePerSecond } = bucketParams(rate, 1);
    const burstBytes = this.#burstExplicit ? this.#meter.burstBytes : defaultBurstBytes(ratePerSecond);
    checkBurst(ratePerSecond, burstBytes);
    const quantumBytes = quantumFor(ratePerSecond, burstBytes, this.#quantumExplicit);
    const nowMs = this.#clock.now();
    this.#meter.setRate(nowMs, ratePerSecond);
    this.#meter.setBurst(nowMs, burstBytes);
    this.#quantumBytes = quantumBytes;
    this.#wakePieceBytes = wakePieceBytes(ratePerSecond, burstBytes, this.#watchdog.latenessMs);
    this.#clampTurns();
    this.#replan();
  }

  /**
   * Changes the shared burst from the next piece on; tokens above a smaller
   * burst are dropped. Throws `BurstTooSmallError` (and changes nothing) if it
   * cannot sustain the rate.
   */
  setBurst(burst: SizeInput): void {
    const { capacity } = bucketParams(this.#meter.ratePerSecond, burst);
    checkBurst(this.#meter.ratePerSecond, capacity);
    const quantumBytes = quantumFor(this.#meter.ratePerSecond, capacity, this.#quantumExplicit);
    this.#meter.setBurst(this.#clock.now(), capacity);
    this.#burstExplicit = true;
    this.#quantumBytes = quantumBytes;
    this.#wakePieceBytes = wakePieceBytes(this.#meter.ratePerSecond, capacity, this.#watchdog.latenessMs);
    this.#clampTurns();
    this.#replan();
  }

  /**
   * After the numbers changed: no open turn may stay larger than a new one
   * (a quantum, or a sparse member's wake piece), which fits the bucket. A
   * turn opened under a larger burst would otherwise wait for a piece the
   * smaller bucket can never hold, and the group would stall.
   */
  #clampTurns(): void {
    const most = Math.max(this.#quantumBytes, this.#wakePieceBytes);
    for (const port of this.#ring) if (port.deficit > most) port.deficit = most;
  }

  /** @internal A new member hands over its port. */
  [kJoin](port: MemberPort): GroupLink {
    this.#members.add(port);
    return this.#link;
  }

  #takeUpTo(nowMs: number, bytes: number): number {
    if (this.#ring.length > 0) return 0;
    const taken = Math.min(bytes, Math.floor(this.#meter.available(nowMs)));
    if (taken <= 0) return 0;
    this.#meter.take(nowMs, taken);
    return taken;
  }

  #request(port: MemberPort): void {
    if (!this.#members.has(port)) return; // it has left
    if (port.inRing) {
      if (!this.#serving && !this.#watchdog.armed) this.#serve();
      return;
    }
    port.inRing = true;
    port.deficit = 0;
    port.dry = false;
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
    // While serving, the loop sees the new member; while the timer is armed,
    // the head has not changed and the timer serves it.
    if (this.#serving || this.#watchdog.armed) return;
    this.#serve();
  }

  #leave(port: MemberPort): void {
    this.#members.delete(port);
    if (!port.inRing) return;
    const index = this.#ring.indexOf(port);
    this.#ring.splice(index, 1);
    port.inRing = false;
    port.deficit = 0;
    port.dry = false;
    port.sparse = false;
    if (this.#serving) return;
    if (this.#ring.length === 0) this.#watchdog.disarm();
    else if (index === 0) this.#replan();
  }

  /** Re-plans the timer after a change of head or of the numbers. */
  #replan(): void {
    if (this.#serving) return;
    this.#watchdog.disarm();
    this.#serve();
  }

  /** One pass of deficit round robin: serve the ring until it is empty or the head must wait. */
  #serve(): void {
    this.#serving = true;
    try {
      const nowMs = this.#clock.now();
      const ring = this.#ring;
      const meter = this.#meter;
      for (;;) {
        const port = ring[0];
        if (port === undefined) {
          this.#watchdog.disarm();
          return;
        }
        if (port.pendingBytes() === 0) {
          if (port.deficit > 0 && !port.dry) {
            // Ran dry in mid-turn: keep the turn until the next wake-up.
            port.dry = true;
            this.#watchdog.arm(nowMs, meter.msUntil(nowMs, this.#wakePieceBytes));
            return;
          }
          this.#drop(port);
          continue;
        }
        const want = port.want(nowMs);
        if (want === 0) {
          this.#drop(port); // its own cap or its reader holds it; it asks again when it can go
          continue;
        }
        port.dry = false;
        if (port.deficit <= 0) {
          // A sparse member's turn: what its own cap allows, up to a wake piece (which fits the bucket).
          port.deficit = port.sparse
            ? Math.max(this.#quantumBytes, Math.min(want, this.#wakePieceBytes))
            : this.#quantumBytes;
        }
        port.sparse = false;
        const piece = Math.min(want, port.deficit);
        if (meter.available(nowMs) < piece) {
          // Sleep for a wake piece, not just this piece: one wake-up then serves
          // several quantum-sized turns, and the timer fires ~25 times a second.
          // Once every waiting writer has ended, only what they hold is left.
          // A capped member at the head is served as soon as its piece conforms.
          const target = port.capped() || ring.every((p) => p.ended()) ? piece : Math.max(piece, this.#wakePieceBytes);
          this.#watchdog.arm(nowMs, meter.msUntil(nowMs, target));
          return;
        }
        const sent = port.send(nowMs, piece);
        meter.take(nowMs, sent);
        if (!port.inRing) continue; // it left while sending
        if (sent === 0) {
          this.#drop(port);
          continue;
        }
        port.deficit -= sent;
        if (port.deficit <= 0) {
          // Its turn is over: to the back of the ring.
          port.deficit = 0;
          ring.splice(ring.indexOf(port), 1);
          ring.push(port);
        }
      }
    } finally {
      this.#serving = false;
    }
  }

  /** Takes a member out of the ring; its deficit is reset. */
  #drop(port: MemberPort): void {
    this.#ring.splice(this.#ring.indexOf(port), 1);
    port.inRing = false;
    port.deficit = 0;
    port.dry = false;
    port.sparse = false;
  }
}

function quantumFor(ratePerSecond: number, burstBytes: number, explicit: number | undefined): number {
  if (explicit === undefined) return defaultQuantumBytes(ratePerSecond, burstBytes);
  if (explicit > burstBytes / 2) {
    throw new InvalidOptionError(
      'quantum',
      explicit,
      `quantum ${describeBytes(explicit)} must be at most half the burst (${describeBytes(burstBytes / 2)}): ` +
        'the group waits for a quantum-sized piece, and a late timer must not overflow the bucket; lower quantum or raise burst',
    );
  }
  return explicit;
}
