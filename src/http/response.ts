/**
 * From a decision to what the client is sent: the rate-limit header fields
 * (draft-11 by default, draft-7, draft-6, `X-RateLimit-*`; headers.ts formats
 * the values), `Retry-After`, and the RFC 9457
 * `application/problem+json` bodies of a 429, 500 or 503.
 *
 * Invariants: a refusal carries `Retry-After` in whole seconds, rounded up,
 * at least 1, whatever header style; a limiter that could not decide answers
 * 503 with `Retry-After: 1`, a user function that threw or a cost above the
 * burst 500; stacked limiters add to each other's fields, never overwrite
 * them (see {@link RateFields}); nothing is written to a response whose
 * headers have gone out: it is cut short ({@link abandon}), never left
 * hanging and never answered twice.
 */

import type { ServerResponse } from 'node:http';
import {
  formatPolicy,
  formatPolicyUnnamed,
  formatRateLimitQuoted,
  mostExhausted,
  type PolicyWindow,
  parseRateLimit,
  remainingOf,
  resetSecondsOf,
  sfString,
  wholeNumber,
} from './headers.js';
import type { HttpErrorMessage } from './messages.js';
import type { Decision } from './types.js';

/** The problem type the draft registers for a refused request. */
export const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/** An RFC 9457 problem details object, as the 429, 500 and 503 bodies carry. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

/** Header fields as name/value pairs, in the order they are set. */
export type HeaderList = ReadonlyArray<readonly [string, string]>;

export const NO_HEADERS: HeaderList = Object.freeze([]);
export const PROBLEM_TYPE = 'application/problem+json';

/** The rate-limit fields a limiter sends besides `Retry-After` (see `RateLimitOptions.headers`). */
export type HeaderStyle = 'draft-11' | 'draft-7' | 'draft-6';

/** Reads a field set on the response so far (by an earlier limiter), by its lowercase name. */
export type FieldReader<Res> = (res: Res, name: string) => string | undefined;

/**
 * One limiter's rate-limit fields. `first` is the common case, when no earlier
 * limiter has written (the response has no `marker` field); `stacked` merges
 * with what earlier limiters wrote: list fields (`RateLimit-Policy`, draft-11's
 * `RateLimit`) get this limiter's item appended, under a name no earlier item
 * has (`default-2`, `default-3`, ... when two share one); single-valued fields
 * (draft-7's `RateLimit`, draft-6's and the `X-RateLimit-*` trios) keep the
 * most restrictive layer's values: they are replaced unless they already say
 * fewer remaining.
 */
export interface RateFields {
  /** The lowercase field whose presence means an earlier limiter wrote (undefined: this one sends none). */
  readonly marker: string | undefined;
  /** `policy`: the key's own (limits by plan); without it, the limiter's. */
  first(decision: Decision, policy?: PolicyWindow): Array<[string, string]>;
  stacked<Res>(
    decision: Decision,
    res: Res,
    read: FieldReader<Res>,
    policy?: PolicyWindow,
  ): { name: string; fields: Array<[string, string]> };
}

/** What a limiter's {@link RateFields} are made from. */
export interface RateFieldsOptions {
  /** The standard fields' style; `false`: none. */
  readonly style: HeaderStyle | false;
  /** Also the `X-RateLimit-*` trio. */
  readonly legacy: boolean;
  readonly policyName: string;
  /** What `RateLimit-Policy` advertises (`undefined`: the field is left out). */
  readonly policy: PolicyWindow | undefined;
  /** Milliseconds since the Unix epoch, for `X-RateLimit-Reset` (see wall-clock.ts). */
  readonly wallClock: () => number;
}

/** Makes a limiter's {@link RateFields}; validates the policy name once, here. */
export function rateFields({ style, legacy, policyName, policy, wallClock }: RateFieldsOptions): RateFields {
  const quotedName = sfString(policyName); // validates, once
  const unnamedPolicy = policy === undefined ? undefined : formatPolicyUnnamed(policy);
  const namedPolicy = policy === undefined ? undefined : formatPolicy(policyName, policy);
  const marker =
    style === 'draft-6' ? 'ratelimit-remaining' : style !== false ? 'ratelimit' : legacy ? LEGACY : undefined;
  // The limit of draft-6's and draft-7's single-valued fields: the quota of the policy they come with, else the burst.
  const limitOf = (decision: Decision, own: PolicyWindow | undefined): number => own?.quota ?? decision.limit;
  const draft7 = (decision: Decision, own: PolicyWindow | undefined): string =>
    `limit=${limitOf(decision, own)}, remaining=${remainingOf(decision)}, reset=${resetSecondsOf(decision)}`;
  const pushTrio = (
    list: Array<[string, string]>,
    prefix: string,
    limit: number,
    decision: Decision,
    reset: number,
  ) => {
    list.push([`${prefix}Limit`, String(limit)]);
    list.push([`${prefix}Remaining`, String(remainingOf(decision))]);
    list.push([`${prefix}Reset`, String(reset)]);
  };
  // The X-RateLimit trio has no window to state a quota over: its Limit is what Remaining counts down
  // from and is back to at Reset, the bucket's burst (decision.limit), and Reset the Unix time (s,
  // rounded up) at which `t` falls.
  const pushLegacy = (list: Array<[string, string]>, decision: Decision): void =>
    pushTrio(list, 'X-RateLimit-', decision.limit, decision, Math.ceil(wallClock() / 1000) + resetSecondsOf(decision));

  const first = (decision: Decision, own: PolicyWindow | undefined = policy): Array<[string, string]> => {
    const list: Array<[string, string]> = [];
    const fixed = own === policy;
    if (style === 'draft-11') {
      const named = fixed ? namedPolicy : formatPolicy(policyName, own as PolicyWindow);
      if (named !== undefined) list.push(['RateLimit-Policy', named]);
      list.push(['RateLimit', formatRateLimitQuoted(quotedName, decision)]);
    } else if (style !== false) {
      const unnamed = fixed ? unnamedPolicy : formatPolicyUnnamed(own as PolicyWindow);
      if (unnamed !== undefined) list.push(['RateLimit-Policy', unnamed]);
      if (style === 'draft-7') list.push(['RateLimit', draft7(decision, own)]);
      else pushTrio(list, 'RateLimit-', limitOf(decision, own), decision, resetSecondsOf(decision));
    }
    if (legacy) pushLegacy(list, decision);
    return list;
  };

  const stacked = <Res>(decision: Decision, res: Res, read: FieldReader<Res>, own = policy) => {
    const list: Array<[string, string]> = [];
    let name = policyName;
    const remaining = remainingOf(decision);
    const policies = style === false ? undefined : read(res, 'ratelimit-policy');
    if (style === 'draft-11') {
      const limits = read(res, 'ratelimit');
      let quoted = quotedName;
      for (let n = 2; hasItem(limits, quoted) || hasItem(policies, quoted); n++) {
        name = `${policyName}-${n}`;
        quoted = sfString(name);
      }
      if (own !== undefined) list.push(['RateLimit-Policy', appendItem(policies, formatPolicy(name, own))]);
      list.push(['RateLimit', appendItem(limits, formatRateLimitQuoted(quoted, decision))]);
    } else if (style !== false) {
      if (own !== undefined) list.push(['RateLimit-Policy', appendItem(policies, formatPolicyUnnamed(own))]);
      if (style === 'draft-7') {
        const earlier = mostExhausted(parseRateLimit(read(res, 'ratelimit')) ?? [])?.remaining;
        if (remaining <= (earlier ?? Number.POSITIVE_INFINITY)) list.push(['RateLimit', draft7(decision, own)]);
      } else if (remaining <= wholeOr(read(res, 'ratelimit-remaining'))) {
        pushTrio(list, 'RateLimit-', limitOf(decision, own), decision, resetSecondsOf(decision));
      }
    }
    if (legacy && remaining <= wholeOr(read(res, 'x-ratelimit-remaining'))) pushLegacy(list, decision);
    return { name, fields: list };
  };

  return { marker, first, stacked };
}

const LEGACY = 'x-ratelimit-remaining';

/** A whole number of remaining units written by an earlier layer, or Infinity if there is none. */
function wholeOr(text: string | undefined): number {
  return wholeNumber(text) ?? Number.POSITIVE_INFINITY;
}

/** Whether a list field has an item named `quoted` (an sf-string, as sfString writes it). */
function hasItem(field: string | undefined, quoted: string): boolean {
  if (field === undefined) return false;
  for (let at = field.indexOf(quoted); at >= 0; at = field.indexOf(quoted, at + 1)) {
    const before = field.slice(0, at).trimEnd();
    const after = field[at + quoted.length];
    if (
      (before === '' || before.endsWith(',')) &&
      (after === undefined || after === ';' || after === ',' || after === ' ')
    ) {
      return true;
    }
  }
  return false;
}

function appendItem(field: string | undefined, item: string): string {
  return field === undefined || field === '' ? item : `${field}, ${item}`;
}

/** The 429 body of a refusal that may be retried in `seconds` (its `Retry-After`), by the policy named `policyName`. */
export function refusalProblem(seconds: number, policyName: string): ProblemDetails {
  return {
    type: QUOTA_EXCEEDED,
    title: 'Too Many Requests',
    status: 429,
    detail: `Rate limit exceeded; retry in ${seconds} s.`,
    'violated-policies': [policyName],
  };
}

/** The body when the request could not be decided: 503 if the limiter could not decide (`unavailable`), else 500. */
export function failureProblem(stage: HttpErrorMessage['stage'], unavailable: boolean): ProblemDetails {
  return unavailable
    ? {
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: 'The rate limiter could not decide this request; retry shortly.',
      }
    : {
        type: 'about:blank',
        title: 'Internal Server Error',
        status: 500,
        detail: `The rate limiter could not evaluate this request (${stage}).`,
      };
}

/** The header fields the default answer to a failure sends: `Retry-After: 1` with a 503. */
export function failureHeaders(statusCode: number): HeaderList {
  return statusCode === 503 ? [['Retry-After', '1']] : NO_HEADERS;
}

/** A field set so far on a node:http response, as one string: the {@link FieldReader} of node:http's adapters. */
export function readResponseField(res: ServerResponse, name: string): string | undefined {
  return fieldText(res.getHeader(name));
}

/** A response field's value as node:http and Fastify give it, as one string. */
export function fieldText(value: number | string | readonly string[] | undefined): string | undefined {
  if (value === undefined || typeof value === 'string') return value;
  return Array.isArray(value) ? value.join(', ') : String(value);
}

/** Ends `res` with a problem details body; the caller has checked that its headers have not gone out. */
export function sendProblem(res: ServerResponse, problem: ProblemDetails, headers: HeaderList): void {
  res.statusCode = problem.status;
  for (const [name, value] of headers) res.setHeader(name, value);
  res.setHeader('Content-Type', PROBLEM_TYPE);
  res.end(JSON.stringify(problem));
}

/**
 * Ends a response that can no longer be answered as it should (its headers went out before the
 * limiter refused it, or a user's callback failed after that): the connection is destroyed, so the
 * client sees it close before the response is complete, never a success. Nothing if it has ended.
 */
export function abandon(res: ServerResponse): void {
  if (!res.writableEnded) res.destroy();
}

/** The 500 body when a user's callback (onLimit, onError, next) itself failed. */
export const CALLBACK_FAILED: ProblemDetails = Object.freeze({
  type: 'about:blank',
  title: 'Internal Server Error',
  status: 500,
  detail: 'The request could not be handled.',
});

/** The last resort when a user callback failed: a 500 if nothing was sent yet, else {@link abandon}. */
export function salvage(res: ServerResponse): void {
  if (!res.headersSent) sendProblem(res, CALLBACK_FAILED, NO_HEADERS);
  else abandon(res);
}
