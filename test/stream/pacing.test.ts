/**
 * The pacing rules (src/stream/pacing.ts): the smallest and the default
 * burst, the wake piece, the group's pieces, and the largest rate and burst.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BurstTooSmallError, InvalidRateError, InvalidSizeError } from '../../src/errors.js';
import {
  checkBurst,
  checkBurstLimit,
  checkRateLimit,
  defaultBurstBytes,
  defaultGroupBurstBytes,
  defaultQuantumBytes,
  describeDefaultBurst,
  groupWakePieceBytes,
  guaranteeWakePieceBytes,
  MAX_BURST,
  MAX_RATE,
  minBurstBytes,
  wakePieceBytes,
} from '../../src/stream/pacing.js';

describe('the wake-piece rule', () => {
  it('the burst less 10 ms of the rate, at least half the burst, at most 250 ms of the rate', () => {
    expect(wakePieceBytes(1000, 100)).toBe(90); // the burst less 10 ms of the rate
    expect(wakePieceBytes(1000, 12)).toBe(6); // at least half the burst
    expect(wakePieceBytes(1e7, 1e9)).toBe(900_000); // a burst above the default (100 ms) counts as the default
    expect(wakePieceBytes(1e6, 1e9)).toBe(121_072); // (at 1 MB/s two 64 KiB chunks, less 10 ms)
    expect(wakePieceBytes(1e6, 1e9, 0, defaultGroupBurstBytes(1e6))).toBe(40_000); // a group's: 50 ms
    expect(wakePieceBytes(1000, 1e6)).toBe(250); // and a piece is at most 250 ms of the rate
    expect(wakePieceBytes(1000, 100, 20)).toBe(70); // timers seen 20 ms late: a margin of 30 ms
    expect(wakePieceBytes(1000, 100, 60)).toBe(50); // never below half the burst
  });

  it('a late wake-up never overflows the bucket: piece + rate * tolerated lateness <= burst', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 40 }),
        fc.double({ min: 1, max: 20, noNaN: true }),
        fc.double({ min: 0, max: 30, noNaN: true }),
        (ratePerSecond, burstFactor, lateMs) => {
          const burst = Math.ceil(minBurstBytes(ratePerSecond) * burstFactor);
          const piece = wakePieceBytes(ratePerSecond, burst, lateMs);
          expect(piece).toBeGreaterThanOrEqual(1);
          expect(piece).toBeLessThanOrEqual(burst);
          // The lateness it tolerates: at least the 5 ms slack the burst rule assumes.
          const effective = Math.min(burst, defaultBurstBytes(ratePerSecond));
          expect(piece + (ratePerSecond * 5) / 1000).toBeLessThanOrEqual(effective + 1);
        },
      ),
    );
  });

  it("the group's pieces: less than a lone stream's, at least the quantum where it fits", () => {
    expect(groupWakePieceBytes(1000, 100, 10)).toBe(75); // wake piece 90, less 15 ms of the rate
    expect(groupWakePieceBytes(1000, 100, 80)).toBe(80); // at least the quantum
    expect(defaultQuantumBytes(1024 ** 2, defaultBurstBytes(1024 ** 2))).toBe(5243); // 5 ms of the rate
    expect(defaultQuantumBytes(1e6, 2000)).toBe(1000); // at most half the burst
    expect(defaultQuantumBytes(1000, 1024)).toBe(250); // and at most a wake piece
  });

  it('while guaranteed children wait, a group sleeps for at most 8 ms of its rate', () => {
    expect(guaranteeWakePieceBytes(1000, 75)).toBe(8);
    expect(guaranteeWakePieceBytes(8 * 1024 ** 2, 204800)).toBe(67108); // 25 ms of the rate becomes 8
    expect(guaranteeWakePieceBytes(1e6, 5000)).toBe(5000); // never more than the wake piece
    expect(guaranteeWakePieceBytes(10, 75)).toBe(1);
  });
});

describe('burst rules and limits', () => {
  it('the smallest burst is 10 ms of the rate; the default 100 ms, at least two 64 KiB chunks up to 250 ms, at least 1 KiB', () => {
    expect(minBurstBytes(1000)).toBe(10);
    expect(defaultBurstBytes(100)).toBe(1024);
    expect(defaultBurstBytes(10 * 1024)).toBe(2560); // 250 ms: two chunks would be 12.8 s
    expect(defaultBurstBytes(256 * 1024)).toBe(65536); // 250 ms
    expect(defaultBurstBytes(512 * 1024)).toBe(131072); // two chunks = 250 ms
    expect(defaultBurstBytes(1024 ** 2)).toBe(131072); // two chunks = 125 ms
    expect(defaultBurstBytes(1.25 * 1024 ** 2)).toBe(131072); // two chunks = 100 ms
    expect(defaultBurstBytes(3 * 1024 ** 2)).toBe(314573); // 100 ms
    expect(defaultBurstBytes(10 * 1024 ** 2)).toBe(1048576); // 100 ms
    // Whatever the rate: at least 100 ms and 1 KiB, at most max(100 ms, 250 ms capped at two chunks).
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 40 }), (rate) => {
        const burst = defaultBurstBytes(rate);
        expect(burst).toBeGreaterThanOrEqual(Math.max(1024, (rate * 100) / 1000));
        expect(burst).toBeLessThanOrEqual(Math.max(1024, Math.ceil((rate * 100) / 1000), Math.ceil(rate / 4)));
        expect(burst).toBeLessThanOrEqual(Math.max(131072, Math.ceil((rate * 100) / 1000)));
        expect(wakePieceBytes(rate, burst)).toBeLessThanOrEqual(Math.ceil(rate / 4));
      }),
    );
    // A group's default is 50 ms, with no chunk floor (its members wait for its wake-ups with their own buckets full).
    expect(defaultGroupBurstBytes(1024 ** 2)).toBe(52429);
    expect(defaultGroupBurstBytes(100)).toBe(1024);
    expect(describeDefaultBurst(1024 ** 2)).toBe('131072 bytes (128 KiB) (two 64 KiB chunks)');
    expect(describeDefaultBurst(10 * 1024 ** 2)).toBe('1048576 bytes (1 MiB) (rate x 100 ms)');
    expect(describeDefaultBurst(100 * 1024)).toBe('25600 bytes (25 KiB) (rate x 250 ms)');
    expect(describeDefaultBurst(100)).toBe('1024 bytes (1 KiB) (the 1 KiB floor)');
    expect(() => checkBurst(1000, 10)).not.toThrow();
    expect(() => checkBurst(1000, 9)).toThrow(BurstTooSmallError);
  });

  it('the largest rate and burst are 2^53 (bytes per second, bytes); above throws a coded error', () => {
    expect(MAX_RATE).toBe(2 ** 53);
    expect(MAX_BURST).toBe(2 ** 53);
    expect(() => checkRateLimit(2 ** 53, 2 ** 53)).not.toThrow();
    expect(() => checkRateLimit(1e308, 1e308)).toThrow(InvalidRateError);
    expect(() => checkRateLimit(1e308, 1e308)).toThrow(/bytes per second/);
    expect(() => checkBurstLimit(2 ** 53, 2 ** 53)).not.toThrow();
    expect(() => checkBurstLimit(2 ** 54, 2 ** 54)).toThrow(InvalidSizeError);
  });
});
