/**
 * Window counters: `FixedWindow` and `SlidingWindow`, for rules that count
 * requests per window ("at most 100 between 12:00 and 12:01") rather than
 * pace them. A token bucket is the wrong tool for such a rule: it lets a full
 * bucket's burst through at any moment and never resets on a boundary.
 *
 * Fixed window. Time is cut into windows [k * W, (k + 1) * W) on the clock's
 * time axis; each window admits at most `limit` cost, and the count starts
 * again at zero on each boundary. Simple and cheap (two numbers of state),
 * but the boundary is sharp: `limit` at the end of one window and `limit` at
 * the start of the next pass within moments of each other, so a window of W
 * that straddles a boundary can see 2 * limit.
 *
 * Sliding window. A request at time t counts until t + W, so no window of
 * length W, wherever it starts, admits more than `limit`: the rule a fixed
 * window only approximates. Two forms:
 *
 * - `'log'` (the default, exact): the admitted requests' times and costs are
 *   kept (one entry per admission time, at most `limit` of them for cost-1
 *   requests), and a request conforms iff the cost admitted in (t - W, t]
 *   plus its own is at most `limit`.
 * - `'counter'` (approximate, two numbers of state, what a Redis key can hold
 *   cheaply): the count of the current fixed window plus the previous
 *   window's count weighted by the share of it still inside the sliding
 *   window, assuming it was spread evenly: `previous * (1 - elapsed / W) +
 *   current`. It smooths the boundary but is not a hard bound.
 *
 * Worked example (limit 100 per 1 s): 100 requests at 0.9 s fill window 0;
 * at 1.0 s a fixed window admits 100 more (200 within 0.1 s), a sliding log
 * admits none until 1.9 s, and the counter (which sees 100 * (1 - 0) = 100
 * still counted at 1.0 s) admits one more at 1.01 s, when 1 % of the previous
 * window has slid out.
 *
 * The windows are aligned to the clock's zero: with a clock that reads
 * wall time (`Date.now()`), they are calendar windows (12:00:00-12:01:00 for
 * W = 1 min); with the default monotonic clock they start at the process's
 * time origin. Time that goes backwards counts as no time at all.
 *
 * State and arithmetic are plain functions over plain objects
 * (`fixedWindowTake`, `slidingLogTake`, `slidingCounterTake`, and the log's
 * steps `slideLog`, `slidingLogRecord`, `slidingLogWaitMs`), so a store or the
 * Scheduler's window limit can keep the state elsewhere and run the same
 * steps; the classes add a clock.
 */

import { type Clock, checkClock } from '../clock.js';
import { CostExceedsCapacityError, checkKnownOptions, InvalidOptionError, InvalidSizeError } from '../errors.js';
import { type DurationInput, parseDuration } from '../units.js';
import type { Decision } from './decision.js';

/** The parameters of a window counter. */
export interface WindowParams {
  /** The most cost admitted per window. */
  limit: number;
  /** The window's length, ms. */
  windowMs: number;
}

/** A fixed window's variables. */
export interface FixedWindowState {
  /** The start of the window `count` belongs to, ms. */
  windowStartMs: number;
  /** Cost admitted in that window. */
  count: number;
}

/** A sliding log's variables: the admissions still inside the window, oldest first. */
export interface SlidingLogState {
  /** Admission times, ms, non-decreasing. */
  atMs: number[];
  /** The cost admitted at each time. */
  cost: number[];
  /** Index of the oldest live entry (entries before it have slid out). */
  head: number;
  /** Sum of the live entries' costs. */
  used: number;
  /** The latest time seen, ms (time never goes back). */
  latestMs: number;
  /**
   * The newest admission time among entries dropped while a longer window could still have counted
   * them (see {@link slideLog}'s `keepCost`); absent when none was.
   */
  forgottenAtMs?: number;
}

/** A sliding counter's variables. */
export interface SlidingCounterState {
  /** Start of the current fixed window, ms. */
  windowStartMs: number;
  /** Cost admitted in the previous window. */
  previous: number;
  /** Cost admitted in the current window. */
  current: number;
}

function windowStart(nowMs: number, windowMs: number): number {
  return Math.floor(nowMs / windowMs) * windowMs;
}

/** Validates a request's cost against a window's limit. */
export function checkWindowCost(cost: number, limit: number): void {
  if (cost > limit) throw new CostExceedsCapacityError({ cost, capacity: limit, capacityName: "the window's limit" });
  if (!(cost >= 0)) throw new InvalidSizeError(cost, `invalid cost ${cost}: expected a finite number >= 0`);
}

/** Brings a fixed window up to `nowMs` (a new window starts at zero). */
function fixedRoll(state: FixedWindowState, params: WindowParams, nowMs: number): number {
  const now = Math.max(nowMs, state.windowStartMs);
  const start = windowStart(now, params.windowMs);
  if (start > state.windowStartMs) {
    state.windowStartMs = start;
    state.count = 0;
  }
  return now;
}

/** Counts `cost` in the fixed window at `nowMs` if it fits; changes nothing if not. */
export function fixedWindowTake(state: FixedWindowState, params: WindowParams, nowMs: number, cost: number): Decision {
  checkWindowCost(cost, params.limit);
  const now = fixedRoll(state, params, nowMs);
  const allowed = state.count + cost <= params.limit;
  if (allowed) state.count += cost;
  const resetAfterMs = state.windowStartMs + params.windowMs - now;
  return {
    allowed,
    remaining: Math.floor(params.limit - state.count),
    retryAfterMs: allowed ? 0 : resetAfterMs,
    resetAfterMs: state.count === 0 ? 0 : resetAfterMs,
    limit: params.limit,
  };
}

/**
 * Brings the log to `nowMs` under the window in force (W = `params.windowMs`, which may have changed
 * since the entries were recorded) and returns the time the log is now at: `nowMs`, or the latest
 * time it has seen if that is later (time never goes back). `used` is then the cost in
 * (now - W, now]: entries that slid out leave it, and entries still kept that a longer W covers
 * again count again.
 *
 * Entries that slid out are kept while the entries after them cost less than `keepCost` in all, and
 * dropped beyond that (with a `keepCost`, the newest dropped one's time is kept as `forgottenAtMs`). A log whose
 * window may grow keeps `keepCost` = its limit: any window that holds all the kept entries then holds
 * at least `limit` and admits nothing more until one of them slides out, and the dropped entries,
 * older than every kept one, have slid out by then. So the kept entries decide exactly, whatever the
 * new length, for any limit up to `keepCost`; for a higher one, {@link slidingLogWaitMs} admits
 * nothing until the dropped entries have surely slid out (`forgottenAtMs` + W). The log holds the
 * cost in the window and at most `keepCost` more (one entry per admission time: about `limit` entries
 * for cost-1 requests), however long the window grows, plus the dropped entries not yet compacted.
 * With `keepCost` 0 (the default) an entry is dropped once it slides out.
 */
export function slideLog(state: SlidingLogState, params: WindowParams, nowMs: number, keepCost = 0): number {
  const now = Math.max(nowMs, state.latestMs);
  state.latestMs = now;
  const { atMs, cost } = state;
  while (state.head < atMs.length && (atMs[state.head] as number) + params.windowMs <= now) {
    state.used -= cost[state.head] as number;
    state.head++;
  }
  // A longer window than when they slid out: kept entries it covers count again.
  while (state.head > 0 && (atMs[state.head - 1] as number) + params.windowMs > now) {
    state.head--;
    state.used += cost[state.head] as number;
  }
  if (state.head === atMs.length) state.used = 0; // no rounding left over in an empty window
  // Compaction, once more than half the array (and more than 64 entries) is dropped at once: keep the
  // slid-out entries needed to make `keepCost` with those after them.
  const least = Math.max(64, atMs.length >> 1);
  if (state.head > least) {
    let keep = state.head;
    let after = state.used;
    while (after < keepCost && keep > least) after += cost[--keep] as number;
    if (after >= keepCost && keep > least) {
      if (keepCost > 0) state.forgottenAtMs = atMs[keep - 1] as number;
      atMs.splice(0, keep);
      cost.splice(0, keep);
      state.head -= keep;
    }
  }
  return now;
}

/** Records `cost` admitted at `nowMs` (or at the latest time the log has seen, if later), whether it fits or not. */
export function slidingLogRecord(state: SlidingLogState, nowMs: number, cost: number): void {
  if (!(cost > 0)) return;
  const at = Math.max(nowMs, state.latestMs);
  state.latestMs = at;
  const last = state.atMs.length - 1;
  if (last >= state.head && state.atMs[last] === at) state.cost[last] = (state.cost[last] as number) + cost;
  else {
    state.atMs.push(at);
    state.cost.push(cost);
  }
  state.used += cost;
}

/**
 * After {@link slideLog} at `now`: the ms until `cost` fits within the limit, the oldest entries
 * sliding out first (0: it fits now). `heldCost` is cost that counts on top of the log's and does not
 * slide out by itself (jobs still running); when only its release could make room, the answer is
 * Infinity.
 */
export function slidingLogWaitMs(
  state: SlidingLogState,
  params: WindowParams,
  now: number,
  cost: number,
  heldCost = 0,
): number {
  // Dropped entries may still be in the window (a higher limit than the one they were kept for):
  // nothing more until they have surely slid out. When a kept entry must slide out first, they have too.
  const forgottenAtMs = state.forgottenAtMs;
  const floorMs = forgottenAtMs !== undefined && cost > 0 ? Math.max(0, forgottenAtMs + params.windowMs - now) : 0;
  let used = state.used + heldCost;
  if (used + cost <= params.limit) return floorMs;
  const last = state.atMs.length - 1;
  for (let i = state.head; i <= last; i++) {
    // Once the newest entry slides out only the held cost is left (exactly, with no rounding carried).
    used = i === last ? heldCost : used - (state.cost[i] as number);
    if (used + cost <= params.limit) return Math.max(floorMs, (state.atMs[i] as number) + params.windowMs - now);
  }
  return Number.POSITIVE_INFINITY;
}

/** A new, empty sliding log. */
export function newSlidingLog(): SlidingLogState {
  return { atMs: [], cost: [], head: 0, used: 0, latestMs: Number.NEGATIVE_INFINITY };
}

/** Counts `cost` in the sliding log at `nowMs` if it fits in (now - W, now]; changes nothing if not. */
export function slidingLogTake(state: SlidingLogState, params: WindowParams, nowMs: number, cost: number): Decision {
  checkWindowCost(cost, params.limit);
  const now = slideLog(state, params, nowMs);
  const retryAfterMs = slidingLogWaitMs(state, params, now, cost);
  const allowed = retryAfterMs === 0;
  if (allowed) slidingLogRecord(state, now, cost);
  const newest = state.atMs[state.atMs.length - 1];
  return {
    allowed,
    remaining: Math.floor(params.limit - state.used),
    retryAfterMs,
    resetAfterMs: state.used > 0 && newest !== undefined ? newest + params.windowMs - now : 0,
    limit: params.limit,
  };
}

/** A new sliding counter, both windows empty. */
export function newSlidingCounter(): SlidingCounterState {
  return { windowStartMs: Number.NEGATIVE_INFINITY, previous: 0, current: 0 };
}

/** Brings a sliding counter up to `nowMs`: the current window becomes the previous one on a boundary. */
function rollCounter(state: SlidingCounterState, params: WindowParams, nowMs: number): number {
  const now = Math.max(nowMs, state.windowStartMs);
  const start = windowStart(now, params.windowMs);
  if (start > state.windowStartMs) {
    state.previous = start - state.windowStartMs === params.windowMs ? state.current : 0;
    state.current = 0;
    state.windowStartMs = start;
  }
  return now;
}

/** The counter's estimate of the cost admitted in (now - W, now]. */
function counterEstimate(state: SlidingCounterState, params: WindowParams, now: number): number {
  const elapsed = (now - state.windowStartMs) / params.windowMs;
  return state.previous * (1 - elapsed) + state.current;
}

/** Counts `cost` if the sliding counter's estimate leaves room for it; changes nothing if not. */
export function slidingCounterTake(
  state: SlidingCounterState,
  params: WindowParams,
  nowMs: number,
  cost: number,
): Decision {
  checkWindowCost(cost, params.limit);
  const now = rollCounter(state, params, nowMs);
  const { limit, windowMs } = params;
  const allowed = counterEstimate(state, params, now) + cost <= limit;
  if (allowed) state.current += cost;
  let retryAfterMs = 0;
  if (!allowed) {
    const end = state.windowStartMs + windowMs;
    if (state.current + cost > limit) {
      // Not in this window: in the next one, once enough of this window has slid out.
      const share = state.current > 0 ? 1 - (limit - cost) / state.current : 0;
      retryAfterMs = end + Math.max(0, share) * windowMs - now;
    } else {
      const share = 1 - (limit - cost - state.current) / state.previous;
      retryAfterMs = Math.max(0, state.windowStartMs + share * windowMs - now);
    }
  }
  const estimate = counterEstimate(state, params, now);
  return {
    allowed,
    remaining: Math.max(0, Math.floor(limit - estimate)),
    retryAfterMs,
    resetAfterMs:
      state.current > 0
        ? state.windowStartMs + 2 * windowMs - now
        : state.previous > 0
          ? state.windowStartMs + windowMs - now
          : 0,
    limit,
  };
}

/** Options for {@link FixedWindow} and {@link SlidingWindow}. */
export interface WindowOptions {
  /** The most cost (requests, for cost 1) admitted per window. A positive number. */
  limit: number;
  /** The window's length: milliseconds or a string such as `'1s'`, `'1 min'`. Must be positive. */
  window: DurationInput;
  /** The time source; windows are aligned to its zero. @default systemClock */
  clock?: Clock;
}

/** Names that users bring from express-rate-limit and p-queue, with what to write here instead. */
export const WINDOW_PEER_OPTIONS: Readonly<Record<string, string>> = {
  max: 'write `limit` (the most cost per window)',
  windowMs: 'write `window` (milliseconds, or a string such as "1s")',
  intervalCap: 'write `limit` (the most cost per window)',
  interval: 'write `window` (milliseconds, or a string such as "1s")',
};
const FIXED_OPTIONS: ReadonlySet<string> = new Set(['limit', 'window', 'clock']);
const SLIDING_OPTIONS: ReadonlySet<string> = new Set(['limit', 'window', 'clock', 'mode']);

/** Validates `limit` and `window` into WindowParams. */
export function windowParams(options: WindowOptions): WindowParams {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'expected an options object such as { limit: 100, window: "1s" }');
  }
  const { limit } = options;
  if (!(typeof limit === 'number' && Number.isFinite(limit) && limit > 0)) {
    throw new InvalidOptionError(
      'limit',
      limit,
      `Expected \`limit\` to be a positive finite number, got ${String(limit)}`,
    );
  }
  const windowMs = parseDuration(options.window);
  if (!(windowMs > 0 && Number.isFinite(windowMs))) {
    throw new InvalidOptionError(
      'window',
      options.window,
      `Expected \`window\` to be a positive finite duration such as "1s", got ${String(options.window)}`,
    );
  }
  return { limit, windowMs };
}

/**
 * A fixed-window counter: at most `limit` cost in each window [k * W, (k + 1) * W).
 *
 * @example
 * const perMinute = new FixedWindow({ limit: 100, window: '1 min' });
 * const d = perMinute.tryTake(); if (!d.allowed) reply429(d.retryAfterMs);
 */
export class FixedWindow {
  readonly #params: WindowParams;
  readonly #clock: Clock;
  readonly #state: FixedWindowState = { windowStartMs: Number.NEGATIVE_INFINITY, count: 0 };

  constructor(options: WindowOptions) {
    this.#params = windowParams(options);
    checkKnownOptions(options, FIXED_OPTIONS, 'FixedWindow options', WINDOW_PEER_OPTIONS);
    this.#clock = checkClock(options.clock);
  }

  /** The most cost per window. */
  get limit(): number {
    return this.#params.limit;
  }

  /** The window's length, ms. */
  get windowMs(): number {
    return this.#params.windowMs;
  }

  /** Counts `cost` in the current window if it fits. */
  tryTake(cost = 1): Decision {
    return this.tryTakeAt(this.#clock.now(), cost);
  }

  /** {@link tryTake} at an explicit time. */
  tryTakeAt(nowMs: number, cost = 1): Decision {
    return fixedWindowTake(this.#state, this.#params, nowMs, cost);
  }

  /** What a request of `cost` would get now, without counting it. */
  peek(cost = 1): Decision {
    return this.peekAt(this.#clock.now(), cost);
  }

  /** {@link peek} at an explicit time. */
  peekAt(nowMs: number, cost = 1): Decision {
    return fixedWindowTake({ ...this.#state }, this.#params, nowMs, cost);
  }
}

/** Options for {@link SlidingWindow}. */
export interface SlidingWindowOptions extends WindowOptions {
  /**
   * `'log'`: exact, keeps one entry per admission time still in the window;
   * `'counter'`: two numbers, an estimate that assumes the previous window's
   * requests were spread evenly.
   * @default 'log'
   */
  mode?: 'log' | 'counter';
}

/**
 * A sliding window: at most `limit` cost in any window of length W (exactly,
 * in the default `'log'` mode).
 *
 * @example
 * const w = new SlidingWindow({ limit: 100, window: '1s' });
 * w.tryTake().allowed;
 */
export class SlidingWindow {
  readonly #params: WindowParams;
  readonly #clock: Clock;
  readonly #mode: 'log' | 'counter';
  readonly #log: SlidingLogState = newSlidingLog();
  readonly #counter: SlidingCounterState = newSlidingCounter();

  constructor(options: SlidingWindowOptions) {
    this.#params = windowParams(options);
    checkKnownOptions(options, SLIDING_OPTIONS, 'SlidingWindow options', WINDOW_PEER_OPTIONS);
    this.#clock = checkClock(options.clock);
    const mode = options.mode ?? 'log';
    if (mode !== 'log' && mode !== 'counter') {
      throw new InvalidOptionError('mode', mode, `Expected \`mode\` to be 'log' or 'counter', got ${String(mode)}`);
    }
    this.#mode = mode;
  }

  /** The most cost in any window. */
  get limit(): number {
    return this.#params.limit;
  }

  /** The window's length, ms. */
  get windowMs(): number {
    return this.#params.windowMs;
  }

  /** `'log'` or `'counter'`. */
  get mode(): 'log' | 'counter' {
    return this.#mode;
  }

  /** Counts `cost` if it fits in the window ending now. */
  tryTake(cost = 1): Decision {
    return this.tryTakeAt(this.#clock.now(), cost);
  }

  /** {@link tryTake} at an explicit time. */
  tryTakeAt(nowMs: number, cost = 1): Decision {
    return this.#mode === 'log'
      ? slidingLogTake(this.#log, this.#params, nowMs, cost)
      : slidingCounterTake(this.#counter, this.#params, nowMs, cost);
  }

  /** What a request of `cost` would get now, without counting it. */
  peek(cost = 1): Decision {
    return this.peekAt(this.#clock.now(), cost);
  }

  /** {@link peek} at an explicit time. */
  peekAt(nowMs: number, cost = 1): Decision {
    if (this.#mode === 'counter') return slidingCounterTake({ ...this.#counter }, this.#params, nowMs, cost);
    const log = this.#log;
    const copy: SlidingLogState = {
      atMs: log.atMs.slice(log.head),
      cost: log.cost.slice(log.head),
      head: 0,
      used: log.used,
      latestMs: log.latestMs,
    };
    return slidingLogTake(copy, this.#params, nowMs, cost);
  }
}
