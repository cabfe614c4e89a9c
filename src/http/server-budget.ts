/**
 * What an origin says is left of its quota, spent (throttleInterceptor's
 * `adaptive`): an answer's `RateLimit` r and t (or the older remaining /
 * reset fields, ./headers.ts `quotaLeft`) allow at most r more requests until
 * the reset; the origin is paused when they are spent, until then. So a quota
 * the origin shares with other clients, or one that its own window has nearly
 * used up, holds requests back before the origin refuses them.
 *
 * It holds the origin only when the answers say less is left than the
 * origin's own window limit does (`localLeft`): a window that models the
 * quota already spaces requests, and the reset's whole seconds would hold it
 * far too long (at full use of a sliding window every answer says r=0).
 *
 * Invariants: requests sent after the answered one and not yet answered
 * count as spent (the origin had not counted them; it may at any moment;
 * those sent before it had most likely arrived, and r counts them); an answer
 * to a request sent before the one
 * whose answer set the budget is stale and changes nothing; past its reset the
 * budget says nothing until the next answer; it never lets more through than
 * the origin's own pace, it only holds back.
 */

import type { QuotaLeft } from './headers.js';

/** An answer as the budget reads it. */
export interface BudgetAnswer {
  /** The sequence number of the request it answers (from {@link ServerBudget.sent}). */
  readonly seq: number;
  /** When it arrived, ms. */
  readonly nowMs: number;
  readonly statusCode: number;
  /** What it says is left (`undefined`: nothing). */
  readonly quota: QuotaLeft | undefined;
  /** When the quota gives no reset, it resets within this (the advertised window, ms, if any). */
  readonly fallbackResetMs?: number | undefined;
  /** How many more requests the origin's own window lets start now. */
  readonly localLeft: number;
}

/** One origin's budget; see the file's opening comment. */
export class ServerBudget {
  /** Requests sent so far: a request's sequence number is the count before it. */
  #sent = 0;
  /** The sequence number of the request whose answer set the budget (-1: none yet). */
  #fromSeq = -1;
  /** Requests that may still be sent before the reset. */
  #left = Number.POSITIVE_INFINITY;
  #resetAtMs = Number.NEGATIVE_INFINITY;
  /** The status of the answer that set the budget (for the pause it asks for). */
  statusCode = 0;

  /** Requests that may still be sent at `nowMs` (Infinity: the origin said nothing in force). */
  leftAt(nowMs: number): number {
    return nowMs < this.#resetAtMs ? Math.max(0, this.#left) : Number.POSITIVE_INFINITY;
  }

  /**
   * A request is sent at `nowMs`, its own window then letting `localLeft` more start: its sequence
   * number, and the ms to hold the next ones (0: none).
   */
  sent(nowMs: number, localLeft: number): { seq: number; holdMs: number } {
    const seq = this.#sent++;
    this.#left--;
    return { seq, holdMs: this.#holdMs(nowMs, localLeft) };
  }

  /** An answer arrived: returns the ms to hold the origin (0: none). */
  answered({ seq, nowMs, statusCode, quota, fallbackResetMs, localLeft }: BudgetAnswer): number {
    if (quota === undefined || seq < this.#fromSeq) return 0;
    const resetMs = quota.resetMs ?? fallbackResetMs;
    if (resetMs === undefined || !(resetMs > 0)) return 0;
    this.#fromSeq = seq;
    this.statusCode = statusCode;
    // Sent after it: none is answered yet (an answer to one would have made this one stale).
    this.#left = quota.remaining - (this.#sent - 1 - seq);
    this.#resetAtMs = nowMs + resetMs;
    return this.#holdMs(nowMs, localLeft);
  }

  #holdMs(nowMs: number, localLeft: number): number {
    return this.#left <= 0 && localLeft > 0 && nowMs < this.#resetAtMs ? this.#resetAtMs - nowMs : 0;
  }
}
