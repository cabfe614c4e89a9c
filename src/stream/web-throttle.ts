/**
 * WebThrottle: the WHATWG `TransformStream` form of `Throttle`, for `fetch`
 * bodies (`res.body.pipeThrough(...)`, an upload's `body`), `Blob.stream()`,
 * and runtimes whose streams are Web streams. The pacing is the engine's
 * (engine.ts), the same as the Node form's: the same bound (no window sees
 * more than burst + rate * T), splitting (no piece larger than the burst),
 * counters, live changes and group membership, fair with Node members.
 *
 * Backpressure: `transform()` settles once the last of its chunk has passed,
 * so the writable side's next chunk waits (the stream's own strategies hold
 * the rest). Pieces of the chunk being paced go to the readable side as they
 * conform: views on that chunk, no copy; a `TransformStream` gives its
 * transformer no word when its reader takes a piece, so a reader that stops
 * finds at most the rest of that one chunk queued, and the next chunk is not
 * taken before it reads again.
 *
 * Invariants: chunks are `Uint8Array`s (anything else errors the stream with
 * `NotSupportedError`); after a cancel, an abort of `signal` or an error, no
 * timer is armed, the group is left, and nothing more is enqueued.
 */

import { describeValue, NotSupportedError } from '../errors.js';
import type { RateInput, SizeInput } from '../units.js';
import type { ThrottleCounters } from './counters.js';
import { type StreamHost, ThrottleEngine } from './engine.js';
import type { GroupHandle } from './link.js';
import { checkOptions, type WebThrottleOptions } from './throttle-options.js';

function isBytes(chunk: unknown): chunk is Uint8Array {
  return chunk instanceof Uint8Array || Object.prototype.toString.call(chunk) === '[object Uint8Array]';
}

function notBytes(chunk: unknown): NotSupportedError {
  const hint =
    typeof chunk === 'string'
      ? 'pipe text through `new TextEncoderStream()` first'
      : chunk instanceof ArrayBuffer || ArrayBuffer.isView(chunk)
        ? 'wrap it as `new Uint8Array(buffer)` (a view, no copy)'
        : 'a WebThrottle paces bytes; pace objects with a Scheduler and a cost per object';
  return new NotSupportedError(`WebThrottle passes Uint8Array chunks only, got ${describeValue(chunk)}: ${hint}`);
}

/**
 * A bandwidth cap for a byte stream in the WHATWG form: a `TransformStream`
 * of `Uint8Array`s that passes them unchanged at no more than `rate` bytes
 * per second, with bursts of up to `burst` bytes. The same options and
 * numbers as `Throttle`, the Node form; a member of a `ThrottleGroup` comes
 * from `group.webThrottle(options)` (or `new WebThrottle({ group })`).
 *
 * @example
 * const res = await fetch(url);
 * await res.body.pipeThrough(new WebThrottle({ rate: '1MiB/s' })).pipeTo(Writable.toWeb(createWriteStream(file)));
 */
export class WebThrottle<Options extends WebThrottleOptions = WebThrottleOptions> extends TransformStream<
  Uint8Array,
  Uint8Array
> {
  readonly #engine: ThrottleEngine;
  readonly #controller: TransformStreamDefaultController<Uint8Array>;
  /** The writer has closed (flush ran), or the group ended this member: nothing more is taken. */
  #ended = false;
  /** The pending `transform()`'s promise is settled through this; undefined while none is held. */
  #release: (() => void) | undefined;
  /** The chunk being transformed passed whole before `transform()` returned. */
  #passedNow = false;
  /** A flush waiting for the held chunk (a group's `endAll` ends a member that still holds one). */
  #terminateWhenPassed = false;

  constructor(options: Options) {
    const group = checkOptions(options, 'WebThrottle');
    let controller: TransformStreamDefaultController<Uint8Array> | undefined;
    super(
      {
        start: (c) => {
          controller = c;
        },
        transform: (chunk) => (this as WebThrottle).#transform(chunk),
        flush: () => (this as WebThrottle).#flush(),
        cancel: (reason) => (this as WebThrottle).#stop(reason, false),
      },
      options.writableStrategy,
      options.readableStrategy,
    );
    this.#controller = controller as TransformStreamDefaultController<Uint8Array>;
    this.#engine = new ThrottleEngine(options, group, this.#host());
    const signal = options.signal;
    if (signal !== undefined) {
      if (signal.aborted) this.#stop(signal.reason, true);
      else signal.addEventListener('abort', () => this.#stop(signal.reason, true), { once: true });
    }
  }

  #host(): StreamHost {
    return {
      stream: this,
      deliver: (piece) => {
        try {
          this.#controller.enqueue(piece);
        } catch (error) {
          this.#stop(error, false); // the readable side was cancelled or errored meanwhile
        }
        return true; // a TransformStream says nothing when its reader takes a piece (see the file's opening comment)
      },
      writtenBytes: () => 0,
      writerEnded: () => this.#ended,
      end: () => this.#endFromGroup(),
      destroy: (error) =>
        this.#stop(error ?? new NotSupportedError('this WebThrottle was destroyed by its group'), true),
    };
  }

  readonly #chunkPassed = (): void => {
    const release = this.#release;
    if (release === undefined) {
      this.#passedNow = true;
      return;
    }
    this.#release = undefined;
    release();
    if (this.#terminateWhenPassed) this.#terminate();
  };

  #transform(chunk: Uint8Array): Promise<void> | undefined {
    if (!isBytes(chunk)) throw notBytes(chunk);
    if (this.#ended || this.#engine.destroyed) return undefined;
    this.#passedNow = false;
    if (this.#engine.write(chunk, this.#chunkPassed) || this.#passedNow) return undefined;
    return new Promise<void>((resolve) => {
      this.#release = resolve;
    });
  }

  #flush(): void {
    this.#ended = true;
    this.#engine.flush();
  }

  /** `ThrottleGroup.endAll`: the member takes no more; what it holds still passes, then its readable side closes. */
  #endFromGroup(): void {
    if (this.#ended || this.#engine.destroyed) return;
    this.#ended = true;
    if (this.#release === undefined) this.#terminate();
    else {
      this.#terminateWhenPassed = true;
      this.#engine.writerEnded();
    }
  }

  #terminate(): void {
    this.#engine.flush();
    try {
      this.#controller.terminate();
    } catch {
      // already closed or errored
    }
  }

  /** Cancelled, aborted or destroyed: the engine stops (timer cleared, group left); the held write is let go. */
  #stop(reason: unknown, error: boolean): void {
    if (this.#engine.destroyed) return;
    this.#ended = true;
    this.#engine.destroy();
    if (error) {
      try {
        this.#controller.error(reason);
      } catch {
        // already errored
      }
    }
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }

  /** The own sustained rate, bytes per second (undefined for a group member without a cap of its own). */
  get rate(): number | undefined {
    return this.#engine.cap?.ratePerSecond;
  }

  /** The own burst, bytes (a `number` wherever a `rate` was given). */
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

  /** The group this stream shares a cap with, if any. */
  get group(): GroupHandle | undefined {
    return this.#engine.group;
  }

  /** A group member's weight (undefined for a lone WebThrottle). */
  get weight(): number | undefined {
    return this.#engine.weight;
  }

  /** A group member's guaranteed rate, bytes per second (undefined for a lone WebThrottle). */
  get guaranteed(): number | undefined {
    return this.#engine.guaranteed;
  }

  /** Progress: bytes passed, time spent waiting, current and average rate. A fresh snapshot on each read. */
  get counters(): ThrottleCounters {
    return this.#engine.counters;
  }

  /** As `Throttle.setRate`: from the next piece on, no data lost, tokens kept (capped at the new burst). */
  setRate(rate: RateInput): void {
    this.#engine.setRate(rate);
  }

  /** As `Throttle.setBurst`. */
  setBurst(burst: SizeInput): void {
    this.#engine.setBurst(burst);
  }

  /** As `Throttle.setWeight` (a group member only). */
  setWeight(weight: number): void {
    this.#engine.setWeight(weight);
  }

  /** As `Throttle.setGuaranteed` (a group member only). */
  setGuaranteed(guaranteed: RateInput): void {
    this.#engine.setGuaranteed(guaranteed);
  }
}
