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

  // systemClock reads the global performance at every call (tokenpace made it a new data property,
  // which optimised code embeds as a constant); the fakes replace it (vitest, older sinon) or patch
  // perf_hooks' object (sinon 15): both must move it, in optimised code as well.
  const hot = (): number => {
    let t = 0;
    for (let i = 0; i < 200_000; i++) t = systemClock.now();
    return t;
  };
  const fakes = [
    {
      name: "sinon's install",
      install: () => {
        const sinon = FakeTimers.install({ toFake: ['performance', 'setTimeout', 'clearTimeout'] });
        return { advance: (ms: number) => sinon.tick(ms), uninstall: () => sinon.uninstall() };
      },
    },
    {
      name: "vitest's useFakeTimers",
      install: () => {
        vi.useFakeTimers({ toFake: ['performance', 'setTimeout', 'clearTimeout'] });
        return { advance: (ms: number) => vi.advanceTimersByTime(ms), uninstall: () => vi.useRealTimers() };
      },
    },
  ];
  it.each(fakes)('follows fake timers installed over the globals: $name', ({ install }) => {
    hot(); // optimised before the fakes come
    const fake = install();
    try {
      const before = systemClock.now();
      fake.advance(1234);
      expect(systemClock.now() - before).toBe(1234);
      expect(hot() - before).toBe(1234);
    } finally {
      fake.uninstall();
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
