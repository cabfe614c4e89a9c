/**
 * `rateLimit`'s options: their types, and the checks that turn them into a
 * {@link RateLimitConfig} once, when the middleware is made.
 *
 * Invariants of a config: exactly one source of limits (`limiter`, or `rate`
 * and `burst`, or limits by plan, `limits` or `plans` and `plan`, from which a
 * `KeyedLimiter` is made); with limits by plan (rateLimit's, of the request,
 * or a given KeyedLimiter's, of the key) `planned` resolves each request's and
 * `RateLimit-Policy` advertises them, unless `policy` says otherwise; `maxWait` only with a
 * limiter that has take() (a token bucket, not a window); giving costs back
 * (`skipSuccessfulRequests`, `skipFailedRequests`) only with a limiter that
 * has credit(); `maxQueue` an integer >= 0; the policy name printable ASCII.
 * A bad option throws a coded error naming it when `rateLimit` is called,
 * never at a request; so does an option name it does not know, and the names
 * users bring from express-rate-limit and @fastify/rate-limit are answered
 * with ours (`keyGenerator` -> `key`).
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Clock, checkClock } from '../clock.js';
import { checkKnownOptions, describeValue, InvalidOptionError } from '../errors.js';
import { KeyedLimiter } from '../keyed/keyed-limiter.js';
import { type LimitsResolver, limitsResolver, type PlanLimits } from '../keyed/plans.js';
import { type BucketParams, bucketParams } from '../meters/bucket.js';
import {
  type DurationInput,
  parseDuration,
  parseRate,
  parseSizeOption,
  type RateInput,
  type SizeInput,
} from '../units.js';
import { compileTrust, DEFAULT_IPV6_SUBNET, type ProxyHeader, type TrustProxy } from './client-address.js';
import { type PolicyWindow, policyWindow } from './headers.js';
import type { HttpErrorMessage } from './messages.js';
import { type HeaderList, type HeaderStyle, type ProblemDetails, type RateFields, rateFields } from './response.js';
import type { Decision, RateLimitDecider } from './types.js';
import { checkWallClock } from './wall-clock.js';

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
  /** Where it failed: a user function (`key`, `cost`, `skip`, `limits` for `limits` or `plan`) or the limiter itself. */
  readonly stage: Extract<HttpErrorMessage['stage'], 'key' | 'cost' | 'skip' | 'limits' | 'limiter'>;
  /** The status the default answer sends: 500, or 503 for a limiter that could not decide. */
  readonly statusCode: number;
  readonly problem: ProblemDetails;
}

/**
 * What a handler finds on the request (`req.rateLimit`, or the property named by
 * `requestPropertyName`): the decision of the limiter that let the request through.
 */
export interface RequestRateLimit extends Decision {
  /** The policy's name as sent in the header fields (with a suffix when stacked limiters share one). */
  readonly policy: string;
  readonly key: string;
  readonly cost: number;
}

/** Options for `rateLimit` and `rateLimitHook`. `Req`/`Res` are the framework's request and response types. */
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
  /**
   * Each request's limits, `{ rate, burst }`, sync or async, instead of `rate` and `burst` (a free
   * key 10/s, a paid one 500/s): the limit as a function of the request, as express-rate-limit's
   * `limit` and @fastify/rate-limit's `max` may be. `RateLimit-Policy` advertises each request's own.
   * A key whose limits change keeps its tokens, capped at the new burst. Bounded by `functionTimeout`.
   */
  limits?: (req: Req) => PlanLimits | Promise<PlanLimits>;
  /** Named limits, e.g. `{ free: { rate: '10/s', burst: 10 }, paid: { rate: '500/s', burst: 500 } }`; with `plan`. */
  plans?: Readonly<Record<string, PlanLimits>>;
  /** With `plans`: the name of the request's plan, sync or async. Bounded by `functionTimeout`. */
  plan?: (req: Req) => string | Promise<string>;
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
   * Milliseconds since the Unix epoch, read only to write `X-RateLimit-Reset` (a Unix time) with
   * `legacyHeaders`; the buckets run on `clock`. @default () => Date.now()
   */
  wallClock?: () => number;
  /**
   * The request's key, a non-empty string. @default the client's address
   * (see `trustProxy`), IPv6 grouped by `ipv6Subnet`
   */
  key?: (req: Req) => string | Promise<string>;
  /** The request's cost, a number >= 0. @default 1 */
  cost?: (req: Req) => number | Promise<number>;
  /** Requests for which this returns true pass without being counted or given headers. */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /**
   * The longest a `key`, `cost` or `skip` promise may take (ms or `'2s'`):
   * past it the request is answered 500 and a `TimeoutError` is published.
   * @default 5000
   */
  functionTimeout?: DurationInput;
  /**
   * Which forwarding hops to believe for the default key: `false` (the
   * socket's peer only), `true` (all), a hop count, a list of proxy
   * addresses/CIDR blocks, or a predicate `(address, hop) => boolean`.
   * Not given, the framework's own answer is used when it has one: Express's
   * `req.ip` when its `trust proxy` setting is on, Fastify's `request.ip`.
   * @default false
   */
  trustProxy?: TrustProxy;
  /**
   * For the default key: the prefix length (bits) that groups IPv6 clients,
   * 1 to 128 (`false`: 128, each address its own). Any IPv6 spelling of an
   * IPv4 address counts as the IPv4 address whatever this is.
   * @default 64
   */
  ipv6Subnet?: number | false;
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
  /**
   * The rate-limit header fields: `true` or `'draft-11'` (`RateLimit-Policy`
   * and `RateLimit` as Structured Fields lists; `'draft-8'` is the same
   * syntax), `'draft-7'` (`RateLimit: limit=40, remaining=39, reset=1`),
   * `'draft-6'` (`RateLimit-Limit`, `-Remaining`, `-Reset`), or `false`.
   * `Retry-After` is sent on every refusal whatever this is.
   * @default 'draft-11'
   */
  headers?: boolean | HeaderStyle | 'draft-8';
  /**
   * Also send `X-RateLimit-Limit` (the burst: what `Remaining` counts down from), `X-RateLimit-Remaining`
   * and `X-RateLimit-Reset` (Unix time, s). @default false
   */
  legacyHeaders?: boolean;
  /** Where handlers find the decision: `req[requestPropertyName]` (a {@link RequestRateLimit}); `false`: nowhere. @default 'rateLimit' */
  requestPropertyName?: string | false;
  /** Give an admitted request's cost back once its response has gone out with a status below 400 (see `requestWasSuccessful`). */
  skipSuccessfulRequests?: boolean;
  /** Give an admitted request's cost back once its response has a status of 400 or more, or did not complete. */
  skipFailedRequests?: boolean;
  /** What counts as a success for `skipSuccessfulRequests`/`skipFailedRequests`. @default a status below 400 */
  requestWasSuccessful?: (req: Req, res: Res) => boolean | Promise<boolean>;
  /**
   * Answers a refused request instead of the default 429. It must end the
   * response (send the reply). The rate-limit fields and `Retry-After` are
   * already set on the response (the reply, for Fastify), unless an earlier
   * handler had sent its headers: then nothing is set, and it is called all
   * the same (`res.headersSent` is true) to end the response. If it throws or
   * rejects, the error goes to the framework's error path: Express's and
   * Connect's `next(error)`, Fastify's error handler; see docs/http.md.
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
const DEFAULT_FUNCTION_TIMEOUT_MS = 5000;

/** Every option's name: any other is refused when the middleware is made. */
// biome-ignore format: a list of names
const KNOWN = new Set([
  'limiter', 'rate', 'burst', 'limits', 'plans', 'plan', 'global', 'maxKeys', 'clock', 'wallClock', 'key', 'cost', 'skip', 'functionTimeout',
  'trustProxy', 'proxyHeader', 'ipv6Subnet', 'maxWait', 'maxQueue', 'policyName', 'policy', 'headers',
  'legacyHeaders', 'requestPropertyName', 'skipSuccessfulRequests', 'skipFailedRequests', 'requestWasSuccessful',
  'onLimit', 'onError',
]);

const LIMITS =
  "give `rate` and `burst`: a token bucket (express-rate-limit's `limit: 100, windowMs: 15 * 60_000` is about `rate: '100/15min', burst: 100`); a limit that depends on the request is `limits: (req) => ({ rate, burst })`; for a counter per window, `limiter: new KeyedLimiter({ algorithm: 'fixed-window', limit, window })`";
const HEADERS =
  "use `headers`: true or 'draft-11' (the default), 'draft-7', 'draft-6' or false, and `legacyHeaders` for X-RateLimit-*";
const ANSWER =
  'answer refusals yourself with `onLimit: (req, res, info) => ...` (the default is a 429 with a problem+json body)';
const STORE =
  'pass `limiter: new KeyedLimiter({ rate, burst, store })` with a MemoryStore or a RedisStore (its `prefix` namespaces the keys)';
const FAIL_OPEN =
  "write `onError: (error, req, res, next) => next()` to let requests through when the limiter fails (or a RedisStore's `onError: 'allow'`)";
const NOT_OFFERED = 'not offered: a token bucket refills continuously (see docs/migrating.md)';

/** Options users bring from express-rate-limit and @fastify/rate-limit, and what to write here instead. */
const PEERS: Readonly<Record<string, string>> = {
  keyGenerator: 'write `key: (req) => string`',
  windowMs: LIMITS,
  limit: LIMITS,
  max: LIMITS,
  timeWindow: LIMITS,
  handler: 'write `onLimit: (req, res, info) => ...`',
  message: ANSWER,
  statusCode: ANSWER,
  errorResponseBuilder: ANSWER,
  standardHeaders: HEADERS,
  enableDraftSpec: HEADERS,
  addHeaders: HEADERS,
  addHeadersOnExceeding: HEADERS,
  identifier: 'use `policyName`',
  store: STORE,
  cache: STORE,
  redis: STORE,
  nameSpace: STORE,
  validate: 'remove it: rateLimit checks every option when it is made and throws a coded error',
  passOnStoreError: FAIL_OPEN,
  skipOnError: FAIL_OPEN,
  allowList: 'write `skip: (req) => ...`',
  groupId: 'write `key`: routes that share a limit share a key',
  hook: "register the hook you want yourself: `fastify.addHook('preHandler', rateLimitHook(...))`",
  onExceeding: 'subscribe to the `tokenpace:http:decision` diagnostics channel (every decision)',
  onExceeded: 'answer refusals with `onLimit`, or subscribe to `tokenpace:http:decision`',
  retryAfter: "`Retry-After` is the bucket's own wait, in whole seconds rounded up; set another in `onLimit`",
  logger: 'subscribe to the `tokenpace:http:error` diagnostics channel: every failure is published there',
  ban: NOT_OFFERED,
  onBanReach: NOT_OFFERED,
  continueExceeding: NOT_OFFERED,
  exponentialBackoff: NOT_OFFERED,
};

/** How `skipSuccessfulRequests`/`skipFailedRequests` give costs back. */
export interface GiveBack<Req, Res> {
  readonly successful: boolean;
  readonly failed: boolean;
  readonly wasSuccessful: RateLimitOptions<Req, Res>['requestWasSuccessful'];
  /** The limiter's `credit(key, cost)`. */
  readonly credit: (key: string, cost: number) => Promise<void>;
}

/**
 * Limits by plan, resolved per request: `of` gives a request's limits (rateLimit's `limits` or `plans`
 * of the request, or a given KeyedLimiter's of the key), and `limiter` decides with them.
 */
export interface PlannedLimits<Req> {
  readonly limiter: KeyedLimiter;
  readonly of: (req: Req, key: string) => BucketParams | Promise<BucketParams>;
  /** What `RateLimit-Policy` advertises for the limits (`undefined`: the limiter's `policy` option or none). */
  readonly policyOf: ((limits: BucketParams) => PolicyWindow) | undefined;
}

/** The options of {@link RateLimitOptions}, checked and resolved: what the engine runs on. */
export interface RateLimitConfig<Req, Res> {
  readonly limiter: RateLimitDecider;
  /** Limits by plan; `undefined`: the limiter's own, the same for every request. */
  readonly planned: PlannedLimits<Req> | undefined;
  /** The burst, when known: the `limit` of a refusal made from a `WaitTooLongError` (0 if unknown). */
  readonly advertisedCapacity: number;
  readonly clock: Clock;
  readonly policyName: string;
  /** The rate-limit header fields of a decision. */
  readonly fields: RateFields;
  /** 0: decide at once. */
  readonly maxWaitMs: number;
  readonly maxQueue: number;
  readonly trust: ReturnType<typeof compileTrust>;
  /** False when `trustProxy` was not given (the framework's own answer may then be used). */
  readonly trustGiven: boolean;
  readonly proxyHeader: ProxyHeader;
  readonly ipv6Subnet: number;
  /** Infinity: unbounded. */
  readonly functionTimeoutMs: number;
  readonly requestProperty: string | undefined;
  readonly giveBack: GiveBack<Req, Res> | undefined;
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
  checkKnownOptions(options, KNOWN, 'rateLimit options', PEERS);
  if (options.global !== undefined && (options.global === null || typeof options.global !== 'object')) {
    throw new InvalidOptionError(
      'global',
      options.global,
      "`global` is a bucket over all keys, `{ rate, burst }`; to limit every route (@fastify/rate-limit's " +
        '`global: true`), register rateLimitPlugin (tokenpace/fastify), which does, or the hook on the ' +
        "instance: fastify.addHook('onRequest', rateLimitHook(...))",
    );
  }
  let limiter: RateLimitDecider;
  let policy: PolicyWindow | undefined;
  let advertisedCapacity = 0;
  let planned: PlannedLimits<Req> | undefined;
  const byRequest: LimitsResolver<Req> | undefined = limitsResolver<Req>(
    options,
    options.rate !== undefined || options.burst !== undefined,
  );
  if (options.limiter !== undefined) {
    if (byRequest !== undefined) {
      throw new InvalidOptionError(
        'limiter',
        options.limiter,
        'Give either `limiter` or `limits`/`plans`, not both: for limits by plan with a limiter of your own, ' +
          'give the KeyedLimiter `limits` or `plans` and `plan` (functions of the key)',
      );
    }
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
    if (limiter instanceof KeyedLimiter && limiter.algorithm === 'token-bucket' && limiter.rate === undefined) {
      const keyed = limiter;
      planned = { limiter: keyed, of: (_req, key) => keyed.limitsFor(key), policyOf: undefined };
    }
  } else if (byRequest !== undefined) {
    const made = new KeyedLimiter({
      limits: unresolved,
      global: options.global,
      maxKeys: options.maxKeys,
      clock: options.clock,
    });
    limiter = made;
    planned = { limiter: made, of: byRequest, policyOf: undefined };
  } else {
    if (options.rate === undefined) {
      throw new InvalidOptionError(
        'rate',
        options.rate,
        'rateLimit needs either `limiter` or both `rate` and `burst` (e.g. { rate: 20, burst: 40 })',
      );
    }
    const params = bucketParams(options.rate, options.burst); // the rate first, then the burst rule
    const made = new KeyedLimiter({
      rate: params.ratePerSecond,
      burst: params.burst,
      global: options.global,
      maxKeys: options.maxKeys,
      clock: options.clock,
    });
    limiter = made;
    advertisedCapacity = made.burst as number;
    if (options.policy !== false) policy = policyWindow(made.rate as number, advertisedCapacity);
  }
  if (planned !== undefined && options.policy === undefined) planned = { ...planned, policyOf: policyOfLimits() };
  const clock = checkClock(options.clock);
  const policyName = checkPolicyName(options.policyName);
  const fields = rateFields({
    style: headerStyle(options.headers),
    legacy: options.legacyHeaders === true,
    policyName,
    policy,
    wallClock: checkWallClock(options.wallClock),
  });
  const maxWaitMs = options.maxWait === undefined ? 0 : parseDuration(options.maxWait);
  const algorithm = (limiter as { algorithm?: unknown }).algorithm;
  const windowed = algorithm === 'fixed-window' || algorithm === 'sliding-window';
  if (maxWaitMs > 0 && windowed) {
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
    planned,
    advertisedCapacity,
    clock,
    policyName,
    fields,
    maxWaitMs,
    maxQueue,
    trust,
    trustGiven: options.trustProxy !== undefined,
    proxyHeader,
    ipv6Subnet: checkIpv6Subnet(options.ipv6Subnet),
    functionTimeoutMs:
      options.functionTimeout === undefined ? DEFAULT_FUNCTION_TIMEOUT_MS : positiveMs(options.functionTimeout),
    requestProperty: checkRequestProperty(options.requestPropertyName),
    giveBack: giveBackOf(options, limiter, windowed ? String(algorithm) : undefined),
    key: callback(options.key, 'key', '(req) => string'),
    cost: callback(options.cost, 'cost', '(req) => number'),
    skip: callback(options.skip, 'skip', '(req) => boolean'),
    onLimit: callback(options.onLimit, 'onLimit', '(req, res, info) => void'),
    onError: callback(options.onError, 'onError', '(error, req, res, next, info) => void'),
  };
}

/** The limits function of the KeyedLimiter rateLimit makes for limits by plan: never called, each request's are given. */
function unresolved(): never {
  throw new Error("rateLimit resolves each request's limits itself");
}

/** Each plan's policy, computed once per limits object (plans and `limits` objects resolve to the same one each time). */
function policyOfLimits(): (limits: BucketParams) => PolicyWindow {
  const policies = new WeakMap<BucketParams, PolicyWindow>();
  return (limits) => {
    let policy = policies.get(limits);
    if (policy === undefined) {
      policy = policyWindow(limits.ratePerSecond, limits.burst);
      policies.set(limits, policy);
    }
    return policy;
  };
}

/** A callback option: a function or nothing, refused now rather than failing every request later. */
function callback<F>(value: F | undefined, option: string, shape: string): F | undefined {
  if (value === undefined || typeof value === 'function') return value;
  throw new InvalidOptionError(
    option,
    value,
    `Expected \`${option}\` to be a function ${shape}, got ${describeValue(value)}`,
  );
}

/** The policy's name in RateLimit-Policy and RateLimit: a non-empty string (quoted there as a structured-field string). */
function checkPolicyName(value: unknown): string {
  if (value === undefined) return 'default';
  if (typeof value === 'string' && value !== '' && /^[\x20-\x7e]*$/.test(value)) return value;
  throw new InvalidOptionError(
    'policyName',
    value,
    `Expected \`policyName\` to be a non-empty string of printable ASCII characters, got ${describeValue(value)}`,
  );
}

function headerStyle(value: RateLimitOptions['headers']): HeaderStyle | false {
  if (value === undefined || value === true || value === 'draft-11' || value === 'draft-8') return 'draft-11';
  if (value === false || value === 'draft-7' || value === 'draft-6') return value;
  throw new InvalidOptionError(
    'headers',
    value,
    `Expected \`headers\` to be true, false, 'draft-11', 'draft-8', 'draft-7' or 'draft-6', got ${String(value)}`,
  );
}

function checkIpv6Subnet(value: number | false | undefined): number {
  if (value === undefined) return DEFAULT_IPV6_SUBNET;
  if (value === false) return 128;
  if (Number.isInteger(value) && value >= 1 && value <= 128) return value;
  throw new InvalidOptionError(
    'ipv6Subnet',
    value,
    `Expected \`ipv6Subnet\` to be a prefix length from 1 to 128 (usually 48 to 64), or false, got ${String(value)}`,
  );
}

function positiveMs(value: DurationInput): number {
  const ms = parseDuration(value);
  if (ms > 0) return ms;
  throw new InvalidOptionError(
    'functionTimeout',
    value,
    'Expected `functionTimeout` to be a duration above 0 (Infinity: no bound)',
  );
}

function checkRequestProperty(value: string | false | undefined): string | undefined {
  if (value === undefined) return 'rateLimit';
  if (value === false) return undefined;
  if (typeof value === 'string' && value.length > 0) return value;
  throw new InvalidOptionError(
    'requestPropertyName',
    value,
    `Expected \`requestPropertyName\` to be a non-empty string or false, got ${String(value)}`,
  );
}

function giveBackOf<Req, Res>(
  options: RateLimitOptions<Req, Res>,
  limiter: RateLimitDecider,
  windowAlgorithm: string | undefined,
): GiveBack<Req, Res> | undefined {
  const successful = options.skipSuccessfulRequests === true;
  const failed = options.skipFailedRequests === true;
  if (!successful && !failed) {
    if (options.requestWasSuccessful !== undefined) {
      throw new InvalidOptionError(
        'requestWasSuccessful',
        options.requestWasSuccessful,
        '`requestWasSuccessful` is read only with `skipSuccessfulRequests` or `skipFailedRequests`: give one of them',
      );
    }
    return undefined;
  }
  const option = successful ? 'skipSuccessfulRequests' : 'skipFailedRequests';
  if (windowAlgorithm !== undefined || typeof limiter.credit !== 'function') {
    throw new InvalidOptionError(
      option,
      true,
      `\`${option}\` gives a request's cost back with the limiter's credit(key, cost), which ` +
        `${windowAlgorithm === undefined ? 'this limiter does not have' : `a '${windowAlgorithm}' limiter does not have`}: ` +
        'use a token-bucket limiter (rate and burst, or a KeyedLimiter on a MemoryStore or RedisStore)',
    );
  }
  const credit = limiter.credit.bind(limiter);
  const wasSuccessful = callback(options.requestWasSuccessful, 'requestWasSuccessful', '(req, res) => boolean');
  return { successful, failed, wasSuccessful, credit };
}
