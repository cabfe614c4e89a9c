/**
 * The Scheduler's three forms, for running one behaviour suite on each:
 * `describe.each(forms)('$name', (form) => ...)`.
 *
 * - local: `new Scheduler(options)`;
 * - memory fleet: the same options with a fresh `MemoryFleetStore` and key;
 * - redis fleet: with a `RedisFleetStore` on the run's redis-server
 *   (test/helpers/redis-global-setup.ts), a fresh key per scheduler, and the
 *   store's time taken from the scheduler's clock (its `now` hook), so a fake
 *   clock drives it too. Only where that server runs: `npm test` starts it,
 *   the unit tests (vitest.unit.config.ts) do not.
 *
 * A fleet decides in calls to its store, which answer asynchronously: on a
 * MemoryFleetStore within the same microtask turns (so fake-timer tests stay
 * exact with `tickAsync`), on Redis after a real round trip. So the timers a
 * setup gives ({@link FormTimers}) wait for the store between timers: on
 * Redis they fire the fake timers one at a time (two due at one instant too)
 * and let every call in flight answer before the next (real time passes,
 * fake time does not). For
 * the local form they are exactly @sinonjs/fake-timers' `tickAsync` and
 * `runAllAsync`, and {@link Form.settle} does nothing.
 */

import { Redis } from 'ioredis';
import { afterAll, inject } from 'vitest';
import { type Clock, systemClock } from '../../src/clock.js';
import { RedisFleetStore } from '../../src/fleet/redis-fleet-store.js';
import { type FleetStore, MemoryFleetStore } from '../../src/fleet/store.js';
import { Scheduler, type SchedulerOptions } from '../../src/scheduler/scheduler.js';
import { type FakeClock, fakeClock } from './fake-clock.js';

export interface Form {
  readonly name: 'local' | 'memory fleet' | 'redis fleet';
  /** A fleet form (a store decides). */
  readonly fleet: boolean;
  /** The Redis form (a real round trip per call). */
  readonly redis: boolean;
  /** A scheduler of this form with `options` (for a fleet form, plus its own store and key). */
  scheduler(options: SchedulerOptions): Scheduler;
  /** The store of the last scheduler this form made (undefined for the local form). */
  readonly store: FleetStore | undefined;
  /**
   * Lets the calls of the last scheduler it made to its store answer, and what they set off (nothing
   * for the local form).
   */
  settle(): Promise<void>;
}

let client: Redis | undefined;
let keys = 0;
const prefix = `tokenpace-forms-${process.pid}-${Date.now().toString(36)}`;

afterAll(async () => {
  await client?.quit();
  client = undefined;
});

/** Yields to the event loop once: every microtask queued so far (and those they queue) has run. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** `store` with every call counted in `inFlight` until it settles. */
function tracked(store: FleetStore, inFlight: Set<Promise<unknown>>): FleetStore {
  const track = <T>(call: Promise<T>): Promise<T> => {
    inFlight.add(call);
    call.then(
      () => inFlight.delete(call),
      () => inFlight.delete(call),
    );
    return call;
  };
  return {
    exchange: (op) => track(store.exchange(op)),
    acquire: (op) => track(store.acquire(op)),
    cancel: (...args) => track(store.cancel(...args)),
    renew: (...args) => track(store.renew(...args)),
    release: (...args) => track(store.release(...args)),
    adjust: (...args) => track(store.adjust(...args)),
    configure: (...args) => track(store.configure(...args)),
    inspect: (...args) => track(store.inspect(...args)),
  };
}

/** Lets the calls in `inFlight` answer, and what they set off, until none is left. */
async function settleCalls(inFlight: ReadonlySet<Promise<unknown>> | undefined): Promise<void> {
  if (inFlight === undefined) return;
  for (;;) {
    await turn();
    if (inFlight.size === 0) return;
    await Promise.allSettled([...inFlight]);
  }
}

/** The calls in flight of each scheduler a form made. */
const callsOf = new WeakMap<Scheduler, Set<Promise<unknown>>>();

function makeForm(name: Form['name']): Form {
  let last: FleetStore | undefined;
  let lastCalls: Set<Promise<unknown>> | undefined;
  const fleet = name !== 'local';
  const redis = name === 'redis fleet';
  return {
    name,
    fleet,
    redis,
    get store() {
      return last;
    },
    scheduler(options) {
      if (!fleet) return new Scheduler(options);
      const clock: Clock = options.clock ?? systemClock;
      const calls = new Set<Promise<unknown>>();
      if (redis) {
        client ??= new Redis({ port: inject('redisPort'), host: '127.0.0.1' });
        last = tracked(new RedisFleetStore({ client, prefix, onError: 'deny', now: () => clock.now() }), calls);
      } else {
        last = tracked(new MemoryFleetStore({ clock }), calls);
      }
      lastCalls = calls;
      const scheduler = new Scheduler({ ...options, store: last, key: `k${keys++}` });
      callsOf.set(scheduler, calls);
      return scheduler;
    },
    settle() {
      return fleet ? settleCalls(lastCalls) : Promise.resolve();
    },
  };
}

/** The forms, in the order the suites run them: the Redis one where the run started a redis-server. */
export const forms: readonly Form[] = [
  makeForm('local'),
  makeForm('memory fleet'),
  ...(inject('redisPort') === undefined ? [] : [makeForm('redis fleet')]),
];

/** The fake timers as a form's tests move them: like @sinonjs/fake-timers' own, waiting for the store. */
export interface FormTimers {
  readonly now: number;
  /** `tickAsync(ms)`, letting a fleet's store answer between timers. */
  tickAsync(ms: number): Promise<void>;
  /** `runAllAsync()`, the same way; for a fleet, at most `limitMs` of fake time (renewals re-arm while a job runs). */
  runAllAsync(limitMs?: number): Promise<void>;
}

/** A scheduler of a form on a fake clock, with the helpers to move time. */
export interface FormSetup {
  scheduler: Scheduler;
  clock: Clock;
  timers: FormTimers;
  /** The fake clock itself (its timers move time without waiting for a store). */
  fake: FakeClock;
  /** Fake timers armed and not yet fired or cleared. */
  pending(): number;
  /** A promise that resolves `ms` later on the fake clock (a job's work). */
  sleep(ms: number): Promise<void>;
  /** {@link Form.settle}. */
  settle(): Promise<void>;
}

/** The earliest fake timer's instant, or undefined when none is armed. */
function nextTimerAt(fake: FakeClock): number | undefined {
  const timers = (fake.timers as unknown as { timers?: Map<number, { callAt: number }> }).timers;
  let next: number | undefined;
  for (const timer of timers?.values() ?? []) if (next === undefined || timer.callAt < next) next = timer.callAt;
  return next;
}

/** A scheduler of `form` with `options` on a fresh fake clock (at `startMs`). */
export function setupForm(form: Form, options: Omit<SchedulerOptions, 'clock'>, startMs = 0): FormSetup {
  const fake = fakeClock(startMs);
  const scheduler = form.scheduler({ ...options, clock: fake.clock });
  const sleep = (ms: number) => new Promise<void>((resolve) => fake.clock.setTimeout(resolve, ms));
  const calls = callsOf.get(scheduler);
  const settle = () => (form.fleet ? settleCalls(calls) : Promise.resolve());
  const tickAsync = async (ms: number): Promise<void> => {
    if (!form.redis) {
      await fake.timers.tickAsync(ms);
      return;
    }
    const end = fake.timers.now + ms;
    for (;;) {
      await settle();
      const next = nextTimerAt(fake);
      if (next === undefined || next > end) break;
      await fake.timers.nextAsync(); // one timer: two due at one instant see the answers the first set off
    }
    await fake.timers.tickAsync(end - fake.timers.now);
    await settle();
  };
  const runAllAsync = async (limitMs = 60_000): Promise<void> => {
    if (!form.fleet) {
      await fake.timers.runAllAsync();
      return;
    }
    const end = fake.timers.now + limitMs;
    for (;;) {
      await settle(); // an answer may arm a timer
      const next = nextTimerAt(fake);
      if (next === undefined || next > end) return;
      await tickAsync(Math.max(0, next - fake.timers.now));
    }
  };
  const timers: FormTimers = {
    get now() {
      return fake.timers.now;
    },
    tickAsync,
    runAllAsync,
  };
  return { scheduler, clock: fake.clock, timers, fake, pending: fake.pending, sleep, settle };
}
