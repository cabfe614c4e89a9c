/**
 * Test tables of the window counters' steps (src/meters/windows.ts:
 * `fixedWindowTake`, `slidingCounterTake`), one row per call on a given
 * state. test/redis/window-lua.test.ts holds windows.ts to each row's answer
 * and runs every row through the Lua twin (src/redis/window-lua.ts) on a real
 * redis-server, asking for windows.ts's answer to the last bit. The rows
 * follow the worked sequences of test/meters/windows.test.ts, one step each,
 * plus the edges (a skipped window, a clock that went back, fractional limits
 * and costs).
 *
 * A state's window start is `-Infinity` for a key never counted. A decision
 * is `[allowed, remaining, retryAfterMs, resetAfterMs]`.
 */

import type { WindowParams } from '../../src/meters/windows.js';

/** `[limit, windowMs]` */
type Params = readonly [number, number];
type Decision = readonly [boolean, number, number, number];
type Fixed = readonly [number, number];
type Counter = readonly [number, number, number];

const NEW = Number.NEGATIVE_INFINITY;

/** [params, state [windowStartMs, count], nowMs, cost, decision, state after] */
export const fixedWindowCases: readonly (readonly [Params, Fixed, number, number, Decision, Fixed])[] = [
  // limit 100 per 1 s, from 0.9 s: the 100th passes, the 101st waits for the boundary
  [[100, 1000], [NEW, 0], 900, 1, [true, 99, 0, 100], [0, 1]],
  [[100, 1000], [0, 99], 900, 1, [true, 0, 0, 100], [0, 100]],
  [[100, 1000], [0, 100], 900, 1, [false, 0, 100, 100], [0, 100]],
  [[100, 1000], [0, 100], 999.999, 1, [false, 0, 1000 - 999.999, 1000 - 999.999], [0, 100]],
  [[100, 1000], [0, 100], 1000, 1, [true, 99, 0, 1000], [1000, 1]], // the boundary: the count starts again
  // cost counts; a refusal charges nothing; cost 0 fits a full window's remainder
  [[10, 60_000], [NEW, 0], 0, 7, [true, 3, 0, 60_000], [0, 7]],
  [[10, 60_000], [0, 7], 0, 3, [true, 0, 0, 60_000], [0, 10]],
  [[10, 60_000], [0, 7], 0, 4, [false, 3, 60_000, 60_000], [0, 7]],
  [[10, 60_000], [0, 7], 0, 0, [true, 3, 0, 60_000], [0, 7]],
  // an idle window reports no reset; a clock that went back stays in the window it had
  [[2, 1000], [NEW, 0], 5500, 1, [true, 1, 0, 500], [5000, 1]],
  [[2, 1000], [NEW, 0], 5500, 0, [true, 2, 0, 0], [5000, 0]],
  [[2, 1000], [5000, 2], 3000, 1, [false, 0, 1000, 1000], [5000, 2]],
  [[2, 1000], [5000, 2], 6000, 1, [true, 1, 0, 1000], [6000, 1]],
  // windows skipped: a fresh count in the window of now
  [[100, 1000], [0, 5], 2500, 1, [true, 99, 0, 500], [2000, 1]],
  // fractional limits and costs: remaining is the whole requests left
  [[2.5, 1000], [0, 1], 10, 1, [true, 0, 0, 990], [0, 2]],
  [[2.5, 1000], [0, 1.5], 10, 1.5, [false, 1, 990, 990], [0, 1.5]],
];

/** [params, state [windowStartMs, previous, current], nowMs, cost, decision, state after] */
export const slidingCounterCases: readonly (readonly [Params, Counter, number, number, Decision, Counter])[] = [
  // limit 100 per 1 s, from 0.9 s: the previous window weighs by the share of it still inside
  [[100, 1000], [NEW, 0, 0], 900, 1, [true, 99, 0, 1100], [0, 0, 1]],
  [[100, 1000], [0, 0, 99], 900, 1, [true, 0, 0, 1100], [0, 0, 100]],
  [[100, 1000], [0, 0, 100], 1000, 1, [false, 0, 10, 1000], [1000, 100, 0]], // 100 * (1 - 0) + 0 + 1 > 100
  [[100, 1000], [1000, 100, 0], 1010, 1, [true, 0, 0, 1990], [1000, 100, 1]], // 100 * 0.99 = 99: one fits
  [[100, 1000], [1000, 100, 1], 1010, 1, [false, 0, 10, 1990], [1000, 100, 1]],
  [[100, 1000], [1000, 100, 1], 1500, 49, [true, 0, 0, 1500], [1000, 100, 50]], // 50 + 1 + 49
  [[100, 1000], [1000, 100, 1], 1500, 50, [false, 49, 10, 1500], [1000, 100, 1]],
  [[100, 1000], [1000, 100, 1], 3000, 100, [true, 0, 0, 2000], [3000, 0, 100]], // two windows later: empty
  [[100, 1000], [1000, 100, 0], 1250, 0, [true, 25, 0, 750], [1000, 100, 0]], // 75 still counted
  [[100, 1000], [1000, 100, 1], 500, 1, [false, 0, 20, 2000], [1000, 100, 1]], // the clock went back
  // a cost that cannot fit this window waits for the next: 8 * (1 - e) + 5 <= 10 once e >= 3/8
  [[10, 1000], [NEW, 0, 0], 100, 8, [true, 2, 0, 1900], [0, 0, 8]],
  [[10, 1000], [0, 0, 8], 500, 5, [false, 2, 875, 1500], [0, 0, 8]],
  [[10, 1000], [0, 0, 8], 1375, 5, [true, 0, 0, 1625], [1000, 8, 5]],
  [[10, 1000], [0, 0, 8], 1000, 10, [false, 2, 1000, 1000], [1000, 8, 0]],
  [[1, 1000], [0, 0, 0], 0, 0.5, [true, 0, 0, 2000], [0, 0, 0.5]],
];

/** One call of a window step, for the Lua suite. */
export interface WindowCall {
  kind: 'fixed' | 'counter';
  params: WindowParams;
  /** `[windowStartMs, count]`, or `[windowStartMs, previous, current]`. */
  state: readonly number[];
  nowMs: number;
  cost: number;
}

/** Every row of both tables as a call. */
export function windowTableCalls(): WindowCall[] {
  const params = ([limit, windowMs]: Params): WindowParams => ({ limit, windowMs });
  return [
    ...fixedWindowCases.map(
      ([p, state, nowMs, cost]): WindowCall => ({
        kind: 'fixed',
        params: params(p),
        state,
        nowMs,
        cost,
      }),
    ),
    ...slidingCounterCases.map(
      ([p, state, nowMs, cost]): WindowCall => ({
        kind: 'counter',
        params: params(p),
        state,
        nowMs,
        cost,
      }),
    ),
  ];
}
