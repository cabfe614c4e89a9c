import { describe, expect, it } from 'vitest';
import { Watchdog } from '../../src/stream/pacing.js';
import { fakeClock } from '../helpers/fake-clock.js';

describe('Watchdog', () => {
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
