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
  /** True if the contender settles asynchronously (microtasks must run before time moves on). */
  async: boolean;
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
        async: false,
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
        async: false,
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
        async: false,
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
        async: false,
        offer(id, nowMs) {
          const d = b.tryTakeAt(nowMs);
          outcomes[id] = d.allowed ? nowMs + d.delayMs : Number.NaN;
        },
      };
    }
    case 'queue': {
      const scheduler = new Scheduler({ rate: ratePerSecond, burst: 1, maxQueue: Number.MAX_SAFE_INTEGER, clock });
      return {
        algorithm,
        config: `Scheduler({ rate: ${ratePerSecond}, burst: 1, maxQueue: unbounded })`,
        async: true,
        offer(id) {
          scheduler
            .schedule(() => {
              outcomes[id] = clock.now();
            })
            .catch(() => {
              outcomes[id] = Number.NaN;
            });
        },
      };
    }
  }
}

/** Lets every pending microtask (and promise continuation) run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function percentile(sorted: number[], p: number): number {
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
  const waits: number[] = [];
  const starts: number[] = [];
  // Queue length changes: +1 when a request starts waiting, -1 when it is let through.
  const changes: [number, number][] = [];
  let queuedAtEnd = 0;
  for (const [id, arrival] of arrivalsMs.entries()) {
    const row = rows[Math.floor(arrival / 1000)];
    if (row) row.offered++;
    const start = outcomes[id];
    if (start === undefined) {
      queuedAtEnd++;
      changes.push([arrival, 1]);
      continue;
    }
    if (Number.isNaN(start)) {
      if (row) row.rejected++;
      continue;
    }
    const wait = start - arrival;
    waits.push(wait);
    starts.push(start);
    const startRow = rows[Math.floor(start / 1000)];
    if (startRow) {
      startRow.admitted++;
      if (wait > startRow.maxWaitMs) startRow.maxWaitMs = wait;
    }
    if (wait > 0) changes.push([arrival, 1], [start, -1]);
  }
  // Queue length at each second's end, and its peak.
  changes.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let queued = 0;
  let peakQueued = 0;
  let c = 0;
  for (const row of rows) {
    const endMs = (row.second + 1) * 1000;
    while (c < changes.length && (changes[c] as [number, number])[0] < endMs) {
      queued += (changes[c] as [number, number])[1];
      if (queued > peakQueued) peakQueued = queued;
      c++;
    }
    row.queued = queued;
  }
  for (; c < changes.length; c++) {
    queued += (changes[c] as [number, number])[1];
    if (queued > peakQueued) peakQueued = queued;
  }
  // The most let through in any window of 1 s: two pointers over the sorted start times.
  starts.sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; j < starts.length; j++) {
    while ((starts[j] as number) - (starts[i] as number) >= 1000) i++;
    most = Math.max(most, j - i + 1);
  }
  waits.sort((a, b) => a - b);
  const rejected = outcomes.filter((o) => o !== undefined && Number.isNaN(o)).length;
  return {
    algorithm,
    label: LABELS[algorithm],
    config,
    seconds: rows,
    totals: {
      offered: arrivalsMs.length,
      admitted: starts.length,
      rejected,
      queuedAtEnd,
      mostInAnySecond: most,
      peakQueued,
      waitP50Ms: percentile(waits, 50),
      waitP99Ms: percentile(waits, 99),
      maxWaitMs: waits.length ? (waits[waits.length - 1] as number) : 0,
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
        if (contender.async) await settle();
      }
      clock.set(arrival);
      contender.offer(id, arrival);
      if (contender.async && arrivalsMs[id + 1] !== arrival) await settle();
    }
    while (clock.nextTimerAtMs() < stopMs) {
      clock.fireNext();
      if (contender.async) await settle();
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
