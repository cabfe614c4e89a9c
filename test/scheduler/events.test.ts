/**
 * The events' one mechanism (src/scheduler/events.ts): listeners, `once`,
 * `off` of a `once` listener, and the promise form `when` built on them.
 */

import { describe, expect, it, vi } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { Emitter } from '../../src/scheduler/events.js';
import { fakeClock } from '../helpers/fake-clock.js';

/** Collects the process's unhandled rejections while `fn` runs (and a few turns after). */
async function unhandledDuring(fn: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const onUnhandled = (reason: unknown) => seen.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    await fn();
    await new Promise((resolve) => setTimeout(resolve, 20)); // unhandled rejections are reported after a macrotask
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  return seen;
}

describe('Emitter', () => {
  it('calls listeners in order, once-listeners once, and off removes either kind', () => {
    const events = new Emitter();
    const calls: string[] = [];
    const a = () => calls.push('a');
    const b = () => calls.push('b');
    events.on('empty', a);
    events.once('empty', b);
    expect(events.has('empty')).toBe(true);
    events.emit('empty');
    events.emit('empty');
    expect(calls).toEqual(['a', 'b', 'a']);
    events.once('idle', b);
    events.off('idle', b); // the wrapper made for b goes too
    events.off('empty', a);
    events.emit('idle');
    events.emit('empty');
    expect(calls).toEqual(['a', 'b', 'a']);
    expect(events.has('empty')).toBe(false);
  });

  it('when() resolves the first time the event comes with its condition true, then leaves', async () => {
    const events = new Emitter();
    let size = 3;
    let resolved = false;
    const below2 = events
      .when('changed', () => size < 2)
      .then(() => {
        resolved = true;
      });
    events.emit('changed');
    size = 1;
    await Promise.resolve();
    expect(resolved).toBe(false);
    events.emit('changed');
    await below2;
    expect(resolved).toBe(true);
    expect(events.has('changed')).toBe(false);
  });

  it('a throwing listener does not stop the others; its error surfaces on a microtask of its own', () => {
    const surfaced: unknown[] = [];
    const spy = vi.spyOn(globalThis, 'queueMicrotask').mockImplementation((fn) => {
      try {
        fn();
      } catch (error) {
        surfaced.push(error);
      }
    });
    try {
      const events = new Emitter();
      const calls: string[] = [];
      const boom = new Error('listener');
      events.on('empty', () => {
        throw boom;
      });
      events.on('empty', () => calls.push('second'));
      events.emit('empty');
      expect(calls).toEqual(['second']);
      expect(surfaced).toEqual([boom]);
    } finally {
      spy.mockRestore();
    }
  });

  it("an async listener's rejection goes to the 'error' listeners, as a throw does", async () => {
    const events = new Emitter();
    const errors: unknown[] = [];
    const boom = new Error('async listener');
    events.on('error', (error) => errors.push(error));
    events.on('empty', async () => {
      throw boom;
    });
    events.once('empty', async () => {
      throw boom;
    });
    const unhandled = await unhandledDuring(async () => {
      events.emit('empty');
      await Promise.resolve();
    });
    expect(errors).toEqual([boom, boom]);
    expect(unhandled).toEqual([]);
  });

  it("without an 'error' listener, an async listener's rejection surfaces as a throw does, not as an unhandled rejection", async () => {
    const surfaced: unknown[] = [];
    const events = new Emitter();
    const boom = new Error('async listener');
    events.on('empty', () => Promise.reject(boom));
    const spy = vi.spyOn(globalThis, 'queueMicrotask').mockImplementation((fn) => {
      try {
        fn();
      } catch (error) {
        surfaced.push(error);
      }
    });
    try {
      const unhandled = await unhandledDuring(async () => {
        events.emit('empty');
        await Promise.resolve();
      });
      expect(surfaced).toEqual([boom]);
      expect(unhandled).toEqual([]);
    } finally {
      spy.mockRestore();
    }
  });
});

describe("Scheduler events: an async listener's rejection", () => {
  it("reaches the 'error' event and strands no job", async () => {
    const { clock, timers } = fakeClock(0);
    const scheduler = new Scheduler({ concurrency: 1, clock });
    const errors: unknown[] = [];
    const boom = new Error('completed listener');
    scheduler.on('error', (error) => errors.push(error));
    scheduler.on('completed', async () => {
      await Promise.resolve();
      throw boom;
    });
    const unhandled = await unhandledDuring(async () => {
      const results = await Promise.all([scheduler.schedule(() => 1), scheduler.schedule(() => 2)]);
      expect(results).toEqual([1, 2]);
      await timers.runAllAsync();
      await scheduler.onIdle();
    });
    expect(errors).toEqual([boom, boom]);
    expect(unhandled).toEqual([]);
  });
});
