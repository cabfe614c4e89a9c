/**
 * `rateLimit`'s options: their types, and the checks that turn them into a
 * {@link RateLimitConfig} once, when the middleware is made.
 *
 * Invariants of a config: exactly one source of limits (`limiter`, or `rate`
 * and `burst` from which a `KeyedLimiter` is made); `maxWait` only with a
 * limiter that has take() (a token bucket, not a window); `maxQueue` an
 * integer >= 0; the policy name printable ASCII. A bad option throws a coded
 * error naming it when `rateLimit` is called, never at a request.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Clock, systemClock } from '../clock.js';
import { InvalidOptionError } from '../errors.js';
import { KeyedLimiter } from '../keyed/keyed-limiter.js';
import {
  type DurationInput,
  parseDuration,
  parseRate,
  parseSizeOption,
  type RateInput,
  type SizeInput,
} from '../units.js';
import { compileTrust, type ProxyHeader, type TrustProxy } from './client-address.js';
import { type PolicyWindow, policyWindow } from './headers.js';
import type { HttpErrorMessage } from './messages.js';
import { decisionHeaders, type HeaderList, type ProblemDetails } from './response.js';
import type { Decision, RateLimitDecider } from './types.js';

/** What `onLimit` is told about a refused request. */
export interface LimitInfo {
  readonly key: string;
  readonly cost: number;
  readonly decision: Decision;
  /** The `Retry-After` value, whole seconds (>= 1). */
  readonly retryAfterSeconds: number;
  /** The header fields the default answer sends (already set on the response for node:http/Express). */
  readonly headers: HeaderList;
  /** The body the default answer sends. */
  readonly problem: ProblemDetails;
}

/** What `onError` is told. */
export interface ErrorInfo {
  /** Where it failed: a user function (`key`, `cost`, `skip`) or the limiter itself. */
  readonly stage: HttpErrorMessage['stage'];
  /** The status the default answer sends: 500, or 503 for a limiter that could not decide. */
  readonly statusCode: number;
  readonly problem: ProblemDetails;
}

/** Options for `rateLimit` and `rateLimit.fastify`. `Req`/`Res` are the framework's request and response types. */
export interface RateLimitOptions<Req = IncomingMessage, Res = ServerResponse> {
  /**
   * The limiter that decides: a `KeyedLimiter` (any store) or any object with
   * its `tryTake(key, cost)` and `take(key, cost, { signal, maxWait })`.
   * Give either this or `rate` and `burst`.
   */
  limiter?: RateLimitDecider;
  /** Each key's rate (with `burst`, instead of `limiter`): a number per second or a string such as `'100/min'`. */
  rate?: RateInput;
  /** Each key's burst (with `rate`). */
  burst?: SizeInput;
  /** A bucket over all keys: a request needs tokens in both, and neither is charged if either refuses. */
  global?: { rate: RateInput; burst: SizeInput };
  /**
   * With `rate`: the most keys kept in memory (the limiter's `MemoryStore`: full buckets go first,
   * then the least recently used). @default 100_000
   */
  maxKeys?: number;
  /** With `rate`: the time source of the buckets; also times `maxWait` holds. @default systemClock */
  clock?: Clock;
  /**
   * The request's key. @default the client's address (see `trustProxy`),
   * IPv6 grouped by /64
   */
  key?: (req: Req) => string | Promise<string>;
  /** The request's cost, a number >= 0. @default 1 */
  cost?: (req: Req) => number | Promise<number>;
  /** Requests for which this returns true pass without being counted or given headers. */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /**
   * Which forwarding hops to believe for the default key: `false` (the
   * socket's peer only), `true` (all), a hop count, a list of proxy
   * addresses/CIDR blocks, or a predicate `(address, hop) => boolean`.
   * @default false
   */
  trustProxy?: TrustProxy;
  /** The header that lists the forwarding chain, read only with `trustProxy`. @default 'x-forwarded-for' */
  proxyHeader?: ProxyHeader;
  /**
   * Hold a request that would be refused up to this long (ms or `'250ms'`)
   * until it conforms, instead of refusing it. @default 0 (refuse at once)
   */
  maxWait?: DurationInput;
  /** With `maxWait`: the most requests held at once; beyond that, decisions are immediate. @default 1000 */
  maxQueue?: number;
  /** The policy name in the `RateLimit-Policy` and `RateLimit` fields. @default 'default' */
  policyName?: string;
  /**
   * What `RateLimit-Policy` advertises, when `limiter` is given: its rate and
   * burst. Without it, the limiter's own numeric `rate` and `burst`
   * properties are used if it has them; otherwise the field is left out.
   * `false` leaves it out always.
   */
  policy?: { rate: RateInput; burst: SizeInput } | false;
  /** Send the `RateLimit-Policy` and `RateLimit` fields. @default true */
  headers?: boolean;
  /**
   * Answers a refused request instead of the default 429. It must end the
   * response (send the reply). The rate-limit fields and `Retry-After` are
   * already set on the response (the reply, for Fastify).
   */
  onLimit?: (req: Req, res: Res, info: LimitInfo) => void | Promise<void>;
  /**
   * Answers a request the middleware could not decide instead of the default
   * 500/503. It must end the response, or (node:http/Express) call `next()` to
   * let the request through unlimited.
   */
  onError?: (error: unknown, req: Req, res: Res, next: () => void, info: ErrorInfo) => void | Promise<void>;
}

const DEFAULT_MAX_QUEUE = 1000;

/** The options of {@link RateLimitOptions}, checked and resolved: what the engine runs on. */
export interface RateLimitConfig<Req, Res> {
  readonly limiter: RateLimitDecider;
  /** The burst, when known: the `limit` of a refusal made from a `WaitTooLongError` (0 if unknown). */
  readonly advertisedCapacity: number;
  readonly clock: Clock;
  readonly policyName: string;
  readonly sendHeaders: boolean;
  /** The rate-limit header fields of a decision (none when `sendHeaders` is false). */
  readonly rateHeaders: (decision: Decision) => Array<[string, string]>;
  /** 0: decide at once. */
  readonly maxWaitMs: number;
  readonly maxQueue: number;
  readonly trust: ReturnType<typeof compileTrust>;
  readonly proxyHeader: ProxyHeader;
  readonly key: RateLimitOptions<Req, Res>['key'];
  readonly cost: RateLimitOptions<Req, Res>['cost'];
  readonly skip: RateLimitOptions<Req, Res>['skip'];
  readonly onLimit: RateLimitOptions<Req, Res>['onLimit'];
  readonly onError: RateLimitOptions<Req, Res>['onError'];
}

/** Checks `options` and resolves them (see the file's opening comment); throws on the first bad one. */
export function resolveRateLimitOptions<Req, Res>(options: RateLimitOptions<Req, Res>): RateLimitConfig<Req, Res> {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'Expected rateLimit options to be an object');
  }
  let limiter: RateLimitDecider;
  let policy: PolicyWindow | undefined;
  let advertisedCapacity = 0;
  if (options.limiter !== undefined) {
    if (options.rate !== undefined || options.burst !== undefined || options.global !== undefined) {
      throw new InvalidOptionError(
        'limiter',
        options.limiter,
        'Give either `limiter` or `rate`/`burst`/`global`, not both: the limiter carries its own limits',
      );
    }
    limiter = options.limiter;
    if (typeof limiter.tryTake !== 'function' || typeof limiter.take !== 'function') {
      throw new InvalidOptionError(
        'limiter',
        limiter,
        'Expected `limiter` to have tryTake(key, cost) and take(key, cost, options)',
      );
    }
    const own = limiter as { rate?: unknown; burst?: unknown };
    if (options.policy) {
      advertisedCapacity = parseSizeOption(options.policy.burst, 'burst');
      policy = policyWindow(parseRate(options.policy.rate), advertisedCapacity);
    } else if (options.policy === undefined && typeof own.rate === 'number' && typeof own.burst === 'number') {
      advertisedCapacity = own.burst;
      policy = policyWindow(own.rate, own.burst);
    }
  } else {
    if (options.rate === undefined || options.burst === undefined) {
      throw new InvalidOptionError(
        'rate',
        options.rate,
        'rateLimit needs either `limiter` or both `rate` and `burst` (e.g. { rate: 20, burst: 40 })',
      );
    }
    const made = new KeyedLimiter({
      rate: options.rate,
      burst: options.burst,
      global: options.global,
      maxKeys: options.maxKeys,
      clock: options.clock,
    });
    limiter = made;
    advertisedCapacity = made.burst;
    if (options.policy !== false) policy = policyWindow(made.rate, made.burst);
  }
  const clock = options.clock ?? systemClock;
  const policyName = options.policyName ?? 'default';
  const sendHeaders = options.headers !== false;
  const rateHeaders = decisionHeaders(policyName, policy, sendHeaders);
  const maxWaitMs = options.maxWait === undefined ? 0 : parseDuration(options.maxWait);
  const algorithm = (limiter as { algorithm?: unknown }).algorithm;
  if (maxWaitMs > 0 && (algorithm === 'fixed-window' || algorithm === 'sliding-window')) {
    // Holding a request is take(): a reservation in a token bucket. A window limiter has no take().
    throw new InvalidOptionError(
      'maxWait',
      options.maxWait,
      `\`maxWait\` holds requests with the limiter's take(), which a '${algorithm}' limiter does not have: ` +
        'remove `maxWait` (refusals then carry Retry-After), or give a token-bucket limiter (rate and burst)',
    );
  }
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  if (!(Number.isInteger(maxQueue) && maxQueue >= 0)) {
    throw new InvalidOptionError(
      'maxQueue',
      maxQueue,
      `Expected \`maxQueue\` to be an integer >= 0, got ${String(maxQueue)}`,
    );
  }
  const trust = compileTrust(options.trustProxy);
  const proxyHeader = options.proxyHeader ?? 'x-forwarded-for';
  if (proxyHeader !== 'x-forwarded-for' && proxyHeader !== 'forwarded') {
    throw new InvalidOptionError(
      'proxyHeader',
      proxyHeader,
      "Expected `proxyHeader` to be 'x-forwarded-for' or 'forwarded'",
    );
  }
  return {
    limiter,
    advertisedCapacity,
    clock,
    policyName,
    sendHeaders,
    rateHeaders,
    maxWaitMs,
    maxQueue,
    trust,
    proxyHeader,
    key: options.key,
    cost: options.cost,
    skip: options.skip,
    onLimit: options.onLimit,
    onError: options.onError,
  };
}
