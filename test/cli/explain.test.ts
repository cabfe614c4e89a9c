/**
 * `explain`'s numbers: the worked numbers of the two source texts come out of
 * it, and its "most admitted in a window" bound is checked against the real
 * TokenBucket driven by a greedy client.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { explain, formatExplanation } from '../../src/cli/explain.js';
import { TokenBucket } from '../../src/index.js';
import { manualClock } from '../helpers/fake-clock.js';

describe('explain: the worked numbers', () => {
  it('100/s with a burst of 200: 200 at once, full again after 2 s, 300 in any 1 s, never more than 100/s sustained', () => {
    const e = explain(100, 200);
    expect(e.largestBurst).toBe(200);
    expect(e.refillFromEmptyMs).toBe(2000);
    expect(e.tokenIntervalMs).toBe(10);
    expect(e.windows).toEqual([
      { windowMs: 1000, most: 300, average: 100 },
      { windowMs: 10_000, most: 1200, average: 1000 },
      { windowMs: 60_000, most: 6200, average: 6000 },
    ]);
    expect(e.warnings).toEqual([]);
    const text = formatExplanation(e);
    expect(text).toContain('Refill from empty  2 s (200 / 100/s)');
    expect(text).toContain('200 is a reserve, not a rate');
  });

  it('ten independent instances of 100/s allow about 1000/s', () => {
    const e = explain(100, 200, 10);
    expect(e.fleet?.ratePerSecond).toBe(1000);
    expect(e.fleet?.largestBurst).toBe(2000);
    expect(e.fleet?.windows[0]?.most).toBe(3000);
    const text = formatExplanation(e);
    expect(text).toContain('10 independent instances');
    expect(text).toContain('about 1000/s sustained');
    expect(text).toContain('give each instance 10/s');
    expect(formatExplanation(explain(100, 200))).not.toContain('instances');
  });

  it('20/s with 40: after an idle spell 30 quick calls pass, and of the next 30 exactly the first 10', () => {
    const e = explain(20, 40, 1, [30, 30]);
    expect(e.refillFromEmptyMs).toBe(2000); // an idle minute is far more than enough
    expect(e.calls).toEqual([
      { calls: 30, passed: 30, firstPassed: true, nextTokenMs: 0 },
      { calls: 30, passed: 10, firstPassed: true, nextTokenMs: 50 },
    ]);
    const text = formatExplanation(e);
    expect(text).toContain('30 calls: 30 pass');
    expect(text).toContain('30 calls: 10 pass (the first 10), 20 refused; the next token comes in 50 ms');
  });

  it('warns when the burst is too small for timers to sustain the rate, and not when it is just enough', () => {
    const tight = explain(1024 * 1024, 1024); // 1 MiB/s with 1 KiB: fills in ~1 ms
    expect(tight.minBurstForTimers).toBe(10486);
    expect(tight.warnings).toHaveLength(1);
    expect(formatExplanation(tight).replace(/\s+/g, ' ')).toContain('Use a burst of at least 10,486');
    const bytes = explain(1024 * 1024, 1024, 1, undefined, 'bytes');
    const text = formatExplanation(bytes).replace(/\s+/g, ' ');
    expect(text).toContain('A token bucket with rate 1 MiB/s and burst 1 KiB');
    expect(text).toContain('Use a burst of at least 10486 bytes (~10.2 KiB, 10 ms of the rate)');
    for (const line of formatExplanation(bytes).split('\n')) expect(line.length).toBeLessThanOrEqual(110);
    expect(explain(1024 * 1024, 10486).warnings).toEqual([]);
    expect(explain(100, 0.5).warnings[0]).toContain('never passes');
  });
});

describe('explain: the words', () => {
  it('bytes read naturally ("up to 1 KiB can pass at once") and durations are rounded to three digits, marked ~', () => {
    const text = formatExplanation(explain(1024 * 1024, 1024, 1, undefined, 'bytes'));
    expect(text).toContain('Refill from empty  ~0.977 ms (1 KiB / 1 MiB/s).');
    expect(text).toContain('after an idle spell of ~0.977 ms or more, up to 1 KiB can pass at once, then 1 MiB/s:');
    expect(text).not.toMatch(/KiB pass|0\.9765625/);
    const requests = formatExplanation(explain(7, 3, 1, [5]));
    expect(requests).toContain('Refill from empty  ~429 ms (3 / 7/s); a token every ~143 ms.');
    expect(requests).toContain('3 quick calls pass, then one every ~143 ms');
    expect(requests).toContain('the next token comes in ~143 ms');
    // No number in the text has more than three significant digits after a decimal point.
    for (const t of [text, requests]) expect(t).not.toMatch(/[0-9]\.[0-9]{4}/);
  });

  it('sizes and rates are written as formatSize and formatRate write them, wherever they appear', () => {
    const text = formatExplanation(explain(10 * 1024 * 1024, 1024 * 1024, 3, undefined, 'bytes'));
    expect(text).toContain('give each instance ~3.33 MiB/s and a burst of ~341 KiB');
    expect(text).toContain('~1.76 GiB in 1 min');
  });
});

describe('explain: the window bound is what the real bucket admits', () => {
  it('a client calling at every token arrival gets exactly floor(burst + rate * T) in a window of T from a full bucket', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2000 }), fc.integer({ min: 1, max: 500 }), (rate, burst) => {
        const bound = explain(rate, burst).windows[0]?.most ?? 0;
        const clock = manualClock();
        const bucket = new TokenBucket({ rate, burst, clock });
        let admitted = 0;
        // Over the closed window [0, 1000 ms], call as often as a token arrives, and take all there is.
        for (let j = 0; j <= rate; j++) {
          clock.set((j * 1000) / rate);
          while (bucket.tryTake()) admitted++;
        }
        expect(admitted).toBe(bound);
      }),
      { numRuns: 60 },
    );
  });

  it('no client, however it times its calls, gets more than the bound', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 1, max: 300 }),
        fc.array(fc.double({ min: 0, max: 1000, noNaN: true }), { maxLength: 400 }),
        (rate, burst, times) => {
          const bound = explain(rate, burst).windows[0]?.most ?? 0;
          const clock = manualClock();
          const bucket = new TokenBucket({ rate, burst, clock });
          let admitted = 0;
          for (const t of times.sort((a, b) => a - b)) {
            clock.set(t);
            while (bucket.tryTake()) admitted++;
          }
          expect(admitted).toBeLessThanOrEqual(bound);
        },
      ),
      { numRuns: 60 },
    );
  });
});
