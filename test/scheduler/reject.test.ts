/**
 * Rejecting jobs (src/scheduler/reject.ts): counted by reason, told to
 * `rejected` listeners, each with an error of its own.
 */

import { describe, expect, it } from 'vitest';
import { isTokenpaceError, QueueFullError } from '../../src/errors.js';
import { Emitter } from '../../src/scheduler/events.js';
import { type RejectedJob, zeroCounters } from '../../src/scheduler/options.js';
import { costError, Rejections } from '../../src/scheduler/reject.js';

describe('Rejections', () => {
  it('each queue-full rejection has its own error and promise, with its own estimate', async () => {
    const c = zeroCounters();
    const events = new Emitter();
    const told: RejectedJob[] = [];
    events.on('rejected', (job) => told.push(job));
    const rejections = new Rejections(c, events, 10);
    const promises = [1, 2, 3].map((cost) => rejections.queueFull(cost, 0, 40 + cost));
    expect(new Set(promises).size).toBe(3);
    const errors = await Promise.all(promises.map((p) => p.catch((error: unknown) => error)));
    expect(new Set(errors).size).toBe(3);
    expect(errors.map((e) => (e as { retryAfterMs: number }).retryAfterMs)).toEqual([41, 42, 43]);
    expect(errors[0]).toBeInstanceOf(QueueFullError);
    expect(errors[0]).toMatchObject({ code: 'ERR_QUEUE_FULL', maxQueue: 10 });
    expect((errors[0] as Error).message).toContain('retry in about 41 ms');
    expect((errors[0] as Error).stack).toMatch(/\n\s+at /);
    expect(isTokenpaceError(errors[0], 'ERR_QUEUE_FULL')).toBe(true);
    expect(c.rejected.queueFull).toBe(3);
    expect(told.map((j) => j.cost)).toEqual([1, 2, 3]);
    expect(told[0]?.error).toBe(errors[0]);
  });

  it('rejectCost names the limit the cost exceeds, and rejects a cost that is not a number >= 0', async () => {
    const rejections = new Rejections(zeroCounters(), new Emitter(), 10);
    await expect(rejections.rejectCost({ cost: 5, priority: 0, burst: 4, concurrency: 10 })).rejects.toMatchObject({
      cost: 5,
      capacity: 4,
    });
    await expect(rejections.rejectCost({ cost: 5, priority: 0, burst: 10, concurrency: 4 })).rejects.toThrow(
      /concurrency/,
    );
    await expect(rejections.rejectCost({ cost: -1, priority: 0, burst: 10, concurrency: 4 })).rejects.toMatchObject({
      code: 'ERR_INVALID_SIZE',
    });
    expect(costError({ cost: 3, burst: 2, concurrency: 10 }).message).toMatch(/3/);
  });
});
