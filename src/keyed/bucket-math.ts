/**
 * Small pure helpers over a token bucket's state that `src/meters/token-bucket.ts`
 * does not export yet. They are built on its functions (`tokensAt`, `msUntil`,
 * `slackFor`) and add no arithmetic of their own beyond what is named here.
 *
 * TODO(merge): these belong in `src/meters/token-bucket.ts` next to `tokensAt`
 * (the meter is being refactored to add pure `charge`/`refund`; when it lands,
 * `refundable` should be replaced by its cancel rule and `timeToFullMs` moved
 * there). The Lua script in `redis-script.ts` mirrors these line by line.
 */

import type { BucketParams } from '../meters/token-bucket.js';

/**
 * Milliseconds until a bucket holding `tokens` is full (0 if it is).
 *
 * A full bucket holds no information (it equals a new one): this is when a
 * memory store may forget it and when a Redis key may expire.
 */
export function timeToFullMs(tokens: number, params: BucketParams): number {
  const missing = params.capacity - tokens;
  return missing > 0 ? (missing * 1000) / params.ratePerSecond : 0;
}

/**
 * How many of a cancelled reservation's tokens may go back: Go's
 * `Reservation.CancelAt` rule. A reservation of `cost` that was to conform at
 * `readyAtMs` gives back its cost minus what later reservations already count
 * on; nothing once its time has passed (as in Go, a reservation cancelled at
 * the very instant it conforms still comes back). The caller adds the result to the bucket
 * and caps it at the capacity.
 *
 * In a bucket in debt, the latest reservation conforms when the debt is paid:
 * `lastReadyAtMs = nowMs + debt / rate`. Later reservations counted on the
 * tokens that refill between `readyAtMs` and `lastReadyAtMs`, so those stay
 * taken. With no later reservation `lastReadyAtMs === readyAtMs` and the whole
 * cost comes back.
 *
 * @param tokensNow - the bucket's tokens at `nowMs` (negative while in debt)
 */
export function refundable(
  tokensNow: number,
  nowMs: number,
  readyAtMs: number,
  cost: number,
  params: BucketParams,
): number {
  if (readyAtMs < nowMs) return 0; // it came due before: the tokens were used
  const debt = tokensNow < 0 ? -tokensNow : 0;
  const countedOnByLater = debt - ((readyAtMs - nowMs) * params.ratePerSecond) / 1000;
  if (countedOnByLater <= 0) return cost;
  return countedOnByLater >= cost ? 0 : cost - countedOnByLater;
}
