import { describe, expect, it } from 'vitest';
import { systemClock } from '../src/index.js';

describe('systemClock', () => {
  it('reads a monotonic millisecond clock', () => {
    const a = systemClock.now();
    const b = systemClock.now();
    expect(b).toBeGreaterThanOrEqual(a);
    expect(Math.abs(a - performance.now())).toBeLessThan(1000);
  });

  it('arms and clears timers', async () => {
    let fired = false;
    const cleared = systemClock.setTimeout(() => {
      fired = true;
    }, 1);
    systemClock.clearTimeout(cleared);
    await new Promise<void>((resolve) => systemClock.setTimeout(resolve, 5));
    expect(fired).toBe(false);
  });
});
