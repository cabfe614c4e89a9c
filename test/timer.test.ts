/**
 * The watchdog (src/timer.ts): one timer for an exact instant, never early,
 * of any length, with a lateness estimate. Fake timers throughout; they
 * reproduce Node's overflow (a delay above 2^31 - 1 ms fires after 1 ms).
 */

import { describe, expect, it } from 'vitest';
import type { Clock } from '../src/clock.js';
import { wakePieceBytes } from '../src/stream/pacing.js';
import { expectedLatenessMs, Lateness, MAX_TIMER_MS, Watchdog } from '../src/timer.js';
import { fakeClock } from './helpers/fake-clock.js';

const DAY = 24 * 3600 * 1000;

describe('Watchdog', () => {
  it('wakes at the instant asked for, rounded up to a whole millisecond, once', async () => {
    const { clock, timers, pending } = fakeClock();
    const wakes: number[] = [];
    const dog = new Watchdog(clock, () => wakes.push(clock.now()));
    dog.arm(0, 5.3);
    expect(dog.armed).toBe(true);
    expect(dog.dueMs).toBe(6);
    await timers.tickAsync(5);
    expect(wakes).toEqual([]);
    await timers.tickAsync(100);
    expect(wakes).toEqual([6]);
    expect(dog.armed).toBe(false);
    expect(pending()).toBe(0);
  });

  it('armAt a fractional instant wakes at the first whole millisecond at or after it', async () => {
    const { clock, timers } = fakeClock(10);
    const wakes: number[] = [];
    const dog = new Watchdog(clock, () => wakes.push(clock.now()));
    dog.armAt(12.25, 10);
    await timers.tickAsync(10);
    expect(wakes).toEqual([13]);
  });

  it('keeps one timer: the same instant is kept, another replaces it, Infinity disarms', async () => {
    const { clock, timers, pending } = fakeClock();
    let wakes = 0;
    const dog = new Watchdog(clock, () => wakes++);
    dog.armAt(50, 0);
    dog.armAt(50, 0);
    expect(pending()).toBe(1);
    dog.armAt(20, 0);
    expect(pending()).toBe(1);
    await timers.tickAsync(30);
    expect(wakes).toBe(1);
    dog.armAt(100, 30);
    dog.armAt(Number.POSITIVE_INFINITY, 30);
    expect(dog.armed).toBe(false);
    expect(pending()).toBe(0);
    dog.arm(30, 5);
    dog.disarm();
    dog.disarm();
    await timers.tickAsync(1000);
    expect(wakes).toBe(1);
  });

  it.each([
    ['30 days', 30 * DAY],
    ['exactly the limit', MAX_TIMER_MS],
    ['one past the limit', MAX_TIMER_MS + 1],
    ['a year', 365 * DAY],
  ])('a wait of %s neither fires at once nor early, and holds one timer', async (_name, ms) => {
    const { clock, timers, pending } = fakeClock();
    const wakes: number[] = [];
    const dog = new Watchdog(clock, () => wakes.push(clock.now()));
    dog.arm(0, ms);
    await timers.tickAsync(1);
    expect(wakes).toEqual([]);
    await timers.tickAsync(ms - 2);
    expect(wakes).toEqual([]);
    expect(pending()).toBe(1);
    await timers.tickAsync(1);
    expect(wakes).toEqual([ms]);
    expect(pending()).toBe(0);
  });

  it('a timer that fires early (Node may, by up to a millisecond) re-arms instead of waking', async () => {
    const { clock: fake, timers } = fakeClock();
    // A clock whose timers fire 0.6 ms before they should.
    const early: Clock = { ...fake, setTimeout: (fn, ms) => timers.setTimeout(fn, ms - 0.6) };
    const wakes: number[] = [];
    const dog = new Watchdog(early, () => wakes.push(fake.now()));
    dog.armAt(10, 0);
    await timers.tickAsync(9.5);
    expect(wakes).toEqual([]);
    expect(dog.armed).toBe(true);
    await timers.tickAsync(5);
    expect(wakes).toHaveLength(1);
    expect(wakes[0]).toBeGreaterThanOrEqual(10);
  });

  it('measures how late its wake-ups come', async () => {
    const { clock: fake, timers } = fakeClock();
    const late: Clock = { ...fake, setTimeout: (fn, ms) => timers.setTimeout(fn, ms + 3) };
    const changes: boolean[] = [];
    const dog = new Watchdog(late, (changed) => changes.push(changed));
    dog.arm(fake.now(), 10);
    await timers.tickAsync(20);
    expect(dog.latenessMs).toBe(3);
    expect(changes).toEqual([true]);
  });
});

describe('Lateness', () => {
  it('jumps to the largest lateness seen and halves every second (by time, not by wake-up)', () => {
    const lateness = new Lateness();
    expect(lateness.observe(-0.7, 0)).toBe(false); // early (real timers may be) counts as punctual
    expect(lateness.observe(20, 0)).toBe(true);
    expect(lateness.ms).toBe(20);
    expect(lateness.observe(1, 1000)).toBe(true); // halves every second
    expect(lateness.ms).toBe(10);
    expect(lateness.observe(0, 1010)).toBe(false); // 10 ms later: moved less than 0.5 ms
    expect(lateness.ms).toBe(10);
    for (let t = 1040; t < 2000; t += 40) lateness.observe(0, t); // 24 punctual wake-ups: small steps add up
    expect(lateness.ms).toBeGreaterThan(5);
    expect(lateness.ms).toBeLessThan(5.5);
    expect(lateness.observe(9, 2000)).toBe(true); // a later wake-up raises it at once
    expect(lateness.ms).toBe(9);
    for (let t = 2040; t < 12_000; t += 40) lateness.observe(0, t);
    expect(lateness.ms).toBe(0);
  });
});

describe('expectedLatenessMs: the one lateness policy', () => {
  it.each([
    [0, 0, 0],
    [0, 10, 10],
    [4, 10, 10],
    [12, 10, 18],
    [2, 1, 3],
  ])('estimate %d ms, floor %d ms: expect %d ms', (estimateMs, floorMs, expected) => {
    expect(expectedLatenessMs(estimateMs, floorMs)).toBe(expected);
  });

  it('is what a stream sizes its wake piece by and what caps the Scheduler: 1.5x the estimate', () => {
    // A stream at 1000 B/s with a 100 B burst: its wake piece keeps room for the expected lateness.
    expect(wakePieceBytes(1000, 100, 20)).toBe(100 - expectedLatenessMs(20, 10));
  });
});

describe('Watchdog.arm: a delay from now, as a stream sleeps', () => {
  it('arms one timer in whole milliseconds, rounded up, at least 1', async () => {
    const { clock, timers, pending } = fakeClock();
    const wakes: boolean[] = [];
    const watchdog = new Watchdog(clock, (changed) => wakes.push(changed));
    watchdog.arm(0, 2.2);
    expect(watchdog.armed).toBe(true);
    expect(pending()).toBe(1);
    timers.tick(2);
    expect(wakes).toEqual([]);
    timers.tick(1);
    expect(wakes).toEqual([false]);
    expect(watchdog.armed).toBe(false);
    watchdog.arm(clock.now(), 0);
    timers.tick(1);
    expect(wakes).toHaveLength(2);
    expect(pending()).toBe(0);
  });

  it('keeps a pending wake-up for the same time, replaces one for another, and disarms', () => {
    const { clock, timers, pending } = fakeClock();
    let wakes = 0;
    const watchdog = new Watchdog(clock, () => wakes++);
    watchdog.arm(0, 10);
    watchdog.arm(0, 9.5); // the same whole millisecond: kept
    expect(pending()).toBe(1);
    watchdog.arm(0, 5); // earlier: replaced
    expect(pending()).toBe(1);
    timers.tick(5);
    expect(wakes).toBe(1);
    watchdog.arm(clock.now(), 5);
    watchdog.disarm();
    watchdog.disarm();
    expect(watchdog.armed).toBe(false);
    expect(pending()).toBe(0);
    timers.tick(100);
    expect(wakes).toBe(1);
  });

  it('tells when the lateness it sees changes its estimate', () => {
    const { clock } = fakeClock();
    let fire: (() => void) | undefined;
    let nowMs = 0;
    const lateClock = { ...clock, now: () => nowMs, setTimeout: (fn: () => void) => (fire = fn) };
    const changes: boolean[] = [];
    const watchdog = new Watchdog(lateClock, (changed) => changes.push(changed));
    watchdog.arm(0, 10);
    nowMs = 30; // 20 ms late
    fire?.();
    expect(changes).toEqual([true]);
    expect(watchdog.latenessMs).toBe(20);
    watchdog.arm(30, 10);
    nowMs = 40; // punctual, 10 ms later: the estimate has barely decayed (it halves every second)
    fire?.();
    expect(changes).toEqual([true, false]);
    expect(watchdog.latenessMs).toBe(20);
    watchdog.arm(1030, 10);
    nowMs = 1040; // a second later: half
    fire?.();
    expect(changes).toEqual([true, false, true]);
    expect(watchdog.latenessMs).toBeCloseTo(20 * 0.5 ** (1010 / 1000), 9); // 1010 ms since the last wake-up
  });
});
