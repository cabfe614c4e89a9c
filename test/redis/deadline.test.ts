/**
 * StoreHealth's deadlines (src/stores/health.ts): every call set at time t times out at exactly
 * t + timeoutMs unless cleared first, under one timer for all calls in flight, and a callback that
 * sets or clears deadlines leaves the others on time.
 */

import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { type StoreEvents, StoreHealth } from '../../src/stores/health.js';
import { fakeClock } from '../helpers/fake-clock.js';

function health(timeoutMs: number) {
  const fake = fakeClock(1000);
  const owner = new EventEmitter<StoreEvents>();
  const h = new StoreHealth({
    owner,
    backend: 'Redis',
    failure: { policy: 'deny', timeoutMs, probeIntervalMs: 50 },
    clock: fake.clock,
    probe: () => Promise.resolve('PONG'),
    stats: { failures: 0 },
  });
  return { h, ...fake };
}

describe('StoreHealth deadlines', () => {
  it('times each call out at its own time, with one timer for the calls in flight', () => {
    const { h, timers, pending } = health(200);
    const fired: [string, number][] = [];
    const set = (name: string) => h.deadline((error) => fired.push([`${name}: ${error.message}`, timers.now]));
    const a = set('a');
    timers.tick(50);
    const b = set('b');
    timers.tick(30);
    set('c');
    expect(pending()).toBe(1);
    h.clearDeadline(a);
    timers.tick(119); // 1199: a was cleared, b is due at 1250
    expect(fired).toEqual([]);
    timers.tick(51); // 1250
    expect(fired.map(([, at]) => at)).toEqual([1250]);
    expect(fired[0]?.[0]).toMatch(/^b: Redis did not answer within the store's timeout \(200 ms\)/);
    h.clearDeadline(b); // late: ignored
    timers.tick(29);
    expect(fired).toHaveLength(1);
    timers.tick(1); // 1280: c
    expect(fired.map(([, at]) => at)).toEqual([1250, 1280]);
    expect(pending()).toBe(0);
  });

  it('a call cleared before its time never fires; many calls settle without a timer each', () => {
    const { h, timers, pending } = health(100);
    let fired = 0;
    for (let i = 0; i < 5000; i++) {
      const d = h.deadline(() => fired++);
      timers.tick(0.05);
      h.clearDeadline(d);
    }
    expect(pending()).toBe(1); // the one timer, armed by the first call
    timers.tick(1000);
    expect(fired).toBe(0);
    expect(pending()).toBe(0);
  });

  it('a callback that sets a deadline does not delay the ones already waiting', () => {
    const { h, timers } = health(100);
    const fired: number[] = [];
    h.deadline(() => {
      fired.push(timers.now);
      h.deadline(() => fired.push(timers.now)); // due at 1200
    });
    timers.tick(10);
    h.deadline(() => fired.push(timers.now)); // due at 1110
    timers.tick(500);
    expect(fired).toEqual([1100, 1110, 1200]);
  });
});
