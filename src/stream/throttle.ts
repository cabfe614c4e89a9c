/**
 * Throttle: a `Transform` that paces bytes like Linux's Token Bucket Filter.
 * A flow obeys TBF with rate R and depth B if, for any interval of length T,
 * the bytes passed do not exceed B + R * T (sch_tbf.c). One byte costs one
 * token; the bucket starts full. With `peakRate`, a piece must also conform
 * to TBF's second bucket (peakRate, peakBurst). In a `ThrottleGroup`, a
 * member passes its own cap first, then the group's (group.ts).
 *
 * `_transform` holds a chunk's callback until all of it has been pushed, so
 * the source is paused by ordinary backpressure and nothing is buffered
 * beyond that chunk. What conforms passes now; for the rest the stream sleeps
 * on one timer (timer.ts's Watchdog) for a wake piece (pacing.ts).
 *
 * Invariants: no piece is larger than the burst; every piece is taken at a
 * clock read before it is pushed and done with at one after (so the bound
 * holds wherever in `push()` the reader receives it; meters/byte-meter.ts);
 * nothing is dropped, reordered or duplicated; a full readable side holds the rest until
 * `_read()`; after `destroy()` (an aborted `signal`, a failed `pipeline`)
 * no timer is armed and nothing more is pushed. docs/internals/streams.md
 * gives the reasoning (runs, early wake-ups, the peak bucket).
 */

import { addAbortSignal, Transform, type TransformCallback } from 'node:stream';
import { type Clock, systemClock } from '../clock.js';
import { streamWaitChannel } from '../diagnostics.js';
import { InvalidOptionError } from '../errors.js';
import { ByteMeter } from '../meters/byte-meter.js';
import { Watchdog } from '../timer.js';
import type { RateInput, SizeInput } from '../units.js';
import { Progress, type ThrottleCounters } from './counters.js';
import { type GroupHandle, type GroupLink, kJoin, type MemberPort, makePort } from './link.js';
import { EARLY_WAKE_MS, wakePieceBytes } from './pacing.js';
import {
  type Cap,
  checkGuaranteedBelow,
  checkOptions,
  ownCap,
  parseGuaranteed,
  parseWeight,
  resolveCap,
  type ThrottleOptions,
  transformOptions,
} from './throttle-options.js';

function wakePieceFor(cap: Cap, lateMs: number): number {
  const piece = wakePieceBytes(cap.ratePerSecond, cap.capacityBytes, lateMs);
  return cap.peak === undefined ? piece : Math.max(1, Math.min(piece, cap.peak.capacityBytes / 2));
}

/**
 * The most a run (see Throttle's #beginRun) passes without reading the clock,
 * ms of the rate (1 MiB at 1 GiB/s: a thousand 1 KiB chunks per clock read).
 * A run charges its bytes when it ends, after the refill up to then is capped
 * at the burst, so the refill of a run that starts with the bucket nearly full
 * is lost; in steady state the bucket holds the wake piece, 10 ms of the rate
 * below the burst, so runs of 1 ms lose nothing even at a pass speed of a
 * tenth of the rate.
 */
const RUN_MS = 1;
/** ... and at least 64 KiB, a chunk, which at lower rates passes in far less than 1 ms of the rate. */
const RUN_FLOOR_BYTES = 64 * 1024;

/**
 * A bandwidth cap for a byte stream: a `Transform` that passes bytes through
 * unchanged at no more than `rate` bytes per second, with bursts of up to
 * `burst` bytes.
 *
 * @example
 * await pipeline(response.body, new Throttle({ rate: '1MiB/s' }), createWriteStream(file));
 */
export class Throttle<Options extends ThrottleOptions = ThrottleOptions> extends Transform {
  readonly #clock: Clock;
  readonly #progress = new Progress();
  #cap: Cap | undefined;
  #meter: ByteMeter | undefined;
  #wakePieceBytes = 1;
  readonly #group: GroupHandle | undefined;
  #link: GroupLink | undefined;
  readonly #port: MemberPort | undefined;
  /** The chunk being passed, the bytes of it already pushed, and its held-back callback. */
  #chunk: Buffer | undefined;
  #offset = 0;
  #callback: TransformCallback | undefined;
  /** Our one timer, armed while the own cap is short. */
  readonly #watchdog: Watchdog;
  /** True while a loop is pushing: a chunk handed over synchronously is picked up by that loop. */
  #pumping = false;
  /** The current run (see #beginRun): bytes it may still pass without a clock read, and bytes it passed, not yet charged. */
  #runSpare = 0;
  #runBytes = 0;
  /** The most a run passes without a clock read: {@link RUN_MS} of the rate, at least {@link RUN_FLOOR_BYTES}. */
  #runLimitBytes = 1;
  #runScheduled = false;
  /** push() reported a full readable buffer in the middle of a chunk; the rest waits for _read(). */
  #awaitingRead = false;
  /** Set in `_destroy`: `this.destroyed` is two getters deep, and the group asks on every piece. */
  #destroyedFlag = false;

  constructor(options: Options) {
    const group = checkOptions(options);
    const cap = ownCap(options, group);
    super(transformOptions(options));
    this.#group = group;
    let link: GroupLink | undefined;
    if (group !== undefined) {
      const weight = options.weight === undefined ? 1 : parseWeight(options.weight);
      const guaranteed = options.guaranteed === undefined ? 0 : parseGuaranteed(options.guaranteed);
      if (cap !== undefined) checkGuaranteedBelow(guaranteed, cap.ratePerSecond, options.guaranteed);
      this.#port = this.#makePort(weight, guaranteed);
      link = this.#joinGroup(group, this.#port, options.clock);
    }
    this.#clock = link?.clock ?? options.clock ?? systemClock;
    this.#watchdog = new Watchdog(this.#clock, (latenessChanged) => this.#onWake(latenessChanged));
    if (cap !== undefined) this.#applyCap(cap, undefined);
    // The signal is attached last: one already aborted destroys the stream at
    // once, which must not happen before our fields exist. checkOptions has
    // made sure it is a signal.
    if (options.signal !== undefined) addAbortSignal(options.signal, this);
  }

  /** The port the group sees of this member (see link.ts). */
  #makePort(weight: number, guaranteedPerSecond: number): MemberPort {
    return makePort({
      weight,
      guaranteedPerSecond,
      holdsBack: () => false,
      dropped: () => {},
      pendingBytes: () => this.#pendingBytes(),
      ended: () => this.writableEnded,
      end: () => {
        if (!this.writableEnded && !this.destroyed) this.end();
      },
      destroy: (error) => {
        this.destroy(error);
      },
      capped: () => this.#meter !== undefined,
      fullAtMs: (nowMs) => this.#meter?.readyAt(nowMs, this.#meter.burstBytes) ?? Number.POSITIVE_INFINITY,
      sendableNow: (nowMs) => this.#sendableOrArmWake(nowMs),
      send: (nowMs, bytes) => this.#send(nowMs, bytes),
    });
  }

  /** Joins `group`; throws `InvalidOptionError` for a clock of its own (a member uses the group's). */
  #joinGroup(group: GroupHandle, port: MemberPort, clock: Clock | undefined): GroupLink {
    const link = group[kJoin](port);
    if (clock !== undefined && clock !== link.clock) {
      link.leave(port);
      throw new InvalidOptionError(
        'clock',
        clock,
        "a member of a ThrottleGroup uses the group's clock: pass `clock` to the group",
      );
    }
    this.#link = link;
    return link;
  }

  /** The timer fired: size the wake piece by the lateness seen, and go on passing. */
  #onWake(latenessChanged: boolean): void {
    const cap = this.#cap;
    if (latenessChanged && cap !== undefined) this.#wakePieceBytes = wakePieceFor(cap, this.#watchdog.latenessMs);
    if (!this.#pumping) this.#pump();
  }

  /** The own sustained rate, bytes per second (undefined for a group member without a cap of its own). */
  get rate(): number | undefined {
    return this.#cap?.ratePerSecond;
  }

  /**
   * The own burst, bytes: always there for a Throttle given a `rate` (typed `number` then), undefined
   * for a group member without a cap of its own.
   */
  get burst(): Options extends { rate: RateInput } ? number : number | undefined {
    return this.#cap?.capacityBytes as Options extends { rate: RateInput } ? number : number | undefined;
  }

  /** The peak rate, bytes per second, if one is set. */
  get peakRate(): number | undefined {
    return this.#cap?.peak?.ratePerSecond;
  }

  /** The peak bucket's capacity, bytes, if a peak rate is set. */
  get peakBurst(): number | undefined {
    return this.#cap?.peak?.capacityBytes;
  }

  /** The group this stream shares a cap with (a `ThrottleGroup`), if any. */
  get group(): GroupHandle | undefined {
    return this.#group;
  }

  /** A group member's weight (1 by default; undefined for a lone Throttle). */
  get weight(): number | undefined {
    return this.#port?.weight;
  }

  /** A group member's guaranteed rate, bytes per second (0: none; undefined for a lone Throttle). */
  get guaranteed(): number | undefined {
    return this.#port?.guaranteedPerSecond;
  }

  /**
   * Changes a group member's weight from its next turn on. Throws
   * `InvalidOptionError` for a weight that is not a number above 0, or on a
   * lone Throttle.
   */
  setWeight(weight: number): void {
    const port = this.#sharePort('weight', weight);
    this.#link?.reweigh(port, parseWeight(weight), port.guaranteedPerSecond);
  }

  /**
   * Changes a group member's guaranteed rate (0: none) from its next turn on.
   * Throws `InvalidOptionError`, changing nothing, if the guarantees in a
   * group above it would add up to more than its rate, or if it is above the
   * member's own rate.
   */
  setGuaranteed(guaranteed: RateInput): void {
    const port = this.#sharePort('guaranteed', guaranteed);
    const guaranteedPerSecond = parseGuaranteed(guaranteed);
    const cap = this.#cap;
    if (cap !== undefined) checkGuaranteedBelow(guaranteedPerSecond, cap.ratePerSecond, guaranteed);
    this.#link?.reweigh(port, port.weight, guaranteedPerSecond);
  }

  #sharePort(option: string, value: unknown): MemberPort {
    const port = this.#port;
    if (port === undefined || this.#link === undefined) {
      throw new InvalidOptionError(
        option,
        value,
        `${option} is a share in a group: this Throttle is not in one (or has left it)`,
      );
    }
    return port;
  }

  /** Progress: bytes passed, time spent waiting, current and average rate. A fresh snapshot on each read. */
  get counters(): ThrottleCounters {
    const nowMs = this.#clock.now();
    this.#endRun(nowMs);
    return this.#progress.snapshot(nowMs);
  }

  /**
   * Changes the rate from the next piece on; no data is lost. The tokens in
   * the bucket are kept, capped at the new burst (Linux's `tbf_change` refills
   * the bucket instead; we hand out no burst on a change). A default burst follows the new
   * rate; an explicit burst too small for it throws `BurstTooSmallError` and
   * changes nothing. On a group member this sets (or changes) its own cap.
   */
  setRate(rate: RateInput): void {
    const cap = this.#cap;
    const peak = cap?.peak;
    const next = resolveCap(
      rate,
      cap?.burstExplicit ? cap.capacityBytes : undefined,
      peak?.ratePerSecond,
      peak?.burstExplicit ? peak.capacityBytes : undefined,
    );
    this.#applyCap(next, cap);
  }

  /**
   * Changes the burst from the next piece on; tokens above a smaller burst
   * are dropped. Throws `BurstTooSmallError` (and changes nothing) if the new
   * burst cannot sustain the rate.
   */
  setBurst(burst: SizeInput): void {
    const cap = this.#cap;
    if (cap === undefined) {
      throw new InvalidOptionError(
        'burst',
        burst,
        "this group member has no cap of its own: call setRate() first, or change the group's burst",
      );
    }
    const peak = cap.peak;
    const next = resolveCap(
      cap.ratePerSecond,
      burst,
      peak?.ratePerSecond,
      peak?.burstExplicit ? peak.capacityBytes : undefined,
    );
    this.#applyCap(next, cap);
  }

  #applyCap(next: Cap, previous: Cap | undefined): void {
    const port = this.#port;
    if (port !== undefined) checkGuaranteedBelow(port.guaranteedPerSecond, next.ratePerSecond, next.ratePerSecond);
    const nowMs = this.#clock.now();
    this.#endRun(nowMs);
    const peak = next.peak && { ratePerSecond: next.peak.ratePerSecond, burstBytes: next.peak.capacityBytes };
    if (this.#meter === undefined || previous === undefined) {
      this.#meter = new ByteMeter(next.ratePerSecond, next.capacityBytes, nowMs, peak);
    } else {
      this.#meter.reconfigure(nowMs, { ratePerSecond: next.ratePerSecond, burstBytes: next.capacityBytes });
      if (peak !== undefined) this.#meter.reconfigurePeak(nowMs, peak);
    }
    this.#cap = next;
    this.#runLimitBytes = Math.max(RUN_FLOOR_BYTES, Math.ceil((next.ratePerSecond * RUN_MS) / 1000));
    this.#wakePieceBytes = wakePieceFor(next, this.#watchdog.latenessMs);
    // A stream asleep on its own timer re-plans with the new numbers at once.
    if (this.#watchdog.armed) {
      this.#watchdog.disarm();
      if (!this.#pumping) this.#pump();
    }
  }

  override _transform(chunk: Buffer | string, encoding: BufferEncoding, callback: TransformCallback): void {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk;
    const length = bytes.length;
    if (length === 0) {
      callback();
      return;
    }
    if (!this.#pumping) {
      // The fast path: the whole chunk conforms now. Within a run (see
      // #beginRun), a chunk the tokens known at the run's clock read still
      // cover passes without reading the clock; it is charged when the run ends.
      if (length <= this.#runSpare) {
        this.#runSpare -= length;
        this.#runBytes += length;
        this.push(bytes);
        callback();
        return;
      }
      // Otherwise it is taken at a clock read now, and done with at one once
      // it has passed (see meters/byte-meter.ts), which a lone stream starts a run at.
      const nowMs = this.#clock.now();
      this.#endRun(nowMs);
      const progress = this.#progress;
      if (progress.startedAtMs === undefined) progress.start(nowMs);
      const meter = this.#meter;
      const link = this.#link;
      if (
        link === undefined
          ? (meter as ByteMeter).tryTake(nowMs, length)
          : (meter === undefined || meter.available(nowMs) >= length) && link.tryTake(nowMs, length)
      ) {
        if (link !== undefined) meter?.take(nowMs, length);
        progress.record(nowMs, length);
        this.push(bytes);
        const doneMs = this.#clock.now();
        meter?.done(doneMs, length);
        if (link !== undefined) link.done(doneMs, length);
        else this.#beginRun(doneMs);
        callback();
        return;
      }
    }
    this.#chunk = bytes;
    this.#offset = 0;
    this.#callback = callback;
    if (!this.#pumping) this.#pump();
  }

  /**
   * `Writable.end()`, plus: a stream asleep for a whole wake piece needs only
   * what it holds once its writer has ended, so the wait is planned again.
   */
  override end(callback?: () => void): this;
  override end(chunk: unknown, callback?: () => void): this;
  override end(chunk: unknown, encoding: BufferEncoding, callback?: () => void): this;
  override end(...args: unknown[]): this {
    (super.end as (...endArgs: unknown[]) => this)(...args);
    if (this.#watchdog.armed && !this.#pumping) {
      this.#watchdog.disarm();
      this.#pump();
    } else if (this.#port?.inRing) {
      this.#link?.replan();
    }
    return this;
  }

  override _read(size: number): void {
    if (this.#awaitingRead) {
      this.#awaitingRead = false;
      if (!this.#pumping) this.#pump();
    }
    super._read(size);
  }

  override _flush(callback: TransformCallback): void {
    const nowMs = this.#clock.now();
    this.#endRun(nowMs);
    this.#progress.endedAtMs = nowMs;
    this.#leaveGroup();
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#destroyedFlag = true;
    const nowMs = this.#clock.now();
    this.#endRun(nowMs);
    this.#progress.stopWaiting(nowMs);
    this.#watchdog.disarm();
    this.#leaveGroup();
    const held = this.#callback;
    this.#chunk = undefined;
    this.#callback = undefined;
    callback(error);
    // Release the write we held back, as a core stream completes its pending
    // write: Node then calls its callback and fails the queued ones with
    // ERR_STREAM_DESTROYED. Nothing is pushed: the stream is destroyed.
    if (held !== undefined) process.nextTick(held);
  }

  /**
   * Starts a run at the clock read `nowMs` (a lone stream's fast path): the
   * tokens the bucket holds now are a lower bound for the rest of this
   * synchronous stretch of the event loop (refill only adds), so chunks
   * handed over before it ends pass against them without a clock read. Their
   * bytes are charged once, when the run ends (a microtask, or the next clock
   * read, whichever comes first: a read after they have passed, as
   * meters/byte-meter.ts's `done` asks), after the refill up to then is capped at
   * the burst. That is exactly TBF's charge per piece whenever the bucket
   * could not have filled up during the run (tokens at the read + rate x the
   * run's length <= burst); otherwise the bucket is left at most rate x the
   * run's length below what a per-piece charge would leave (never above: no
   * window ever carries more than burst + rate * T). A run is one stretch of
   * synchronous code, microseconds for a socket's chunk, so the difference
   * is bytes at most; on a fake clock it is none. A synchronous source can
   * keep a stretch going for long (nextTick callbacks run back to back, and
   * microtasks only once they are done), so a run passes at most
   * {@link RUN_MS} of the rate (or 64 KiB) before the clock is read again: the tokens
   * earned meanwhile are then credited while the bucket has room for them.
   */
  #beginRun(nowMs: number): void {
    const spare = Math.min(Math.floor((this.#meter as ByteMeter).available(nowMs)), this.#runLimitBytes);
    if (spare < 1) return;
    this.#runSpare = spare;
    if (!this.#runScheduled) {
      this.#runScheduled = true;
      queueMicrotask(this.#runEnds);
    }
  }

  /** Charges the bytes passed in the current run at `nowMs`, and ends it. */
  #endRun(nowMs: number): void {
    this.#runSpare = 0;
    const bytes = this.#runBytes;
    if (bytes === 0) return;
    this.#runBytes = 0;
    (this.#meter as ByteMeter).take(nowMs, bytes);
    this.#progress.record(nowMs, bytes);
  }

  readonly #runEnds = (): void => {
    this.#runScheduled = false;
    if (this.#runBytes === 0) this.#runSpare = 0;
    else this.#endRun(this.#clock.now());
  };

  /**
   * Passes what conforms of the held chunk (and of chunks handed over behind
   * it) at one clock read; sleeps for the rest. Each piece is done with at a
   * clock read once it has passed (meters/byte-meter.ts).
   */
  #pump(): void {
    this.#pumping = true;
    try {
      const nowMs = this.#clock.now();
      this.#endRun(nowMs);
      this.#progress.start(nowMs);
      for (;;) {
        const chunk = this.#chunk;
        if (chunk === undefined || this.destroyed || this.#awaitingRead) return;
        const port = this.#port;
        if (port?.inRing) {
          this.#link?.request(port); // the group serves it in turn
          return;
        }
        const remaining = chunk.length - this.#offset;
        let allowed = remaining;
        const meter = this.#meter;
        if (meter !== undefined) {
          const available = meter.available(nowMs);
          if (available < remaining) {
            allowed = Math.floor(available); // the conforming prefix
            if (allowed < 1) {
              this.#armWake(nowMs, meter.readyAt(nowMs, this.#wakeTarget()));
              return;
            }
          }
        }
        const link = this.#link;
        if (link !== undefined && port !== undefined) {
          allowed = link.takeUpTo(nowMs, allowed);
          if (allowed === 0) {
            this.#progress.waiting(nowMs);
            link.request(port);
            return;
          }
        }
        this.#pushPiece(nowMs, allowed);
        const doneMs = this.#clock.now();
        meter?.done(doneMs, allowed);
        if (link !== undefined && port !== undefined) link.done(doneMs, allowed);
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** Pushes the next `bytes` of the held chunk; finishing the chunk releases its callback. */
  #pushPiece(nowMs: number, bytes: number): void {
    const chunk = this.#chunk as Buffer;
    const offset = this.#offset;
    this.#meter?.take(nowMs, bytes);
    this.#progress.record(nowMs, bytes);
    const end = offset + bytes;
    if (end >= chunk.length) {
      const callback = this.#callback as TransformCallback;
      this.#chunk = undefined;
      this.#callback = undefined;
      this.#offset = 0;
      this.push(offset === 0 ? chunk : chunk.subarray(offset));
      callback(); // Node may hand over the next queued chunk right here
    } else {
      this.#offset = end;
      if (!this.push(chunk.subarray(offset, end))) this.#awaitingRead = true;
    }
  }

  /**
   * The piece to sleep for: the wake piece (pacing.ts), whatever the chunk
   * size, so chunks handed over between wake-ups pass on the tokens already
   * earned. Once the writer has ended, only what is left, if less.
   */
  #wakeTarget(): number {
    return this.writableEnded ? Math.min(this.#pendingBytes(), this.#wakePieceBytes) : this.#wakePieceBytes;
  }

  #pendingBytes(): number {
    const chunk = this.#chunk;
    if (chunk === undefined || this.#destroyedFlag) return 0;
    // writableLength counts the held chunk whole, and every write queued behind it.
    return Math.max(this.writableLength, chunk.length) - this.#offset;
  }

  /**
   * For the group: the bytes this member could send now within its own cap.
   * When its own cap is short it arms its own wake-up and returns 0 (it asks
   * the group again when the tokens are there).
   */
  #sendableOrArmWake(nowMs: number): number {
    if (this.#awaitingRead) return 0;
    const pending = this.#pendingBytes();
    const meter = this.#meter;
    if (pending === 0 || meter === undefined) return pending;
    const available = meter.available(nowMs);
    if (available >= pending) return pending;
    const conforming = Math.floor(available);
    if (conforming >= 1) return conforming;
    this.#armWake(nowMs, meter.readyAt(nowMs, this.#wakeTarget()));
    return 0;
  }

  /** For the group: sends up to `limit` bytes now; returns the bytes sent (done with in its own bucket once they have passed). */
  #send(nowMs: number, limit: number): number {
    const wasPumping = this.#pumping;
    this.#pumping = true;
    let sent = 0;
    try {
      while (sent < limit) {
        const chunk = this.#chunk;
        if (chunk === undefined || this.destroyed || this.#awaitingRead) break;
        const bytes = Math.min(chunk.length - this.#offset, limit - sent);
        this.#pushPiece(nowMs, bytes);
        sent += bytes;
      }
    } finally {
      this.#pumping = wasPumping;
    }
    if (sent > 0) this.#meter?.done(this.#clock.now(), sent);
    if (this.#chunk !== undefined && !this.destroyed) this.#progress.waiting(nowMs);
    return sent;
  }

  /**
   * Arms the one timer for about the instant `dueMs`: whole milliseconds, at
   * least 1 ms from now, and no earlier than {@link EARLY_WAKE_MS} before it
   * (docs/internals/streams.md says why a wake-up a little early is welcome).
   */
  #armWake(nowMs: number, dueMs: number): void {
    this.#progress.waiting(nowMs);
    if (streamWaitChannel.hasSubscribers) streamWaitChannel.publish({ stream: this, waitMs: dueMs - nowMs });
    // A timer of whole milliseconds, as the watchdog would arm for `dueMs`,
    // that may call back from EARLY_WAKE_MS before its end. A pending one that
    // is not early for it and less than 1 ms later is kept (a re-plan from a
    // slightly later clock read clears and sets no timer).
    const wakeMs = nowMs + Math.max(1, Math.ceil(dueMs - nowMs)) - EARLY_WAKE_MS;
    const watchdog = this.#watchdog;
    if (watchdog.armed && watchdog.dueMs >= wakeMs && watchdog.dueMs < wakeMs + 1) return;
    watchdog.armAt(wakeMs, nowMs);
  }

  #leaveGroup(): void {
    const link = this.#link;
    if (link === undefined || this.#port === undefined) return;
    this.#link = undefined;
    link.leave(this.#port);
  }
}
