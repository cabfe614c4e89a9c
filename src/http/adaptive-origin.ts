/**
 * throttleInterceptor's `adaptive` option: each origin's rate is learned from
 * its answers by ../scheduler/aimd.ts and applied to the origin's Scheduler
 * (`setRate`, burst 1). An advertised policy (RateLimit-Policy, or the older
 * RateLimit-Limit / X-RateLimit-Limit with a window) is adopted: the rate
 * pinned at quota / window and, unless the caller gave a window of its own, a
 * window limit of the quota (`setWindow`). A window longer than `maxPause` is
 * followed in windows of `maxPause`, each allowing the quota scaled to it
 * (at least 1): the same average, in smaller bursts, so that no request
 * waits on it longer than `maxPause` (1000 a day, with the default 5 min: 3
 * per 5 min). What the answers say is left of the quota is spent, no more
 * (./server-budget.ts). Every rate change is told to the interceptor's `rate`
 * listeners and on `tokenpace:http:client:rate`.
 *
 * Invariants: a learned origin is kept `keep` after its last use (within
 * `maxOrigins`), so a client that comes back within it resumes at the rate it
 * learned; the rate never leaves [min, max]; an adopted window is at most
 * `maxPause` long.
 */

import { clientRateChannel } from '../diagnostics.js';
import { InvalidOptionError } from '../errors.js';
import { rateParam } from '../meters/bucket.js';
import { Aimd, type AimdBounds, type RateChange } from '../scheduler/aimd.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import { type DurationInput, parseDuration, type RateInput } from '../units.js';
import { type AdvertisedPolicy, advertisedPolicy, fieldValue, parseRateLimit, quotaLeft } from './headers.js';
import type { ClientRateMessage } from './messages.js';
import { ServerBudget } from './server-budget.js';

/** Options of `adaptive`: the bounds of the learned rate, and how long it is kept. */
export interface AdaptiveOptions {
  /** The least rate it goes down to. @default 0.5 (per second) */
  min?: RateInput;
  /** The most rate it goes up to. @default Infinity */
  max?: RateInput;
  /** Where it starts. @default the `rate` option, else 10 (per second) */
  initial?: RateInput;
  /** How long an idle origin's learned rate is kept (within `maxOrigins`). @default '10min' */
  keep?: DurationInput;
}

/** An origin's answer, as {@link AdaptiveOrigin.answered} reads it. */
export interface OriginAnswer {
  /** The sequence number of the request it answers (from {@link AdaptiveOrigin.sent}). */
  readonly seq: number;
  /** When it arrived, ms (the interceptor's clock). */
  readonly nowMs: number;
  readonly statusCode: number;
  readonly headers: Headers;
  /** Its status is one of `pauseOn`. */
  readonly refused: boolean;
  /** The wall-clock time, ms since the Unix epoch: for a reset sent as a Unix time, on an answer without `Date`. */
  readonly wallMs: number;
}

/** What one origin's learning is made of. */
export interface AdaptiveOriginParts {
  readonly origin: string;
  readonly scheduler: Scheduler;
  readonly settings: AdaptiveSettings;
  /** When the origin is first used, ms. */
  readonly nowMs: number;
  /** The longest the origin's answers may hold it (`maxPause`), ms: an adopted window is no longer. */
  readonly maxPauseMs: number;
  /** Told every rate change. */
  readonly notify: (info: RateChangeInfo) => void;
}

/** `adaptive`, parsed. @internal */
export interface AdaptiveSettings {
  readonly bounds: AimdBounds;
  readonly keepMs: number;
}

type Headers = Record<string, string | string[] | undefined>;

/** What a `rate` listener receives. */
export type RateChangeInfo = ClientRateMessage;

const DEFAULT_INITIAL = 10;
const DEFAULT_MIN = 0.5;
const DEFAULT_KEEP_MS = 600_000;

/** Parses `adaptive` (true or the options; `undefined`/false: not adaptive). @internal */
export function parseAdaptive(
  value: boolean | AdaptiveOptions | undefined,
  rate: RateInput | undefined,
): AdaptiveSettings | undefined {
  if (value === undefined || value === false) return undefined;
  if (value !== true && (typeof value !== 'object' || value === null)) {
    throw new InvalidOptionError('adaptive', value, 'Expected `adaptive` to be true or { min, max, initial, keep }');
  }
  const options = value === true ? {} : value;
  const min = options.min === undefined ? DEFAULT_MIN : rateParam(options.min, 'adaptive.min');
  const max = options.max === undefined ? Number.POSITIVE_INFINITY : rateParam(options.max, 'adaptive.max');
  const start = options.initial ?? rate;
  const initial =
    start === undefined ? Math.max(min, Math.min(max, DEFAULT_INITIAL)) : rateParam(start, 'adaptive.initial');
  if (!(min <= initial && initial <= max)) {
    throw new InvalidOptionError(
      'adaptive',
      value,
      `Expected adaptive's min <= initial <= max, got ${min} <= ${initial} <= ${max} (per second)`,
    );
  }
  const keepMs = options.keep === undefined ? DEFAULT_KEEP_MS : parseDuration(options.keep);
  return { bounds: { min, max, initial }, keepMs };
}

/** One origin's learning; see the file's opening comment. */
export class AdaptiveOrigin {
  readonly #aimd: Aimd;
  readonly #budget = new ServerBudget();
  /** The caller gave the origin a window limit: an advertised policy does not replace it. */
  readonly #ownWindow: boolean;
  /** The advertised window, ms (`undefined`: no policy seen). */
  #policyWindowMs: number | undefined = undefined;
  readonly #maxPauseMs: number;

  readonly origin: string;
  readonly scheduler: Scheduler;
  readonly notify: (info: RateChangeInfo) => void;

  constructor({ origin, scheduler, settings, nowMs, maxPauseMs, notify }: AdaptiveOriginParts) {
    this.origin = origin;
    this.scheduler = scheduler;
    this.notify = notify;
    this.#aimd = new Aimd(settings.bounds, nowMs);
    this.#ownWindow = scheduler.window !== 0;
    this.#maxPauseMs = maxPauseMs;
  }

  get rate(): number {
    return this.#aimd.rate;
  }

  /** The status of the answer whose quota holds the origin now (for the pause's message). */
  get quotaStatus(): number {
    return this.#budget.statusCode;
  }

  /** A request is sent at `nowMs`: its sequence number, and how long to hold the next ones (ms, 0: none). */
  sent(nowMs: number): { seq: number; holdMs: number } {
    return this.#budget.sent(nowMs, this.scheduler.windowRemaining);
  }

  /**
   * An answer arrived. Pushback is a refusal, or `RateLimit` with r=0 while no policy is known.
   * Returns how long to hold the origin for its quota (ms, 0: none).
   */
  answered({ seq, nowMs, statusCode, headers, refused, wallMs }: OriginAnswer): number {
    const aimd = this.#aimd;
    let pushback = refused;
    if (!pushback && !aimd.policyKnown) {
      pushback = parseRateLimit(fieldValue(headers, 'ratelimit'))?.some((l) => l.remaining === 0) ?? false;
    }
    if (pushback || statusCode < 400) this.#learn(nowMs, headers, pushback);
    return this.#budget.answered({
      seq,
      nowMs,
      statusCode,
      quota: quotaLeft(headers, wallMs),
      fallbackResetMs: this.#policyWindowMs,
      localLeft: this.scheduler.windowRemaining,
    });
  }

  #learn(nowMs: number, headers: Headers, pushback: boolean): void {
    const aimd = this.#aimd;
    const previousRate = aimd.rate;
    let reason: RateChange | undefined;
    const policy = advertisedPolicy(headers);
    const followed = policy === undefined || this.#ownWindow ? undefined : followedWindow(policy, this.#maxPauseMs);
    if (policy !== undefined && aimd.advertised(policy.quota, policy.windowMs, followed !== undefined)) {
      reason = 'policy';
      this.#policyWindowMs = policy.windowMs;
      if (followed !== undefined) {
        // Counted as the interceptor counts a window: from sent until a window after the answer.
        this.scheduler.setWindow({
          limit: followed.quota,
          window: followed.windowMs,
          windowMargin: 0,
          windowCounts: 'finish',
        });
      }
    }
    if (pushback) {
      if (aimd.pushedBack(nowMs)) reason = 'pushback';
    } else if (aimd.succeeded(nowMs, this.scheduler.size !== 0)) {
      reason ??= 'increase';
    }
    if (reason === undefined || aimd.rate === previousRate) return;
    this.scheduler.setRate(aimd.rate);
    const info: ClientRateMessage = { origin: this.origin, rate: aimd.rate, previousRate, reason };
    this.notify(info);
    if (clientRateChannel.hasSubscribers) clientRateChannel.publish(info);
  }
}

/**
 * The window an advertised policy is followed in: its own, or, when it is longer than `maxPauseMs`,
 * a window of `maxPauseMs` allowing the quota scaled to it (at least 1), so that no request waits
 * longer than `maxPause` for it. `undefined` (no window, the pinned rate alone) when `maxPause` is 0.
 * @internal
 */
export function followedWindow(policy: AdvertisedPolicy, maxPauseMs: number): AdvertisedPolicy | undefined {
  if (policy.windowMs <= maxPauseMs) return policy;
  if (!(maxPauseMs > 0)) return undefined;
  return { quota: Math.max(1, Math.floor((policy.quota * maxPauseMs) / policy.windowMs)), windowMs: maxPauseMs };
}
