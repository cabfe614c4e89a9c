/**
 * Rejecting jobs (src/scheduler/reject.ts): counted by reason, told to
 * `rejected` listeners, and the flood path's own stackless error per job.
 */

import { describe, expect, it } from 'vitest';
import { isTokenpaceError, QueueFullError } from '../../src/errors.js';
import { Emitter } from '../../src/scheduler/events.js';
import { type RejectedJob, zeroCounters } from '../../src/scheduler/options.js';
import { costError, Rejections } from '../../src/scheduler/reject.js';

describe('Rejections', () => {
  it('each queue-full rejection has its own stackless error and promise, with its own estimate', async () => {
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
    expect(errors[0]).toMatchObject({ code: 'ERR_QUEUE_FULL', maxQueue: 10 });
    expect((errors[0] as Error).stack).not.toMatch(/\n\s+at /);
    expect(c.rejected.queueFull).toBe(3);
    expect(told.map((j) => j.cost)).toEqual([1, 2, 3]);
    // The next burst gets a fresh error.
    const next = await rejections.queueFull(1, 0, 41).catch((error: unknown) => error);
    expect(next).not.toBe(errors[0]);
  });

  it("a flood rejection is a QueueFullError in every way a caller looks at one, though Error's constructor never ran", async () => {
    const rejections = new Rejections(zeroCounters(), new Emitter(), 10);
    const error = await rejections.queueFull(1, 0, 41.5).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueueFullError);
    expect(error).toBeInstanceOf(Error);
    expect(isTokenpaceError(error, 'ERR_QUEUE_FULL')).toBe(true);
    const e = error as QueueFullError;
    expect(e.name).toBe('QueueFullError');
    expect(e.message).toBe(new QueueFullError(10, 41.5).message);
    expect(e.message).toContain('retry in about 42 ms');
    expect(String(e)).toBe(`QueueFullError: ${e.message}`);
    expect(e.stack).toBe(`QueueFullError: ${e.message}`);
    expect(e).toMatchObject({ code: 'ERR_QUEUE_FULL', maxQueue: 10, retryAfterMs: 41.5 });
    // An ordinary QueueFullError keeps its own message, name and stack.
    const ordinary = new QueueFullError(3, 7);
    expect(Object.hasOwn(ordinary, 'message')).toBe(true);
    expect(ordinary.stack).toMatch(/\n\s+at /);
  });

  it('rejectCost names the limit the cost exceeds, and rejects a cost that is not a number >= 0', async () => {
    const rejections = new Rejections(zeroCounters(), new Emitter(), 10);
    await expect(rejections.rejectCost(5, 0, 4, 10)).rejects.toMatchObject({ cost: 5, capacity: 4 });
    await expect(rejections.rejectCost(5, 0, 10, 4)).rejects.toThrow(/concurrency/);
    await expect(rejections.rejectCost(-1, 0, 10, 4)).rejects.toMatchObject({ code: 'ERR_INVALID_SIZE' });
    expect(costError(3, 2, 10).message).toMatch(/3/);
  });
});
