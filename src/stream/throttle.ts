/**
 * Throttle: the Node `Transform` form of a throttled byte stream. The pacing
 * (TBF's buckets, runs, wake pieces, group membership) is the engine's
 * (engine.ts), shared with the WHATWG form (web-throttle.ts); this file binds
 * it to `Transform`'s hooks.
 *
 * `_transform` hands each chunk to the engine, which holds its callback until
 * all of it has been pushed, so the source is paused by ordinary backpressure
 * and nothing is buffered beyond that chunk. `push()` returning false (a full
 * readable side) stops a chunk mid-way until `_read()`. After `destroy()` (an
 * aborted `signal`, a failed `pipeline`) no timer is armed and nothing more
 * is pushed.
 */

import { addAbortSignal, Transform, type TransformCallback } from 'node:stream';
import type { RateInput, SizeInput } from '../units.js';
import type { ThrottleCounters } from './counters.js';
import { ThrottleEngine } from './engine.js';
import type { GroupHandle } from './link.js';
import { checkOptions, type ThrottleOptions, transformOptions } from './throttle-options.js';

/**
 * A bandwidth cap for a byte stream: a `Transform` that passes bytes through
 * unchanged at no more than `rate` bytes per second, with bursts of up to
 * `burst` bytes.
 *
 * @example
 * await pipeline(response.body, new Throttle({ rate: '1MiB/s' }), createWriteStream(file));
 */
export class Throttle<Options extends ThrottleOptions = ThrottleOptions> extends Transform {
  readonly #engine: ThrottleEngine;

  constructor(options: Options) {
    const group = checkOptions(options);
    super(transformOptions(options));
    this.#engine = new ThrottleEngine(options, group, {
      stream: this,
      deliver: (piece) => this.push(piece),
      writtenBytes: () => this.writableLength,
      writerEnded: () => this.writableEnded,
      end: () => {
        if (!this.writableEnded && !this.destroyed) this.end();
      },
      destroy: (error) => {
        this.destroy(error);
      },
    });
    // The signal is attached last: one already aborted destroys the stream at
    // once, which must not happen before our fields exist. checkOptions has
    // made sure it is a signal.
    if (options.signal !== undefined) addAbortSignal(options.signal, this);
  }

  /** The own sustained rate, bytes per second (undefined for a group member without a cap of its own). */
  get rate(): number | undefined {
    return this.#engine.cap?.ratePerSecond;
  }

  /**
   * The own burst, bytes: always there for a Throttle given a `rate` (typed `number` then), undefined
   * for a group member without a cap of its own.
   */
  get burst(): Options extends { rate: RateInput } ? number : number | undefined {
    return this.#engine.cap?.capacityBytes as Options extends { rate: RateInput } ? number : number | undefined;
  }

  /** The peak rate, bytes per second, if one is set. */
  get peakRate(): number | undefined {
    return this.#engine.cap?.peak?.ratePerSecond;
  }

  /** The peak bucket's capacity, bytes, if a peak rate is set. */
  get peakBurst(): number | undefined {
    return this.#engine.cap?.peak?.capacityBytes;
  }

  /** The group this stream shares a cap with (a `ThrottleGroup`), if any. */
  get group(): GroupHandle | undefined {
    return this.#engine.group;
  }

  /** A group member's weight (1 by default; undefined for a lone Throttle). */
  get weight(): number | undefined {
    return this.#engine.weight;
  }

  /** A group member's guaranteed rate, bytes per second (0: none; undefined for a lone Throttle). */
  get guaranteed(): number | undefined {
    return this.#engine.guaranteed;
  }

  /**
   * Changes a group member's weight from its next turn on. Throws
   * `InvalidOptionError` for a weight that is not a number above 0, or on a
   * lone Throttle.
   */
  setWeight(weight: number): void {
    this.#engine.setWeight(weight);
  }

  /**
   * Changes a group member's guaranteed rate (0: none) from its next turn on.
   * Throws `InvalidOptionError`, changing nothing, if the guarantees in a
   * group above it would add up to more than its rate, or if it is above the
   * member's own rate.
   */
  setGuaranteed(guaranteed: RateInput): void {
    this.#engine.setGuaranteed(guaranteed);
  }

  /** Progress: bytes passed, time spent waiting, current and average rate. A fresh snapshot on each read. */
  get counters(): ThrottleCounters {
    return this.#engine.counters;
  }

  /**
   * Changes the rate from the next piece on; no data is lost. The tokens in
   * the bucket are kept, capped at the new burst (Linux's `tbf_change` refills
   * the bucket instead; we hand out no burst on a change). A default burst follows the new
   * rate; an explicit burst too small for it throws `BurstTooSmallError` and
   * changes nothing. On a group member this sets (or changes) its own cap.
   */
  setRate(rate: RateInput): void {
    this.#engine.setRate(rate);
  }

  /**
   * Changes the burst from the next piece on; tokens above a smaller burst
   * are dropped. Throws `BurstTooSmallError` (and changes nothing) if the new
   * burst cannot sustain the rate.
   */
  setBurst(burst: SizeInput): void {
    this.#engine.setBurst(burst);
  }

  override _transform(chunk: Buffer | string, encoding: BufferEncoding, callback: TransformCallback): void {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk;
    if (this.#engine.write(bytes, callback)) callback();
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
    this.#engine.writerEnded();
    return this;
  }

  override _read(size: number): void {
    this.#engine.readResumed();
    super._read(size);
  }

  override _flush(callback: TransformCallback): void {
    this.#engine.flush();
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const held = this.#engine.destroy();
    callback(error);
    // Release the write we held back, as a core stream completes its pending
    // write: Node then calls its callback and fails the queued ones with
    // ERR_STREAM_DESTROYED. Nothing is pushed: the stream is destroyed.
    if (held !== undefined) process.nextTick(held);
  }
}
