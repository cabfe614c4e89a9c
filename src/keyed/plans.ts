/**
 * Limits by plan: where each key's rate and burst come from when they are not one pair for all.
 *
 * A source of limits is one of:
 *
 * - a fixed `{ rate, burst }` (every key the same);
 * - `limits(subject)`, a function returning `{ rate, burst }`, sync or async;
 * - `plans` (a table of named `{ rate, burst }`) and `plan(subject)`, a function returning a name
 *   of the table, sync or async.
 *
 * `subject` is the key for KeyedLimiter and KeyedScheduler, the request for
 * `rateLimit`. Every form resolves to {@link BucketParams}: the table is parsed once; a `limits`
 * object is parsed the first time it is seen and again only when its `rate` or `burst` changed
 * (the parse is cached per object, compared by the inputs), so returning constants costs a map
 * read, not a parse. A value that is not a pair, or a plan name not in the table, is an
 * `InvalidOptionError` naming what was returned.
 *
 * Invariant: resolving never touches a bucket. What a key does on a new plan is the store's rule
 * (its tokens kept, capped at the new burst: `clampToCapacity` in src/meters/bucket.ts).
 */

import { checkKnownOptions, describeValue, InvalidOptionError } from '../errors.js';
import { type BucketParams, bucketParams } from '../meters/bucket.js';
import type { RateInput, SizeInput } from '../units.js';

/** One plan's limits: a token bucket's rate and burst. */
export interface PlanLimits {
  /** Tokens per second: a number or a string such as `'100/min'`. */
  rate: RateInput;
  /** The bucket's capacity: the most taken at once. */
  burst: SizeInput;
}

/** Limits given per subject (a key, or a request): a function returning `{ rate, burst }`, sync or async. */
export type LimitsFunction<S> = (subject: S) => PlanLimits | PromiseLike<PlanLimits>;
/** Picks a plan of the table by name, sync or async. */
export type PlanFunction<S> = (subject: S) => string | PromiseLike<string>;

/** The options that give limits by plan (beside a fixed `rate` and `burst`). */
export interface PlanOptions<S> {
  /** Each subject's limits, `{ rate, burst }`, sync or async. Instead of `rate` and `burst`, or of `plans`. */
  limits?: LimitsFunction<S>;
  /** Named limits, e.g. `{ free: { rate: '10/s', burst: 10 }, paid: { rate: '500/s', burst: 500 } }`; with `plan`. */
  plans?: Readonly<Record<string, PlanLimits>>;
  /** With `plans`: the name of the subject's plan, sync or async. */
  plan?: PlanFunction<S>;
}

/** Resolved limits: parameters now, or a promise of them. */
export type LimitsResolver<S> = (subject: S) => BucketParams | Promise<BucketParams>;

const PLAN_LIMITS: ReadonlySet<string> = new Set(['rate', 'burst']);

/** Parses one `{ rate, burst }`; `what` names it in the error. */
export function planParams(value: unknown, what: string): BucketParams {
  if (typeof value !== 'object' || value === null) {
    throw new InvalidOptionError(
      what,
      value,
      `Expected ${what} to be { rate, burst }, such as { rate: '10/s', burst: 10 }, got ${describeValue(value)}`,
    );
  }
  checkKnownOptions(value, PLAN_LIMITS, what);
  const { rate, burst } = value as Partial<PlanLimits>;
  if (rate === undefined || burst === undefined) {
    throw new InvalidOptionError(
      what,
      value,
      `Expected ${what} to have both \`rate\` and \`burst\`, such as { rate: '10/s', burst: 10 }`,
    );
  }
  return bucketParams(rate, burst);
}

/**
 * The resolver for `limits` or `plans` + `plan`, or `undefined` when neither is given (then the
 * caller's fixed `rate` and `burst` apply). Throws when the options mix or miss a part; `fixed` says
 * whether `rate` or `burst` was given too (refused beside a plan).
 */
export function limitsResolver<S>(options: PlanOptions<S>, fixed: boolean): LimitsResolver<S> | undefined {
  const { limits, plans, plan } = options;
  if (limits === undefined && plans === undefined && plan === undefined) return undefined;
  if (fixed) {
    const option = limits !== undefined ? 'limits' : plans !== undefined ? 'plans' : 'plan';
    throw new InvalidOptionError(
      option,
      options[option],
      `Give either \`rate\` and \`burst\` (every key alike) or \`${option === 'limits' ? 'limits' : 'plans` and `plan'}\` (limits by plan), not both`,
    );
  }
  if (limits !== undefined) {
    if (plans !== undefined || plan !== undefined) {
      throw new InvalidOptionError(
        plans !== undefined ? 'plans' : 'plan',
        plans ?? plan,
        'Give either `limits` (a function returning { rate, burst }) or `plans` with `plan` (a table and a function naming one), not both',
      );
    }
    if (typeof limits !== 'function') {
      throw new InvalidOptionError(
        'limits',
        limits,
        `Expected \`limits\` to be a function returning { rate, burst } (or a promise of it), got ${describeValue(limits)}`,
      );
    }
    return fromLimits(limits);
  }
  if (typeof plan !== 'function') {
    throw new InvalidOptionError(
      'plan',
      plan,
      `Expected \`plan\` to be a function returning the name of one of \`plans\`, got ${describeValue(plan)}`,
    );
  }
  if (typeof plans !== 'object' || plans === null || Object.keys(plans).length === 0) {
    throw new InvalidOptionError(
      'plans',
      plans,
      "Expected `plans` to be a table of named limits, such as { free: { rate: '10/s', burst: 10 } }, " +
        `got ${describeValue(plans)}`,
    );
  }
  return fromPlans(plans, plan);
}

/** The parse of a `limits` object, with the inputs it was made from (a change of either parses again). */
interface Parsed {
  rate: unknown;
  burst: unknown;
  params: BucketParams;
}

/** Objects whose parse is looked up by identity before the WeakMap: a handful of plans fit. */
const RECENT = 8;

function fromLimits<S>(limits: LimitsFunction<S>): LimitsResolver<S> {
  const parsed = new WeakMap<object, Parsed>();
  const recent: (PlanLimits | undefined)[] = new Array(RECENT).fill(undefined);
  const recentParsed: (Parsed | undefined)[] = new Array(RECENT).fill(undefined);
  let next = 0;
  const paramsOf = (value: PlanLimits): BucketParams => {
    for (let i = 0; i < RECENT; i++) {
      if (recent[i] === value) {
        const seen = recentParsed[i] as Parsed;
        if (seen.rate === value.rate && seen.burst === value.burst) return seen.params;
        break;
      }
    }
    let seen = typeof value === 'object' && value !== null ? parsed.get(value) : undefined;
    if (seen === undefined || seen.rate !== value.rate || seen.burst !== value.burst) {
      const params = planParams(value, 'the value of limits()'); // throws for anything but { rate, burst }
      seen = { rate: value.rate, burst: value.burst, params };
      parsed.set(value, seen);
    }
    recent[next] = value;
    recentParsed[next] = seen;
    next = (next + 1) % RECENT;
    return seen.params;
  };
  return (subject) => {
    const value = limits(subject);
    if (typeof (value as { then?: unknown } | null)?.then === 'function') return Promise.resolve(value).then(paramsOf);
    return paramsOf(value as PlanLimits);
  };
}

function fromPlans<S>(plans: Readonly<Record<string, PlanLimits>>, plan: PlanFunction<S>): LimitsResolver<S> {
  const table = new Map<string, BucketParams>();
  for (const name of Object.keys(plans)) table.set(name, planParams(plans[name], `plans.${name}`));
  let lastName: string | undefined;
  let lastParams: BucketParams | undefined;
  const paramsOf = (name: string): BucketParams => {
    if (name === lastName) return lastParams as BucketParams;
    const params = typeof name === 'string' ? table.get(name) : undefined;
    if (params !== undefined) {
      lastName = name;
      lastParams = params;
      return params;
    }
    throw new InvalidOptionError(
      'plan',
      name,
      `plan() returned ${describeValue(name)}, which is not one of \`plans\` (${[...table.keys()].join(', ')}): ` +
        'return one of those names, or add the plan to the table',
    );
  };
  return (subject) => {
    const name = plan(subject);
    if (typeof name === 'string') return paramsOf(name);
    if (typeof (name as { then?: unknown } | null)?.then === 'function') return Promise.resolve(name).then(paramsOf);
    return paramsOf(name as never); // not a name: refused with the table's names
  };
}
