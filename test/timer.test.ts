/**
 * The watchdog (src/timer.ts): one timer for an exact instant, never early,
 * of any length, with a lateness estimate. Fake timers throughout; they
 * reproduce Node's overflow (a delay above 2^31 - 1 ms fires after 1 ms).
 */

import { describe, expect, it } from 'vitest';
import type { Clock } from '../src/clock.js';
import { Lateness, MAX_TIMER_MS, Watchdog } from '../src/timer.js';
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
  it('jumps to the largest lateness seen and decays by a fifth per wake-up', () => {
    const lateness = new Lateness();
    expect(lateness.observe(0)).toBe(false);
    expect(lateness.observe(10)).toBe(true);
    expect(lateness.ms).toBe(10);
    expect(lateness.observe(0)).toBe(true);
    expect(lateness.ms).toBe(8);
    expect(lateness.observe(9)).toBe(true);
    expect(lateness.ms).toBe(9);
    for (let i = 0; i < 30; i++) lateness.observe(0);
    expect(lateness.ms).toBe(0);
  });
});
