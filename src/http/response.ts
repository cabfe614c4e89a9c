/**
 * From a decision to what the client is sent: the rate-limit header fields
 * (headers.ts formats them), `Retry-After`, and the RFC 9457
 * `application/problem+json` bodies of a 429, 500 or 503.
 *
 * Invariants: a refusal carries `Retry-After` in whole seconds, rounded up,
 * at least 1; a limiter that could not decide answers 503 with `Retry-After:
 * 1`, a user function that threw or a cost above the burst 500; nothing is
 * written to a response whose headers have gone out (it is then cut short,
 * never answered twice).
 */

import type { ServerResponse } from 'node:http';
import { formatPolicy, formatRateLimitQuoted, type PolicyWindow, sfString } from './headers.js';
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

/**
 * The header fields of a decision under the policy `policyName`: the
 * `RateLimit-Policy` field (when `policy` is known) and `RateLimit`; none when
 * `send` is false. Validates the name once, here.
 */
export function decisionHeaders(
  policyName: string,
  policy: PolicyWindow | undefined,
  send: boolean,
): (decision: Decision) => Array<[string, string]> {
  const quotedName = sfString(policyName); // validates, once
  const policyHeader = send && policy !== undefined ? formatPolicy(policyName, policy) : undefined;
  return (decision: Decision): Array<[string, string]> => {
    if (!send) return [];
    const list: Array<[string, string]> = [];
    if (policyHeader !== undefined) list.push(['RateLimit-Policy', policyHeader]);
    list.push(['RateLimit', formatRateLimitQuoted(quotedName, decision)]);
    return list;
  };
}

/** The 429 body of a refusal that may be retried in `seconds` (its `Retry-After`). */
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

/** Ends `res` with a problem details body, unless something was already sent. */
export function sendProblem(res: ServerResponse, problem: ProblemDetails, headers: HeaderList): void {
  if (res.headersSent || res.writableEnded) return;
  res.statusCode = problem.status;
  for (const [name, value] of headers) res.setHeader(name, value);
  res.setHeader('Content-Type', PROBLEM_TYPE);
  res.end(JSON.stringify(problem));
}

/** The last resort when a user callback (onLimit, onError, next) itself failed. */
export function salvage(res: ServerResponse): void {
  if (!res.headersSent) {
    sendProblem(
      res,
      { type: 'about:blank', title: 'Internal Server Error', status: 500, detail: 'The request could not be handled.' },
      NO_HEADERS,
    );
  } else if (!res.writableEnded) {
    res.destroy();
  }
}
