/**
 * A Scheduler's window limit (`limit`, `window`): no window of `window` ms,
 * wherever it starts, sees more than `limit` of cost, across any
 * `setWindow`. It is the sliding log of ../meters/windows.ts, run with that
 * file's steps (one entry per instant), kept over `window + windowMargin`.
 *
 * How a job counts (`windowCounts`). `'finish'` (the default): from its start
 * until `window` after it finishes. A downstream that counts at some instant
 * between the two (a server counting arrival times, which lag our starts by a
 * varying one-way delay) then never sees `limit + 1` within `window`,
 * whatever the delays. `'start'`: at its start only, for `window +
 * windowMargin`: exact for a limit on the starts themselves; against a server
 * the margin is a guess at the spread of one-way delays.
 *
 * The log keeps, besides the entries in the window, the newest behind it up
 * to `limit` of cost: enough for a window made longer to count every entry it
 * covers (about `2 * limit` entries for cost-1 jobs, whatever the length).
 *
 * Invariants: a start is counted at the instant the admission read the clock
 * for it (never a theoretical instant in the past, unlike the bucket's
 * charge); a job's `ctx.adjust` does not change what its start counted; the
 * window binds together with the bucket and the concurrency (all must allow).
 * docs/calling-apis.md tells why a bucket at the server's rate is not enough.
 */

import { checkKnownOptions, checkOptions, describeValue, InvalidOptionError, NotSupportedError } from '../errors.js';
import {
  newSlidingLog,
  type SlidingLogState,
  slideLog,
  slidingLogRecord,
  slidingLogWaitMs,
  type WindowParams,
  windowParams,
} from '../meters/windows.js';
import { type DurationInput, parseDuration } from '../units.js';

/**
 * The default margin added to a window under `windowCounts: 'start'`, ms: room for the spread of
 * one-way delays on a LAN over connections already open, at the cost of 1 % of a 1 s window's
 * throughput. Under `'finish'` (the default) it is 0: no jitter can bring two jobs closer there.
 */
export const DEFAULT_WINDOW_MARGIN_MS = 10;

/** A window limit, parsed. @internal */
export interface WindowSettings {
  /** The most cost started in any window. */
  readonly limit: number;
  /** The window as the caller gave it, ms. */
  readonly windowMs: number;
  /** Added to the window for the jitter between our start times and the server's arrival times, ms. */
  readonly marginMs: number;
  /** `windowCounts: 'finish'`. */
  readonly untilFinish: boolean;
}

/** The window options as the Scheduler and the interceptor take them. */
export interface WindowLimitOptions {
  /**
   * With `window`: the most cost in any window of that length, wherever it starts (a sliding
   * window, exact), a job counting as `windowCounts` says. Combines with `rate`/`burst` and
   * `concurrency`: all given must hold.
   */
  limit?: number;
  /** With `limit`: the window's length, ms or a string such as `'1s'`. */
  window?: DurationInput;
  /**
   * Added to the window. Under `windowCounts: 'start'` it covers the varying one-way delay between
   * our starts and a server's arrivals; under `'finish'` no delay needs it.
   * @default 0 with `windowCounts: 'finish'`, 10 (ms) with `'start'`
   */
  windowMargin?: DurationInput;
  /**
   * When a job's cost counts in the window. `'finish'`: from its start until `window` after it
   * finishes (settles or times out), so a downstream that counts at any instant between the two
   * (an API counting arrivals) sees no more than `limit` in any `window`, whatever the delays; a
   * long job holds its share of the limit while it runs. `'start'`: at its start, for `window`
   * plus `windowMargin`: exact for a limit on the starts themselves (p-queue's `interval`), a
   * guess against a server, whose arrivals lag the starts by a delay that varies (a new
   * connection, a loaded machine).
   * @default 'finish'
   */
  windowCounts?: 'start' | 'finish';
}

/** `limit`, `window` and `windowMargin` (`undefined` when neither `limit` nor `window` is given). @internal */
export function parseWindowLimit(options: WindowLimitOptions): WindowSettings | undefined {
  const { limit, window, windowMargin, windowCounts } = options;
  if (limit === undefined && window === undefined) {
    for (const [name, value] of [
      ['windowMargin', windowMargin],
      ['windowCounts', windowCounts],
    ] as const) {
      if (value !== undefined) {
        throw new InvalidOptionError(
          name,
          value,
          `\`${name}\` is for a window limit: give \`limit\` and \`window\` too`,
        );
      }
    }
    return undefined;
  }
  if (windowCounts !== undefined && windowCounts !== 'start' && windowCounts !== 'finish') {
    throw new InvalidOptionError(
      'windowCounts',
      windowCounts,
      `Expected \`windowCounts\` to be 'start' or 'finish', got ${describeValue(windowCounts)}`,
    );
  }
  const untilFinish = windowCounts !== 'start';
  if (limit === undefined || window === undefined) {
    const missing = limit === undefined ? 'limit' : 'window';
    throw new InvalidOptionError(
      missing,
      undefined,
      'a window limit needs both `limit` (the most cost per window) and `window` (its length, such as "1s")',
    );
  }
  const params = windowParams({ limit, window });
  const marginMs =
    windowMargin === undefined ? (untilFinish ? 0 : DEFAULT_WINDOW_MARGIN_MS) : parseDuration(windowMargin);
  if (!(marginMs < Number.POSITIVE_INFINITY)) {
    throw new InvalidOptionError('windowMargin', windowMargin, 'Expected `windowMargin` to be a finite duration >= 0');
  }
  return { limit: params.limit, windowMs: params.windowMs, marginMs, untilFinish };
}

const WINDOW_OPTIONS: ReadonlySet<string> = new Set(['limit', 'window', 'windowMargin', 'windowCounts']);

/**
 * `setWindow`'s options, parsed against the window in force (`current`, if any): a margin not given
 * keeps the current one, and how a live window counts (`windowCounts`) cannot change, since the
 * starts it already holds were counted that way. @internal
 */
export function parseWindowChange(options: WindowLimitOptions, current: WindowSettings | undefined): WindowSettings {
  checkOptions(options, 'setWindow({ limit, window })', true);
  checkKnownOptions(options, WINDOW_OPTIONS, 'setWindow options');
  const counts = options.windowCounts ?? (current === undefined || current.untilFinish ? 'finish' : 'start');
  if (current !== undefined && (counts === 'finish') !== current.untilFinish) {
    throw new InvalidOptionError(
      'windowCounts',
      options.windowCounts,
      `the window counts its jobs until they ${current.untilFinish ? 'finish' : 'start'}; that cannot change on a live ` +
        'window (the starts it holds were counted so): leave `windowCounts` out, or make a new Scheduler',
    );
  }
  const windowMargin = options.windowMargin ?? current?.marginMs;
  const parsed = parseWindowLimit({ limit: options.limit, window: options.window, windowMargin, windowCounts: counts });
  if (parsed === undefined) throw new InvalidOptionError('limit', undefined, 'setWindow needs `limit` and `window`');
  return parsed;
}

/** A fleet's settings, refused with a window limit: the fleet store keeps no sliding log. @internal */
export function noWindowOnFleet<F>(fleet: F | undefined, window: WindowSettings | undefined): F | undefined {
  if (fleet === undefined || window === undefined) return fleet;
  throw new NotSupportedError(
    'a window limit (`limit`/`window`) does not apply to a fleet yet: the fleet store keeps a bucket and a ' +
      "concurrency, not a sliding log; give the fleet a `rate` with `burst: 1` below the window's limit, or use a " +
      'Scheduler without `store`',
  );
}

/**
 * A key's turns at a KeyedScheduler's limit over all keys, refused with a window limit: a job must
 * pass its window and take its turn at once, and the turns charge the global bucket before a window
 * could refuse. @internal
 */
export function noWindowOnKey<T>(turns: T | undefined, window: WindowSettings | undefined): T | undefined {
  if (turns === undefined || window === undefined) return turns;
  throw new NotSupportedError(
    "a window limit (`limit`/`window`) does not apply to a KeyedScheduler's key yet: its jobs take turns at the " +
      'limit over all keys, which charges the global bucket before a window could refuse; give the key a `rate` ' +
      "with `burst: 1` below the window's limit (`setRate`), or use a Scheduler of its own",
  );
}

/** The sliding log a local admission keeps for its window limit; see the file's opening comment. */
export class StartWindow {
  #params: WindowParams;
  #settings: WindowSettings;
  readonly #log: SlidingLogState = newSlidingLog();
  /** `windowCounts: 'finish'`: the cost started and not yet finished (it counts until W after it finishes). */
  readonly untilFinish: boolean;
  #running = 0;

  constructor(settings: WindowSettings) {
    this.#settings = settings;
    this.#params = { limit: settings.limit, windowMs: settings.windowMs + settings.marginMs };
    this.untilFinish = settings.untilFinish;
  }

  get limit(): number {
    return this.#params.limit;
  }

  get settings(): WindowSettings {
    return this.#settings;
  }

  /**
   * A new limit or length from now on (the same way of counting, see {@link parseWindowChange}): the
   * starts counted so far stay, so a window made shorter frees at once what slid out of it, and a
   * window made longer counts every start it covers (the log kept them; after a higher limit too,
   * it waits until the starts it did not keep have surely slid out).
   */
  reconfigure(settings: WindowSettings): void {
    this.#settings = settings;
    this.#params = { limit: settings.limit, windowMs: settings.windowMs + settings.marginMs };
  }

  /**
   * Counts a start of `cost` at `now` if it fits and returns 0; else changes nothing and returns the
   * ms until it fits (Infinity: when a running job finishes).
   */
  take(now: number, cost: number): number {
    const waitMs = this.waitMs(now, cost);
    if (waitMs !== 0 || cost === 0) return waitMs;
    if (this.untilFinish) this.#running += cost;
    else slidingLogRecord(this.#log, now, cost);
    return 0;
  }

  /** A job of `cost` started under `windowCounts: 'finish'` finished at `now`: it counts for W from now. */
  finished(now: number, cost: number): void {
    if (!this.untilFinish || cost === 0) return;
    this.#running -= cost;
    if (this.#running < 1e-9) this.#running = 0;
    slidingLogRecord(this.#log, now, cost);
  }

  /**
   * The ms until a start of `cost` would fit at `now` (0: now; Infinity: once a running job finishes),
   * counting nothing. At least 1 ms when it does not fit now: the timer's step.
   */
  waitMs(now: number, cost: number): number {
    const at = slideLog(this.#log, this.#params, now, this.#params.limit);
    const waitMs = slidingLogWaitMs(this.#log, this.#params, at, cost, this.#running);
    return waitMs === 0 ? 0 : Math.max(1, waitMs);
  }

  /** The cost that may start at `now` within the limit. */
  remaining(now: number): number {
    const at = slideLog(this.#log, this.#params, now, this.#params.limit);
    const forgottenAtMs = this.#log.forgottenAtMs;
    if (forgottenAtMs !== undefined && forgottenAtMs + this.#params.windowMs > at) return 0; // see slidingLogWaitMs
    return Math.max(0, this.#params.limit - this.#log.used - this.#running);
  }
}
