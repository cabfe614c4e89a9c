import FakeTimers from '@sinonjs/fake-timers';
import { describe, expect, it, vi } from 'vitest';
import { systemClock } from '../src/index.js';

describe('systemClock', () => {
  it('reads a monotonic millisecond clock', () => {
    const a = systemClock.now();
    const b = systemClock.now();
    expect(b).toBeGreaterThanOrEqual(a);
    expect(Math.abs(a - performance.now())).toBeLessThan(1000);
  });

  it('follows fake timers installed over the globals, as performance.now() does', () => {
    // systemClock keeps the performance object it found at load; the fakes patch that very object
    // (perf_hooks' performance), so a test that fakes time globally moves this clock too.
    const sinon = FakeTimers.install({ toFake: ['performance', 'setTimeout', 'clearTimeout'] });
    try {
      const before = systemClock.now();
      sinon.tick(1234);
      expect(systemClock.now() - before).toBe(1234);
    } finally {
      sinon.uninstall();
    }
    vi.useFakeTimers({ toFake: ['performance', 'setTimeout', 'clearTimeout'] });
    try {
      const before = systemClock.now();
      vi.advanceTimersByTime(250);
      expect(systemClock.now() - before).toBe(250);
    } finally {
      vi.useRealTimers();
    }
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
