/**
 * tokenpace/p-queue (src/scheduler/p-queue.ts): p-queue's names over a Scheduler, and only there. The
 * cases p-queue's own suite does not pin down: the package subpath and exports, the rate limit as a
 * sliding window, events in p-queue's order around a task's end, an abort freeing a running task's
 * slot, a moved task keeping its signal. p-queue's suite itself runs in the other files of this folder.
 */

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { JobTimeoutError, Scheduler } from '../../src/index.js';
import PQueueDefault, { PQueue, TimeoutError } from '../../src/scheduler/p-queue.js';
import { fakeClock } from '../helpers/fake-clock.js';

function setup(options: ConstructorParameters<typeof PQueue>[0] = {}) {
  const { clock, timers } = fakeClock();
  const queue = new PQueue({ clock, ...options });
  const sleep = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
  return { queue, clock, timers, sleep };
}

describe('tokenpace/p-queue', () => {
  it('is its own package subpath, with a default and a named export, and TimeoutError', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      exports: Record<string, { types: string; default: string }>;
    };
    expect(pkg.exports['./p-queue']).toEqual({
      types: './dist/scheduler/p-queue.d.ts',
      default: './dist/scheduler/p-queue.js',
    });
    expect(PQueueDefault).toBe(PQueue);
    expect(TimeoutError).toBe(JobTimeoutError);
  });

  it("p-queue's names live here, not on the Scheduler", () => {
    for (const name of ['add', 'addAll', 'start', 'onRateLimit', 'setPriority']) {
      expect(name in Scheduler.prototype, name).toBe(false);
      expect(typeof (PQueue.prototype as unknown as Record<string, unknown>)[name], name).toBe('function');
    }
    expect(Object.getOwnPropertyDescriptor(Scheduler.prototype, 'concurrency')?.set).toBeUndefined();
    expect(Object.getOwnPropertyDescriptor(PQueue.prototype, 'concurrency')?.set).toBeTypeOf('function');
    expect(() => new Scheduler({ concurrency: 1, interval: 1000, intervalCap: 1 } as never)).toThrow(/PQueue/);
  });

  it("'add' fires on every add and 'next' after every task; addAll resolves in order", async () => {
    const { queue, timers, sleep } = setup({ concurrency: 1 });
    let adds = 0;
    let nexts = 0;
    queue.on('add', () => adds++).on('next', () => nexts++);
    const tasks = [queue.add(() => sleep(10)), queue.add(() => sleep(10)), queue.add(() => 1)];
    expect(adds).toBe(3); // one started at once, two wait
    await timers.tickAsync(20);
    await Promise.all(tasks);
    expect(nexts).toBe(3);
    const all = queue.addAll([() => 'a', async () => 'b', () => 'c']);
    await timers.tickAsync(1);
    await expect(all).resolves.toEqual(['a', 'b', 'c']);
  });

  it('concurrency and timeout are assignable properties', async () => {
    const { queue, timers, sleep } = setup({ concurrency: 1 });
    queue.concurrency = 2;
    expect(queue.concurrency).toBe(2);
    const tasks = [1, 2].map(() => queue.add(() => sleep(10)));
    expect(queue.pending).toBe(2);
    expect(() => {
      queue.concurrency = 0;
    }).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', option: 'concurrency' }));
    queue.concurrency = Number.POSITIVE_INFINITY;
    expect(queue.concurrency).toBe(Number.POSITIVE_INFINITY);
    expect(queue.timeout).toBeUndefined();
    queue.timeout = 5;
    const slow = queue.add(() => sleep(100)).catch((error: unknown) => error);
    await timers.tickAsync(10);
    await Promise.all(tasks);
    expect(await slow).toBeInstanceOf(TimeoutError);
    await timers.runAllAsync();
  });

  it.each([false, true])('intervalCap per interval is a sliding window (strict: %s)', async (strict) => {
    const { queue, timers, clock } = setup({ interval: 1000, intervalCap: 3, strict });
    const starts: number[] = [];
    const start = () => starts.push(clock.now());
    const tasks = Array.from({ length: 6 }, () => queue.add(start));
    await timers.tickAsync(500);
    tasks.push(queue.add(start)); // mid-window: waits for the first starts to slide out
    await timers.tickAsync(2000);
    await Promise.all(tasks);
    expect(starts).toEqual([0, 0, 0, 1000, 1000, 1000, 2000]);
  });

  it('carryoverIntervalCount: a task counts from its start until `interval` after it ends', async () => {
    const { queue, timers, clock, sleep } = setup({ interval: 1000, intervalCap: 1, carryoverIntervalCount: true });
    const starts: number[] = [];
    const tasks = [1, 2].map(() =>
      queue.add(async () => {
        starts.push(clock.now());
        await sleep(300);
      }),
    );
    await timers.tickAsync(3000);
    await Promise.all(tasks);
    expect(starts).toEqual([0, 1300]);
  });

  it("refuses an unknown option, naming what to write for p-queue's old and internal ones", () => {
    expect(() => new PQueue({ queueClass: class {} } as never)).toThrow(/queueClass.*remove it/);
    expect(() => new PQueue({ carryoverConcurrencyCount: true } as never)).toThrow(/carryoverIntervalCount/);
    expect(() => new PQueue({ concurency: 2 } as never)).toThrow(/did you mean `concurrency`/);
  });

  it("tells a task's outcome before the queue goes idle, as p-queue does, also at a timeout", async () => {
    const { queue, timers, sleep } = setup({ concurrency: 1 });
    const events: string[] = [];
    queue
      .on('completed', (value) => events.push(`completed:${String(value)}`))
      .on('error', (error) => events.push(`error:${(error as Error).name}`))
      .on('idle', () => events.push('idle'))
      .on('next', () => events.push('next'));
    await queue.add(() => 'a');
    await timers.tickAsync(1);
    const late = queue.add(() => sleep(100), { timeout: 10 }).catch(() => {});
    await timers.tickAsync(20);
    await late;
    expect(events).toEqual(['completed:a', 'idle', 'next', 'error:JobTimeoutError', 'idle', 'next']);
    await timers.runAllAsync();
  });

  it("an abort ends a running task at once and frees its slot, whatever the task's function does", async () => {
    const { queue, timers } = setup({ concurrency: 1 });
    const controller = new AbortController();
    const stuck = queue.add(() => new Promise(() => {}), { signal: controller.signal });
    const next = queue.add(() => 'next');
    expect(queue.pending).toBe(1);
    const reason = new Error('stop');
    controller.abort(reason);
    await expect(stuck).rejects.toBe(reason);
    await timers.tickAsync(1);
    await expect(next).resolves.toBe('next');
    expect(queue.pending).toBe(0);
  });

  it('clear() leaves the removed tasks pending, as p-queue 9 does (no unhandled rejection)', async () => {
    const { queue, timers } = setup({ autoStart: false });
    let settled = false;
    const removed = queue.add(() => 1);
    void removed.finally(() => {
      settled = true;
    });
    queue.clear();
    await timers.tickAsync(100);
    expect(settled).toBe(false);
    expect(queue.size).toBe(0);
  });

  it('setPriority moves a task with an id and keeps its signal', async () => {
    const { queue } = setup({ autoStart: false, concurrency: 1 });
    const order: string[] = [];
    const controller = new AbortController();
    const a = queue.add(() => order.push('a'), { id: 'a' });
    const b = queue.add(() => order.push('b'), { id: 'b', signal: controller.signal });
    const c = queue.add(() => order.push('c'), { id: 'c', signal: controller.signal });
    queue.setPriority('c', 1);
    expect(queue.size).toBe(3);
    expect(queue.sizeBy({ priority: 1 })).toBe(1);
    controller.abort();
    await expect(b).rejects.toMatchObject({ name: 'AbortError' });
    await expect(c).rejects.toMatchObject({ name: 'AbortError' });
    queue.start();
    await a;
    expect(order).toEqual(['a']);
    expect(() => queue.setPriority('a', 1)).toThrow(/No promise function with the id "a"/);
    expect(() => queue.setPriority('a', Number.NaN)).toThrow(expect.objectContaining({ option: 'priority' }));
  });

  it('runningTasks reads the queue clock: startTime and timeoutRemaining', async () => {
    const { queue, timers, sleep } = setup({ concurrency: 2, timeout: 500 });
    void queue.add(() => sleep(100), { id: 'x', priority: 2 });
    await timers.tickAsync(40);
    expect(queue.runningTasks).toEqual([{ id: 'x', priority: 2, startTime: 0, timeout: 500, timeoutRemaining: 460 }]);
    await timers.tickAsync(100);
    expect(queue.runningTasks).toEqual([]);
  });
});
