/**
 * `throttleInterceptor`: an undici interceptor (for `dispatcher.compose(...)`)
 * that paces requests per origin and obeys the origin's own pushback.
 *
 * Each origin gets its own `Scheduler`; a request is a job of cost 1 that
 * holds its concurrency unit from the moment it is sent until its response
 * has been delivered in full (or has failed). A 429/503 with `Retry-After`
 * or a `RateLimit` item with `r=0` pauses its origin (at most `maxPause`,
 * which bounds an adopted window too: nothing an origin says holds it longer
 * at a time). With `bandwidth`, bodies pass through a member `Throttle` of
 * one group.
 *
 * Invariants: a request the scheduler rejects (`QueueFullError`,
 * `WaitTooLongError`) fails through the handler and is never sent; the
 * response to a pushback still reaches the caller (retrying is undici's
 * retry interceptor's job); a body is paced by backpressure (the handler's
 * controller pauses the connection), never buffered; no timer is armed for a
 * pause unless requests wait behind it. docs/internals/http.md gives the
 * reasoning.
 */

import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { type Clock, checkClock } from '../clock.js';
import { clientPauseChannel, clientRejectedChannel, clientStartChannel } from '../diagnostics.js';
import { checkKnownOptions, checkOptions, InvalidOptionError, WaitTooLongError } from '../errors.js';
import { KeyTable } from '../scheduler/key-table.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { ThrottleGroup } from '../stream/group.js';
import type { Throttle } from '../stream/throttle.js';
import { type DurationInput, parseDuration, type RateInput } from '../units.js';
import { type AdaptiveOptions, AdaptiveOrigin, parseAdaptive, type RateChangeInfo } from './adaptive-origin.js';
import { pauseRequested } from './headers.js';
import type { ClientPauseMessage, ClientRejectedMessage, ClientStartMessage } from './messages.js';
import { merge, type OriginLimits, OriginState, originOf, schedulerOptions, settleMsOf } from './origin-state.js';
import { PacedController } from './paced-controller.js';
import { checkWallClock } from './wall-clock.js';

export type { OriginLimits } from './origin-state.js';

/**
 * What {@link throttleInterceptor} returns: an interceptor for undici's
 * `dispatcher.compose(...)`, `(dispatch) => dispatch`. It is typed without
 * naming undici's own types, so a project that does not use undici
 * type-checks the package without having it installed; `compose` accepts it
 * as its `DispatcherComposeInterceptor`.
 */
export interface ThrottleInterceptor {
  <D extends (options: never, handler: never) => boolean>(dispatch: D): D;
  /** Origins whose state is kept now (at most `maxOrigins` unless more are busy). */
  readonly originCount: number;
  /** The rate `origin` is paced at now, per second (learned with `adaptive`); `undefined` if none is kept. */
  rateOf(origin: string): number | undefined;
  /** With `adaptive`: calls `listener` each time an origin's learned rate changes. */
  on(event: 'rate', listener: (info: RateChangeInfo) => void): void;
  off(event: 'rate', listener: (info: RateChangeInfo) => void): void;
}

/** Options for {@link throttleInterceptor}. */
export interface ThrottleInterceptorOptions extends OriginLimits {
  /**
   * Limits per origin (`'https://api.example.com'`), each field over the defaults above; an origin's
   * own `rate` without a `burst` gets the default burst (1), not the defaults' burst.
   */
  origins?: Record<string, OriginLimits>;
  /** Cap on body bytes, requests and responses together: a rate (`'1MiB/s'`) or a `ThrottleGroup`. */
  bandwidth?: RateInput | ThrottleGroup;
  /** Statuses whose `Retry-After`/`RateLimit` pause the origin. @default [429, 503] */
  pauseOn?: readonly number[];
  /**
   * The longest an origin's answers can hold it at a time (ms or `'5min'`): a pause (`Retry-After`,
   * `r=0`), a spent quota, and with `adaptive` an adopted window (a longer advertised window is
   * followed in windows of `maxPause`, the quota scaled to it). `Infinity` follows any window whole.
   * @default 300000 (5 minutes)
   */
  maxPause?: DurationInput;
  /** The time source of the schedulers and pauses. @default systemClock */
  clock?: Clock;
  /**
   * Milliseconds since the Unix epoch, read only to convert the wall times an answer carries (an
   * HTTP-date `Retry-After`, a Unix-time reset) when the answer has no `Date` field; pacing and
   * pauses run on `clock`. @default () => Date.now()
   */
  wallClock?: () => number;
  /**
   * The most origins whose state is kept. An idle origin whose bucket is full again (and window
   * empty, pause over) is dropped anyway, as it equals a new one; beyond `maxOrigins`, the least
   * recently used idle origins are dropped too, and come back as new ones (a full bucket). An origin
   * with requests waiting or running is never dropped. An integer >= 1, or Infinity.
   * @default 10000
   */
  maxOrigins?: number;
  /**
   * Learn each origin's sustainable rate from its answers (AIMD: a slow start, a cut on pushback,
   * a gentle probe), and adopt a policy it advertises (`RateLimit-Policy`, or `RateLimit-Limit` /
   * `X-RateLimit-Limit` with a window; one longer than `maxPause` in windows of `maxPause`, its quota
   * scaled to them). `true`, or bounds `{ min, max, initial, keep }`; `rate` is then where it
   * starts, `burst` defaults to 1. See docs/calling-apis.md.
   * @default false
   */
  adaptive?: boolean | AdaptiveOptions;
}

type DispatchHandler = Dispatcher.DispatchHandler;
type Headers = Record<string, string | string[] | undefined>;
type DispatchOptions = Dispatcher.DispatchOptions;
type Dispatch = Dispatcher['dispatch'];

/** The default bound on origins kept (see `maxOrigins`). */
const DEFAULT_MAX_ORIGINS = 10_000;

/** A request on its way out: undici's options and the caller's handler, its controller and its origin. */
interface Outgoing {
  readonly opts: DispatchOptions;
  readonly handler: DispatchHandler;
  readonly controller: PacedController;
  readonly state: OriginState;
}

const DEFAULT_MAX_PAUSE_MS = 300_000;
const BODY_HIGH_WATER_MARK = 16 * 1024;
const MAX_CACHED_ORIGINS = 1024;

/** Does a header list (object or flat array) name `content-length`? */
function hasContentLength(headers: DispatchOptions['headers']): boolean | undefined {
  if (headers == null) return false;
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) if (String(headers[i]).toLowerCase() === 'content-length') return true;
    return false;
  }
  if (typeof headers === 'object' && !(Symbol.iterator in headers)) {
    return Object.keys(headers).some((k) => k.toLowerCase() === 'content-length');
  }
  return undefined; // an iterable of pairs: left as it is
}

/**
 * The dispatch options with the request body piped through `throttle`, or
 * `undefined` (and `throttle` unused) if the body is absent or of a kind that
 * is sent unpaced.
 */
function throttleRequestBody(opts: DispatchOptions, throttle: () => Throttle): DispatchOptions | undefined {
  const body = opts.body as unknown;
  if (body == null) return undefined;
  let source: Readable;
  let headers = opts.headers;
  if (typeof body === 'string' || body instanceof Uint8Array) {
    const has = hasContentLength(headers);
    if (has === undefined) return undefined;
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    if (!has) {
      const length = String(bytes.byteLength);
      headers = Array.isArray(headers)
        ? [...headers, 'content-length', length]
        : { ...(headers as Record<string, string>), 'content-length': length };
    }
    source = Readable.from([bytes], { objectMode: false });
  } else if (body instanceof Readable) {
    source = body;
  } else if (typeof body === 'object' && Symbol.asyncIterator in body && !(body instanceof Blob)) {
    source = Readable.from(body as AsyncIterable<Uint8Array>, { objectMode: false });
  } else {
    return undefined;
  }
  const paced = throttle();
  source.on('error', (error) => paced.destroy(error));
  source.pipe(paced);
  return { ...opts, headers, body: paced };
}

/**
 * An undici interceptor that paces requests per origin and obeys 429/503
 * pushback; see the file's opening comment.
 *
 * @example
 * import { Agent, interceptors } from 'undici';
 * const dispatcher = new Agent().compose(
 *   throttleInterceptor({ rate: 36, burst: 8, concurrency: 8, maxWait: '10s' }),
 *   interceptors.retry({ maxRetries: 3 }),
 * );
 */
const ORIGIN_OPTIONS: ReadonlySet<string> = new Set([
  'rate',
  'burst',
  'concurrency',
  'maxQueue',
  'maxWait',
  'limit',
  'window',
  'windowMargin',
]);
const INTERCEPTOR_OPTIONS: ReadonlySet<string> = new Set([
  ...ORIGIN_OPTIONS,
  'origins',
  'bandwidth',
  'pauseOn',
  'maxPause',
  'clock',
  'wallClock',
  'maxOrigins',
  'adaptive',
]);

export function throttleInterceptor(options: ThrottleInterceptorOptions = {}): ThrottleInterceptor {
  checkOptions(options, 'throttleInterceptor options ({ rate, burst, concurrency, ... })', false);
  checkKnownOptions(options, INTERCEPTOR_OPTIONS, 'throttleInterceptor options');
  for (const [origin, limits] of Object.entries(options.origins ?? {})) {
    checkOptions(limits, `the limits of origin ${origin}`, true);
    checkKnownOptions(limits, ORIGIN_OPTIONS, `the limits of origin ${origin}`);
  }
  const clock = checkClock(options.clock);
  const wallClock = checkWallClock(options.wallClock);
  const pauseOn = new Set(options.pauseOn ?? [429, 503]);
  const maxPauseMs = options.maxPause === undefined ? DEFAULT_MAX_PAUSE_MS : parseDuration(options.maxPause);
  const { origins: overrides = {}, bandwidth } = options;
  const defaults: OriginLimits = {
    rate: options.rate,
    burst: options.burst,
    concurrency: options.concurrency,
    maxQueue: options.maxQueue,
    maxWait: options.maxWait,
    limit: options.limit,
    window: options.window,
    windowMargin: options.windowMargin,
  };
  const overrideByOrigin = new Map<string, OriginLimits>();
  for (const [origin, limits] of Object.entries(overrides)) overrideByOrigin.set(originOf(origin), limits);
  // Validate every configuration now, not at the first request to that origin.
  new Scheduler(schedulerOptions(defaults, clock));
  for (const [origin, limits] of overrideByOrigin) {
    try {
      new Scheduler(schedulerOptions(merge(defaults, limits), clock));
    } catch (error) {
      throw new InvalidOptionError(
        'origins',
        origin,
        `invalid limits for origin ${origin}: ${(error as Error).message}`,
      );
    }
  }
  let group: ThrottleGroup | undefined;
  if (bandwidth instanceof ThrottleGroup) group = bandwidth;
  else if (bandwidth !== undefined) group = new ThrottleGroup({ rate: bandwidth, clock });
  const member =
    group === undefined ? undefined : () => (group as ThrottleGroup).throttle({ highWaterMark: BODY_HIGH_WATER_MARK });

  const adaptive = parseAdaptive(options.adaptive, options.rate);
  const rateListeners = new Set<(info: RateChangeInfo) => void>();
  const notifyRate = (info: RateChangeInfo): void => {
    for (const listener of rateListeners) listener(info);
  };
  const maxOrigins = options.maxOrigins ?? DEFAULT_MAX_ORIGINS;
  if (
    !(
      typeof maxOrigins === 'number' &&
      maxOrigins >= 1 &&
      (Number.isSafeInteger(maxOrigins) || maxOrigins === Number.POSITIVE_INFINITY)
    )
  ) {
    throw new InvalidOptionError(
      'maxOrigins',
      maxOrigins,
      `Expected \`maxOrigins\` to be an integer >= 1 or Infinity, got ${String(maxOrigins)}`,
    );
  }
  // Busy origins are kept beyond the bound: each one's queue is bounded, and a request is never refused for another origin's load.
  const states = new KeyTable<OriginState>({ maxKeys: maxOrigins, whenAllBusy: 'keep' });
  const makeOrigin = (origin: string): OriginState => {
    const limits = merge(defaults, overrideByOrigin.get(origin));
    const { maxWait } = limits;
    if (adaptive === undefined) {
      const scheduler = new Scheduler(schedulerOptions(limits, clock));
      return new OriginState({ origin, scheduler, clock, maxWait, settleMs: settleMsOf(scheduler, limits) });
    }
    const scheduler = new Scheduler(schedulerOptions({ ...limits, rate: adaptive.bounds.initial }, clock));
    const settleMs = Math.max(settleMsOf(scheduler, limits), adaptive.keepMs);
    const state = new OriginState({ origin, scheduler, clock, maxWait, settleMs });
    state.adaptive = new AdaptiveOrigin({
      origin,
      scheduler,
      settings: adaptive,
      nowMs: clock.now(),
      maxPauseMs,
      notify: notifyRate,
    });
    return state;
  };
  // 'http://h:80/' as given -> 'http://h': each origin string is parsed as a URL once, not per request.
  const originCache = new Map<string, string>();

  const interceptor = (dispatch: Dispatch): Dispatch => {
    return function throttleDispatch(opts: DispatchOptions, handler: DispatchHandler): boolean {
      const raw = opts.origin;
      let origin = typeof raw === 'string' ? originCache.get(raw) : undefined;
      if (origin === undefined) {
        origin = originOf(raw);
        if (typeof raw === 'string' && originCache.size < MAX_CACHED_ORIGINS) originCache.set(raw, origin);
      }
      const enqueuedAtMs = clock.now();
      const known = origin;
      // With whenAllBusy 'keep', `add` always adds.
      const state = states.use(known) ?? (states.add(known, enqueuedAtMs, () => makeOrigin(known)) as OriginState);
      const controller = new PacedController();
      const method = String(opts.method);
      const path = opts.path;

      /** Fails the request before it is sent (the scheduler rejected it, or it was aborted while waiting). */
      const rejectRequest = (error: unknown, publish: boolean): void => {
        if (publish && clientRejectedChannel.hasSubscribers) {
          clientRejectedChannel.publish({ origin, method, path, error } satisfies ClientRejectedMessage);
        }
        handler.onResponseError?.(controller, error as Error);
      };

      handler.onRequestStart?.(controller, undefined);
      if (controller.aborted) {
        rejectRequest(controller.reason, false);
        return true;
      }

      const pauseLeftMs = state.pauseLeftMs(enqueuedAtMs);
      if (pauseLeftMs > state.maxWaitMs) {
        rejectRequest(
          new WaitTooLongError({ waitMs: pauseLeftMs, maxWaitMs: state.maxWaitMs, retryAfterMs: pauseLeftMs }),
          true,
        );
        return true;
      }

      const waiting = new AbortController();
      controller.onAbortWaiting = (reason) => waiting.abort(reason);
      let started = false;
      state.scheduler
        .schedule(
          () =>
            new Promise<void>((done) => {
              started = true;
              controller.onAbortWaiting = undefined;
              if (clientStartChannel.hasSubscribers) {
                clientStartChannel.publish({
                  origin,
                  method,
                  path,
                  waitedMs: clock.now() - enqueuedAtMs,
                } satisfies ClientStartMessage);
              }
              state.lastUseMs = clock.now();
              send(dispatch, { opts, handler, controller, state }, () => {
                state.lastUseMs = clock.now();
                done();
              });
            }),
          { signal: waiting.signal },
        )
        .catch((error: unknown) => {
          if (!started) rejectRequest(error, !waiting.signal.aborted);
        });
      state.armIfWaiting();
      return true;
    };
  };
  Object.defineProperty(interceptor, 'originCount', { get: () => states.size, enumerable: true });
  const checkEvent = (event: unknown, listener: unknown): void => {
    if (event !== 'rate' || typeof listener !== 'function') {
      throw new InvalidOptionError('event', event, "Expected on('rate', listener) with a function listener");
    }
  };
  Object.assign(interceptor, {
    rateOf: (origin: string) => states.peek(originOf(origin))?.scheduler.rate,
    on(event: 'rate', listener: (info: RateChangeInfo) => void) {
      checkEvent(event, listener);
      rateListeners.add(listener);
    },
    off(event: 'rate', listener: (info: RateChangeInfo) => void) {
      checkEvent(event, listener);
      rateListeners.delete(listener);
    },
  });
  return interceptor as unknown as ThrottleInterceptor;

  /** Holds `state` for `delayMs` (at most `maxPause`) and tells the pause channel. */
  function hold(state: OriginState, statusCode: number, delayMs: number, source: ClientPauseMessage['source']): void {
    const heldMs = Math.min(delayMs, maxPauseMs);
    if (state.pauseFor(clock.now(), heldMs) && clientPauseChannel.hasSubscribers) {
      clientPauseChannel.publish({
        origin: state.origin,
        statusCode,
        delayMs: heldMs,
        source,
      } satisfies ClientPauseMessage);
    }
  }

  /** Sends the request and relays its response; `done` when the caller has it all (or an error). */
  function send(dispatch: Dispatch, outgoing: Outgoing, done: () => void): void {
    const { opts, handler, controller, state } = outgoing;
    let finished = false;
    let throttle: Throttle | undefined;
    const adaptive = state.adaptive;
    let seq = 0;
    if (adaptive !== undefined) {
      const sent = adaptive.sent(clock.now());
      seq = sent.seq;
      if (sent.holdMs > 0) hold(state, adaptive.quotaStatus, sent.holdMs, 'quota'); // it spent the last one
    }
    const finish = (): void => {
      if (finished) return;
      finished = true;
      done();
    };
    const fail = (error: Error): void => {
      if (finished) return;
      throttle?.destroy();
      handler.onResponseError?.(controller, error);
      finish();
    };
    const inner: DispatchHandler = {
      onRequestStart(connection) {
        controller.target = connection;
      },
      onRequestUpgrade(_connection, statusCode, headers, socket) {
        handler.onRequestUpgrade?.(controller, statusCode, headers, socket);
        finish();
      },
      onResponseStart(_connection, statusCode, headers, statusMessage) {
        const refused = pauseOn.has(statusCode);
        if (adaptive !== undefined) {
          const holdMs = adaptive.answered({
            seq,
            nowMs: clock.now(),
            statusCode,
            headers: headers as Headers,
            refused,
            wallMs: wallClock(),
          });
          if (holdMs > 0) hold(state, statusCode, holdMs, 'quota');
        }
        if (refused) {
          const asked = pauseRequested(headers as Headers, wallClock());
          if (asked !== undefined && asked.delayMs > 0) hold(state, statusCode, asked.delayMs, asked.source);
        }
        if (member !== undefined && opts.method !== 'HEAD') {
          const paced = member();
          throttle = paced;
          paced.on('data', (chunk: Buffer) => handler.onResponseData?.(controller, chunk));
          paced.on('drain', () => {
            controller.throttleFull = false;
          });
          paced.on('error', (error: Error) => fail(error));
          controller.onCallerPause = (paused) => {
            if (paused) paced.pause();
            else paced.resume();
          };
        }
        handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
      },
      onResponseData(_connection, chunk) {
        if (throttle === undefined) {
          handler.onResponseData?.(controller, chunk);
        } else if (!throttle.write(chunk)) {
          controller.throttleFull = true;
        }
      },
      onResponseEnd(_connection, trailers) {
        if (throttle === undefined) {
          handler.onResponseEnd?.(controller, trailers);
          finish();
          return;
        }
        throttle.once('end', () => {
          handler.onResponseEnd?.(controller, trailers);
          finish();
        });
        throttle.end();
      },
      onResponseError(_connection, error) {
        fail(error);
      },
    };
    try {
      const paced = member === undefined ? undefined : throttleRequestBody(opts, member);
      dispatch(paced ?? opts, inner);
    } catch (error) {
      fail(error as Error);
    }
  }
}
