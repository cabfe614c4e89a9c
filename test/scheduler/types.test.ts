/**
 * The public types, checked by `tsc` (the test run only executes no-ops):
 * results are inferred from the job, events are a closed union.
 */

import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  type EventName,
  type JobContext,
  KeyedScheduler,
  type KeyedSchedulerListener,
  type RejectedJob,
  Scheduler,
  type SchedulerCounters,
  type SchedulerListener,
} from '../../src/index.js';

describe('Scheduler types', () => {
  const scheduler = new Scheduler({ concurrency: 1 });

  it('infers a job result, sync or async', () => {
    expectTypeOf(scheduler.schedule(() => 1)).toEqualTypeOf<Promise<number>>();
    expectTypeOf(scheduler.schedule(async () => 'x')).toEqualTypeOf<Promise<string>>();
    expectTypeOf(scheduler.schedule((context) => context)).toEqualTypeOf<Promise<JobContext>>();
    expectTypeOf<JobContext['signal']>().toEqualTypeOf<AbortSignal | undefined>();
  });

  it('wraps a function keeping its parameters', () => {
    const wrapped = scheduler.wrap(async (id: string, pages: number) => ({ id, pages }), {
      cost: (_id, pages) => pages,
    });
    expectTypeOf(wrapped).parameters.toEqualTypeOf<[string, number]>();
    expectTypeOf(wrapped).returns.toEqualTypeOf<Promise<{ id: string; pages: number }>>();
  });

  it('has a closed set of events with typed listeners', () => {
    expectTypeOf<EventName>().toEqualTypeOf<
      'active' | 'completed' | 'error' | 'empty' | 'idle' | 'rejected' | 'degraded' | 'recovered' | 'storeError'
    >();
    expectTypeOf<SchedulerListener<'rejected'>>().parameters.toEqualTypeOf<[RejectedJob]>();
    expectTypeOf<SchedulerCounters['rejected']['queueFull']>().toEqualTypeOf<number>();
    // @ts-expect-error: not an event (and refused at run time too)
    expect(() => scheduler.on('drained', () => {})).toThrow(/unknown event "drained"/);
  });
});

describe('KeyedScheduler types', () => {
  const keyed = new KeyedScheduler({ rate: 10, burst: 2 });

  it('infers a job result, and hears events with the key first', () => {
    expectTypeOf(keyed.schedule('tenant', () => 1)).toEqualTypeOf<Promise<number>>();
    expectTypeOf<KeyedSchedulerListener<'rejected'>>().parameters.toEqualTypeOf<[string, RejectedJob]>();
    expectTypeOf(keyed.scheduler('tenant')).toEqualTypeOf<Scheduler | undefined>();
    const wrapped = keyed.wrap('tenant', async (id: string) => id);
    expectTypeOf(wrapped).returns.toEqualTypeOf<Promise<string>>();
    // @ts-expect-error: a key is a string
    void keyed.schedule(42, () => 1).catch(() => undefined);
    expect(keyed.keys()).toEqual(['tenant']); // the first expectation ran a job; the bad key made none
  });
});
