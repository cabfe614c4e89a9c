/**
 * The rate-limit header fields, written by the server middleware and read by
 * the client interceptor.
 *
 * Format followed: the IETF httpapi working group's "RateLimit header fields
 * for HTTP", draft-ietf-httpapi-ratelimit-headers-11 (23 May 2026; the text
 * of -10 and -11 define the same syntax): two Structured Fields (RFC 9651)
 * lists,
 *
 *   RateLimit-Policy: "default";q=40;w=2     quota q per window w seconds
 *   RateLimit: "default";r=10;t=2            r units available, effective window t seconds
 *
 * A token bucket of rate R and burst B is advertised as the policy
 * w = max(1, ceil(B / R)) seconds and q = floor(R * w): q / w is the
 * sustained rate, and when B / R is a whole number of seconds (20/s with 40,
 * 100/s with 200), q is the burst as well. `r` is the whole tokens left after
 * this request; `t` is the seconds until the bucket is full again on an
 * admitted request, and the seconds until the request would conform (equal to
 * Retry-After, which the draft says must not be earlier) on a refused one.
 *
 * Reading (client side): `Retry-After` as delay-seconds or an HTTP-date
 * (RFC 9110 section 10.2.3; a date is taken relative to the response's `Date`
 * field when there is one, so the two machines' clocks need not agree), and
 * `RateLimit` items with `r=0`, whose `t` says how long nothing more is
 * available. Malformed fields are ignored, as the draft requires. Every
 * reader of `RateLimit` (the client, and a stacked limiter reading an earlier
 * one's field) goes through {@link parseRateLimit}, which takes the list form
 * of drafts -08 to -11 and the dictionary form of draft -07.
 */

import type { Decision } from './types.js';

/** How a token bucket is advertised in `RateLimit-Policy`. */
export interface PolicyWindow {
  /** The quota per window, quota units. */
  readonly quota: number;
  /** The window, whole seconds >= 1. */
  readonly windowSeconds: number;
}

/** The policy window that advertises a bucket of `ratePerSecond` and `capacity` (its burst; see the opening comment). */
export function policyWindow(ratePerSecond: number, capacity: number): PolicyWindow {
  const windowSeconds = Math.max(1, Math.ceil(capacity / ratePerSecond - 1e-9));
  return { quota: Math.max(1, Math.floor(ratePerSecond * windowSeconds + 1e-9)), windowSeconds };
}

/** A Structured Fields String: printable ASCII, with `"` and `\` escaped. */
export function sfString(value: string): string {
  if (!/^[\x20-\x7e]*$/.test(value)) {
    throw new TypeError(`a policy name must be printable ASCII, got ${JSON.stringify(value)}`);
  }
  return `"${value.replace(/[\\"]/g, '\\$&')}"`;
}

/** `"default";q=40;w=2` */
export function formatPolicy(name: string, policy: PolicyWindow): string {
  return `${sfString(name)};q=${policy.quota};w=${policy.windowSeconds}`;
}

/** Whole seconds, rounded up, for a delay in ms (0 stays 0). */
export function ceilSeconds(ms: number): number {
  return ms > 0 ? Math.ceil(ms / 1000 - 1e-9) : 0;
}

/** `Retry-After` for a refusal: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, ceilSeconds(retryAfterMs));
}

/** `r` of a decision: the whole tokens left (also the remaining of the draft-6/7 and X-RateLimit fields). */
export function remainingOf(decision: Decision): number {
  return Math.max(0, Math.floor(decision.remaining));
}

/** `t` of a decision, seconds (see the opening comment; also the reset of the draft-6/7 and X-RateLimit fields). */
export function resetSecondsOf(decision: Decision): number {
  return decision.allowed ? ceilSeconds(decision.resetAfterMs) : retryAfterSeconds(decision.retryAfterMs);
}

/** `40;w=2`: a policy as drafts -06 and -07 write it (a quota and a window, no name). */
export function formatPolicyUnnamed(policy: PolicyWindow): string {
  return `${policy.quota};w=${policy.windowSeconds}`;
}

/** `"default";r=10;t=2` for a decision (see the opening comment for `t`). */
export function formatRateLimit(name: string, decision: Decision): string {
  return formatRateLimitQuoted(sfString(name), decision);
}

/** {@link formatRateLimit} with the name already quoted by {@link sfString} (the per-request path). */
export function formatRateLimitQuoted(quotedName: string, decision: Decision): string {
  return `${quotedName};r=${remainingOf(decision)};t=${resetSecondsOf(decision)}`;
}

/**
 * Milliseconds a `Retry-After` value asks to wait, or `undefined` if it is
 * malformed. `dateHeader` is the response's `Date` field; `nowMs` the local
 * wall-clock time, used only when the response has no `Date`.
 */
export function parseRetryAfter(
  value: string | undefined,
  dateHeader: string | undefined,
  nowMs: number,
): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An HTTP-date starts with a day name (IMF-fixdate, RFC 850 and asctime forms alike);
  // Date.parse alone would also accept '-5' or '2026'.
  if (!/^(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,? /i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  const reference = dateHeader === undefined ? Number.NaN : Date.parse(dateHeader);
  return Math.max(0, at - (Number.isNaN(reference) ? nowMs : reference));
}

/** One item of a `RateLimit` field: what is left of one quota. */
export interface ServiceLimit {
  /** The policy's name; `''` for draft -7's single unnamed item. */
  readonly policy: string;
  /** Available quota units (`r`; draft -7's `remaining`). */
  readonly remaining: number;
  /** Seconds until the quota resets (`t`; draft -7's `reset`); `undefined` when the server gave none. */
  readonly resetSeconds: number | undefined;
}

/** A Structured Fields list member or dictionary member: a name, an optional `=value`, parameters. */
const MEMBER =
  /^("(?:[^"\\]|\\.)*"|[A-Za-z*][\w:./*!#$%&'+^`|~-]*)(?:=([^;]*))?((?:\s*;\s*[a-z*][a-z0-9_.*-]*(?:=[^;]*)?)*)$/;
/** A Structured Fields dictionary key. */
const DICTIONARY_KEY = /^[a-z*][a-z0-9_.*-]*$/;

/**
 * The one reader of a `RateLimit` field value, in either structured form the drafts define:
 *
 *   "default";r=10;t=2, "daily";r=999     drafts -08 to -11: a list of policies, each with r and t
 *   limit=40, remaining=10, reset=2       draft -07: a dictionary, read as one unnamed item
 *
 * `r`/`remaining` is required and `t`/`reset` optional, each an integer >= 0; other parameters and
 * keys are ignored. Returns `undefined` if the field is absent or malformed: the drafts say to
 * ignore such a field as a whole.
 */
export function parseRateLimit(value: string | undefined): ServiceLimit[] | undefined {
  if (value === undefined) return undefined;
  const members: Array<{ name: string; value: string | undefined; params: string }> = [];
  for (const member of splitList(value)) {
    const match = MEMBER.exec(member);
    if (match === null) return undefined;
    const [, name = '', memberValue, params = ''] = match;
    members.push({ name, value: memberValue, params });
  }
  if (members.length === 0) return undefined;
  // Only a dictionary member has a value of its own (`remaining=10`); a list item has parameters only.
  if (members.some((m) => m.value !== undefined)) {
    const fields = new Map<string, string | undefined>();
    for (const { name, value: memberValue } of members) {
      if (!DICTIONARY_KEY.test(name)) return undefined;
      fields.set(name, memberValue); // a repeated key: the last one counts
    }
    const remaining = wholeNumber(fields.get('remaining'));
    const reset = fields.get('reset');
    const resetSeconds = wholeNumber(reset);
    if (remaining === undefined || (reset !== undefined && resetSeconds === undefined)) return undefined;
    return [{ policy: '', remaining, resetSeconds }];
  }
  const items: ServiceLimit[] = [];
  for (const { name, params } of members) {
    const policy = name.startsWith('"') ? name.slice(1, -1).replace(/\\(.)/g, '$1') : name;
    let remaining: number | undefined;
    let resetSeconds: number | undefined;
    for (const param of params.split(';').slice(1)) {
      const [key = '', val] = param.trim().split('=');
      if (key === 'r' || key === 't') {
        const n = wholeNumber(val);
        if (n === undefined) return undefined;
        if (key === 'r') remaining = n;
        else resetSeconds = n;
      }
    }
    if (remaining === undefined) return undefined;
    items.push({ policy, remaining, resetSeconds });
  }
  return items;
}

/** The item of a parsed `RateLimit` field with the least remaining (the first of equals). */
export function mostExhausted(items: readonly ServiceLimit[]): ServiceLimit | undefined {
  let least: ServiceLimit | undefined;
  for (const item of items) if (least === undefined || item.remaining < least.remaining) least = item;
  return least;
}

/** A field value that is a whole number (`"39"`, digits only, up to 15), else `undefined`. */
export function wholeNumber(text: string | undefined): number | undefined {
  const trimmed = text?.trim();
  return trimmed !== undefined && /^\d{1,15}$/.test(trimmed) ? Number(trimmed) : undefined;
}

/** Splits a Structured Fields list on the commas outside quoted strings. */
function splitList(value: string): string[] {
  const members: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i];
    if (quoted && ch === '\\') {
      current += ch + (value[i + 1] ?? '');
      i++;
      continue;
    }
    if (ch === '"') quoted = !quoted;
    if (ch === ',' && !quoted) {
      members.push(current.trim());
      current = '';
    } else {
      current += ch;
    }
  }
  members.push(current.trim());
  return members.filter((m) => m !== '');
}

/** A response field as one value: a field sent on several lines is one list, joined by ", ". */
export function fieldValue(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * How long a response asks the client to send nothing more to its origin, ms,
 * or `undefined` if it does not. `Retry-After` takes precedence (the draft
 * says so); otherwise the longest `t` of the `RateLimit` items with `r=0`.
 */
export function pauseRequested(
  headers: Record<string, string | string[] | undefined>,
  nowMs: number,
): { delayMs: number; source: 'retry-after' | 'ratelimit' } | undefined {
  const first = (name: string): string | undefined => fieldValue(headers, name);
  const retryAfter = parseRetryAfter(first('retry-after'), first('date'), nowMs);
  if (retryAfter !== undefined) return { delayMs: retryAfter, source: 'retry-after' };
  const limits = parseRateLimit(first('ratelimit'));
  if (limits === undefined) return undefined;
  let delayMs: number | undefined;
  for (const item of limits) {
    if (item.remaining === 0 && item.resetSeconds !== undefined) {
      delayMs = Math.max(delayMs ?? 0, item.resetSeconds * 1000);
    }
  }
  return delayMs === undefined ? undefined : { delayMs, source: 'ratelimit' };
}

/** A quota a server advertises: `quota` units per window of `windowMs`. */
export interface AdvertisedPolicy {
  readonly quota: number;
  readonly windowMs: number;
}

/**
 * The policy a response advertises, or `undefined`: the smallest quota per second of the
 * `RateLimit-Policy` items (`"p";q=40;w=1`, draft -10/-11; or the older `40;w=1`), else the older
 * `RateLimit-Limit` / `X-RateLimit-Limit` quota with a `w` parameter (`40, 40;w=1`). A quota
 * without a window is not a pace and is ignored, as a malformed field is.
 */
export function advertisedPolicy(headers: Record<string, string | string[] | undefined>): AdvertisedPolicy | undefined {
  for (const name of ['ratelimit-policy', 'ratelimit-limit', 'x-ratelimit-limit']) {
    const value = fieldValue(headers, name);
    if (value === undefined) continue;
    let best: AdvertisedPolicy | undefined;
    for (const member of splitList(value)) {
      const policy = policyItem(member);
      if (policy !== undefined && (best === undefined || policy.quota / policy.windowMs < best.quota / best.windowMs)) {
        best = policy;
      }
    }
    if (best !== undefined) return best;
  }
  return undefined;
}

/** One policy item: `"name";q=40;w=1` or `40;w=1`; `undefined` without a quota and a window. */
function policyItem(member: string): AdvertisedPolicy | undefined {
  const parts = member.split(';').map((p) => p.trim());
  const head = parts[0] ?? '';
  let quota = /^\d{1,15}$/.test(head) ? Number(head) : undefined;
  let windowS: number | undefined;
  for (const param of parts.slice(1)) {
    const [key = '', val = ''] = param.split('=').map((p) => p.trim());
    if (!/^\d{1,15}$/.test(val)) continue;
    if (key === 'q') quota = Number(val);
    else if (key === 'w') windowS = Number(val);
  }
  if (quota === undefined || windowS === undefined || !(quota >= 1) || !(windowS >= 1)) return undefined;
  return { quota, windowMs: windowS * 1000 };
}

/** What an answer says is left of its quota: `remaining` more requests until `resetMs` from now. */
export interface QuotaLeft {
  readonly remaining: number;
  /** ms until the quota resets (`undefined`: the answer did not say). */
  readonly resetMs: number | undefined;
}

/**
 * What is left of the quota, from the most exhausted item of `RateLimit` (either form, see
 * {@link parseRateLimit}), or the older pairs `RateLimit-Remaining` / `RateLimit-Reset` and
 * `X-RateLimit-Remaining` / `X-RateLimit-Reset`. A reset above 10^9 is a Unix time (s, or ms above
 * 10^12, as some APIs send), read against the answer's `Date` (else `wallMs`, the local wall-clock
 * time); smaller, a number of seconds. `undefined`: the answer says nothing.
 */
export function quotaLeft(
  headers: Record<string, string | string[] | undefined>,
  wallMs: number,
): QuotaLeft | undefined {
  const first = (name: string): string | undefined => fieldValue(headers, name);
  const least = mostExhausted(parseRateLimit(first('ratelimit')) ?? []);
  if (least !== undefined) {
    return { remaining: least.remaining, resetMs: resetMsOf(least.resetSeconds, first('date'), wallMs) };
  }
  for (const prefix of ['ratelimit-', 'x-ratelimit-']) {
    const remaining = wholeNumber(first(`${prefix}remaining`));
    if (remaining === undefined) continue;
    return { remaining, resetMs: resetMsOf(resetNumber(first(`${prefix}reset`)), first('date'), wallMs) };
  }
  return undefined;
}

/** A reset field's number (whole, or with a fraction as some Unix times are sent), else `undefined`. */
function resetNumber(text: string | undefined): number | undefined {
  const trimmed = text?.trim();
  return trimmed !== undefined && /^\d{1,15}(?:\.\d+)?$/.test(trimmed) ? Number(trimmed) : undefined;
}

/** A reset as ms from now: `n` seconds, or a Unix time (s or ms) read against `Date`, else `wallMs`. */
function resetMsOf(n: number | undefined, dateHeader: string | undefined, wallMs: number): number | undefined {
  if (n === undefined) return undefined;
  if (n <= 1e9) return n * 1000;
  const reference = dateHeader === undefined ? Number.NaN : Date.parse(dateHeader);
  const atMs = n > 1e12 ? n : n * 1000;
  return Math.max(0, atMs - (Number.isNaN(reference) ? wallMs : reference));
}
