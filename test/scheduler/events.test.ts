/**
 * The events' one mechanism (src/scheduler/events.ts): listeners, `once`,
 * `off` of a `once` listener, and the promise form `when` built on them.
 */

import { describe, expect, it, vi } from 'vitest';
import { Emitter } from '../../src/scheduler/events.js';

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
});
