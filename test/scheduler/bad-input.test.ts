/**
 * The Scheduler under bad input: every mistake is a coded error (a rejection from
 * `schedule`, a throw from the constructor and the synchronous methods), never a
 * TypeError, a hang, a job counted as started, or a value silently ignored.
 */

import { describe, expect, it } from 'vitest';
import { isTokenpaceError, Scheduler, type SchedulerOptions } from '../../src/index.js';
import { forms, setupForm } from '../helpers/scheduler-forms.js';

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

const codeOf = (error: unknown) => (isTokenpaceError(error) ? error.code : `not coded: ${String(error)}`);

describe.each(forms)('bad input ($name)', (form) => {
  const setup = (options: Omit<SchedulerOptions, 'clock'>) => setupForm(form, options);

  describe('Scheduler: bad input is a coded error', () => {
    it('a signal that is not an AbortSignal is refused before the job is admitted or armed', async () => {
      const { scheduler, pending } = setup({ rate: 1, concurrency: 1 });
      await scheduler.schedule(() => 1); // empties the bucket: the next job would wait
      for (const signal of [new AbortController(), { aborted: true }, { aborted: false }, 'x', 0]) {
        let ran = false;
        const error = await scheduler
          .schedule(
            () => {
              ran = true;
            },
            { signal: signal as AbortSignal },
          )
          .catch((e: unknown) => e);
        expect(codeOf(error)).toBe('ERR_INVALID_OPTION');
        expect(error).toMatchObject({ option: 'signal' });
        expect(ran).toBe(false);
      }
      expect(scheduler.counters.admitted).toBe(1);
      expect(scheduler.size).toBe(0);
      expect(pending()).toBe(0);
    });

    it('the same refusal when the job could start at once', async () => {
      const { scheduler } = setup({ concurrency: 1 });
      const error = await scheduler
        .schedule(() => 1, { signal: new AbortController() as unknown as AbortSignal })
        .catch((e: Error) => e.message);
      expect(error).toMatch(/pass the controller's `signal`/);
      expect(scheduler.counters.started).toBe(0);
    });

    it.each([
      ['no options', undefined, /Expected the Scheduler options .* to be an object/],
      ['null', null, /got a value of type null/],
      ['clock: {}', { rate: 1, clock: {} }, /Expected `clock` to have now\(\)/],
      ['rate above 2^53', { rate: 1e306, burst: 1e306 }, /largest supported rate is 2\^53/],
      ['burst above 2^53', { rate: 1, burst: 1e306 }, /largest supported burst is 2\^53/],
      ["concurrency: '4'", { concurrency: '4' }, /got "4"/],
      ['maxWait NaN', { rate: 1, maxWait: Number.NaN }, /invalid duration NaN/],
      ["maxWait '1 fortnight'", { rate: 1, maxWait: '1 fortnight' }, /invalid duration "1 fortnight"/],
      [
        "onTimeout 'keep'",
        { concurrency: 1, onTimeout: 'keep' },
        /Expected `onTimeout` to be 'release' or 'hold', got "keep"/,
      ],
    ])('new Scheduler(%s) throws a coded error', (_name, options, message) => {
      // Options that are not an object are refused before a form could add its store and key to them.
      const make = () =>
        typeof options === 'object' && options !== null
          ? form.scheduler(options as never)
          : new Scheduler(options as never);
      const error = thrown(make);
      expect(isTokenpaceError(error)).toBe(true);
      expect((error as Error).message).toMatch(message);
    });

    it("schedule('x') and schedule(fn, null) reject (never throw), count nothing", async () => {
      const { scheduler } = setup({ concurrency: 1 });
      const notAFunction = scheduler.schedule('x' as never);
      const nullOptions = scheduler.schedule(() => 1, null as never);
      expect(codeOf(await notAFunction.catch((e: unknown) => e))).toBe('ERR_INVALID_OPTION');
      await expect(notAFunction).rejects.toThrow(/Expected the job to be a function, got "x"/);
      expect(codeOf(await nullOptions.catch((e: unknown) => e))).toBe('ERR_INVALID_OPTION');
      expect(scheduler.counters).toMatchObject({ admitted: 0, started: 0, failed: 0 });
    });

    it("a cost of '5' or a priority of '1' is refused with the value quoted", async () => {
      const { scheduler } = setup({ concurrency: 10 });
      await expect(scheduler.schedule(() => 1, { cost: '5' as never })).rejects.toThrow(/invalid cost "5"/);
      await expect(scheduler.schedule(() => 1, { priority: '1' as never })).rejects.toThrow(/got "1"/);
    });

    it("maxWait '1s' is a limit of 1000 ms; a job's timeout NaN rejects", async () => {
      const { scheduler, timers } = setup({ rate: 1, maxWait: '1s' });
      await scheduler.schedule(() => 0);
      const waiting = scheduler.schedule(() => 0); // waits 1000 ms: accepted
      expect(scheduler.size).toBe(1);
      await expect(scheduler.schedule(() => 0)).rejects.toMatchObject({ code: 'ERR_WAIT_TOO_LONG', maxWaitMs: 1000 });
      await expect(scheduler.schedule(() => 0, { timeout: Number.NaN })).rejects.toMatchObject({
        code: 'ERR_INVALID_DURATION',
      });
      await timers.tickAsync(1000);
      await waiting;
    });

    it('sizeBy() and sizeBy({ priority: NaN }) throw a coded error', () => {
      const { scheduler } = setup({ concurrency: 1 });
      expect(codeOf(thrown(() => scheduler.sizeBy(undefined as never)))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(thrown(() => scheduler.sizeBy({ priority: Number.NaN })))).toBe('ERR_INVALID_OPTION');
      expect(scheduler.sizeBy({ priority: 0 })).toBe(0);
    });

    it("on('active', 'x') and on('nope', fn) are refused; nothing breaks later", async () => {
      const { scheduler } = setup({ concurrency: 1 });
      expect(thrown(() => scheduler.on('active', 'x' as never))).toMatchObject({
        code: 'ERR_INVALID_OPTION',
        option: 'listener',
      });
      expect(thrown(() => scheduler.on('nope' as never, () => {}))).toMatchObject({
        code: 'ERR_INVALID_OPTION',
        option: 'event',
      });
      expect(thrown(() => scheduler.once('nope' as never, () => {}))).toMatchObject({ option: 'event' });
      // p-queue's 'add' and 'next' are PQueue's events (tokenpace/p-queue), not the Scheduler's.
      expect(thrown(() => scheduler.on('add' as never, () => {}))).toMatchObject({ option: 'event' });
      expect(thrown(() => scheduler.on('next' as never, () => {}))).toMatchObject({ option: 'event' });
      await expect(scheduler.schedule(() => 'fine')).resolves.toBe('fine');
    });

    it.each([-1, Number.NaN, 'x'])('onSizeLessThan(%s) rejects instead of never resolving', async (limit) => {
      const { scheduler } = setup({ concurrency: 1 });
      const error = await scheduler.onSizeLessThan(limit as number).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION', option: 'limit' });
    });

    it('rate and burst at 2^53 run every job (no job left pending without a timer)', async () => {
      const { scheduler, timers } = setup({ rate: 2 ** 53, burst: 2 ** 53 });
      const jobs = [1, 2, 3].map((n) => scheduler.schedule(() => n, { cost: 2 ** 53 }));
      await timers.tickAsync(2000);
      await expect(Promise.all(jobs)).resolves.toEqual([1, 2, 3]);
      expect(scheduler.size).toBe(0);
    });

    it.each([
      ['interval', { interval: 1000, intervalCap: 3 }],
      ['intervalCap', { intervalCap: 3 }],
      ['strict', { strict: true }],
      ['carryoverIntervalCount', { carryoverIntervalCount: true }],
    ])("p-queue's %s is refused, naming `limit`/`window` and tokenpace/p-queue", (option, options) => {
      const error = thrown(() => form.scheduler({ concurrency: 1, ...(options as object) }));
      expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION', option });
      expect((error as Error).message).toMatch(/`limit` per `window`.*'tokenpace\/p-queue'/);
    });

    it("a listener that throws goes to the 'error' listeners when there are some", async () => {
      const { scheduler } = setup({ concurrency: 1 });
      const errors: unknown[] = [];
      const oops = new Error('listener bug');
      scheduler.on('active', () => {
        throw oops;
      });
      scheduler.on('error', (error) => errors.push(error));
      await expect(scheduler.schedule(() => 'still runs')).resolves.toBe('still runs');
      expect(errors).toEqual([oops]);
    });
  });
});
