/**
 * What a shared keyed store answers, in one place for RedisStore and
 * PostgresStore: a decision read from the numbers its backend replies (the
 * keyed script's reply, src/keyed/redis-script.ts, which the PostgreSQL
 * function answers too), and a decision made by the failure policy when the
 * backend cannot be reached (src/stores/health.ts keeps the health; this says
 * what `'allow'`, `'deny'` and `'local'` answer).
 */

import type { Clock } from '../clock.js';
import { delayUntil, tokensAt } from '../meters/bucket.js';
import type { FailurePolicy } from '../stores/health.js';
import type { MemoryStore } from './memory-store.js';
import type { StoreOp, StoreResult } from './store.js';

/** Retry-after given with a `'deny'` decision. */
export const DENY_RETRY_AFTER_MS = 1000;

/**
 * One operation's answer from the backend's numbers: `flag` (1 allowed, 0 not, 2 a try refused
 * without a global bucket), then the key bucket's two numbers and, with a global bucket, its two.
 * Flag 2 carries the bucket's tokens and updatedAtMs as the decision saw it: MemoryStore.decideAt's
 * refusal is worked out here by the same steps on the same doubles (a refusal's wait is a search, the
 * dearest step of a decision; it runs in the caller's process, not in the one backend every instance
 * shares).
 */
export function resultOf(
  op: StoreOp,
  nowMs: number,
  flag: number,
  x: number,
  y: number,
  global: readonly [number, number] | undefined,
): StoreResult {
  if (flag === 2) {
    const state = { tokens: x, updatedAtMs: y };
    const readyInMs = delayUntil(state, op.bucket, nowMs, op.cost);
    return {
      allowed: false,
      tokens: tokensAt(state, op.bucket, nowMs),
      globalTokens: Number.POSITIVE_INFINITY,
      waitMs: readyInMs,
      nowMs,
      readyAtMs: nowMs + readyInMs,
      globalReadyAtMs: nowMs,
      source: 'store',
    };
  }
  const globalReadyInMs = global === undefined ? 0 : global[1];
  return {
    allowed: flag === 1,
    tokens: x,
    globalTokens: global === undefined ? Number.POSITIVE_INFINITY : global[0],
    waitMs: Math.max(y, globalReadyInMs),
    nowMs,
    readyAtMs: nowMs + y,
    globalReadyAtMs: nowMs + globalReadyInMs,
    source: 'store',
  };
}

/**
 * The failure policy's decision: `'allow'` admits, `'deny'` refuses for {@link DENY_RETRY_AFTER_MS},
 * `'local'` asks the instance's own MemoryStore (`local`).
 */
export function decideByPolicy(
  policy: FailurePolicy,
  op: StoreOp,
  clock: Clock,
  local: MemoryStore | undefined,
): Promise<StoreResult> {
  if (policy === 'local') {
    return (local as MemoryStore).decide(op).then((result) => ({ ...result, source: 'local' }));
  }
  const now = clock.now();
  const allowed = policy === 'allow';
  return Promise.resolve({
    allowed,
    tokens: allowed ? op.bucket.burst : 0,
    globalTokens: Number.POSITIVE_INFINITY,
    waitMs: allowed ? 0 : DENY_RETRY_AFTER_MS,
    nowMs: now,
    readyAtMs: now,
    globalReadyAtMs: now,
    source: policy,
  });
}
