/**
 * Throttle on a fake clock: exact piece sizes and times, splitting, the
 * burst rules, live changes, counters and the lifecycle.
 */

import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import {
  BurstTooSmallError,
  InvalidOptionError,
  InvalidRateError,
  InvalidSizeError,
  isTokenpaceError,
  Throttle,
  ThrottleGroup,
  type ThrottleOptions,
} from '../../src/index.js';
import { defaultBurstBytes, minBurstBytes, wakePieceBytes } from '../../src/stream/pacing.js';
import { fakeClock } from '../helpers/fake-clock.js';
import {
  advance,
  byTime,
  byteSource,
  maxInWindow,
  patternByte,
  recordingSink,
  settle,
  timedSource,
} from './support.js';

function setup(options: Omit<ThrottleOptions, 'clock'>) {
  const fake = fakeClock();
  const throttle = new Throttle({ ...options, clock: fake.clock });
  const sink = recordingSink(() => fake.timers.now);
  throttle.pipe(sink);
  return { fake, throttle, sink };
}

describe('Throttle: options', () => {
  it('throws InvalidOptionError for object mode, naming the option', () => {
    for (const key of ['objectMode', 'readableObjectMode', 'writableObjectMode'] as const) {
      const make = () => new Throttle({ rate: 1000, [key]: true as unknown as false });
      expect(make).toThrow(InvalidOptionError);
      expect(make).toThrow(new RegExp(`${key} is not supported: a Throttle paces bytes`));
      try {
        make();
      } catch (error) {
        expect(isTokenpaceError(error, 'ERR_INVALID_OPTION') && error.option).toBe(key);
      }
    }
  });

  it('needs a rate unless it is a group member', () => {
    expect(() => new Throttle({})).toThrow(InvalidRateError);
    expect(() => new Throttle({})).toThrow(/needs a `rate`/);
    expect(() => new Throttle(null as unknown as ThrottleOptions)).toThrow(InvalidOptionError);
  });

  it('parses rates and sizes as strings and names the bad option', () => {
    const throttle = new Throttle({ rate: '8mbit', burst: '64KiB' });
    expect(throttle.rate).toBe(1_000_000);
    expect(throttle.burst).toBe(65536);
    expect(() => new Throttle({ rate: '10 furlongs' })).toThrow(InvalidRateError);
    expect(() => new Throttle({ rate: 1000, burst: 'lots' })).toThrow(/invalid burst "lots"/);
    expect(() => new Throttle({ rate: 1000, burst: -1 })).toThrow(InvalidSizeError);
    expect(() => new Throttle({ rate: 1000, peakRate: 'x' })).toThrow(/invalid peakRate "x"/);
    expect(() => new Throttle({ rate: 1000, peakRate: 5000, peakBurst: 'x' })).toThrow(/invalid peakBurst "x"/);
  });

  it('derives the default burst from the rate: 100 ms of it, at least two 64 KiB chunks up to 250 ms, at least 1 KiB', () => {
    expect(new Throttle({ rate: '1KiB/s' }).burst).toBe(1024);
    expect(new Throttle({ rate: '100KiB/s' }).burst).toBe(25600);
    expect(new Throttle({ rate: '1MiB/s' }).burst).toBe(131072);
    expect(new Throttle({ rate: '10MiB/s' }).burst).toBe(1048576);
    expect(new Throttle({ rate: '1GiB/s' }).burst).toBe(107374183);
    expect(defaultBurstBytes(100)).toBe(1024);
  });

  it('throws BurstTooSmallError for a burst too small for the timers, naming the smallest that works', () => {
    const make = () => new Throttle({ rate: '1GiB/s', burst: '1MiB' });
    expect(make).toThrow(BurstTooSmallError);
    try {
      make();
      expect.unreachable();
    } catch (error) {
      if (!isTokenpaceError(error, 'ERR_BURST_TOO_SMALL')) throw error;
      expect(error.burst).toBe(1048576);
      expect(error.minBurst).toBe(minBurstBytes(1024 ** 3));
      expect(error.minBurst).toBe(10737419);
      expect(error.message).toBe(
        'burst 1048576 bytes (1 MiB) is too small to sustain 1073741824 bytes per second (1 GiB/s): ' +
          'timers fire up to ~5 ms late, and tokens that arrive while a full bucket waits are lost; ' +
          'use a burst of at least 10737419 bytes (~10.2 MiB) (rate x 10 ms), or leave it unset for the default of ' +
          '107374183 bytes (~102 MiB) (rate x 100 ms)',
      );
    }
    // Exactly the minimum is accepted.
    expect(new Throttle({ rate: '1GiB/s', burst: 10737419 }).burst).toBe(10737419);
    expect(() => new Throttle({ rate: 1000, burst: 9 })).toThrow(/at least 10 bytes/);
  });

  it('checks peakRate and peakBurst against rate and burst', () => {
    expect(() => new Throttle({ rate: 1000, peakRate: 1000 })).toThrow(
      /peakRate 1000 bytes per second must be above rate 1000 bytes per second/,
    );
    expect(() => new Throttle({ rate: 1000, burst: 100, peakRate: 5000, peakBurst: 200 })).toThrow(
      /peakBurst 200 bytes must not exceed burst 100 bytes/,
    );
    expect(() => new Throttle({ rate: 1000, peakBurst: 200 })).toThrow(/set peakRate too/);
    expect(() => new Throttle({ rate: 100_000, peakRate: 1e6, peakBurst: 100 })).toThrow(BurstTooSmallError);
    const throttle = new Throttle({ rate: 1000, burst: 5000, peakRate: 1e6 });
    expect(throttle.peakRate).toBe(1e6);
    expect(throttle.peakBurst).toBe(5000); // 10 ms of 1 MB/s is 10 kB, capped at the burst
    expect(new Throttle({ rate: 1000, peakRate: 2000 }).peakBurst).toBe(1024);
  });

  it('passes stream options through, and refuses a transform hook (a Throttle is its own transform)', () => {
    const throttle = new Throttle({ rate: 1000, highWaterMark: 7 });
    expect(throttle.writableHighWaterMark).toBe(7);
    expect(throttle.readableHighWaterMark).toBe(7);
    const hook = () => {
      throw new Error('must not be used');
    };
    expect(() => new Throttle({ rate: 1000, transform: hook } as ThrottleOptions)).toThrow(
      /Unknown option `transform` for Throttle options: a Throttle is its own transform/,
    );
  });
});

describe('Throttle: bad input throws before anything is armed', () => {
  it('a signal that is not an AbortSignal (the controller, say) is InvalidOptionError, and no group keeps the member', () => {
    const controller = new AbortController();
    for (const signal of [controller, {}, 'x', null, { aborted: true }]) {
      let caught: unknown;
      try {
        new Throttle({ rate: 1000, signal: signal as unknown as AbortSignal });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(InvalidOptionError);
      expect(isTokenpaceError(caught, 'ERR_INVALID_OPTION')).toBe(true);
      expect((caught as Error).message).toMatch(/AbortSignal/);
    }
    const fake = fakeClock();
    const group = new ThrottleGroup({ rate: 1000, clock: fake.clock });
    expect(() => group.throttle({ signal: controller as unknown as AbortSignal })).toThrow(InvalidOptionError);
    expect(group.size).toBe(0);
    expect(fake.pending()).toBe(0);
    expect(() => new Throttle({ rate: 1000, group: null as unknown as ThrottleGroup })).toThrow(
      /expected `group` to be a ThrottleGroup/,
    );
  });

  it('a rate or burst above 2^53 throws (1e308 would make an infinite burst)', () => {
    expect(() => new Throttle({ rate: 1e308 })).toThrow(InvalidRateError);
    expect(() => new Throttle({ rate: 1e308 })).toThrow(/largest supported is 2\^53 .* bytes per second/);
    expect(() => new Throttle({ rate: 1000, peakRate: 1e308 })).toThrow(InvalidRateError);
    expect(() => new Throttle({ rate: 1000, burst: 2 ** 60 })).toThrow(InvalidSizeError);
    expect(() => new ThrottleGroup({ rate: 1e308 })).toThrow(InvalidRateError);
    expect(() => new ThrottleGroup({ rate: 1000, burst: 2 ** 60 })).toThrow(InvalidSizeError);
    expect(new Throttle({ rate: 2 ** 53 }).burst).toBe(Math.ceil(2 ** 53 / 10));
  });
});

describe('Throttle: pacing on a fake clock', () => {
  it('passes the burst at once, then wake pieces (the burst less 10 ms of the rate) at the exact times', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100 });
    throttle.end(Buffer.alloc(1000, 7));
    await advance(fake, 1000);
    const expected: [number, number][] = [[0, 100]];
    for (let t = 90; t <= 900; t += 90) expected.push([t, 90]);
    expect(byTime(sink.pieces)).toEqual(expected);
    expect(sink.received).toBe(1000);
    expect(fake.pending()).toBe(0);
  });

  it('arms one timer at a time, for the exact shortfall of a whole wake piece', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100 });
    throttle.write(Buffer.alloc(130));
    await settle();
    expect(sink.received).toBe(100); // the conforming prefix
    expect(fake.pending()).toBe(1);
    // An open stream sleeps for a whole wake piece (90 bytes, 90 ms), though
    // only 30 bytes are held: more may be written meanwhile.
    fake.timers.tick(89);
    await settle();
    expect(sink.received).toBe(100);
    fake.timers.tick(1);
    await settle();
    expect(sink.received).toBe(130);
    expect(fake.pending()).toBe(0);
  });

  it('once the writer has ended, sleeps only for what is left', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100 });
    throttle.write(Buffer.alloc(130));
    await settle();
    expect(sink.received).toBe(100);
    throttle.end(); // re-plans the sleeping timer: 30 bytes short, 30 ms
    await settle();
    expect(fake.pending()).toBe(1);
    fake.timers.tick(29);
    await settle();
    expect(sink.received).toBe(100);
    fake.timers.tick(1);
    await settle();
    expect(sink.received).toBe(130);
    expect(fake.pending()).toBe(0);
  });

  it('never passes a piece above the burst, nor more than burst + rate * T in any window', async () => {
    const { fake, throttle, sink } = setup({ rate: 2000, burst: 300 });
    const source = byteSource(5000, [1, 700, 33, 4096, 250]);
    const done = pipeline(source, throttle);
    await advance(fake, 2500);
    await done;
    expect(sink.received).toBe(5000);
    expect(Math.max(...sink.pieces.map((p) => p.bytes))).toBeLessThanOrEqual(300);
    for (const windowMs of [0, 1, 10, 50, 100, 333, 1000]) {
      expect(maxInWindow(sink.pieces, windowMs)).toBeLessThanOrEqual(300 + 2 * windowMs);
    }
    // Nothing dropped, duplicated or reordered.
    const data = sink.data();
    for (let i = 0; i < data.length; i++) if (data[i] !== patternByte(i)) expect.fail(`byte ${i} differs`);
  });

  it('sustains the rate exactly over time (lazy refill: no loss while waiting)', async () => {
    const { fake, sink } = (() => {
      const s = setup({ rate: 10_000, burst: 1000 });
      pipeline(byteSource(1e9, 4096), s.throttle).catch(() => {});
      return s;
    })();
    await advance(fake, 2000);
    // burst + rate * 2 s, less at most one wake piece not yet earned.
    expect(sink.received).toBeLessThanOrEqual(1000 + 20_000);
    expect(sink.received).toBeGreaterThanOrEqual(1000 + 20_000 - 500);
  });

  it('passes many small queued chunks in one wake-up instead of a timer each', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100, highWaterMark: 1000 });
    throttle.cork(); // queue all 50 before the first is transformed
    for (let i = 0; i < 50; i++) throttle.write(Buffer.alloc(10));
    throttle.uncork();
    throttle.end();
    await settle();
    expect(sink.received).toBe(100);
    let wakeUps = 0;
    for (let t = 0; t < 500; t++) {
      const before = sink.received;
      fake.timers.tick(1);
      await settle();
      if (sink.received !== before) wakeUps++;
    }
    expect(sink.received).toBe(500);
    expect(wakeUps).toBe(5); // 400 bytes: four wake pieces of 90, then the last 40
  });

  it('passes a conforming chunk at once (the fast path) and counts it', async () => {
    const { fake, throttle, sink } = setup({ rate: 1e6, burst: 1e5 });
    throttle.write(Buffer.alloc(1000));
    throttle.write('hello');
    throttle.write(Buffer.alloc(0));
    await settle();
    expect(sink.received).toBe(1005);
    expect(fake.pending()).toBe(0);
    expect(throttle.counters.bytes).toBe(1005);
  });

  it('takes strings in their encoding when decodeStrings is off', async () => {
    const { throttle, sink } = setup({ rate: 1e6, decodeStrings: false });
    throttle.end('héllo', 'utf8');
    await settle();
    expect(sink.data().toString('utf8')).toBe('héllo');
    expect(sink.received).toBe(6);
  });

  it('keeps the reader backpressure: a full readable buffer stops a chunk mid-way', async () => {
    const fake = fakeClock();
    const throttle = new Throttle({ rate: 1000, burst: 100, readableHighWaterMark: 10, clock: fake.clock });
    throttle.write(Buffer.alloc(1000));
    await advance(fake, 500);
    // Without a reader, one piece sits in the readable buffer and the rest waits.
    expect(throttle.readableLength).toBe(100);
    expect(fake.pending()).toBe(0);
    const received: number[] = [];
    throttle.on('data', (chunk: Buffer) => received.push(chunk.length));
    await advance(fake, 1);
    // The bucket filled up meanwhile (it is capped at the burst): 100 more now, then the rate.
    expect(received.reduce((a, b) => a + b, 0)).toBe(200);
    await advance(fake, 900);
    expect(received.reduce((a, b) => a + b, 0)).toBe(1000);
  });
});

describe('Throttle: runs (chunks in one synchronous stretch pass on one clock read)', () => {
  /** A clock set by hand that counts its reads; its timers are a fake clock's. */
  function countingClock() {
    const fake = fakeClock();
    let nowMs = 0;
    const clock = {
      reads: 0,
      set(ms: number) {
        nowMs = ms;
      },
      now: () => {
        clock.reads++;
        return nowMs;
      },
      setTimeout: fake.clock.setTimeout,
      clearTimeout: fake.clock.clearTimeout,
    };
    return clock;
  }

  it('reads the clock twice for a run of chunks the tokens cover, and charges them exactly', async () => {
    const clock = countingClock();
    const throttle = new Throttle({ rate: 1000, burst: 1000, clock });
    throttle.resume();
    await settle();
    const readsBefore = clock.reads;
    for (let i = 0; i < 50; i++) throttle.write(Buffer.alloc(10)); // 500 bytes, one synchronous stretch
    // Before the first chunk passes and once it has; the other 49 pass on the run's tokens.
    expect(clock.reads - readsBefore).toBe(2);
    await settle();
    expect(throttle.counters.bytes).toBe(500);
    // Charged as per piece: 500 left at t = 0, so 500 more pass at once and the next byte waits.
    clock.set(0);
    let passed = 0;
    throttle.on('data', (chunk: Buffer) => {
      passed += chunk.length;
    });
    throttle.write(Buffer.alloc(500));
    await settle();
    expect(passed).toBe(500);
    throttle.write(Buffer.alloc(1));
    await settle();
    expect(passed).toBe(500);
    throttle.destroy();
  });

  it('a run that outlasts the refill to the burst leaves the bucket at most rate x its length below a per-piece charge, never above', async () => {
    const clock = countingClock();
    const throttle = new Throttle({ rate: 1000, burst: 1000, clock });
    throttle.resume();
    throttle.write(Buffer.alloc(600)); // read at 0: 400 left, a run begins
    clock.set(0.1);
    throttle.write(Buffer.alloc(300)); // passes on the run's tokens, no read
    clock.set(1000); // synchronous code runs for a second before the run ends
    await settle();
    // Per piece: 400 - 300 = 100 at 0.1 ms, full (1000) by 1000 ms. The run charged the 300 at 1000 ms
    // after the cap: 700. The difference, 300, is within rate x the run's length (1000).
    let passed = 0;
    throttle.on('data', (chunk: Buffer) => {
      passed += chunk.length;
    });
    throttle.write(Buffer.alloc(1000));
    await settle();
    expect(passed).toBe(700);
    expect(passed).toBeLessThanOrEqual(1000); // never more than a per-piece charge allows
    throttle.destroy();
  });

  it('a synchronous source that keeps one stretch going for long gets the whole rate: runs re-read the clock', async () => {
    // A virtual clock: each chunk the source makes takes 1 KiB at 1.28x the rate (a pass speed
    // just above the cap, as 1 KiB chunks at 1 GiB/s); a timer moves the clock to its instant.
    // nextTick callbacks run back to back, so no microtask ends a run until the stream sleeps.
    const rate = 1024 ** 3;
    let nowMs = 0;
    let received = 0;
    const sleeps: { atMs: number; received: number }[] = [];
    const clock: Clock = {
      now: () => nowMs,
      setTimeout: (fn, ms) => {
        sleeps.push({ atMs: nowMs, received });
        const due = nowMs + ms;
        return setImmediate(() => {
          nowMs = Math.max(nowMs, due);
          fn();
        });
      },
      clearTimeout: (handle) => clearImmediate(handle as NodeJS.Immediate),
    };
    const throttle = new Throttle({ rate, clock });
    const chunk = Buffer.alloc(1024);
    const chunks = 600_000; // more than the default burst (100 ms) and the refill while they pass
    let made = 0;
    const source = new Readable({
      read() {
        if (made++ === chunks) this.push(null);
        else {
          nowMs += (1024 / (1.28 * rate)) * 1000;
          this.push(chunk);
        }
      },
    });
    const sink = new Writable({
      write(piece: Buffer, _encoding, callback) {
        received += piece.length;
        callback();
      },
    });
    await pipeline(source, throttle, sink);
    expect(received).toBe(chunks * 1024);
    const burst = throttle.burst as number;
    expect(received).toBeLessThanOrEqual(burst + (rate * nowMs) / 1000); // never above burst + rate * T
    // Whenever it sleeps, it has passed all the bucket allowed: the burst and the rate since the
    // start (a run charged late would have lost the refill, and slept with the burst alone passed),
    // less the refill during the first run, which starts with the bucket full (a run is 1 ms of the rate).
    expect(sleeps.length).toBeGreaterThan(0);
    for (const sleep of sleeps) {
      expect(sleep.received).toBeLessThanOrEqual(burst + (rate * sleep.atMs) / 1000);
      expect(sleep.received).toBeGreaterThanOrEqual(burst + (rate * sleep.atMs) / 1000 - rate / 1000);
    }
  });

  it('a run ends at the next turn of the event loop: bytes are charged then, with nothing left over', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 1000 });
    for (let i = 0; i < 10; i++) throttle.write(Buffer.alloc(50));
    await settle();
    expect(sink.received).toBe(500);
    await advance(fake, 300); // 300 earned; the bucket is full again at 500 + 300 = 800
    for (let i = 0; i < 20; i++) throttle.write(Buffer.alloc(50)); // 1000 bytes: 800 now, the rest waits
    await settle();
    expect(sink.received).toBe(1300);
    expect(throttle.counters.bytes).toBe(1300);
    throttle.destroy();
  });
});

describe('Throttle: peakRate (the second bucket)', () => {
  it('drains a burst at the peak rate, in pieces no larger than peakBurst', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 1000, peakRate: 10_000, peakBurst: 100 });
    throttle.end(Buffer.alloc(1000));
    await advance(fake, 200);
    expect(sink.received).toBe(1000);
    expect(Math.max(...sink.pieces.map((p) => p.bytes))).toBeLessThanOrEqual(100);
    // 100 at once, then 50 every 5 ms: the peak rate, 10 kB/s.
    expect(byTime(sink.pieces).slice(0, 4)).toEqual([
      [0, 100],
      [5, 50],
      [10, 50],
      [15, 50],
    ]);
    expect(sink.pieces.at(-1)?.atMs).toBe(90);
    for (const windowMs of [0, 5, 20, 50]) {
      expect(maxInWindow(sink.pieces, windowMs)).toBeLessThanOrEqual(100 + 10 * windowMs);
    }
  });
});

describe('Throttle: peakBurst against peakRate', () => {
  it('throws BurstTooSmallError for a peakBurst too small for the peak rate, naming the smallest that works', () => {
    const make = () => new Throttle({ rate: '10MiB/s', burst: '1MiB', peakRate: '64MiB/s', peakBurst: '16KiB' });
    expect(make).toThrow(BurstTooSmallError);
    try {
      make();
      expect.unreachable();
    } catch (error) {
      if (!isTokenpaceError(error, 'ERR_BURST_TOO_SMALL')) throw error;
      expect(error.burst).toBe(16384);
      expect(error.minBurst).toBe(minBurstBytes(64 * 1048576));
      expect(error.message).toBe(
        'peakBurst 16384 bytes (16 KiB) is too small to sustain peakRate 67108864 bytes per second (64 MiB/s): ' +
          'timers fire up to ~5 ms late, and the peak bucket would drain a burst below its peak rate; ' +
          'use a peakBurst of at least 671089 bytes (~655 KiB) (peakRate x 10 ms), ' +
          'or leave it unset for the default of 671089 bytes (~655 KiB)',
      );
    }
    // The default the message names is the one an unset peakBurst gets.
    expect(new Throttle({ rate: '10MiB/s', burst: '1MiB', peakRate: '64MiB/s' }).peakBurst).toBe(671089);
    // Exactly the smallest is accepted.
    expect(new Throttle({ rate: '10MiB/s', burst: '1MiB', peakRate: '64MiB/s', peakBurst: 671089 }).peakBurst).toBe(
      671089,
    );
    // When the smallest does not fit in the burst, the message says to raise the burst too.
    expect(() => new Throttle({ rate: '10MiB/s', burst: '512KiB', peakRate: '64MiB/s', peakBurst: '16KiB' })).toThrow(
      /at least 671089 bytes \(~655 KiB\) \(peakRate x 10 ms\) and a burst at least as large \(it is 524288 bytes \(512 KiB\)\), or a lower peakRate/,
    );
  });

  it('the default peak bucket drains a burst at the peak rate, as TBF does', async () => {
    const rate = 10 * 1048576;
    const peakRate = 64 * 1048576;
    const { fake, throttle, sink } = setup({ rate, burst: '5MiB', peakRate });
    const peakBurst = throttle.peakBurst as number;
    expect(peakBurst).toBe(minBurstBytes(peakRate));
    throttle.end(Buffer.alloc(5 * 1048576));
    await advance(fake, 10);
    // TBF passes peakBurst + peakRate * 10 ms in the first 10 ms; the stream sleeps for half
    // a peak bucket at a time, so it may be up to that much behind, never ahead.
    const tbf = peakBurst + peakRate * 0.01;
    expect(sink.received).toBeLessThanOrEqual(tbf);
    expect(sink.received).toBeGreaterThanOrEqual(tbf - peakBurst / 2 - 1);
    throttle.destroy();
    await settle();
  });
});

describe('Throttle: live changes', () => {
  it('setRate applies to the next piece, re-plans the sleeping timer, and loses nothing', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100 });
    throttle.end(Buffer.alloc(1000));
    await advance(fake, 200); // 100 + 2 * 90
    expect(sink.received).toBe(280);
    throttle.setRate(2000); // the default burst would follow, but this burst is explicit
    expect(throttle.rate).toBe(2000);
    expect(throttle.burst).toBe(100);
    await settle();
    expect(sink.received).toBe(300); // re-planned at once: the 20 tokens earned since 180 ms pass now
    await advance(fake, 39);
    expect(sink.received).toBe(300);
    await advance(fake, 1);
    expect(sink.received).toBe(380); // a wake piece is now 80 bytes (100 less 10 ms at 2000 B/s): 40 ms
    await advance(fake, 400);
    expect(sink.received).toBe(1000);
    expect(sink.pieces.at(-1)?.atMs).toBe(200 + 350); // 720 bytes, 20 of them earned by 200 ms, at 2000 B/s
  });

  it('a default burst follows the rate; an explicit burst that cannot sustain it throws', () => {
    const throttle = new Throttle({ rate: '1MiB/s' });
    throttle.setRate('10MiB/s');
    expect(throttle.burst).toBe(defaultBurstBytes(10 * 1048576));
    const fixed = new Throttle({ rate: 1000, burst: 100 });
    expect(() => fixed.setRate(1e6)).toThrow(BurstTooSmallError);
    expect(fixed.rate).toBe(1000);
    expect(() => fixed.setBurst(5)).toThrow(BurstTooSmallError);
    fixed.setBurst('1KiB');
    expect(fixed.burst).toBe(1024);
    const peaked = new Throttle({ rate: 1000, peakRate: 2000 });
    expect(() => peaked.setRate(3000)).toThrow(/peakRate .* must be above rate/);
    peaked.setRate(1500); // keeps the peak bucket
    expect(peaked.peakRate).toBe(2000);
    peaked.setBurst(2000);
    expect(peaked.peakBurst).toBe(1024); // a default peak burst: 10 ms of the peak rate, at least 1 KiB
    const explicitPeak = new Throttle({ rate: 1000, burst: 500, peakRate: 5000, peakBurst: 400 });
    expect(() => explicitPeak.setBurst(300)).toThrow(/peakBurst 400 bytes must not exceed burst 300 bytes/);
    expect(explicitPeak.burst).toBe(500);
  });

  it('setBurst applies to the next piece', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100 });
    throttle.end(Buffer.alloc(600));
    await settle();
    expect(sink.received).toBe(100);
    throttle.setBurst(2000);
    await advance(fake, 500);
    // Now it waits for wake pieces of 250 bytes (at most 250 ms of the rate) and the
    // bucket may hold 2000: it passes 250 at 250 ms, and the last 250 at 500 ms.
    expect(byTime(sink.pieces)).toEqual([
      [0, 100],
      [250, 250],
      [500, 250],
    ]);
    throttle.setBurst(150);
    expect(throttle.burst).toBe(150);
  });
});

describe('Throttle: counters', () => {
  it('counts bytes, time waited, and the current and average rate', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100 });
    expect(throttle.counters).toEqual({
      bytes: 0,
      waitedMs: 0,
      currentBytesPerSecond: 0,
      averageBytesPerSecond: 0,
      elapsedMs: 0,
    });
    throttle.write(Buffer.alloc(2100));
    await advance(fake, 1500);
    let counters = throttle.counters;
    expect(counters.bytes).toBe(1540); // 100 + 16 wake pieces of 90
    expect(counters.waitedMs).toBe(1500);
    expect(counters.elapsedMs).toBe(1500);
    expect(counters.averageBytesPerSecond).toBeCloseTo(1540 / 1.5, 6);
    // Bytes since the newest sample at least a second old, over the time since it.
    expect(counters.currentBytesPerSecond).toBeGreaterThan(900);
    expect(counters.currentBytesPerSecond).toBeLessThan(1100);
    await advance(fake, 500);
    throttle.end();
    await settle();
    await advance(fake, 1000);
    counters = throttle.counters;
    expect(sink.received).toBe(2100);
    expect(counters.bytes).toBe(2100);
    expect(counters.waitedMs).toBe(2000);
    expect(counters.elapsedMs).toBe(2000); // frozen at the end
    expect(counters.currentBytesPerSecond).toBe(0); // nothing in the last second
  });
});

describe('Throttle: lifecycle', () => {
  it('destroy() while waiting clears the timer, emits close, and pushes nothing more', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100 });
    throttle.write(Buffer.alloc(1000));
    await settle();
    expect(fake.pending()).toBe(1);
    let closed = false;
    throttle.on('close', () => {
      closed = true;
    });
    throttle.destroy();
    await settle();
    expect(closed).toBe(true);
    expect(fake.pending()).toBe(0);
    await advance(fake, 1000);
    expect(sink.received).toBe(100);
    expect(throttle.counters.waitedMs).toBe(0);
  });

  it('destroy() settles the write callbacks as a core stream does', async () => {
    const { fake, throttle } = setup({ rate: 1000, burst: 100 });
    const results: string[] = [];
    throttle.write(Buffer.alloc(500), (error) =>
      results.push(`held: ${error ? (error as NodeJS.ErrnoException).code : 'ok'}`),
    );
    throttle.write(Buffer.alloc(500), (error) => results.push(`queued: ${(error as NodeJS.ErrnoException).code}`));
    await settle();
    throttle.destroy();
    await settle();
    // The held write completes (nothing more is pushed), the queued one fails.
    expect(results).toEqual(['held: ok', 'queued: ERR_STREAM_DESTROYED']);
    expect(throttle.errored).toBeNull();
    expect(fake.pending()).toBe(0);
  });

  it('an aborted signal ends a waiting pipeline with no timer left', async () => {
    const fake = fakeClock();
    const controller = new AbortController();
    const throttle = new Throttle({ rate: 1000, burst: 100, clock: fake.clock, signal: controller.signal });
    const sink = recordingSink(() => fake.timers.now);
    const done = pipeline(byteSource(1e6, 512), throttle, sink);
    await advance(fake, 100);
    expect(fake.pending()).toBe(1);
    controller.abort();
    await expect(done).rejects.toMatchObject({ name: 'AbortError' });
    expect(throttle.destroyed).toBe(true);
    expect(fake.pending()).toBe(0);
  });

  it('a signal already aborted at construction destroys it with an AbortError', async () => {
    const fake = fakeClock();
    const throttle = new Throttle({ rate: 1000, clock: fake.clock, signal: AbortSignal.abort() });
    const errors: unknown[] = [];
    throttle.on('error', (error) => errors.push(error));
    await settle();
    expect(throttle.destroyed).toBe(true);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
    expect(fake.pending()).toBe(0);
  });

  it('pipeline(..., { signal }) aborted mid-wait leaves no timer', async () => {
    const fake = fakeClock();
    const controller = new AbortController();
    const throttle = new Throttle({ rate: 1000, burst: 100, clock: fake.clock });
    const done = pipeline(
      byteSource(1e6, 512),
      throttle,
      recordingSink(() => fake.timers.now),
      {
        signal: controller.signal,
      },
    );
    await advance(fake, 60);
    controller.abort();
    await expect(done).rejects.toMatchObject({ name: 'AbortError' });
    expect(fake.pending()).toBe(0);
  });

  it('an error downstream propagates through the pipeline and clears the timer', async () => {
    const fake = fakeClock();
    const throttle = new Throttle({ rate: 1000, burst: 100, clock: fake.clock });
    let seen = 0;
    const failing = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        seen += chunk.length;
        callback(seen > 150 ? new Error('disk full') : null);
      },
    });
    const done = pipeline(byteSource(1e6, 1000), throttle, failing).then(
      () => undefined,
      (error: unknown) => error,
    );
    await advance(fake, 100);
    expect(await done).toMatchObject({ message: 'disk full' });
    expect(throttle.destroyed).toBe(true);
    expect(fake.pending()).toBe(0);
  });

  it('an error upstream propagates too', async () => {
    const fake = fakeClock();
    const throttle = new Throttle({ rate: 1000, burst: 100, clock: fake.clock });
    let calls = 0;
    const source = new Readable({
      read() {
        if (++calls > 3) this.destroy(new Error('socket reset'));
        else this.push(Buffer.alloc(100));
      },
    });
    const done = pipeline(
      source,
      throttle,
      recordingSink(() => fake.timers.now),
    ).then(
      () => undefined,
      (error: unknown) => error,
    );
    await advance(fake, 200);
    expect(await done).toMatchObject({ message: 'socket reset' });
    expect(fake.pending()).toBe(0);
  });

  it('ends cleanly: finish, end and close, with everything passed', async () => {
    const { fake, throttle, sink } = setup({ rate: 1000, burst: 100 });
    const events: string[] = [];
    throttle.on('finish', () => events.push('finish'));
    throttle.on('end', () => events.push('end'));
    throttle.on('close', () => events.push('close'));
    throttle.end(Buffer.alloc(200));
    await advance(fake, 200);
    expect(sink.received).toBe(200);
    expect(events.sort()).toEqual(['close', 'end', 'finish']);
    expect(fake.pending()).toBe(0);
  });
});

describe('Throttle: conformance property', () => {
  it('for any rate, burst and chunking: no piece above the burst, no window above burst + rate * T, data intact, rate exact', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1000, max: 50_000 }),
        fc.double({ min: 0.01, max: 0.2, noNaN: true }),
        fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 8 }),
        fc.double({ min: 0.2, max: 0.6, noNaN: true }),
        async (ratePerSecond, burstSeconds, chunkSizes, durationSeconds) => {
          const burst = Math.max(Math.ceil(ratePerSecond * burstSeconds), minBurstBytes(ratePerSecond));
          const total = burst + Math.floor(ratePerSecond * durationSeconds);
          const { fake, throttle, sink } = setup({ rate: ratePerSecond, burst });
          let finished = false;
          pipeline(byteSource(total, chunkSizes), throttle).then(() => {
            finished = true;
          });
          const idealMs = ((total - burst) * 1000) / ratePerSecond;
          // An open stream sleeps for whole wake pieces: the writer is paused by
          // backpressure and only ends once the last chunk has passed, so the last
          // bytes may wait up to one wake piece longer than the bucket requires.
          const tailMs = (wakePieceBytes(ratePerSecond, burst) * 1000) / ratePerSecond;
          await advance(fake, Math.ceil(idealMs + tailMs) + 3);
          expect(finished).toBe(true);
          expect(sink.received).toBe(total);
          expect(Math.max(...sink.pieces.map((p) => p.bytes))).toBeLessThanOrEqual(burst);
          for (const windowMs of [0, 1, 7, 50, 100, 250]) {
            expect(maxInWindow(sink.pieces, windowMs)).toBeLessThanOrEqual(
              burst + (ratePerSecond * windowMs) / 1000 + 1e-6,
            );
          }
          const lastMs = sink.pieces.at(-1)?.atMs ?? 0;
          expect(lastMs).toBeGreaterThanOrEqual(idealMs - 1e-6);
          expect(lastMs).toBeLessThanOrEqual(idealMs + tailMs + 2);
          const data = sink.data();
          for (let i = 0; i < data.length; i++) if (data[i] !== patternByte(i)) expect.fail(`byte ${i} differs`);
          expect(fake.pending()).toBe(0);
        },
      ),
      { numRuns: 25 },
    );
  }, 60_000);
});

/** Bytes a sink received at times in (fromMs, toMs]. */
function receivedBetween(pieces: readonly { atMs: number; bytes: number }[], fromMs: number, toMs: number): number {
  let sum = 0;
  for (const piece of pieces) if (piece.atMs > fromMs && piece.atMs <= toMs) sum += piece.bytes;
  return sum;
}

describe('Throttle: conformance with asynchronous (socket-like) sources', () => {
  it('chunks arriving on timers between wake-ups: the whole rate while there is demand, never above burst + rate * T', async () => {
    await fc.assert(
      fc.asyncProperty(
        // Socket-sized chunks (at least the streams' 16 KiB buffers, so a stream holds one
        // chunk at a time, as with a socket) at rates where many pass per wake-up.
        fc.integer({ min: 2_000_000, max: 30_000_000 }),
        fc.double({ min: 0.01, max: 0.05, noNaN: true }),
        fc.integer({ min: 1, max: 5 }),
        fc.double({ min: 1.2, max: 2.5, noNaN: true }),
        fc.integer({ min: 16384, max: 65536 }),
        async (ratePerSecond, burstSeconds, intervalMs, speed, chunkBytes) => {
          const burst = Math.max(Math.ceil(ratePerSecond * burstSeconds), minBurstBytes(ratePerSecond));
          const fake = fakeClock();
          const throttle = new Throttle({ rate: ratePerSecond, burst, clock: fake.clock });
          const sink = recordingSink(() => fake.timers.now);
          const source = timedSource(fake, { bytesPerSecond: ratePerSecond * speed, chunkBytes, intervalMs });
          pipeline(source, throttle, sink).catch(() => {});
          await advance(fake, 1300);
          // Never more than burst + rate * T in any window.
          for (const windowMs of [0, 1, 10, 50, 100, 500]) {
            expect(maxInWindow(sink.pieces, windowMs)).toBeLessThanOrEqual(
              burst + (ratePerSecond * windowMs) / 1000 + 1e-6,
            );
          }
          // Never less than the rate while there is demand: the source outruns the cap from
          // burst / (speed - 1) / rate <= 0.25 s on, and the bucket then gains at most its
          // capacity over any span, so (300 ms, 1300 ms] carries at least rate * 1 s - burst.
          expect(receivedBetween(sink.pieces, 300, 1300)).toBeGreaterThanOrEqual(ratePerSecond - burst);
          const data = sink.data();
          for (let i = 0; i < data.length; i++) if (data[i] !== patternByte(i)) expect.fail(`byte ${i} differs`);
          source.destroy();
          throttle.destroy();
          await settle();
          expect(fake.pending()).toBe(0);
        },
      ),
      { numRuns: 8 },
    );
  }, 120_000);

  it('a source slower than the cap passes everything it sends, as it arrives', async () => {
    const fake = fakeClock();
    const throttle = new Throttle({ rate: 100_000, clock: fake.clock });
    const sink = recordingSink(() => fake.timers.now);
    const source = timedSource(fake, { bytesPerSecond: 50_000, chunkBytes: 1500, intervalMs: 3 });
    pipeline(source, throttle, sink).catch(() => {});
    await advance(fake, 2000);
    // Everything produced has passed, less at most the last tick's worth in flight.
    expect(sink.received).toBeGreaterThanOrEqual(source.produced - 1500);
    expect(sink.received).toBeGreaterThanOrEqual(50_000 * 2 - 1500);
    expect(fake.pending()).toBe(1); // the source's own timer: the throttle never had to wait
    source.destroy();
    throttle.destroy();
    await settle();
  });

  it('the README case: 16 KiB every 1 ms into 10 MiB/s delivers the whole 10 MiB/s', async () => {
    const fake = fakeClock();
    const rate = 10 * 1048576;
    const throttle = new Throttle({ rate, clock: fake.clock });
    const sink = recordingSink(() => fake.timers.now);
    const source = timedSource(fake, { bytesPerSecond: 16384 * 1000, chunkBytes: 16384, intervalMs: 1 });
    pipeline(source, throttle, sink).catch(() => {});
    await advance(fake, 1500);
    const achieved = receivedBetween(sink.pieces, 500, 1500) / rate;
    expect(achieved).toBeGreaterThanOrEqual(0.99);
    expect(achieved).toBeLessThanOrEqual(1 + (throttle.burst as number) / rate);
    source.destroy();
    throttle.destroy();
    await settle();
  });
});

describe('Throttle: the defaults sustain every rate with late timers', () => {
  /** A fake clock whose timers all fire `lateMs` plus up to 8 ms (deterministic) late. */
  function lateClock(fake: ReturnType<typeof fakeClock>, lateMs: number): Clock {
    let seed = 1;
    return {
      now: fake.clock.now,
      setTimeout: (fn, ms) => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return fake.clock.setTimeout(fn, ms + lateMs + (seed % 9));
      },
      clearTimeout: fake.clock.clearTimeout,
    };
  }

  it.each([
    ['1 KiB/s, timers 2-10 ms late', 1024, 120_000, 50, 2],
    ['1 MiB/s, timers 2-10 ms late', 1024 ** 2, 10_000, 5, 2],
    ['100 MiB/s, timers 2-10 ms late', 100 * 1024 ** 2, 4000, 2, 2],
    ['1 GiB/s, timers 2-10 ms late', 1024 ** 3, 2000, 1, 2],
    // Later than the 10 ms margin: the wake pieces shrink to leave room (timer.ts's Lateness).
    ['1 MiB/s, timers 12-20 ms late', 1024 ** 2, 10_000, 5, 12],
    ['1 GiB/s, timers 12-20 ms late', 1024 ** 3, 2000, 1, 12],
  ])(
    '%s: within 1 %%',
    async (_label, ratePerSecond, durationMs, stepMs, lateMs) => {
      const fake = fakeClock();
      const throttle = new Throttle({ rate: ratePerSecond, clock: lateClock(fake, lateMs) });
      const shared = Buffer.alloc(65536);
      const source = new Readable({
        read() {
          this.push(shared);
        },
      });
      let received = 0;
      const times: number[] = [];
      const totals: number[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          received += chunk.length;
          if (fake.timers.now >= durationMs / 2) {
            times.push(fake.timers.now / 1000);
            totals.push(received);
          }
          callback();
        },
      });
      pipeline(source, throttle, sink).catch(() => {});
      await settle();
      for (let t = 0; t < durationMs; t += stepMs) {
        fake.timers.tick(stepMs);
        await settle(2);
      }
      // The second half (no initial burst): the least-squares slope of bytes
      // against time, since the output comes in steps of one wake piece.
      const n = times.length;
      const meanT = times.reduce((a, b) => a + b, 0) / n;
      const meanB = totals.reduce((a, b) => a + b, 0) / n;
      let covariance = 0;
      let variance = 0;
      for (let k = 0; k < n; k++) {
        covariance += ((times[k] as number) - meanT) * ((totals[k] as number) - meanB);
        variance += ((times[k] as number) - meanT) ** 2;
      }
      const achieved = covariance / variance;
      expect(achieved / ratePerSecond).toBeGreaterThan(0.99);
      expect(achieved / ratePerSecond).toBeLessThan(1.01);
      throttle.destroy();
      source.destroy();
      await settle();
      expect(fake.pending()).toBe(0);
    },
    30_000,
  );
});

/**
 * A lone Throttle at `rate` on `clock`, fed 64 KiB chunks as fast as it takes them, after `ticks`
 * steps of 1 ms of fake time; `close` destroys the pipeline.
 */
async function busyThrottle(fake: ReturnType<typeof fakeClock>, clock: Clock, rate: number, ticks: number) {
  const throttle = new Throttle({ rate, clock });
  const shared = Buffer.alloc(65536);
  const source = new Readable({
    read() {
      this.push(shared);
    },
  });
  const sink = recordingSink(() => clock.now());
  pipeline(source, throttle, sink).catch(() => {});
  await settle();
  for (let t = 0; t < ticks; t++) {
    fake.timers.tick(1);
    await settle(2);
  }
  const close = async () => {
    throttle.destroy();
    source.destroy();
    await settle();
  };
  return { throttle, sink, close };
}

describe('Throttle: timers that fire a little early', () => {
  it('a timer up to 0.9 ms early by the clock wakes the stream once: no second timer for the rest', async () => {
    // Clock time is half the fake time, so a timer can fire half a millisecond
    // early, as Node's do by performance.now() (they start from the event loop's cached time).
    const fake = fakeClock();
    let armed = 0;
    const clock: Clock = {
      now: () => fake.timers.now / 2,
      setTimeout: (fn, ms) => {
        armed++;
        return fake.clock.setTimeout(fn, 2 * ms - 1);
      },
      clearTimeout: fake.clock.clearTimeout,
    };
    const rate = 1024 ** 2;
    const clockMs = 2000;
    const { throttle, sink, close } = await busyThrottle(fake, clock, rate, 2 * clockMs);
    // The burst (128 KiB) at once, then the rate: every byte the bucket earned has passed but
    // for the part of a wake piece (118 KiB) not yet due.
    const earned = (throttle.burst as number) + (rate * clockMs) / 1000;
    expect(sink.received).toBeLessThanOrEqual(earned);
    expect(sink.received).toBeGreaterThan(earned - 130_000);
    // One timer per wake piece: 2 s / 113 ms is ~18 (each woken early would be ~36).
    expect(armed).toBeLessThanOrEqual(19);
    await close();
    expect(fake.pending()).toBe(0);
  });
});

describe('Throttle: wake-ups of a busy stream', () => {
  it('the default burst (100 ms of the rate) lets a busy stream wake about 11 times a second, and the rate holds', async () => {
    // Each wake-up pauses and resumes the source, so the default burst is sized to wake as seldom
    // as `throttle`'s 100 ms slices: a wake piece is the burst less 10 ms of the rate, 90 ms.
    const fake = fakeClock();
    let armed = 0;
    const clock: Clock = {
      now: fake.clock.now,
      setTimeout: (fn, ms) => {
        armed++;
        return fake.clock.setTimeout(fn, ms);
      },
      clearTimeout: fake.clock.clearTimeout,
    };
    const rate = 10 * 1024 ** 2;
    const ms = 3000;
    const { throttle, sink, close } = await busyThrottle(fake, clock, rate, ms);
    expect(throttle.burst).toBe(rate / 10);
    // 3 s / 90 ms is 33.3 wake-ups; a timer for each, no more.
    expect(armed).toBeGreaterThanOrEqual(32);
    expect(armed).toBeLessThanOrEqual(35);
    // Both sides of the bound: everything earned has passed but for one wake piece not yet due.
    const earned = (throttle.burst as number) + (rate * ms) / 1000;
    expect(sink.received).toBeLessThanOrEqual(earned);
    expect(sink.received).toBeGreaterThanOrEqual(earned - 0.09 * rate - 65536);
    await close();
    expect(fake.pending()).toBe(0);
  });
});
