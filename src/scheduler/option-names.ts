/**
 * The names of the Scheduler's options, for the check that refuses any other (plain JavaScript has
 * no type checker to catch a misspelt \`brust\`), and what to write instead of a peer's option.
 */

/** What to write instead of p-queue's interval options. */
const P_QUEUE_WINDOW =
  "p-queue's intervalCap per interval is `limit` per `window` here (a sliding window: no `window` sees more " +
  "than `limit` starts); or keep p-queue's options with `PQueue` from 'tokenpace/p-queue'";

/** Every option a Scheduler reads; any other name is refused (a typo in plain JavaScript). */
export const SCHEDULER_OPTIONS: ReadonlySet<string> = new Set([
  'rate',
  'burst',
  'concurrency',
  'maxQueue',
  'onFull',
  'maxWait',
  'catchUp',
  'timeout',
  'onTimeout',
  'autoStart',
  'clock',
  'store',
  'key',
  'lease',
  'pollInterval',
  'reserveAhead',
  'limit',
  'window',
  'windowMargin',
  'windowCounts',
]);
/** Names that p-queue and bottleneck users bring, with what to write here instead. */
export const SCHEDULER_PEER_OPTIONS: Readonly<Record<string, string>> = {
  interval: P_QUEUE_WINDOW,
  intervalCap: P_QUEUE_WINDOW,
  strict: P_QUEUE_WINDOW,
  carryoverIntervalCount: `${P_QUEUE_WINDOW}, with windowCounts: 'finish' to count a job until it finishes`,
  throwOnTimeout: 'a timed-out job always rejects with JobTimeoutError here; remove it',
  queueClass: 'the queue is built in (bounded, by priority); remove it',
  carryoverConcurrencyCount: 'remove it: a job holds its concurrency until it settles (or its timeout, with onTimeout)',
  maxConcurrent: "write `concurrency` (bottleneck's maxConcurrent)",
  minTime: "write `rate` (bottleneck's minTime of t ms is rate: 1000 / t per second, with burst: 1)",
  reservoir: 'write `limit` and `window` (a sliding window), or `burst` and `rate`',
  highWater: 'write `maxQueue`',
  strategy:
    "write `onFull`: 'reject' (bottleneck's OVERFLOW), 'evict-lower' (OVERFLOW_PRIORITY) or 'drop-oldest' (LEAK); " +
    'BLOCK is not offered (see docs/migrating.md)',
};
