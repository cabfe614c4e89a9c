/**
 * `tokenpace explain`: what a token bucket of rate R and burst B allows, in
 * plain words. Every number here follows from the conformance bound (no
 * window of length T admits more than B + R * T) and the refill rule; the
 * quick-call groups (`--calls`) are run through the real TokenBucket on a
 * virtual clock.
 */

import { TokenBucket } from '../meters/token-bucket.js';
import { minBurstBytes, TIMER_SLACK_MS } from '../stream/pacing.js';
import { formatDuration, formatRate, formatSize } from '../units.js';

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
  /** What a token is: a request (the default) or a byte (a rate given in B/s or bits). */
  unit: 'requests' | 'bytes';
  /** The rate written for people: `'100/s'`, `'100/min'`, `'10 MiB/s'`. */
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
    burst,
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
export function explain(
  ratePerSecond: number,
  burst: number,
  instances = 1,
  calls?: number[],
  unit: 'requests' | 'bytes' = 'requests',
): Explanation {
  const amount = (n: number): string => describeAmount(n, unit);
  const rateText = (perSecond: number): string => describeRate(perSecond, unit);
  const minBurst = minBurstBytes(ratePerSecond);
  const warnings: string[] = [];
  if (burst < 1) {
    warnings.push(
      `a burst of ${amount(burst)} holds less than one token, so a request of cost 1 never passes: use a burst of at least 1`,
    );
  } else if (burst < minBurst) {
    warnings.push(
      `a burst of ${amount(burst)} cannot sustain ${rateText(ratePerSecond)} for a waiter that sleeps on a timer ` +
        `(a Scheduler's queue, take(), a Throttle): Node's timers tick in whole milliseconds and fire up to ` +
        `${TIMER_SLACK_MS} ms late, the bucket fills in ${formatDuration((burst * 1000) / ratePerSecond)} and ` +
        `overflows while the waiter sleeps, so tokens are lost. Use a burst of at least ${unit === 'bytes' ? `${minBurst} bytes (${amount(minBurst)}, ` : `${amount(minBurst)} (`}` +
        `${2 * TIMER_SLACK_MS} ms of the rate). Requests refused at once (tryTake) are not affected.`,
    );
  }
  const fleet =
    instances > 1
      ? {
          ratePerSecond: ratePerSecond * instances,
          rate: rateText(ratePerSecond * instances),
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
    unit,
    rate: rateText(ratePerSecond),
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

/** A count for people (`6,200`), or bytes as formatSize writes them (`64 KiB`, `~600 MiB`). */
export function describeAmount(n: number, unit: 'requests' | 'bytes'): string {
  return unit === 'requests' ? count(n) : formatSize(n);
}

function describeRate(perSecond: number, unit: 'requests' | 'bytes'): string {
  return formatRate(perSecond, unit === 'requests' ? 'count' : 'bytes');
}

function count(n: number): string {
  return Number.isInteger(n) ? n.toLocaleString('en-US') : Number(n.toPrecision(6)).toLocaleString('en-US');
}

function windowName(ms: number): string {
  return ms === 60_000 ? '1 min' : formatDuration(ms);
}

/** Splits `text` into lines of at most `width` characters (words are not broken), each indented. */
function wrap(text: string, width: number, indent: string): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && indent.length + line.length + 1 + word.length > width) {
      out.push(indent + line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) out.push(indent + line);
  return out;
}

/** The explanation in plain words, as `explain` prints it. */
export function formatExplanation(e: Explanation): string {
  const bytes = e.unit === 'bytes';
  const amount = (n: number): string => describeAmount(n, e.unit);
  const lines: string[] = [];
  lines.push(`A token bucket with rate ${e.rate} and burst ${amount(e.burst)}:`);
  lines.push('');
  lines.push(
    `  Sustained rate     ${e.rate} (${amount(e.ratePerSecond * 60)}/min): over a long run, no more than this gets through.`,
  );
  lines.push(
    `  Largest burst      ${amount(e.largestBurst)}${bytes ? '' : ' requests'} at once, from a full bucket (a new bucket starts full).`,
  );
  lines.push(
    `  Refill from empty  ${formatDuration(e.refillFromEmptyMs)} (${amount(e.burst)} / ${e.rate})${bytes ? '' : `; a token every ${formatDuration(e.tokenIntervalMs)}`}.`,
  );
  lines.push(
    bytes
      ? `  So                 after an idle spell of ${formatDuration(e.refillFromEmptyMs)} or more, up to ${amount(e.largestBurst)} can pass at once, then ${e.rate}:`
      : `  So                 after an idle spell of ${formatDuration(e.refillFromEmptyMs)} or more, ${amount(e.largestBurst)} quick calls pass, then one every ${formatDuration(e.tokenIntervalMs)}:`,
  );
  lines.push(`                     ${amount(e.burst)} is a reserve, not a rate.`);
  lines.push('');
  lines.push(`  Most ${bytes ? 'bytes' : 'requests'} admitted in any window (burst + rate x window):`);
  for (const w of e.windows) {
    lines.push(
      `    ${windowName(w.windowMs).padEnd(6)} ${amount(w.most).padStart(12)}   (the rate alone: ${amount(w.average)})`,
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
    lines.push(`    together they allow about ${f.rate} sustained and ${amount(f.largestBurst)} at once;`);
    lines.push(
      `    most in any window: ${f.windows.map((w) => `${amount(w.most)} in ${windowName(w.windowMs)}`).join(', ')}.`,
    );
    lines.push(
      '    The total moves with the number of instances and the routing. For one limit across them, keep the bucket',
    );
    lines.push(
      `    in a shared store, or give each instance ${describeRate(e.ratePerSecond / e.instances, e.unit)} and a burst of ${amount(e.burst / e.instances)}.`,
    );
  }
  for (const warning of e.warnings) {
    lines.push('');
    lines.push(...wrap(`Warning: ${warning}`, 100, '  '));
  }
  return `${lines.join('\n')}\n`;
}
