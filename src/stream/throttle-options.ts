/**
 * A Throttle's options: their types, the checks that need no parsing, and the
 * parsing of `rate`, `burst`, `peakRate` and `peakBurst` into a {@link Cap},
 * the stream's own bandwidth cap (TBF's rate and bucket, and its peak bucket).
 *
 * Invariants of a Cap: 0 < rate <= MAX_RATE; rate x 10 ms <= capacity <=
 * MAX_BURST (pacing.ts); with a peak, peakRate > rate and the peak bucket's
 * capacity <= the main one's (an explicit one also >= peakRate x 10 ms). A
 * group member's weight is in (0, MAX_WEIGHT], its guarantee at most its own
 * rate.
 * Everything here throws before a stream is made or a timer armed, and keeps
 * no state.
 */

import type { TransformOptions } from 'node:stream';
import type { Clock } from '../clock.js';
import { checkKnownOptions, describeValue, InvalidOptionError, InvalidRateError } from '../errors.js';
import {
  describeBytes,
  describeRate,
  parseRateOption,
  parseSizeOption,
  type RateInput,
  type SizeInput,
} from '../units.js';
import { type GroupHandle, kJoin } from './link.js';
import {
  checkBurst,
  checkBurstLimit,
  checkPeakBurst,
  checkRateLimit,
  defaultBurstBytes,
  defaultPeakBurstBytes,
} from './pacing.js';

/** The stream options a Throttle passes on to `Transform` (object mode and the simplified-constructor hooks are not among them). */
export type ThrottleStreamOptions = Pick<
  TransformOptions,
  | 'highWaterMark'
  | 'readableHighWaterMark'
  | 'writableHighWaterMark'
  | 'allowHalfOpen'
  | 'emitClose'
  | 'autoDestroy'
  | 'signal'
  | 'decodeStrings'
  | 'defaultEncoding'
  | 'encoding'
>;

const STREAM_KEYS = [
  'highWaterMark',
  'readableHighWaterMark',
  'writableHighWaterMark',
  'allowHalfOpen',
  'emitClose',
  'autoDestroy',
  'signal',
  'decodeStrings',
  'defaultEncoding',
  'encoding',
] as const;

/** The pacing options both forms take, `Throttle` and `WebThrottle`: the cap, the group and the share in it, the clock. */
export interface PacingOptions {
  /**
   * The sustained rate, bytes per second: a number or a string such as
   * `'1MiB/s'`, `'8mbit'`, `'100Mbps'`. Required, except for a member of a
   * `group`, where it is the member's own cap under the group's (omit it to
   * take whatever the group gives).
   */
  rate?: RateInput;
  /**
   * The bucket's capacity: the most bytes that pass at once after an idle
   * spell, and the largest piece. A number of bytes or a size such as `'64KiB'`.
   * Must be at least rate x 10 ms (`BurstTooSmallError` says the smallest that works).
   * @default rate x 100 ms, but at least 128 KiB (two 64 KiB chunks) where that is at most rate x 250 ms, and at least 1 KiB
   */
  burst?: SizeInput;
  /**
   * TBF's peak rate: how fast a burst itself may drain, bytes per second.
   * Must be above `rate`.
   * @default none (a burst drains as fast as the reader takes it)
   */
  peakRate?: RateInput;
  /**
   * The peak bucket's capacity (TBF's `mtu`): the most bytes that pass back to
   * back at the peak rate. At most `burst`, at least rate x 10 ms.
   * @default peakRate x 10 ms, at least 1 KiB, at most `burst`
   */
  peakBurst?: SizeInput;
  /** Share a cap with other streams (a `ThrottleGroup`): the group's rate bounds all its members together. */
  group?: GroupHandle;
  /**
   * A group member's share under contention relative to the other members and
   * subgroups of its group: a member of weight 2 gets twice the share of one of
   * weight 1 (its deficit round robin turn is scaled by it). A positive number.
   * @default 1
   */
  weight?: number;
  /**
   * A group member's guaranteed rate (HTB's `rate`): with data to send it gets
   * at least this much, whatever its siblings' weights; what it leaves unused
   * goes to the others. The guarantees in a group add up to at most its rate.
   * @default none
   */
  guaranteed?: RateInput;
  /** The time source. A member of a group uses the group's clock. @default systemClock */
  clock?: Clock;
}

/** Options for {@link Throttle}, the Node form: the pacing options and the `Transform` options that apply to bytes. */
export interface ThrottleOptions extends PacingOptions, ThrottleStreamOptions {
  /** Not supported: a Throttle paces bytes, and objects have no size. */
  objectMode?: false;
  /** Not supported, as `objectMode`. */
  readableObjectMode?: false;
  /** Not supported, as `objectMode`. */
  writableObjectMode?: false;
}

/** Options for `WebThrottle`, the WHATWG form: the pacing options, a signal, and the `TransformStream`'s strategies. */
export interface WebThrottleOptions extends PacingOptions {
  /** Aborting it errors the stream with the signal's reason; its timer is cleared and its group left. */
  signal?: AbortSignal;
  /** The writable side's queuing strategy (the `TransformStream` constructor's second argument). @default one chunk */
  writableStrategy?: QueuingStrategy<Uint8Array>;
  /** The readable side's queuing strategy (its third argument). @default none queued beyond the piece being read */
  readableStrategy?: QueuingStrategy<Uint8Array>;
}

/** A stream's own bandwidth cap, parsed: its rate and its bucket's capacity, and TBF's peak bucket if any; `burstExplicit`: the option was given. */
export interface Cap {
  ratePerSecond: number;
  capacityBytes: number;
  burstExplicit: boolean;
  peak: { ratePerSecond: number; capacityBytes: number; burstExplicit: boolean } | undefined;
}

/** Parses and checks rate, burst, peakRate and peakBurst together. */
export function resolveCap(rate: RateInput, burst?: SizeInput, peakRate?: RateInput, peakBurst?: SizeInput): Cap {
  const ratePerSecond = parseRateOption(rate, 'rate');
  checkRateLimit(ratePerSecond, rate);
  const capacityBytes = burst === undefined ? defaultBurstBytes(ratePerSecond) : parseSizeOption(burst, 'burst');
  checkBurstLimit(capacityBytes, burst);
  checkBurst(ratePerSecond, capacityBytes);
  let peak: Cap['peak'];
  if (peakRate !== undefined) {
    const peakPerSecond = parseRateOption(peakRate, 'peakRate');
    checkRateLimit(peakPerSecond, peakRate, 'peakRate');
    if (!(peakPerSecond > ratePerSecond)) {
      throw new InvalidOptionError(
        'peakRate',
        peakRate,
        `peakRate ${describeRate(peakPerSecond)} must be above rate ${describeRate(ratePerSecond)}: ` +
          'the peak bucket caps how fast a burst drains; to cap the rate itself, lower `rate`',
      );
    }
    let peakCapacityBytes: number;
    if (peakBurst === undefined) {
      peakCapacityBytes = Math.min(capacityBytes, defaultPeakBurstBytes(peakPerSecond));
    } else {
      peakCapacityBytes = parseSizeOption(peakBurst, 'peakBurst');
      if (peakCapacityBytes > capacityBytes) {
        throw new InvalidOptionError(
          'peakBurst',
          peakBurst,
          `peakBurst ${describeBytes(peakCapacityBytes)} must not exceed burst ${describeBytes(capacityBytes)}: ` +
            'a piece must fit both buckets; lower peakBurst or raise burst',
        );
      }
      checkPeakBurst(peakPerSecond, peakCapacityBytes, capacityBytes);
    }
    peak = { ratePerSecond: peakPerSecond, capacityBytes: peakCapacityBytes, burstExplicit: peakBurst !== undefined };
  } else if (peakBurst !== undefined) {
    throw new InvalidOptionError(
      'peakBurst',
      peakBurst,
      'peakBurst is the peak bucket of `peakRate`: set peakRate too',
    );
  }
  return { ratePerSecond, capacityBytes, burstExplicit: burst !== undefined, peak };
}

/** The most a weight may be: shares finer than a millionth are not worth a turn. */
export const MAX_WEIGHT = 1e6;

/** A `weight` option, checked: a finite number above 0, at most {@link MAX_WEIGHT}. */
export function parseWeight(weight: unknown): number {
  if (typeof weight === 'number' && Number.isFinite(weight) && weight > 0 && weight <= MAX_WEIGHT) return weight;
  throw new InvalidOptionError(
    'weight',
    weight,
    `invalid weight ${describeValue(weight)}: expected a number above 0 and at most ${MAX_WEIGHT} ` +
      "(a share relative to the siblings' weights; the default is 1)",
  );
}

/** A `guaranteed` option, parsed: a rate, or 0 for none. */
export function parseGuaranteed(guaranteed: RateInput): number {
  if (guaranteed === 0) return 0;
  const ratePerSecond = parseRateOption(guaranteed, 'guaranteed');
  checkRateLimit(ratePerSecond, guaranteed, 'guaranteed');
  return ratePerSecond;
}

/** Throws if a guaranteed rate is above the rate its own class may send at. */
export function checkGuaranteedBelow(guaranteedPerSecond: number, ratePerSecond: number, input: unknown): void {
  if (guaranteedPerSecond <= ratePerSecond) return;
  throw new InvalidOptionError(
    'guaranteed',
    input,
    `guaranteed ${describeRate(guaranteedPerSecond)} is above its own rate ${describeRate(ratePerSecond)}: ` +
      'a rate of its own is a ceiling, never passed; lower guaranteed or raise rate',
  );
}

/** A value Node accepts as a signal: an object with a boolean `aborted` and `addEventListener`. */
function isAbortSignal(value: unknown): value is AbortSignal {
  if (value === null || typeof value !== 'object') return false;
  const candidate = value as Partial<AbortSignal>;
  return typeof candidate.aborted === 'boolean' && typeof candidate.addEventListener === 'function';
}

/** Every option a Throttle reads, and the Transform options it passes on (the object modes are refused below). */
const THROTTLE_OPTIONS: ReadonlySet<string> = new Set([
  'rate',
  'burst',
  'peakRate',
  'peakBurst',
  'group',
  'weight',
  'guaranteed',
  'clock',
  'signal',
  'highWaterMark',
  'readableHighWaterMark',
  'writableHighWaterMark',
  'allowHalfOpen',
  'emitClose',
  'autoDestroy',
  'decodeStrings',
  'defaultEncoding',
  'encoding',
  'objectMode',
  'readableObjectMode',
  'writableObjectMode',
]);

/** Every option a WebThrottle reads. */
const WEB_THROTTLE_OPTIONS: ReadonlySet<string> = new Set([
  'rate',
  'burst',
  'peakRate',
  'peakBurst',
  'group',
  'weight',
  'guaranteed',
  'clock',
  'signal',
  'writableStrategy',
  'readableStrategy',
]);

/** Peers' names for our options, and what to write instead. */
const PEER_NAMES = {
  bps: 'write `rate` (bytes per second, or a string such as "1MiB/s")',
  chunksize: 'remove it: a Throttle splits chunks itself, never into pieces larger than `burst`',
  transform: 'a Throttle is its own transform: pipe it into a Transform of yours instead',
  flush: 'a Throttle is its own transform: pipe it into a Transform of yours instead',
};

const NODE_ONLY =
  'a Node stream option; a WebThrottle takes `writableStrategy` and `readableStrategy` ({ highWaterMark })';

/** Node stream options given to a WebThrottle, and what to write instead. */
const WEB_NAMES = {
  ...PEER_NAMES,
  highWaterMark: NODE_ONLY,
  readableHighWaterMark: NODE_ONLY,
  writableHighWaterMark: NODE_ONLY,
  objectMode: 'remove it: a WebThrottle passes Uint8Array chunks',
};

/**
 * Checks the options that need no parsing, for the Node form (`Throttle`) or
 * the WHATWG one (`WebThrottle`); returns the group, if any. Nothing is made
 * or armed yet.
 */
export function checkOptions(
  options: ThrottleOptions | WebThrottleOptions,
  form: 'Throttle' | 'WebThrottle' = 'Throttle',
): GroupHandle | undefined {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'expected an options object such as { rate: "1MiB/s" }');
  }
  if (form === 'Throttle') {
    checkKnownOptions(options, THROTTLE_OPTIONS, 'Throttle options', PEER_NAMES);
    checkObjectModes(options as ThrottleOptions);
  } else {
    checkKnownOptions(options, WEB_THROTTLE_OPTIONS, 'WebThrottle options', WEB_NAMES);
  }
  const signal: unknown = options.signal;
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw new InvalidOptionError(
      'signal',
      signal,
      'expected `signal` to be an AbortSignal (pass `controller.signal`, not the AbortController)',
    );
  }
  const group: unknown = options.group;
  if (group !== undefined && (group === null || typeof (group as Partial<GroupHandle>)[kJoin] !== 'function')) {
    throw new InvalidOptionError('group', group, 'expected `group` to be a ThrottleGroup');
  }
  if (group === undefined) {
    for (const key of ['weight', 'guaranteed'] as const) {
      if (options[key] !== undefined) {
        throw new InvalidOptionError(
          key,
          options[key],
          `${key} is a share in a group: a lone ${form} has none; pass \`group\`, or use \`rate\` for a cap`,
        );
      }
    }
  }
  return group as GroupHandle | undefined;
}

/** Throws for an object mode: a Throttle paces bytes (one byte, one token). */
function checkObjectModes(options: ThrottleOptions): void {
  for (const key of ['objectMode', 'readableObjectMode', 'writableObjectMode'] as const) {
    if (options[key]) {
      throw new InvalidOptionError(
        key,
        options[key],
        `${key} is not supported: a Throttle paces bytes (one byte, one token), and objects have no size; ` +
          'pipe Buffers or strings, or pace objects with a Scheduler and a cost per object',
      );
    }
  }
}

/** The member's own cap from rate, burst, peakRate and peakBurst (undefined: a group member without one). */
export function ownCap(options: PacingOptions, group: GroupHandle | undefined): Cap | undefined {
  if (options.rate !== undefined) return resolveCap(options.rate, options.burst, options.peakRate, options.peakBurst);
  if (group === undefined) {
    throw new InvalidRateError(
      undefined,
      'a Throttle needs a `rate` (bytes per second, e.g. "1MiB/s"), or a `group` whose cap it shares',
    );
  }
  for (const key of ['burst', 'peakRate', 'peakBurst'] as const) {
    if (options[key] !== undefined) {
      throw new InvalidOptionError(
        key,
        options[key],
        `${key} applies to the member's own cap: set \`rate\` too, or set the group's ${key === 'burst' ? 'burst' : 'rate'}`,
      );
    }
  }
  return undefined;
}

/** The `Transform` options among ours (the signal is attached later, by the constructor). */
export function transformOptions(options: ThrottleOptions): TransformOptions {
  const streamOptions: TransformOptions = {};
  for (const key of STREAM_KEYS) {
    if (key !== 'signal' && options[key] !== undefined) (streamOptions as Record<string, unknown>)[key] = options[key];
  }
  return streamOptions;
}
