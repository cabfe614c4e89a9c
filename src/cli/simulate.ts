/**
 * The simulator behind `tokenpace simulate`: replays a trace through the
 * real limiters on a {@link VirtualClock} and records, for every request,
 * whether it was refused or when it was let through to the service.
 *
 * The contenders, all configured from one rate R and burst B:
 *
 * - token bucket: `TokenBucket` (rate R, burst B); refused when empty.
 * - fixed window: `FixedWindow` (R per 1 s window); refused when the window is full.
 * - sliding window: `SlidingWindow` (R in any 1 s, exact log).
 * - leaky bucket: `LeakyBucket` (leaks at R, holds B); a request waits for its
 *   turn, refused when the bucket is full.
 * - unbounded queue: a `Scheduler` at rate R with a burst of 1 and a queue
 *   with no practical bound: nothing is refused, requests wait their turn.
 *
 * Per second: offered (arrived), admitted (let through to the service that
 * second), rejected, queued (waiting at the end of the second) and the
 * longest wait of the requests let through that second. Everything follows
 * from the per-request outcomes, so the numbers are exact and repeatable.
 */

import { LeakyBucket } from '../meters/leaky-bucket.js';
import { TokenBucket } from '../meters/token-bucket.js';
import { FixedWindow, SlidingWindow } from '../meters/windows.js';
import { Scheduler } from '../scheduler/scheduler.js';
import type { Trace } from './scenarios.js';
import { VirtualClock } from './virtual-clock.js';

/** The contenders' names, in the order they are shown. */
export const ALGORITHMS = ['token-bucket', 'fixed-window', 'sliding-window', 'leaky-bucket', 'queue'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

/** How each contender is called in tables and plots. */
export const LABELS: Record<Algorithm, string> = {
  'token-bucket': 'token bucket',
  'fixed-window': 'fixed window',
  'sliding-window': 'sliding window',
  'leaky-bucket': 'leaky bucket',
  queue: 'unbounded queue',
};

/** One second of one contender. */
export interface SecondStats {
  second: number;
  offered: number;
  admitted: number;
  rejected: number;
  queued: number;
  /** The longest wait of the requests let through this second, ms (0 if none waited). */
  maxWaitMs: number;
}

/** One contender's run. */
export interface AlgorithmResult {
  algorithm: Algorithm;
  label: string;
  /** What it is, configured: "TokenBucket(rate 100/s, burst 200)". */
  config: string;
  seconds: SecondStats[];
  totals: {
    offered: number;
    admitted: number;
    rejected: number;
    /** Still waiting when the simulation stopped. */
    queuedAtEnd: number;
    /** The most let through in any window of 1 s (wherever it starts). */
    mostInAnySecond: number;
    /** The longest queue at any moment. */
    peakQueued: number;
    waitP50Ms: number;
    waitP99Ms: number;
    maxWaitMs: number;
  };
}

/** A whole simulation. */
export interface Simulation {
  ratePerSecond: number;
  burst: number;
  trace: Omit<Trace, 'arrivalsMs'> & { requests: number };
  /** The seconds shown: the trace, plus the time queues took to drain (at most as long again). */
  seconds: number;
  results: AlgorithmResult[];
}

/** Per-request outcome: when it was let through, or NaN for refused, or undefined while still waiting. */
type Outcomes = (number | undefined)[];

interface Contender {
  algorithm: Algorithm;
  config: string;
  /** Offers request `id` at the clock's now. */
  offer(id: number, nowMs: number): void;
  /**
   * True while a request has left the contender's queue but its outcome is
   * not recorded yet (it settles in a microtask): time must not move on
   * until it is, or its start would be recorded late.
   */
  unsettled(): boolean;
}

function makeContender(
  algorithm: Algorithm,
  ratePerSecond: number,
  burst: number,
  clock: VirtualClock,
  outcomes: Outcomes,
): Contender {
  const limit = ratePerSecond; // per window of 1 s
  switch (algorithm) {
    case 'token-bucket': {
      const bucket = new TokenBucket({ rate: ratePerSecond, burst, clock });
      return {
        algorithm,
        config: `TokenBucket({ rate: ${ratePerSecond}, burst: ${burst} })`,
        unsettled: () => false,
        offer(id, nowMs) {
          outcomes[id] = bucket.tryTakeAt(nowMs) ? nowMs : Number.NaN;
        },
      };
    }
    case 'fixed-window': {
      const w = new FixedWindow({ limit, window: 1000, clock });
      return {
        algorithm,
        config: `FixedWindow({ limit: ${limit}, window: '1s' })`,
        unsettled: () => false,
        offer(id, nowMs) {
          outcomes[id] = w.tryTakeAt(nowMs).allowed ? nowMs : Number.NaN;
        },
      };
    }
    case 'sliding-window': {
      const w = new SlidingWindow({ limit, window: 1000, clock });
      return {
        algorithm,
        config: `SlidingWindow({ limit: ${limit}, window: '1s' })`,
        unsettled: () => false,
        offer(id, nowMs) {
          outcomes[id] = w.tryTakeAt(nowMs).allowed ? nowMs : Number.NaN;
        },
      };
    }
    case 'leaky-bucket': {
      const b = new LeakyBucket({ rate: ratePerSecond, maxQueue: Math.max(1, burst), clock });
      return {
        algorithm,
        config: `LeakyBucket({ rate: ${ratePerSecond}, maxQueue: ${Math.max(1, burst)} })`,
        unsettled: () => false,
        offer(id, nowMs) {
          const d = b.tryTakeAt(nowMs);
          outcomes[id] = d.allowed ? nowMs + d.delayMs : Number.NaN;
        },
      };
    }
    case 'queue': {
      const scheduler = new Scheduler({ rate: ratePerSecond, burst: 1, maxQueue: Number.MAX_SAFE_INTEGER, clock });
      let offered = 0;
      let settled = 0;
      return {
        algorithm,
        config: `Scheduler({ rate: ${ratePerSecond}, burst: 1, maxQueue: unbounded })`,
        unsettled: () => offered - scheduler.size - settled > 0,
        offer(id) {
          offered++;
          scheduler
            .schedule(() => {
              outcomes[id] = clock.now();
              settled++;
            })
            .catch(() => {
              outcomes[id] = Number.NaN;
              settled++;
            });
        },
      };
    }
  }
}

/**
 * Waits until `contender` has recorded every outcome that is due: a few turns
 * of the microtask queue are usually enough (cheap); if not, whole event-loop
 * turns.
 */
async function settle(contender: Contender): Promise<void> {
  for (let turns = 0; contender.unsettled(); turns++) {
    if (turns < 64) await Promise.resolve();
    else await new Promise((resolve) => setImmediate(resolve));
  }
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? 0;
}

/** Summarises one contender's outcomes into per-second rows and totals. */
function summarise(
  algorithm: Algorithm,
  config: string,
  arrivalsMs: number[],
  outcomes: Outcomes,
  seconds: number,
): AlgorithmResult {
  const rows: SecondStats[] = Array.from({ length: seconds }, (_, second) => ({
    second,
    offered: 0,
    admitted: 0,
    rejected: 0,
    queued: 0,
    maxWaitMs: 0,
  }));
  const n = arrivalsMs.length;
  const waits = new Float64Array(n);
  const starts = new Float64Array(n);
  // The queue: requests join it at their arrival (sorted already) and leave at their start.
  const joins = new Float64Array(n);
  const leaves = new Float64Array(n);
  let admitted = 0;
  let rejected = 0;
  let joined = 0;
  let left = 0;
  let queuedAtEnd = 0;
  for (let id = 0; id < n; id++) {
    const arrival = arrivalsMs[id] as number;
    const row = rows[Math.floor(arrival / 1000)];
    if (row) row.offered++;
    const start = outcomes[id];
    if (start === undefined) {
      queuedAtEnd++;
      joins[joined++] = arrival;
      continue;
    }
    if (Number.isNaN(start)) {
      rejected++;
      if (row) row.rejected++;
      continue;
    }
    const wait = start - arrival;
    waits[admitted] = wait;
    starts[admitted++] = start;
    const startRow = rows[Math.floor(start / 1000)];
    if (startRow) {
      startRow.admitted++;
      if (wait > startRow.maxWaitMs) startRow.maxWaitMs = wait;
    }
    if (wait > 0) {
      joins[joined++] = arrival;
      leaves[left++] = start;
    }
  }
  const leaveTimes = leaves.subarray(0, left).sort();
  // Walk joins and leaves in time order (a leave first on a tie): the queue at each second's end, and its peak.
  let queued = 0;
  let peakQueued = 0;
  let i = 0;
  let j = 0;
  const step = (untilMs: number): void => {
    while (true) {
      const nextJoin = i < joined ? (joins[i] as number) : Number.POSITIVE_INFINITY;
      const nextLeave = j < left ? (leaveTimes[j] as number) : Number.POSITIVE_INFINITY;
      if (nextLeave <= nextJoin && nextLeave < untilMs) {
        queued--;
        j++;
      } else if (nextJoin < nextLeave && nextJoin < untilMs) {
        queued++;
        i++;
        if (queued > peakQueued) peakQueued = queued;
      } else return;
    }
  };
  for (const row of rows) {
    step((row.second + 1) * 1000);
    row.queued = queued;
  }
  step(Number.POSITIVE_INFINITY);
  // The most let through in any window of 1 s: two pointers over the sorted start times.
  const startTimes = starts.subarray(0, admitted).sort();
  let most = 0;
  for (let a = 0, b = 0; b < admitted; b++) {
    while ((startTimes[b] as number) - (startTimes[a] as number) >= 1000) a++;
    most = Math.max(most, b - a + 1);
  }
  const waitTimes = waits.subarray(0, admitted).sort();
  return {
    algorithm,
    label: LABELS[algorithm],
    config,
    seconds: rows,
    totals: {
      offered: n,
      admitted,
      rejected,
      queuedAtEnd,
      mostInAnySecond: most,
      peakQueued,
      waitP50Ms: percentile(waitTimes, 50),
      waitP99Ms: percentile(waitTimes, 99),
      maxWaitMs: admitted ? (waitTimes[admitted - 1] as number) : 0,
    },
  };
}

/**
 * Replays `trace` through each of `algorithms` (each on its own virtual clock)
 * at `ratePerSecond` and `burst`.
 */
export async function simulate(
  trace: Trace,
  ratePerSecond: number,
  burst: number,
  algorithms: readonly Algorithm[],
): Promise<Simulation> {
  const { arrivalsMs } = trace;
  // Queues may drain after the trace ends: follow them for at most as long again.
  const stopMs = trace.durationS * 2 * 1000;
  const runs: { contender: Contender; outcomes: Outcomes; lastMs: number }[] = [];
  for (const algorithm of algorithms) {
    const clock = new VirtualClock();
    const outcomes: Outcomes = new Array(arrivalsMs.length);
    const contender = makeContender(algorithm, ratePerSecond, burst, clock, outcomes);
    for (const [id, arrival] of arrivalsMs.entries()) {
      // Timers due before this arrival fire first, each at its own time.
      while (clock.nextTimerAtMs() <= arrival) {
        clock.fireNext();
        await settle(contender);
      }
      clock.set(arrival);
      contender.offer(id, arrival);
      if (arrivalsMs[id + 1] !== arrival) await settle(contender);
    }
    while (clock.nextTimerAtMs() < stopMs) {
      clock.fireNext();
      await settle(contender);
    }
    // Requests let through after the stop are still waiting as far as the simulation goes.
    for (let id = 0; id < outcomes.length; id++) {
      const o = outcomes[id];
      if (o !== undefined && o >= stopMs) outcomes[id] = undefined;
    }
    let lastMs = 0;
    for (const o of outcomes) if (o !== undefined && !Number.isNaN(o) && o > lastMs) lastMs = o;
    runs.push({ contender, outcomes, lastMs });
  }
  const lastStartMs = Math.max(0, ...runs.map((r) => r.lastMs));
  const seconds = Math.min(trace.durationS * 2, Math.max(trace.durationS, Math.floor(lastStartMs / 1000) + 1));
  const { arrivalsMs: _, ...rest } = trace;
  return {
    ratePerSecond,
    burst,
    trace: { ...rest, requests: arrivalsMs.length },
    seconds,
    results: runs.map((r) => summarise(r.contender.algorithm, r.contender.config, arrivalsMs, r.outcomes, seconds)),
  };
}
