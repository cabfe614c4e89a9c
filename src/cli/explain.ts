/**
 * `tokenpace explain`: what a token bucket of rate R and burst B allows, in
 * plain words. Every number here follows from the conformance bound (no
 * window of length T admits more than B + R * T) and the refill rule; the
 * quick-call groups (`--calls`) are run through the real TokenBucket on a
 * virtual clock.
 */

import { TokenBucket } from '../meters/token-bucket.js';
import { minBurstBytes, TIMER_SLACK_MS } from '../stream/pacing.js';
import { formatDuration, formatRate } from '../units.js';

/** One window of the "most admitted" table. */
export interface WindowBound {
  /** The window's length, ms. */
  windowMs: number;
  /** The most cost-1 requests one bucket admits in any window of this length: floor(B + R * T). */
  most: number;
  /** What the rate alone gives over it on average: R * T. */
  average: number;
}

/** A group of quick calls (`--calls`) and what happened to it. */
export interface CallGroup {
  calls: number;
  passed: number;
  /** True if the calls that passed are the first ones of the group (a refusal takes nothing). */
  firstPassed: boolean;
  /** Milliseconds until the next token after the group. */
  nextTokenMs: number;
}

/** Everything `explain` says, as data (`--json` prints this). */
export interface Explanation {
  ratePerSecond: number;
  burst: number;
  /** The rate written for people: `'100/s'`, `'100/min'`. */
  rate: string;
  /** Milliseconds between tokens. */
  tokenIntervalMs: number;
  /** The most requests that pass at once: floor(burst). */
  largestBurst: number;
  /** Milliseconds for an empty bucket to fill: burst / rate. */
  refillFromEmptyMs: number;
  windows: WindowBound[];
  instances: number;
  /** What `instances` independent buckets add up to (traffic spread over all of them). */
  fleet: { ratePerSecond: number; rate: string; largestBurst: number; windows: WindowBound[] } | undefined;
  calls: CallGroup[] | undefined;
  /** The smallest burst with which a waiter that sleeps on Node's timers keeps the whole rate. */
  minBurstForTimers: number;
  warnings: string[];
}

const WINDOWS_MS = [1000, 10_000, 60_000];

function windowBounds(ratePerSecond: number, burst: number): WindowBound[] {
  return WINDOWS_MS.map((windowMs) => ({
    windowMs,
    // Exact for whole numbers: multiply first, as the bucket does.
    most: Math.floor(burst + (ratePerSecond * windowMs) / 1000 + 1e-9),
    average: (ratePerSecond * windowMs) / 1000,
  }));
}

/** Runs groups of back-to-back calls through a full TokenBucket at one instant each. */
function runCalls(ratePerSecond: number, burst: number, groups: number[]): CallGroup[] {
  // Quick calls: no time passes between them, nor between the groups.
  const bucket = new TokenBucket({
    rate: ratePerSecond,
    burst: Math.max(burst, Number.MIN_VALUE),
    clock: { now: () => 0, setTimeout: () => undefined, clearTimeout: () => {} },
  });
  const out: CallGroup[] = [];
  for (const calls of groups) {
    const passedAt: number[] = [];
    for (let i = 0; i < calls; i++) if (burst >= 1 && bucket.tryTake()) passedAt.push(i);
    out.push({
      calls,
      passed: passedAt.length,
      firstPassed: passedAt.every((index, i) => index === i),
      nextTokenMs: burst >= 1 ? bucket.delayFor(1) : Number.POSITIVE_INFINITY,
    });
  }
  return out;
}

/** Works out what a bucket of `ratePerSecond` and `burst` allows. */
export function explain(ratePerSecond: number, burst: number, instances = 1, calls?: number[]): Explanation {
  const minBurst = minBurstBytes(ratePerSecond);
  const warnings: string[] = [];
  if (burst < 1) {
    warnings.push(
      `a burst of ${burst} holds less than one token, so a request of cost 1 never passes: use a burst of at least 1`,
    );
  } else if (burst < minBurst) {
    warnings.push(
      `a burst of ${burst} cannot sustain ${formatRate(ratePerSecond)} for a waiter that sleeps on a timer ` +
        `(a Scheduler's queue, take(), a Throttle): Node's timers tick in whole milliseconds and fire up to ` +
        `${TIMER_SLACK_MS} ms late, the bucket fills in ${formatDuration((burst * 1000) / ratePerSecond)} and ` +
        `overflows while the waiter sleeps, so tokens are lost. Use a burst of at least ${minBurst} ` +
        `(${2 * TIMER_SLACK_MS} ms of the rate). Requests refused at once (tryTake) are not affected.`,
    );
  }
  const fleet =
    instances > 1
      ? {
          ratePerSecond: ratePerSecond * instances,
          rate: formatRate(ratePerSecond * instances),
          largestBurst: Math.floor(burst) * instances,
          windows: windowBounds(ratePerSecond, burst).map((w) => ({
            windowMs: w.windowMs,
            most: w.most * instances,
            average: w.average * instances,
          })),
        }
      : undefined;
  return {
    ratePerSecond,
    burst,
    rate: formatRate(ratePerSecond),
    tokenIntervalMs: 1000 / ratePerSecond,
    largestBurst: Math.floor(burst),
    refillFromEmptyMs: (burst * 1000) / ratePerSecond,
    windows: windowBounds(ratePerSecond, burst),
    instances,
    fleet,
    calls: calls === undefined ? undefined : runCalls(ratePerSecond, burst, calls),
    minBurstForTimers: minBurst,
    warnings,
  };
}

function count(n: number): string {
  return Number.isInteger(n) ? n.toLocaleString('en-US') : Number(n.toPrecision(6)).toLocaleString('en-US');
}

function windowName(ms: number): string {
  return ms === 60_000 ? '1 min' : formatDuration(ms);
}

/** The explanation in plain words, as `explain` prints it. */
export function formatExplanation(e: Explanation): string {
  const lines: string[] = [];
  lines.push(`A token bucket with rate ${e.rate} and burst ${count(e.burst)}:`);
  lines.push('');
  lines.push(
    `  Sustained rate     ${e.rate} (${count(e.ratePerSecond * 60)}/min): over a long run, no more than this gets through.`,
  );
  lines.push(
    `  Largest burst      ${count(e.largestBurst)} requests at once, from a full bucket (a new bucket starts full).`,
  );
  lines.push(
    `  Refill from empty  ${formatDuration(e.refillFromEmptyMs)} (${count(e.burst)} / ${e.rate}); a token every ${formatDuration(e.tokenIntervalMs)}.`,
  );
  lines.push(
    `  So                 after an idle spell of ${formatDuration(e.refillFromEmptyMs)} or more, ${count(e.largestBurst)} quick calls pass, then one every ${formatDuration(e.tokenIntervalMs)}:`,
  );
  lines.push(`                     ${count(e.burst)} is a reserve, not a rate.`);
  lines.push('');
  lines.push('  Most requests admitted in any window (burst + rate x window):');
  for (const w of e.windows) {
    lines.push(
      `    ${windowName(w.windowMs).padEnd(6)} ${count(w.most).padStart(10)}   (the rate alone: ${count(w.average)})`,
    );
  }
  if (e.calls) {
    lines.push('');
    lines.push('  Quick calls, back to back, starting from a full bucket (after an idle spell):');
    for (const g of e.calls) {
      const refused = g.calls - g.passed;
      let text = `    ${count(g.calls)} calls: ${count(g.passed)} pass`;
      if (refused > 0) {
        text += g.passed > 0 && g.firstPassed ? ` (the first ${count(g.passed)})` : '';
        text += `, ${count(refused)} refused`;
        if (Number.isFinite(g.nextTokenMs)) text += `; the next token comes in ${formatDuration(g.nextTokenMs)}`;
      }
      lines.push(text);
    }
  }
  if (e.fleet) {
    const f = e.fleet;
    lines.push('');
    lines.push(`  ${e.instances} independent instances, each with its own bucket (traffic spread over all of them):`);
    lines.push(`    together they allow about ${f.rate} sustained and ${count(f.largestBurst)} at once;`);
    lines.push(
      `    most in any window: ${f.windows.map((w) => `${count(w.most)} in ${windowName(w.windowMs)}`).join(', ')}.`,
    );
    lines.push(
      `    The total moves with the number of instances and the routing. For one limit across them, keep the bucket`,
    );
    lines.push(
      `    in a shared store, or give each instance ${formatRate(e.ratePerSecond / e.instances)} and a burst of ${count(e.burst / e.instances)}.`,
    );
  }
  for (const warning of e.warnings) {
    lines.push('');
    lines.push(`  Warning: ${warning}`);
  }
  return `${lines.join('\n')}\n`;
}
