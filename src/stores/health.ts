/**
 * The failure policy of a shared store, one copy for every store whose state
 * lives in another process (RedisStore, RedisWindowStore, RedisFleetStore,
 * PostgresStore, PostgresFleetStore): every call is bounded by the store's
 * `timeout`; a call that fails or times out is a `failure`, and the first one
 * makes the store `degraded`, so later decisions follow `onError` at once
 * (none waits out the timeout again) while one probe at a time tries the backend
 * every `probeInterval`. A probe is the store's own decision on a probe key,
 * writing as a decision writes, so it succeeds only where a decision would:
 * a read-only replica (of Redis or PostgreSQL) or a Redis out of memory
 * answers a ping but refuses the probe, and the store stays degraded. The first probe that succeeds makes it
 * `recovered`. Each transition is an event on the store and a message on the
 * `tokenpace:redis:*` channels (src/diagnostics.ts; every shared store
 * publishes there, whatever its backend).
 *
 * A backend that may delete the store's state behind its back gives an
 * eviction check (Redis's `maxmemory-policy`, src/redis/eviction.ts), read at
 * the store's first call and after each recovery; a setting that may evict
 * is an `eviction` event and message: the store's bounds do not hold while
 * the backend deletes its state, and it says so.
 *
 * The store keeps its decisions; this keeps its health.
 */

import type { EventEmitter } from 'node:events';
import type { Clock } from '../clock.js';
import {
  storeDegradedChannel,
  storeEvictionChannel,
  storeFailureChannel,
  storeRecoveredChannel,
} from '../diagnostics.js';
import { InvalidOptionError, StoreUnavailableError } from '../errors.js';
import { type DurationInput, parseDuration } from '../units.js';

/** What to do when the store's backend fails or does not answer within the store's `timeout`. */
export type FailurePolicy = 'allow' | 'deny' | 'local';

/** What Redis says about evicting keys (the payload of the `eviction` event; src/redis/eviction.ts reads it). */
export interface MaxmemorySettings {
  /** Redis's `maxmemory-policy`, as Redis names it: `'noeviction'`, `'allkeys-lru'`, `'volatile-ttl'`, ... */
  readonly policy: string;
  /** Redis's `maxmemory`, bytes: 0 is no limit, `undefined` if Redis did not say. */
  readonly maxmemoryBytes: number | undefined;
}

/** The events a shared store emits (RedisStore, RedisWindowStore, RedisFleetStore, PostgresStore, PostgresFleetStore). */
export interface StoreEvents {
  /** A call to the backend failed or timed out: decisions now follow the policy. */
  degraded: [{ error: Error; policy: FailurePolicy }];
  /** A probe succeeded: decisions go to the backend again; `downMs` is how long they followed the policy. */
  recovered: [{ downMs: number }];
  /** A call to the backend failed or timed out (also while degraded, for probes). */
  failure: [{ error: Error; operations: number }];
  /**
   * Redis's `maxmemory-policy` may evict the store's keys (any policy but `noeviction`): an evicted
   * key comes back as new (a bucket full, a window empty), so its limit does not hold. Read at the
   * store's first call and after each recovery.
   */
  eviction: [MaxmemorySettings];
}

/** The default bound on one call to the backend, ms. */
export const DEFAULT_TIMEOUT_MS = 200;
/** The default interval between probes of a failed backend, ms. */
export const DEFAULT_PROBE_INTERVAL_MS = 250;

/** The longest delay a Node timer honours: a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The names of the options every shared store has; each store adds its own to refuse any other. */
export const SHARED_STORE_OPTIONS: readonly string[] = [
  'client',
  'prefix',
  'onError',
  'timeout',
  'probeInterval',
  'clock',
  'now',
];

/**
 * The options every shared store has, checked once here: a `client` (an object or a function; `client`
 * says what to pass, as in `'{ client: new Redis(url) }'`), `onError`, `timeout` and
 * `probeInterval` (durations from 1 ms to 2^31 - 1 ms, what a Node timer honours: a number of ms
 * or a string such as `'250ms'`), and `now` (a function, if given). Each bad one is an
 * InvalidOptionError saying what to write (a string that is no duration: InvalidDurationError). @internal
 */
export function failureOptions(
  options: {
    client?: unknown;
    onError: unknown;
    timeout?: DurationInput;
    probeInterval?: DurationInput;
    now?: unknown;
  },
  client: { example: string; what: string },
): {
  policy: FailurePolicy;
  timeoutMs: number;
  probeIntervalMs: number;
  now: (() => number) | undefined;
} {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(
      'options',
      options,
      `Expected an options object with at least \`client\` and \`onError\`, as in \`{ client: ${client.example}, onError: 'deny' }\``,
    );
  }
  if ((typeof options.client !== 'object' && typeof options.client !== 'function') || options.client === null) {
    throw new InvalidOptionError(
      'client',
      options.client,
      `Expected \`client\` to be ${client.what}, as in \`{ client: ${client.example} }\``,
    );
  }
  const policy = options.onError;
  if (!(policy === 'allow' || policy === 'deny' || policy === 'local')) {
    throw new InvalidOptionError(
      'onError',
      policy,
      `Expected \`onError\` to be 'allow' (fail-open), 'deny' (fail-closed) or 'local' (in-memory per instance), got ${String(policy)}`,
    );
  }
  const timeoutMs = timerOption('timeout', options.timeout, DEFAULT_TIMEOUT_MS);
  const probeIntervalMs = timerOption('probeInterval', options.probeInterval, DEFAULT_PROBE_INTERVAL_MS);
  const { now } = options;
  if (now !== undefined && typeof now !== 'function') {
    throw new InvalidOptionError(
      'now',
      now,
      "Expected `now` to be a function that returns the time in ms (as in `now: () => clock.now()`), or no `now` to use the server's time",
    );
  }
  return { policy, timeoutMs, probeIntervalMs, now: now as (() => number) | undefined };
}

/** A duration option for a timer, in ms: from 1 to 2^31 - 1, or the default when absent. */
function timerOption(name: string, value: DurationInput | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const ms = typeof value === 'string' ? parseDuration(value) : value;
  if (typeof ms !== 'number' || !(ms >= 1 && ms <= MAX_TIMER_MS)) {
    throw new InvalidOptionError(
      name,
      value,
      `Expected \`${name}\` to be a duration from 1 ms to ${MAX_TIMER_MS} ms (2^31 - 1, the longest a Node timer waits; a longer one fires after 1 ms), as in \`${name}: ${fallback}\` or \`${name}: '${fallback}ms'\`, got ${String(value)}`,
    );
  }
  return ms;
}

/** A shared store as the health keeper sees it: an emitter of the store events, on the channels. */
export type HealthOwner = EventEmitter<StoreEvents>;

/** `tokenpace:redis:degraded`: decisions now follow the store's policy. */
export interface StoreDegradedMessage {
  /** A `RedisStore`, `RedisWindowStore`, `RedisFleetStore`, `PostgresStore` or `PostgresFleetStore` (a fleet Scheduler's): test with `instanceof`. */
  readonly store: HealthOwner;
  readonly error: Error;
  readonly policy: FailurePolicy;
}

/** `tokenpace:redis:recovered`: a probe succeeded, and decisions go to the backend again. */
export interface StoreRecoveredMessage {
  readonly store: HealthOwner;
  /** How long decisions followed the policy, ms. */
  readonly downMs: number;
}

/** `tokenpace:redis:eviction`: Redis's `maxmemory-policy` may evict the store's keys. */
export interface StoreEvictionMessage extends MaxmemorySettings {
  readonly store: HealthOwner;
}

/** `tokenpace:redis:failure`: one failed or timed-out call (or probe: `operations` 0). */
export interface StoreFailureMessage {
  readonly store: HealthOwner;
  readonly error: Error;
  /** Decisions the failed call carried. */
  readonly operations: number;
}

/** One call's {@link StoreHealth.deadline}: when it falls due, and what it calls then (none once cleared). */
interface Deadline {
  readonly at: number;
  onTimeout: ((error: Error) => void) | undefined;
}

/** What a {@link StoreHealth} watches over, and how it asks the backend. */
export interface StoreHealthOptions {
  /** The store whose events (`degraded`, `recovered`, `failure`, `eviction`) it emits. */
  owner: HealthOwner;
  /** The backend's name in messages: `'Redis'`, `'PostgreSQL'`. */
  backend: string;
  /** The store's failure settings. */
  failure: { policy: FailurePolicy; timeoutMs: number; probeIntervalMs: number };
  clock: Clock;
  /**
   * One decision-shaped call (the store's script on a probe key, bounded by the timeout): it
   * resolves only where a decision would succeed.
   */
  probe: () => Promise<unknown>;
  /** The store's counters; `failures` counts every failed call or probe. */
  stats: { failures: number };
  /**
   * For a backend that may delete the store's state (Redis: src/redis/eviction.ts): `read` never
   * rejects, `mayEvict` says whether a policy deletes keys. Without it no eviction check is made.
   */
  eviction?: { read: () => Promise<MaxmemorySettings | undefined>; mayEvict: (policy: string) => boolean };
}

/** The health of one store's backend, with the store's events and channel messages. @internal */
export class StoreHealth {
  readonly backend: string;
  readonly policy: FailurePolicy;
  readonly timeoutMs: number;
  readonly probeIntervalMs: number;
  readonly #owner: HealthOwner;
  readonly #clock: Clock;
  readonly #probeCall: () => Promise<unknown>;
  readonly #stats: { failures: number };
  readonly #eviction: StoreHealthOptions['eviction'];
  #degradedSinceMs: number | undefined;
  #probeTimer: unknown;
  /** The calls' deadlines, first due first (from #deadlineHead on), and the one timer for them. */
  #deadlines: Deadline[] = [];
  #deadlineHead = 0;
  #deadlineTimer: unknown;
  #probing = false;
  #closed = false;
  /** Whether the first call has asked for the backend's eviction policy. */
  #maxmemoryAsked = false;
  #maxmemory: MaxmemorySettings | undefined;

  constructor({ owner, backend, failure, clock, probe, stats, eviction }: StoreHealthOptions) {
    this.#owner = owner;
    this.backend = backend;
    this.policy = failure.policy;
    this.timeoutMs = failure.timeoutMs;
    this.probeIntervalMs = failure.probeIntervalMs;
    this.#clock = clock;
    this.#probeCall = probe;
    this.#stats = stats;
    this.#eviction = eviction;
  }

  /**
   * Redis's `maxmemory-policy` and `maxmemory` as the last check read them (the store's first
   * call, each recovery); `undefined` before it answers, or when Redis refused both ways to ask.
   */
  get maxmemory(): MaxmemorySettings | undefined {
    return this.#maxmemory;
  }

  /** False while decisions follow the failure policy. */
  get healthy(): boolean {
    return this.#degradedSinceMs === undefined;
  }

  /** True once closed: every later decision follows the policy. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Whether a decision should go to the backend now (healthy and not closed). */
  get usable(): boolean {
    return this.#degradedSinceMs === undefined && !this.#closed;
  }

  /** Stops probing. */
  close(): void {
    this.#closed = true;
    if (this.#probeTimer !== undefined) this.#clock.clearTimeout(this.#probeTimer);
    this.#probeTimer = undefined;
  }

  /**
   * Settles with `promise`, or rejects after `timeoutMs`; a late settlement is absorbed (never
   * unhandled). Every call to the backend passes here: the first also reads its eviction policy.
   */
  withTimeout<T>(promise: Promise<T>): Promise<T> {
    if (!this.#maxmemoryAsked) this.#checkEviction();
    return new Promise<T>((resolve, reject) => {
      const timer = this.deadline(reject);
      promise.then(
        (value) => {
          this.clearDeadline(timer);
          resolve(value);
        },
        (error: unknown) => {
          this.clearDeadline(timer);
          reject(error);
        },
      );
    });
  }

  /**
   * Calls `onTimeout` with the timeout's error `timeoutMs` from now, unless {@link clearDeadline}
   * comes first: withTimeout without a promise of its own, for a caller that already holds callbacks.
   * Every deadline is `timeoutMs` long, so they fall due in the order they were set: they wait in
   * one queue under one timer, armed for the first (not unarmed when calls settle: it finds those
   * gone when it fires, and is armed again for the next one due), instead of a timer per call.
   */
  deadline(onTimeout: (error: Error) => void): unknown {
    const d: Deadline = { at: this.#clock.now() + this.timeoutMs, onTimeout };
    this.#deadlines.push(d);
    if (this.#deadlineTimer === undefined) this.#armDeadlines(this.timeoutMs);
    return d;
  }

  /** Cancels a {@link deadline}. */
  clearDeadline(handle: unknown): void {
    (handle as Deadline).onTimeout = undefined;
    const queue = this.#deadlines;
    let head = this.#deadlineHead;
    while (head < queue.length && (queue[head] as Deadline).onTimeout === undefined) head++;
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else if (head >= 1024) {
      queue.splice(0, head);
      head = 0;
    }
    this.#deadlineHead = head;
  }

  #armDeadlines(ms: number): void {
    this.#deadlineTimer = this.#clock.setTimeout(() => this.#expireDeadlines(), ms);
    // a call in flight is held open by its client's socket; this timer holds nothing open
    unref(this.#deadlineTimer);
  }

  #expireDeadlines(): void {
    this.#deadlineTimer = undefined;
    const now = this.#clock.now();
    const queue = this.#deadlines;
    const due: ((error: Error) => void)[] = [];
    let head = this.#deadlineHead;
    for (; head < queue.length; head++) {
      const d = queue[head] as Deadline;
      if (d.onTimeout === undefined) continue;
      if (d.at > now) break;
      due.push(d.onTimeout);
      d.onTimeout = undefined;
    }
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else {
      this.#armDeadlines(Math.max(1, Math.ceil((queue[head] as Deadline).at - now)));
    }
    this.#deadlineHead = head;
    // after the queue is set right: a callback may set or clear deadlines
    for (const onTimeout of due) {
      onTimeout(
        new StoreUnavailableError(`${this.backend} did not answer within the store's timeout (${this.timeoutMs} ms)`),
      );
    }
  }

  /** A call carrying `operations` decisions failed: a `failure`, and degraded if not yet. */
  failed(error: Error, operations: number): void {
    this.#failure(error, operations);
    this.degrade(error);
  }

  /** Decisions follow the policy from now until a probe gets an answer. */
  degrade(error: Error): void {
    if (this.#degradedSinceMs !== undefined) return;
    this.#degradedSinceMs = this.#clock.now();
    const owner = this.#owner;
    owner.emit('degraded', { error, policy: this.policy });
    if (storeDegradedChannel.hasSubscribers) {
      storeDegradedChannel.publish({ store: owner, error, policy: this.policy } satisfies StoreDegradedMessage);
    }
    this.#scheduleProbe();
  }

  #failure(error: Error, operations: number): void {
    this.#stats.failures++;
    const owner = this.#owner;
    owner.emit('failure', { error, operations });
    if (storeFailureChannel.hasSubscribers) {
      storeFailureChannel.publish({ store: owner, error, operations } satisfies StoreFailureMessage);
    }
  }

  #scheduleProbe(): void {
    if (this.#closed || this.#probeTimer !== undefined) return;
    this.#probeTimer = this.#clock.setTimeout(() => {
      this.#probeTimer = undefined;
      this.#probe();
    }, this.probeIntervalMs);
    unref(this.#probeTimer);
  }

  #probe(): void {
    if (this.#probing || this.#closed || this.#degradedSinceMs === undefined) return;
    this.#probing = true;
    let probe: Promise<unknown>;
    try {
      probe = this.#probeCall();
    } catch (error) {
      probe = Promise.reject(error);
    }
    this.withTimeout(probe).then(
      () => {
        this.#probing = false;
        if (this.#degradedSinceMs === undefined) return;
        const downMs = this.#clock.now() - this.#degradedSinceMs;
        this.#degradedSinceMs = undefined;
        const owner = this.#owner;
        owner.emit('recovered', { downMs });
        if (storeRecoveredChannel.hasSubscribers) {
          storeRecoveredChannel.publish({ store: owner, downMs } satisfies StoreRecoveredMessage);
        }
        // the backend may not be the one it was (a restart, a fail-over): its eviction policy again
        this.#checkEviction();
      },
      (error: unknown) => {
        this.#probing = false;
        this.#failure(errorOf(error), 0);
        this.#scheduleProbe();
      },
    );
  }

  /** Reads the backend's eviction policy; one that may evict the store's keys is an `eviction` event. */
  #checkEviction(): void {
    this.#maxmemoryAsked = true;
    const eviction = this.#eviction;
    if (eviction === undefined || this.#closed) return;
    this.withTimeout(eviction.read()).then(
      (settings) => {
        this.#maxmemory = settings;
        if (settings === undefined || !eviction.mayEvict(settings.policy) || this.#closed) return;
        const owner = this.#owner;
        owner.emit('eviction', settings);
        if (storeEvictionChannel.hasSubscribers) {
          storeEvictionChannel.publish({ store: owner, ...settings } satisfies StoreEvictionMessage);
        }
      },
      () => {
        this.#maxmemory = undefined; // no answer within the timeout: unknown until the next check
      },
    );
  }
}

/** `error` as an Error. @internal */
export function errorOf(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

function unref(handle: unknown): void {
  if (typeof handle === 'object' && handle !== null && 'unref' in handle) {
    const { unref } = handle as { unref: unknown };
    if (typeof unref === 'function') unref.call(handle);
  }
}
