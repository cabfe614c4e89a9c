/**
 * The Scheduler's and the streams' diagnostics channels: what a subscriber
 * receives, and that nothing is built or published while nobody listens.
 * (The HTTP, keyed and Redis channels have their tests beside those parts.)
 */

import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import {
  channelNames,
  QueueFullError,
  Scheduler,
  type SchedulerRejectedMessage,
  type SchedulerStartMessage,
  type StreamWaitMessage,
  Throttle,
  ThrottleGroup,
} from '../src/index.js';
import { record as listen } from './helpers/channel-recorder.js';
import { fakeClock } from './helpers/fake-clock.js';

const flush = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe('scheduler channels', () => {
  it('publish every start (with its wait) and every refusal (with its reason and hint), naming the scheduler', async () => {
    const starts = listen<SchedulerStartMessage>(channelNames.schedulerStart);
    const refusals = listen<SchedulerRejectedMessage>(channelNames.schedulerRejected);
    const { clock, timers } = fakeClock(0);
    const scheduler = new Scheduler({ rate: 10, burst: 1, maxQueue: 1, clock });
    const jobs = [1, 2, 3].map(() => scheduler.schedule(() => 'ok').catch((e: unknown) => e));
    await flush();
    timers.tick(100);
    await flush();
    const [, , third] = await Promise.all(jobs);
    expect(starts.map((m) => [m.scheduler, m.job.waitedMs])).toEqual([
      [scheduler, 0],
      [scheduler, 100],
    ]);
    expect(refusals).toHaveLength(1);
    expect(refusals[0]?.scheduler).toBe(scheduler);
    expect(refusals[0]?.job.reason).toBe('queueFull');
    expect(refusals[0]?.job.error).toBe(third);
    expect(third).toBeInstanceOf(QueueFullError);
    expect((third as QueueFullError).retryAfterMs).toBeGreaterThan(0);
  });

  it('publish nothing while nobody subscribes', async () => {
    const { clock } = fakeClock(0);
    const scheduler = new Scheduler({ rate: 10, burst: 1, maxQueue: 1, clock });
    const seen: unknown[] = [];
    const fn = (m: unknown) => seen.push(m);
    subscribe(channelNames.schedulerStart, fn);
    unsubscribe(channelNames.schedulerStart, fn);
    await scheduler.schedule(() => 'ok');
    expect(seen).toEqual([]);
  });
});

describe('stream channels', () => {
  it('a Throttle publishes once per wait, with how long it sleeps, never per chunk that passes', async () => {
    const waits = listen<StreamWaitMessage>(channelNames.streamWait);
    const { clock, timers } = fakeClock(0);
    const throttle = new Throttle({ rate: 1000, burst: 100, clock });
    throttle.resume();
    throttle.write(Buffer.alloc(50)); // within the burst: passes, no wait
    await flush();
    expect(waits).toHaveLength(0);
    throttle.write(Buffer.alloc(150)); // 50 pass, then it sleeps for the rest
    await flush();
    expect(waits).toHaveLength(1);
    expect(waits[0]?.stream).toBe(throttle);
    expect(waits[0]?.waitMs).toBeGreaterThan(0);
    expect(waits[0]?.waitMs).toBeLessThanOrEqual(100);
    timers.tick(200);
    await flush();
    throttle.destroy();
  });

  it("a ThrottleGroup publishes its own bucket's waits", async () => {
    const waits = listen<StreamWaitMessage>(channelNames.streamWait);
    const { clock, timers } = fakeClock(0);
    const group = new ThrottleGroup({ rate: 1000, burst: 100, clock });
    const member = group.throttle();
    member.resume();
    member.write(Buffer.alloc(400));
    await flush();
    timers.tick(50);
    await flush();
    expect(waits.some((m) => m.stream === group && m.waitMs > 0)).toBe(true);
    member.destroy();
  });
});
