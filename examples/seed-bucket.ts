/**
 * The seed's bucket at work, second by second: 100 requests/s sustained with a
 * burst of 200, against the advertising campaign of the seed (a public API
 * that normally sees 70-90 requests/s, then bursts of 180/s for a few seconds).
 *
 * Runs the real TokenBucket on a virtual clock, so it takes no time:
 *   npm start            (or: npx tsx examples/seed-bucket.ts)
 */

import { type Clock, formatRate, TokenBucket } from '../src/index.js';

/** A virtual clock: time moves only when the simulation says so. */
function virtualClock(): Clock & { set(ms: number): void } {
  let nowMs = 0;
  return {
    now: () => nowMs,
    set(ms: number) {
      nowMs = ms;
    },
    setTimeout: () => {
      throw new Error('the simulation needs no timers');
    },
    clearTimeout: () => {},
  };
}

// Offered requests per second: normal traffic, the campaign's burst, normal again.
const offeredPerSecond = [80, 75, 90, 85, 180, 180, 180, 180, 180, 85, 70, 80, 90, 75, 80];

const clock = virtualClock();
const bucket = new TokenBucket({ rate: '100/s', burst: 200, clock });

console.log(
  `TokenBucket rate ${formatRate(bucket.rate)}, burst ${bucket.burst}: starts full, refills in ${bucket.burst / bucket.rate} s\n`,
);
console.log(' second | offered | admitted | rejected | tokens left | bucket');
console.log(`--------|---------|----------|----------|-------------|${'-'.repeat(22)}`);
let totalOffered = 0;
let totalAdmitted = 0;
for (const [second, offered] of offeredPerSecond.entries()) {
  let admitted = 0;
  for (let i = 0; i < offered; i++) {
    clock.set(second * 1000 + (i * 1000) / offered); // requests spread evenly over the second
    if (bucket.tryTake()) admitted++;
  }
  clock.set((second + 1) * 1000 - 1e-9);
  const tokens = bucket.tokens;
  totalOffered += offered;
  totalAdmitted += admitted;
  const bar = '#'.repeat(Math.round((tokens / bucket.burst) * 20)).padEnd(20, '.');
  console.log(
    `${String(second).padStart(7)} | ${String(offered).padStart(7)} | ${String(admitted).padStart(8)} | ${String(offered - admitted).padStart(8)} | ${tokens.toFixed(1).padStart(11)} | [${bar}]`,
  );
}
console.log(`\n${totalAdmitted} of ${totalOffered} admitted over ${offeredPerSecond.length} s:`);
console.log('the reserve of 200 absorbs the first 2.5 s of the 180/s burst; after that the bucket admits its');
console.log('sustained 100/s and rejects the rest (HTTP 429 with Retry-After), then refills while traffic is normal.');

// The Czech seed's public API: 20/s with a burst of 40, after an idle minute.
const api = new TokenBucket({ rate: '20/s', burst: 40, clock });
clock.set(clock.now() + 60_000);
const first = Array.from({ length: 30 }, () => api.tryTake()).filter(Boolean).length;
const next = Array.from({ length: 30 }, () => api.tryTake()).filter(Boolean).length;
console.log(
  `\n20/s with a burst of 40, after an idle minute: ${first} of 30 quick calls pass, then ${next} of the next 30;`,
);
console.log(`the others get 429 and may retry in ${api.delayFor()} ms.`);
