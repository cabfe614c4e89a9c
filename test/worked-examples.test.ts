/**
 * The README's two worked examples of a token bucket must come out of the code exactly:
 * 100 requests/s with bursts up to 200, and a public API at 20 requests/s with a burst of 40.
 */

import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../src/index.js';
import { manualClock } from './helpers/fake-clock.js';

describe('100 requests/s sustained, bursts up to 200', () => {
  it('starts with 200 tokens: 200 quick calls pass, the 201st does not', () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ rate: '100/s', burst: 200, clock });
    expect(bucket.tokens).toBe(200);
    let admitted = 0;
    for (let i = 0; i < 201; i++) if (bucket.tryTake()) admitted++;
    expect(admitted).toBe(200);
  });

  it('an emptied bucket is full again after exactly 2 s (200 / 100)', () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ rate: 100, burst: 200, clock });
    expect(bucket.tryTake(200)).toBe(true);
    expect(bucket.tokens).toBe(0);
    expect(bucket.delayFor(200)).toBe(2000);
    clock.advance(1999);
    expect(bucket.tokens).toBeLessThan(200);
    expect(bucket.tryTake(200)).toBe(false);
    clock.advance(1);
    expect(bucket.tokens).toBe(200);
    clock.advance(60_000);
    expect(bucket.tokens).toBe(200); // never above the capacity
  });

  it('sustains 100/s, not 200/s: over 10 s of constant demand at most 200 + 100 * 10 pass', () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ rate: 100, burst: 200, clock });
    let admitted = 0;
    // 1,000 requests a second (one each ms) for 10 s.
    for (let ms = 0; ms <= 10_000; ms++) {
      clock.set(ms);
      if (bucket.tryTake()) admitted++;
    }
    expect(admitted).toBe(200 + 100 * 10);
  });
});

describe('a public API: 20 requests/s with a burst of 40', () => {
  it('after an idle minute 30 quick calls pass, and of the next 30 exactly 10 do', () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ rate: '20 per second', burst: 40, clock });
    bucket.tryTake(40); // start from an empty bucket: the minute of idling must refill it
    clock.advance(60_000);
    expect(bucket.tokens).toBe(40); // a reserve of 40, not 20 * 60 = 1200
    const first = Array.from({ length: 30 }, () => bucket.tryTake());
    const next = Array.from({ length: 30 }, () => bucket.tryTake());
    expect(first.filter(Boolean)).toHaveLength(30);
    expect(next.filter(Boolean)).toHaveLength(10);
    // The 10 that pass are the first 10: a refused call never takes anything.
    expect(next.slice(0, 10).every(Boolean)).toBe(true);
    expect(next.slice(10).some(Boolean)).toBe(false);
    // The refused ones would get HTTP 429 with this wait: one token comes every 50 ms.
    expect(bucket.delayFor()).toBe(50);
  });
});
