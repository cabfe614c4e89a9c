/**
 * One error hierarchy for all of tokenpace.
 *
 * Every error is a {@link TokenpaceError} with a stable `code` (the contract to
 * branch on; messages may be reworded) and the numbers that explain it as
 * fields (`cost`, `capacity`, `retryAfterMs`, ...). Messages say what was given
 * and what is expected, so the fix is in the message:
 *
 *   cost 300 exceeds the bucket's capacity (burst) of 200: a request that large
 *   can never conform; raise `burst` to at least 300 or split the request
 *
 * `instanceof` works within one copy of the package; {@link isTokenpaceError}
 * also recognises errors from another copy (two versions in one dependency
 * tree, another realm) through a `Symbol.for` brand, as undici does.
 */

const brand = Symbol.for('tokenpace.error');

/** Every stable error code tokenpace uses. */
export type ErrorCode =
  | 'ERR_INVALID_RATE'
  | 'ERR_INVALID_SIZE'
  | 'ERR_INVALID_DURATION'
  | 'ERR_INVALID_OPTION'
  | 'ERR_COST_EXCEEDS_CAPACITY'
  | 'ERR_BURST_TOO_SMALL'
  | 'ERR_QUEUE_FULL'
  | 'ERR_TOO_MANY_KEYS'
  | 'ERR_WAIT_TOO_LONG'
  | 'ERR_JOB_TIMEOUT'
  | 'ERR_STORE_UNAVAILABLE'
  | 'ERR_CLOSED'
  | 'ERR_NOT_SUPPORTED'
  | 'ABORT_ERR';

/** The base class: anything tokenpace throws or rejects with on purpose. */
export class TokenpaceError extends Error {
  override name = 'TokenpaceError';
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  static {
    // The brand every copy of the package recognises (see isTokenpaceError): on the prototype,
    // non-enumerable, so it is inherited by every error and shows in no listing of its fields.
    Object.defineProperty(TokenpaceError.prototype, brand, { value: true });
  }
}

/** A rate that is not a positive finite number or a string {@link parseRate} understands. */
export class InvalidRateError extends TokenpaceError {
  override name = 'InvalidRateError';
  override readonly code = 'ERR_INVALID_RATE' as const;
  /** What was given. */
  readonly value: unknown;
  constructor(value: unknown, message: string) {
    super('ERR_INVALID_RATE', message);
    this.value = value;
  }
}

/** A size (burst, capacity, cost) that is not valid where it was given. */
export class InvalidSizeError extends TokenpaceError {
  override name = 'InvalidSizeError';
  override readonly code = 'ERR_INVALID_SIZE' as const;
  readonly value: unknown;
  constructor(value: unknown, message: string) {
    super('ERR_INVALID_SIZE', message);
    this.value = value;
  }
}

/** A duration that is not a finite number of milliseconds >= 0 or a string {@link parseDuration} understands. */
export class InvalidDurationError extends TokenpaceError {
  override name = 'InvalidDurationError';
  override readonly code = 'ERR_INVALID_DURATION' as const;
  readonly value: unknown;
  constructor(value: unknown, message: string) {
    super('ERR_INVALID_DURATION', message);
    this.value = value;
  }
}

/** Any other option that is out of range or of the wrong type. */
export class InvalidOptionError extends TokenpaceError {
  override name = 'InvalidOptionError';
  override readonly code = 'ERR_INVALID_OPTION' as const;
  /** The option's name, e.g. `'maxQueue'`. */
  readonly option: string;
  readonly value: unknown;
  constructor(option: string, value: unknown, message: string) {
    super('ERR_INVALID_OPTION', message);
    this.option = option;
    this.value = value;
  }
}

/**
 * A single request costs more than the bucket can ever hold, so it can never
 * conform. Thrown at once instead of waiting forever.
 */
export class CostExceedsCapacityError extends TokenpaceError {
  override name = 'CostExceedsCapacityError';
  override readonly code = 'ERR_COST_EXCEEDS_CAPACITY' as const;
  readonly cost: number;
  /** The bucket's capacity (its burst), or the scheduler's concurrency. */
  readonly capacity: number;
  /**
   * `capacityName`: what the capacity is, in the message (default the bucket's burst); `quantity`:
   * what the message calls the number (`'weight'` for a job's concurrency weight given apart from its cost).
   */
  constructor({
    cost,
    capacity,
    capacityName = "the bucket's capacity (burst)",
    quantity = 'cost',
  }: {
    cost: number;
    capacity: number;
    capacityName?: string;
    quantity?: 'cost' | 'weight';
  }) {
    super(
      'ERR_COST_EXCEEDS_CAPACITY',
      `${quantity} ${cost} exceeds ${capacityName} of ${capacity}: a request that large can never conform; ` +
        `raise the limit to at least ${cost} or split the request`,
    );
    this.cost = cost;
    this.capacity = capacity;
  }
}

/**
 * A burst too small for the timer resolution to sustain the rate: between two
 * timer wake-ups the bucket overflows and the tokens are lost (TBF's rule,
 * burst >= rate / HZ).
 */
export class BurstTooSmallError extends TokenpaceError {
  override name = 'BurstTooSmallError';
  override readonly code = 'ERR_BURST_TOO_SMALL' as const;
  readonly burst: number;
  /** The smallest burst that sustains the rate. */
  readonly minBurst: number;
  constructor(burst: number, minBurst: number, message: string) {
    super('ERR_BURST_TOO_SMALL', message);
    this.burst = burst;
    this.minBurst = minBurst;
  }
}

/** The bounded wait queue is full; the new job was rejected at once. */
export class QueueFullError extends TokenpaceError {
  override name = 'QueueFullError';
  override readonly code = 'ERR_QUEUE_FULL' as const;
  readonly maxQueue: number;
  /** An estimate of when a slot frees up, in milliseconds. */
  readonly retryAfterMs: number;
  /**
   * `'full'`: the new job was turned away; `'evicted'`: a waiting job made room for one of higher
   * priority (`onFull: 'evict-lower'`); `'dropped'`: the oldest waiting job of the lowest priority
   * made room for a newer one (`onFull: 'drop-oldest'`).
   */
  readonly reason: 'full' | 'evicted' | 'dropped';
  constructor({
    maxQueue,
    retryAfterMs,
    reason = 'full',
  }: {
    maxQueue: number;
    retryAfterMs: number;
    reason?: 'full' | 'evicted' | 'dropped';
  }) {
    const retry = `retry in about ${Math.ceil(retryAfterMs)} ms, or raise maxQueue if the backlog is expected`;
    super(
      'ERR_QUEUE_FULL',
      reason === 'full'
        ? `queue full: ${maxQueue} jobs are already waiting (maxQueue ${maxQueue}); ${retry}`
        : reason === 'evicted'
          ? `evicted from a full queue (maxQueue ${maxQueue}) by a job of higher priority; ${retry}`
          : `dropped from a full queue (maxQueue ${maxQueue}), the oldest of the lowest priority, for a newer job; ${retry}`,
    );
    this.maxQueue = maxQueue;
    this.retryAfterMs = retryAfterMs;
    this.reason = reason;
  }
}

/**
 * A KeyedScheduler was given a job for a new key while the `maxKeys` keys it keeps all have jobs
 * waiting or running: it keeps no more, so memory stays bounded.
 */
export class TooManyKeysError extends TokenpaceError {
  override name = 'TooManyKeysError';
  override readonly code = 'ERR_TOO_MANY_KEYS' as const;
  readonly maxKeys: number;
  /** The new key that was refused. */
  readonly key: string;
  constructor(maxKeys: number, key: string) {
    super(
      'ERR_TOO_MANY_KEYS',
      `too many keys: the ${maxKeys} keys kept (maxKeys ${maxKeys}) all have jobs waiting or running, so a new key ` +
        `(${describeValue(key)}) cannot be added; retry once some finish, or raise maxKeys if that many tenants are ` +
        'expected at once',
    );
    this.maxKeys = maxKeys;
    this.key = key;
  }
}

/** A job would start (or has waited) later than its `maxWait`. */
export class WaitTooLongError extends TokenpaceError {
  override name = 'WaitTooLongError';
  override readonly code = 'ERR_WAIT_TOO_LONG' as const;
  readonly maxWaitMs: number;
  /** The predicted (or actual) wait, in milliseconds. */
  readonly waitMs: number;
  readonly retryAfterMs: number;
  /** `message` replaces the default, which speaks of a predicted wait. */
  constructor({
    waitMs,
    maxWaitMs,
    retryAfterMs,
    message,
  }: {
    waitMs: number;
    maxWaitMs: number;
    retryAfterMs: number;
    message?: string;
  }) {
    super(
      'ERR_WAIT_TOO_LONG',
      message ??
        `predicted wait of ${Math.ceil(waitMs)} ms exceeds maxWait of ${maxWaitMs} ms; ` +
          `retry in about ${Math.ceil(retryAfterMs)} ms, or raise maxWait`,
    );
    this.waitMs = waitMs;
    this.maxWaitMs = maxWaitMs;
    this.retryAfterMs = retryAfterMs;
  }
}

/** A running job overran its `timeout`. */
export class JobTimeoutError extends TokenpaceError {
  override name = 'JobTimeoutError';
  override readonly code = 'ERR_JOB_TIMEOUT' as const;
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super(
      'ERR_JOB_TIMEOUT',
      `job ran longer than its timeout of ${timeoutMs} ms; raise \`timeout\` or make the job abort on its signal`,
    );
    this.timeoutMs = timeoutMs;
  }
}

/** The store behind a keyed limit did not answer (and the policy is to say so). */
export class StoreUnavailableError extends TokenpaceError {
  override name = 'StoreUnavailableError';
  override readonly code = 'ERR_STORE_UNAVAILABLE' as const;
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_STORE_UNAVAILABLE', message, options);
  }
}

/** A job given to a scheduler after `close()`, or a waiting job that `close({ drain: false })` turned away. */
export class ClosedError extends TokenpaceError {
  override name = 'ClosedError';
  override readonly code = 'ERR_CLOSED' as const;
  constructor(message = 'the scheduler is closed: it takes no new jobs') {
    super('ERR_CLOSED', message);
  }
}

/** An operation the object was not configured for (a window limiter's `take`, say); the message says what to use instead. */
export class NotSupportedError extends TokenpaceError {
  override name = 'NotSupportedError';
  override readonly code = 'ERR_NOT_SUPPORTED' as const;
  constructor(message: string) {
    super('ERR_NOT_SUPPORTED', message);
  }
}

/**
 * A wait that was cancelled by `clear()` or similar. Aborts through an
 * `AbortSignal` reject with the signal's own `reason` instead.
 */
export class AbortError extends TokenpaceError {
  override name = 'AbortError';
  override readonly code = 'ABORT_ERR' as const;
  constructor(message = 'the operation was aborted', options?: { cause?: unknown }) {
    super('ABORT_ERR', message, options);
  }
}

/** The longest string {@link describeValue} quotes whole. */
const QUOTED_CHARS = 60;

/**
 * A value as an error message shows it, so that what was given is unmistakable: strings are
 * quoted (`"4"`, never a bare `4` that reads like the number), numbers are written as they are
 * (`NaN`, `-1`), and anything else is named by its type and, for class instances, its class:
 * `a value of type object (AbortController)`, the usual mistake for its `signal`.
 *
 *   `invalid rate "4 per fortnight": ...`   `expected an AbortSignal, got a value of type object (AbortController)`
 *
 * Long strings are cut to their first {@link QUOTED_CHARS} characters, with the length.
 * @internal for tokenpace's own messages; not exported from the package root.
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    if (value.length <= QUOTED_CHARS) return JSON.stringify(value);
    return `${JSON.stringify(value.slice(0, QUOTED_CHARS)).slice(0, -1)}..." (${value.length} characters)`;
  }
  if (typeof value === 'number') return String(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null) return 'a value of type null';
  if (typeof value === 'object') {
    const constructorName = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor
      ?.name;
    return typeof constructorName === 'string' && constructorName !== '' && constructorName !== 'Object'
      ? `a value of type object (${constructorName})`
      : 'a value of type object';
  }
  return `a value of type ${typeof value}`;
}

/** Maps each code to its class, for {@link isTokenpaceError}'s narrowing. */
export interface ErrorByCode {
  ERR_INVALID_RATE: InvalidRateError;
  ERR_INVALID_SIZE: InvalidSizeError;
  ERR_INVALID_DURATION: InvalidDurationError;
  ERR_INVALID_OPTION: InvalidOptionError;
  ERR_COST_EXCEEDS_CAPACITY: CostExceedsCapacityError;
  ERR_BURST_TOO_SMALL: BurstTooSmallError;
  ERR_QUEUE_FULL: QueueFullError;
  ERR_TOO_MANY_KEYS: TooManyKeysError;
  ERR_WAIT_TOO_LONG: WaitTooLongError;
  ERR_JOB_TIMEOUT: JobTimeoutError;
  ERR_STORE_UNAVAILABLE: StoreUnavailableError;
  ERR_CLOSED: ClosedError;
  ERR_NOT_SUPPORTED: NotSupportedError;
  ABORT_ERR: AbortError;
}

/**
 * True if `value` is a tokenpace error (from any copy of the package), and,
 * when `code` is given, one with that code.
 *
 * @example
 * if (isTokenpaceError(err, 'ERR_QUEUE_FULL')) setTimeout(retry, err.retryAfterMs);
 */
export function isTokenpaceError(value: unknown): value is TokenpaceError;
export function isTokenpaceError<C extends ErrorCode>(value: unknown, code: C): value is ErrorByCode[C];
export function isTokenpaceError(value: unknown, code?: ErrorCode): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (!(value instanceof TokenpaceError) && (value as Record<symbol, unknown>)[brand] !== true) return false;
  return code === undefined || (value as TokenpaceError).code === code;
}

/**
 * `value` as an `AbortSignal`, or `undefined` when absent. Anything else (the
 * `AbortController` itself, a look-alike such as `{ aborted: true }`) is refused with
 * {@link InvalidOptionError} before anything is charged or armed, so a mistake costs a clear
 * error, never a token, a crash from a timer callback, or a rejection with `undefined`.
 * A signal from another realm (vm, jsdom) passes: what is checked is what is used.
 * @internal
 */
export function checkSignal(value: unknown, option = 'signal'): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (value instanceof AbortSignal) return value;
  const candidate = value as Partial<AbortSignal> | null;
  if (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.aborted === 'boolean' &&
    typeof candidate.addEventListener === 'function' &&
    typeof candidate.removeEventListener === 'function' &&
    typeof candidate.throwIfAborted === 'function'
  ) {
    return candidate as AbortSignal;
  }
  const hint =
    value instanceof AbortController
      ? ": pass the controller's `signal` (`controller.signal`), not the controller"
      : '';
  throw new InvalidOptionError(
    option,
    value,
    `Expected \`${option}\` to be an AbortSignal, got ${describeValue(value)}${hint}`,
  );
}

/**
 * An options argument: `undefined` (all defaults, when `required` is false) or an object.
 * Anything else (`null`, a string, a number) is refused with {@link InvalidOptionError}.
 * @internal
 */
export function checkOptions<T extends object>(value: T | undefined, what: string, required: boolean): T | undefined {
  if (value === undefined && !required) return undefined;
  if (typeof value === 'object' && value !== null) return value;
  throw new InvalidOptionError(
    'options',
    value,
    `Expected the ${what} to be an object${required ? '' : ' or undefined'}, got ${describeValue(value)}`,
  );
}

/**
 * How much earlier than asked a timer may fire, measured against `performance.now()`: Node
 * starts a timer from the event loop's cached time, which can lag the real time by a
 * millisecond or more. A retry hint includes it (see {@link retryHintMs}).
 */
export const TIMER_EARLY_MS = 2;

/**
 * A retry hint a client can follow: the exact wait `exactMs` rounded up to whole milliseconds,
 * plus {@link TIMER_EARLY_MS} so that a client that waits it with `setTimeout` is admitted even
 * when its timer fires early. 0 stays 0 (retry now).
 * @internal
 */
export function retryHintMs(exactMs: number): number {
  if (!(exactMs > 0)) return 0;
  if (exactMs === Number.POSITIVE_INFINITY) return exactMs;
  return Math.ceil(exactMs) + TIMER_EARLY_MS;
}

/**
 * Refuses an option name that `known` does not list, as TypeScript would and plain JavaScript
 * cannot: a misspelt `brust` or an express-rate-limit `keyGenerator` must not be ignored in silence.
 * `peers` maps names that users bring from other libraries to what to write here instead; any
 * other unknown name is answered with the closest known one ("did you mean `burst`?"). The check
 * reads the object's own enumerable string keys once: a few property reads per constructor.
 * @internal
 */
export function checkKnownOptions(
  options: object,
  known: ReadonlySet<string>,
  what: string,
  peers?: Readonly<Record<string, string>>,
): void {
  for (const name in options) {
    if (!Object.hasOwn(options, name) || known.has(name)) continue;
    if ((options as Record<string, unknown>)[name] === undefined && peers?.[name] === undefined) continue;
    const instead = peers !== undefined && Object.hasOwn(peers, name) ? peers[name] : undefined;
    const closest = instead === undefined ? closestName(name, known) : undefined;
    const hint = instead !== undefined ? `: ${instead}` : closest !== undefined ? `: did you mean \`${closest}\`?` : '';
    throw new InvalidOptionError(
      name,
      (options as Record<string, unknown>)[name],
      `Unknown option \`${name}\` for ${what}${hint} (known: ${[...known].sort().join(', ')})`,
    );
  }
}

/**
 * The known name closest to `name`: the same letters in another case, else the fewest single-letter
 * edits (insert, delete, substitute, swap two neighbours), at most 2 and less than half the name.
 * @internal
 */
export function closestName(name: string, known: Iterable<string>): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    if (candidate.toLowerCase() === lower) return candidate;
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return bestDistance <= 2 && bestDistance * 2 < name.length ? best : undefined;
}

/** Optimal string alignment distance (Damerau-Levenshtein without repeated edits of a substring). */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(
        (d[(i - 1) * cols + j] as number) + 1,
        (d[i * cols + j - 1] as number) + 1,
        (d[(i - 1) * cols + j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        v = Math.min(v, (d[(i - 2) * cols + j - 2] as number) + 1);
      }
      d[i * cols + j] = v;
    }
  }
  return d[rows * cols - 1] as number;
}
