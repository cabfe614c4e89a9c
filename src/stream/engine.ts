/**
 * The pacing engine of one throttled byte stream, whatever its form: a Node
 * `Transform` (throttle.ts) or a WHATWG `TransformStream` (web-throttle.ts)
 * hands it each written chunk and a way to pass pieces on (a {@link StreamHost}),
 * and it passes them like Linux's Token Bucket Filter. A flow obeys TBF with
 * rate R and depth B if, for any interval of length T, the bytes passed do
 * not exceed B + R * T (sch_tbf.c). One byte costs one token; the bucket
 * starts full. With `peakRate`, a piece must also conform to TBF's second
 * bucket (peakRate, peakBurst). In a `ThrottleGroup`, a member passes its own
 * cap first, then the group's (group.ts).
 *
 * A chunk is held until all of it has been passed (its `done` runs then), so
 * the writer is paused by its form's ordinary backpressure and nothing is
 * buffered beyond that chunk. What conforms passes now; for the rest the
 * engine sleeps on one timer (timer.ts's Watchdog) for a wake piece (pacing.ts).
 *
 * Invariants: no piece is larger than the burst; every piece is taken at a
 * clock read before it is passed on and done with at one after (so the bound
 * holds wherever in `deliver()` the reader receives it; meters/byte-meter.ts);
 * nothing is dropped, reordered or duplicated; a reader that reports itself
 * full holds the rest until {@link ThrottleEngine.readResumed}; after
 * {@link ThrottleEngine.destroy} no timer is armed and nothing more is passed.
 * docs/internals/streams.md gives the reasoning (runs, early wake-ups, the
 * peak bucket, the two forms).
 */

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
  ownCap,
  type PacingOptions,
  parseGuaranteed,
  parseWeight,
  resolveCap,
} from './throttle-options.js';

/** What a stream form gives its engine. */
export interface StreamHost {
  /** The public stream (what `tokenpace:stream:wait` names). */
  readonly stream: object;
  /** Passes `piece` to the reader; false when the reader's buffer is full (the engine then waits for {@link ThrottleEngine.readResumed}). */
  deliver(piece: Uint8Array): boolean;
  /** Bytes written and not passed yet, the held chunk counted whole (Node's `writableLength`); 0 when the form cannot tell. */
  writtenBytes(): number;
  /** True once the writer has ended: nothing more will come than what is written. */
  writerEnded(): boolean;
  /** Ends the writable side (`ThrottleGroup.endAll`): what it holds still passes. */
  end(): void;
  /** Destroys the stream (`ThrottleGroup.destroyAll`), with `error` if given. */
  destroy(error?: Error): void;
  /**
   * Runs `fn` once the form's chunks stop coming back to back, where a run
   * ends (see the engine's #beginRun): a Node stream hands chunks over in one
   * synchronous stretch, so the next microtask (the default); a Web stream in
   * promise reactions, so the end of the event loop's turn.
   */
  readonly endOfStretch?: (fn: () => void) => void;
}

function wakePieceFor(cap: Cap, lateMs: number): number {
  const piece = wakePieceBytes(cap.ratePerSecond, cap.capacityBytes, lateMs);
  return cap.peak === undefined ? piece : Math.max(1, Math.min(piece, cap.peak.capacityBytes / 2));
}

/**
 * The most a run (see {@link ThrottleEngine}'s #beginRun) passes without reading the clock,
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

/** The engine of one throttled stream; see the file's opening comment. */
export class ThrottleEngine {
  readonly #host: StreamHost;
  readonly clock: Clock;
  readonly #progress = new Progress();
  #cap: Cap | undefined;
  #meter: ByteMeter | undefined;
  #wakePieceBytes = 1;
  readonly group: GroupHandle | undefined;
  #link: GroupLink | undefined;
  readonly #port: MemberPort | undefined;
  /** The chunk being passed, the bytes of it already passed, and what runs once it has passed whole. */
  #chunk: Uint8Array | undefined;
  #offset = 0;
  #done: (() => void) | undefined;
  /** Our one timer, armed while the own cap is short. */
  readonly #watchdog: Watchdog;
  /** True from a wait for the own cap until the next byte passes (what the group's `heldByCap` reports). */
  #heldByCap = false;
  /** True while a loop is passing pieces: a chunk handed over synchronously is picked up by that loop. */
  #pumping = false;
  /** The current run (see #beginRun): bytes it may still pass without a clock read, and bytes it passed, not yet charged. */
  #runSpare = 0;
  #runBytes = 0;
  /** The most a run passes without a clock read: {@link RUN_MS} of the rate, at least {@link RUN_FLOOR_BYTES}. */
  #runLimitBytes = 1;
  #runScheduled = false;
  /** The reader reported itself full in the middle of a chunk; the rest waits for {@link readResumed}. */
  #awaitingRead = false;
  /** Set by {@link destroy}: nothing more is passed. */
  #destroyed = false;
  /** Where the current run ends (see {@link StreamHost.endOfStretch}). */
  readonly #endOfStretch: (fn: () => void) => void;

  /** Checks and applies `options` (parsed by throttle-options.ts's checkOptions); joins the group, if any. */
  constructor(options: PacingOptions, group: GroupHandle | undefined, host: StreamHost) {
    const cap = ownCap(options, group);
    this.#host = host;
    this.#endOfStretch = host.endOfStretch ?? ((fn) => queueMicrotask(fn));
    this.group = group;
    let link: GroupLink | undefined;
    if (group !== undefined) {
      const weight = options.weight === undefined ? 1 : parseWeight(options.weight);
      const guaranteed = options.guaranteed === undefined ? 0 : parseGuaranteed(options.guaranteed);
      if (cap !== undefined) checkGuaranteedBelow(guaranteed, cap.ratePerSecond, options.guaranteed);
      this.#port = this.#makePort(weight, guaranteed);
      link = this.#joinGroup(group, this.#port, options.clock);
    }
    this.clock = link?.clock ?? options.clock ?? systemClock;
    this.#watchdog = new Watchdog(this.clock, (latenessChanged) => this.#onWake(latenessChanged));
    if (cap !== undefined) this.#applyCap(cap, undefined);
  }

  /** The port the group sees of this member (see link.ts). */
  #makePort(weight: number, guaranteedPerSecond: number): MemberPort {
    const host = this.#host;
    return makePort({
      weight,
      guaranteedPerSecond,
      holdsBack: () => false,
      dropped: () => {},
      pendingBytes: () => this.#pendingBytes(),
      ended: () => host.writerEnded(),
      end: () => host.end(),
      destroy: (error) => host.destroy(error),
      capped: () => this.#meter !== undefined,
      heldByCap: () => this.#heldByCap,
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

  /** The own cap (undefined for a group member without one). */
  get cap(): Cap | undefined {
    return this.#cap;
  }

  /** A group member's weight (undefined for a lone stream). */
  get weight(): number | undefined {
    return this.#port?.weight;
  }

  /** A group member's guaranteed rate, bytes per second (undefined for a lone stream). */
  get guaranteed(): number | undefined {
    return this.#port?.guaranteedPerSecond;
  }

  /** See `Throttle.setWeight`. */
  setWeight(weight: number): void {
    const port = this.#sharePort('weight', weight);
    this.#link?.reweigh(port, parseWeight(weight), port.guaranteedPerSecond);
  }

  /** See `Throttle.setGuaranteed`. */
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
        `${option} is a share in a group: this stream is not in one (or has left it)`,
      );
    }
    return port;
  }

  /** Progress: a fresh snapshot. */
  get counters(): ThrottleCounters {
    const nowMs = this.clock.now();
    this.#endRun(nowMs);
    return this.#progress.snapshot(nowMs);
  }

  /** See `Throttle.setRate`. */
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

  /** See `Throttle.setBurst`. */
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
    const nowMs = this.clock.now();
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

  /**
   * A chunk was written. Returns true if it passed whole at once (`done` is
   * then not called); otherwise the engine holds it and calls `done` once the
   * last of it has passed (possibly before this returns).
   */
  write(bytes: Uint8Array, done: () => void): boolean {
    const length = bytes.length;
    if (length === 0) return true;
    if (!this.#pumping) {
      // The fast path: the whole chunk conforms now. Within a run (see
      // #beginRun), a chunk the tokens known at the run's clock read still
      // cover passes without reading the clock; it is charged when the run ends.
      if (length <= this.#runSpare) {
        this.#runSpare -= length;
        this.#runBytes += length;
        this.#host.deliver(bytes);
        return true;
      }
      // Otherwise it is taken at a clock read now, and done with at one once
      // it has passed (see meters/byte-meter.ts), which a lone stream starts a run at.
      const nowMs = this.clock.now();
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
        this.#heldByCap = false;
        this.#host.deliver(bytes);
        const doneMs = this.clock.now();
        meter?.done(doneMs, length);
        if (link !== undefined) link.done(doneMs, length);
        else this.#beginRun(doneMs);
        return true;
      }
    }
    this.#chunk = bytes;
    this.#offset = 0;
    this.#done = done;
    if (!this.#pumping) this.#pump();
    return false;
  }

  /**
   * The writer has ended: a stream asleep for a whole wake piece needs only
   * what it holds, so the wait is planned again.
   */
  writerEnded(): void {
    if (this.#watchdog.armed && !this.#pumping) {
      this.#watchdog.disarm();
      this.#pump();
    } else if (this.#port?.inRing) {
      this.#link?.replan();
    }
  }

  /** The reader takes more again (after `deliver` returned false). */
  readResumed(): void {
    if (this.#awaitingRead) {
      this.#awaitingRead = false;
      if (!this.#pumping) this.#pump();
    }
  }

  /** Everything written has passed and the writer has ended: counters stop, and the group is left. */
  flush(): void {
    const nowMs = this.clock.now();
    this.#endRun(nowMs);
    this.#progress.endedAtMs = nowMs;
    this.#leaveGroup();
  }

  /**
   * The stream is destroyed: the timer is cleared, the group left, nothing
   * more is passed. Returns the held chunk's `done`, if any, for the form to
   * release its write as it sees fit.
   */
  destroy(): (() => void) | undefined {
    this.#destroyed = true;
    const nowMs = this.clock.now();
    this.#endRun(nowMs);
    this.#progress.stopWaiting(nowMs);
    this.#watchdog.disarm();
    this.#leaveGroup();
    const held = this.#done;
    this.#chunk = undefined;
    this.#done = undefined;
    return held;
  }

  /** True once {@link destroy} ran. */
  get destroyed(): boolean {
    return this.#destroyed;
  }

  /**
   * Starts a run at the clock read `nowMs` (a lone stream's fast path): the
   * tokens the bucket holds now are a lower bound for the rest of this
   * synchronous stretch of the event loop (refill only adds), so chunks
   * handed over before it ends pass against them without a clock read. Their
   * bytes are charged once, when the run ends (a microtask, for a Web stream
   * the end of the event loop's turn, or the next clock read, whichever comes
   * first: a read after they have passed, as
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
      this.#endOfStretch(this.#runEnds);
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
    else this.#endRun(this.clock.now());
  };

  /**
   * Passes what conforms of the held chunk (and of chunks handed over behind
   * it) at one clock read; sleeps for the rest. Each piece is done with at a
   * clock read once it has passed (meters/byte-meter.ts).
   */
  #pump(): void {
    this.#pumping = true;
    try {
      const nowMs = this.clock.now();
      this.#endRun(nowMs);
      this.#progress.start(nowMs);
      for (;;) {
        const chunk = this.#chunk;
        if (chunk === undefined || this.#destroyed || this.#awaitingRead) return;
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
        this.#passPiece(nowMs, allowed);
        const doneMs = this.clock.now();
        meter?.done(doneMs, allowed);
        if (link !== undefined && port !== undefined) link.done(doneMs, allowed);
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** Passes the next `bytes` of the held chunk; finishing the chunk releases its `done`. */
  #passPiece(nowMs: number, bytes: number): void {
    const chunk = this.#chunk as Uint8Array;
    const offset = this.#offset;
    this.#meter?.take(nowMs, bytes);
    this.#progress.record(nowMs, bytes);
    this.#heldByCap = false;
    const end = offset + bytes;
    if (end >= chunk.length) {
      const done = this.#done as () => void;
      this.#chunk = undefined;
      this.#done = undefined;
      this.#offset = 0;
      this.#host.deliver(offset === 0 ? chunk : chunk.subarray(offset));
      done(); // the form may hand over the next queued chunk right here
    } else {
      this.#offset = end;
      if (!this.#host.deliver(chunk.subarray(offset, end))) this.#awaitingRead = true;
    }
  }

  /**
   * The piece to sleep for: the wake piece (pacing.ts), whatever the chunk
   * size, so chunks handed over between wake-ups pass on the tokens already
   * earned. Once the writer has ended, only what is left, if less.
   */
  #wakeTarget(): number {
    return this.#host.writerEnded() ? Math.min(this.#pendingBytes(), this.#wakePieceBytes) : this.#wakePieceBytes;
  }

  #pendingBytes(): number {
    const chunk = this.#chunk;
    if (chunk === undefined || this.#destroyed) return 0;
    return Math.max(this.#host.writtenBytes(), chunk.length) - this.#offset;
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
        if (chunk === undefined || this.#destroyed || this.#awaitingRead) break;
        const bytes = Math.min(chunk.length - this.#offset, limit - sent);
        this.#passPiece(nowMs, bytes);
        sent += bytes;
      }
    } finally {
      this.#pumping = wasPumping;
    }
    if (sent > 0) this.#meter?.done(this.clock.now(), sent);
    if (this.#chunk !== undefined && !this.#destroyed) this.#progress.waiting(nowMs);
    return sent;
  }

  /**
   * Arms the one timer for about the instant `dueMs`: whole milliseconds, at
   * least 1 ms from now, and no earlier than {@link EARLY_WAKE_MS} before it
   * (docs/internals/streams.md says why a wake-up a little early is welcome).
   */
  #armWake(nowMs: number, dueMs: number): void {
    this.#heldByCap = true;
    this.#progress.waiting(nowMs);
    if (streamWaitChannel.hasSubscribers) {
      streamWaitChannel.publish({ stream: this.#host.stream, waitMs: dueMs - nowMs });
    }
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
