/**
 * WebThrottle, the WHATWG TransformStream form, on a fake clock: the stream
 * suite's cases for it (exact pieces and times, splitting, the bound in every
 * window, a property over rates and chunkings, counters and live changes,
 * group membership mixed with Node members, cancels, aborts and errors).
 * Real fetch and Blob cases are in web-throttle-http.test.ts.
 */

import { pipeline } from 'node:stream/promises';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  InvalidOptionError,
  isTokenpaceError,
  NotSupportedError,
  ThrottleGroup,
  WebThrottle,
  type WebThrottleOptions,
} from '../../src/index.js';
import { minBurstBytes, wakePieceBytes } from '../../src/stream/pacing.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { advance, byTime, byteSource, maxInWindow, patternByte, recordingSink, settle, slope } from './support.js';
import { webByteSource, webRecordingSink } from './web-support.js';

function setup(options: Omit<WebThrottleOptions, 'clock'>) {
  const fake = fakeClock();
  const throttle = new WebThrottle({ ...options, clock: fake.clock });
  const sink = webRecordingSink(() => fake.timers.now);
  const piped = throttle.readable.pipeTo(sink).then(
    () => undefined,
    (error: unknown) => error,
  );
  const writer = throttle.writable.getWriter();
  return { fake, throttle, sink, writer, piped };
}

function expectIntact(data: Uint8Array): void {
  for (let i = 0; i < data.length; i++) if (data[i] !== patternByte(i)) expect.fail(`byte ${i} differs`);
}

describe('WebThrottle: options', () => {
  it('takes the Throttle options and numbers: a burst derived from the rate, peak, strings', () => {
    const throttle = new WebThrottle({ rate: '1MiB/s', peakRate: '4MiB/s' });
    const burst: number = throttle.burst;
    expect([throttle.rate, burst, throttle.peakRate, throttle.peakBurst]).toEqual([1048576, 131072, 4194304, 41944]);
    expect(throttle).toBeInstanceOf(TransformStream);
  });

  it('refuses Node stream options and unknown names, naming the web equivalent', () => {
    const loose = (options: Record<string, unknown>) => options as unknown as WebThrottleOptions;
    expect(() => new WebThrottle(loose({ rate: 1000, highWaterMark: 10 }))).toThrow(/writableStrategy/);
    expect(() => new WebThrottle(loose({ rate: 1000, brust: 10 }))).toThrow(/did you mean `burst`/);
    expect(() => new WebThrottle(loose({}))).toThrow(/needs a `rate`/);
    expect(() => new WebThrottle({ rate: 1000, burst: 1 })).toThrow(/too small/);
    expect(() => new WebThrottle(loose({ rate: 1000, weight: 2 }))).toThrow(InvalidOptionError);
  });
});

describe('WebThrottle: pacing on a fake clock', () => {
  it('passes the burst at once, then wake pieces at the exact times, as Throttle does', async () => {
    const { fake, sink, writer, piped } = setup({ rate: 1000, burst: 100 });
    void writer.write(new Uint8Array(1000).fill(7));
    void writer.close();
    await advance(fake, 1000);
    const expected: [number, number][] = [[0, 100]];
    for (let t = 90; t <= 900; t += 90) expected.push([t, 90]);
    // The writer has closed only once the chunk has passed: the last piece is a whole wake piece.
    expect(byTime(sink.pieces)).toEqual(expected);
    expect(await piped).toBeUndefined();
    expect(fake.pending()).toBe(0);
  });

  it('never passes a piece above the burst, nor more than burst + rate * T in any window; data intact', async () => {
    const fake = fakeClock();
    const throttle = new WebThrottle({ rate: 2000, burst: 300, clock: fake.clock });
    const sink = webRecordingSink(() => fake.timers.now);
    const done = webByteSource(5000, [1, 700, 33, 4096, 250]).pipeThrough(throttle).pipeTo(sink);
    await advance(fake, 2500);
    await done;
    expect(sink.received).toBe(5000);
    expect(Math.max(...sink.pieces.map((p) => p.bytes))).toBeLessThanOrEqual(300);
    for (const windowMs of [0, 1, 10, 50, 100, 333, 1000]) {
      expect(maxInWindow(sink.pieces, windowMs)).toBeLessThanOrEqual(300 + 2 * windowMs);
    }
    expectIntact(sink.data());
  });

  it('sustains the rate exactly over time', async () => {
    const fake = fakeClock();
    const throttle = new WebThrottle({ rate: 10_000, burst: 1000, clock: fake.clock });
    const sink = webRecordingSink(() => fake.timers.now);
    webByteSource(1e9, 4096)
      .pipeThrough(throttle)
      .pipeTo(sink)
      .catch(() => {});
    await advance(fake, 2000);
    expect(sink.received).toBeLessThanOrEqual(1000 + 20_000);
    expect(sink.received).toBeGreaterThanOrEqual(1000 + 20_000 - 500);
    await throttle.readable.cancel().catch(() => {});
  });

  it('holds the chunk being paced: the writer is not asked for the next one before it has passed', async () => {
    const { fake, writer } = setup({ rate: 1000, burst: 100 });
    let firstDone = false;
    void writer.write(new Uint8Array(300)).then(() => {
      firstDone = true;
    });
    // 100 at once, then wake pieces of 90 at 90 and 180 ms, the last 20 at 270 ms.
    await advance(fake, 269);
    expect(firstDone).toBe(false);
    await advance(fake, 1);
    expect(firstDone).toBe(true);
    await writer.abort();
  });

  it('with a reader that stops, at most the rest of one chunk waits in the readable queue', async () => {
    const fake = fakeClock();
    const throttle = new WebThrottle({ rate: 1000, burst: 100, clock: fake.clock });
    let pulled = 0;
    const source = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          pulled += 400;
          controller.enqueue(new Uint8Array(400));
        },
      },
      { highWaterMark: 0 },
    );
    const readable = source.pipeThrough(throttle);
    await advance(fake, 2000);
    // Nobody reads: the first chunk passed into the readable queue, the second is held, no more is pulled.
    expect(pulled).toBeLessThanOrEqual(3 * 400);
    expect(fake.pending()).toBe(0);
    await readable.cancel();
  });

  it('counts bytes, time waited, and the rate; setRate and setBurst apply to the next piece', async () => {
    const { fake, throttle, sink, writer } = setup({ rate: 1000, burst: 100 });
    void writer.write(new Uint8Array(400));
    await advance(fake, 180);
    expect(sink.received).toBe(280);
    expect(throttle.counters).toMatchObject({ bytes: 280, waitedMs: 180 });
    throttle.setRate(2000); // the default burst would follow; the explicit one stays
    expect([throttle.rate, throttle.burst]).toEqual([2000, 100]);
    await advance(fake, 45); // a wake piece of 80 (the burst less 10 ms of the new rate) at 220 ms
    expect(sink.received).toBe(360);
    throttle.setBurst(50);
    expect(throttle.burst).toBe(50);
    await advance(fake, 100);
    expect(sink.received).toBe(400);
    expect(Math.max(...sink.pieces.filter((p) => p.atMs > 226).map((p) => p.bytes))).toBeLessThanOrEqual(50);
    expect(fake.pending()).toBe(0);
    await writer.close();
  });
});

describe('WebThrottle: chunk types', () => {
  it('passes Uint8Array views and Buffers; anything else errors the stream with NotSupportedError', async () => {
    const { writer, sink, piped } = setup({ rate: 1e9 });
    await writer.write(new Uint8Array([1, 2, 3]).subarray(1));
    await writer.write(Buffer.from('hi'));
    await settle();
    expect(sink.received).toBe(4);
    const failed = writer.write('text' as unknown as Uint8Array).then(
      () => undefined,
      (error: unknown) => error,
    );
    const error = await failed;
    expect(isTokenpaceError(error, 'ERR_NOT_SUPPORTED')).toBe(true);
    expect((error as Error).message).toMatch(/TextEncoderStream/);
    expect(await piped).toBe(error);
    const second = setup({ rate: 1e9 });
    const buffer = await second.writer.write(new ArrayBuffer(4) as unknown as Uint8Array).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(buffer).toBeInstanceOf(NotSupportedError);
    expect((buffer as Error).message).toMatch(/new Uint8Array\(buffer\)/);
  });
});

describe('WebThrottle: conformance property', () => {
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
          const fake = fakeClock();
          const throttle = new WebThrottle({ rate: ratePerSecond, burst, clock: fake.clock });
          const sink = webRecordingSink(() => fake.timers.now);
          let finished = false;
          void webByteSource(total, chunkSizes)
            .pipeThrough(throttle)
            .pipeTo(sink)
            .then(() => {
              finished = true;
            });
          const idealMs = ((total - burst) * 1000) / ratePerSecond;
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
          expectIntact(sink.data());
          expect(fake.pending()).toBe(0);
        },
      ),
      { numRuns: 20 },
    );
  }, 60_000);
});

describe('WebThrottle: the defaults hold the cap from 1 KiB/s to 1 GiB/s within 1 %', () => {
  it.each([
    ['1 KiB/s', 1024, 60_000, 50],
    ['1 MiB/s', 1024 ** 2, 6000, 5],
    ['100 MiB/s', 100 * 1024 ** 2, 3000, 2],
    ['1 GiB/s', 1024 ** 3, 2000, 1],
  ])(
    '%s',
    async (_label, ratePerSecond, durationMs, stepMs) => {
      const fake = fakeClock();
      const throttle = new WebThrottle({ rate: ratePerSecond, clock: fake.clock });
      const shared = new Uint8Array(65536);
      const source = new ReadableStream<Uint8Array>({
        pull(controller) {
          controller.enqueue(shared);
        },
      });
      const sink = webRecordingSink(() => fake.timers.now);
      const stop = new AbortController();
      const done = source
        .pipeThrough(throttle)
        .pipeTo(sink, { signal: stop.signal })
        .catch(() => {});
      await settle();
      for (let t = 0; t < durationMs; t += stepMs) {
        fake.timers.tick(stepMs);
        await settle(2);
      }
      const achieved = slope(sink.pieces, durationMs / 2, durationMs);
      expect(achieved / ratePerSecond).toBeGreaterThan(0.99);
      expect(achieved / ratePerSecond).toBeLessThan(1.01);
      stop.abort();
      await done;
      await settle();
      expect(fake.pending()).toBe(0);
    },
    30_000,
  );
});

describe('WebThrottle: in a ThrottleGroup, mixed with Node members', () => {
  function mixed() {
    const fake = fakeClock();
    const group = new ThrottleGroup({ rate: 300_000, clock: fake.clock });
    const node = (chunkBytes: number, options = {}) => {
      const throttle = group.throttle(options);
      const sink = recordingSink(() => fake.timers.now);
      pipeline(byteSource(1e12, chunkBytes), throttle, sink).catch(() => {});
      return { throttle, sink };
    };
    const web = (chunkBytes: number, options = {}) => {
      const throttle = group.webThrottle(options);
      const sink = webRecordingSink(() => fake.timers.now);
      webByteSource(1e12, chunkBytes)
        .pipeThrough(throttle)
        .pipeTo(sink)
        .catch(() => {});
      return { throttle, sink };
    };
    return { fake, group, node, web };
  }

  it('busy web and Node members share the rate equally, and add up to it', async () => {
    const { fake, group, node, web } = mixed();
    const members = [web(16384), node(16384), web(4096), node(65536)];
    await advance(fake, 5000);
    const rates = members.map((m) => slope(m.sink.pieces, 1000, 5000));
    for (const rate of rates) {
      expect(rate).toBeGreaterThan(75_000 * 0.97);
      expect(rate).toBeLessThan(75_000 * 1.03);
    }
    expect(rates.reduce((a, b) => a + b, 0)).toBeGreaterThan(300_000 * 0.99);
    expect(group.size).toBe(4);
    group.destroyAll();
    await settle();
    expect(group.size).toBe(0);
    expect(fake.pending()).toBe(0);
  });

  it('a capped web member gets its cap, the others split the rest (max-min fairness)', async () => {
    const { fake, node, web } = mixed();
    const capped = web(16384, { rate: 50_000 });
    const a = node(16384);
    const b = web(4096);
    await advance(fake, 7000);
    const cappedRate = slope(capped.sink.pieces, 1000, 7000);
    expect(cappedRate).toBeGreaterThan(50_000 * 0.99);
    expect(cappedRate).toBeLessThan(50_000 * 1.01);
    for (const m of [a, b]) {
      const rate = slope(m.sink.pieces, 1000, 7000);
      expect(rate).toBeGreaterThan(125_000 * 0.99);
      expect(rate).toBeLessThan(125_000 * 1.01);
    }
    expect(maxInWindow(capped.sink.pieces, 1000)).toBeLessThanOrEqual((capped.throttle.burst as number) + 50_000);
  });

  it('new WebThrottle({ group }) is a member too; weights and guarantees apply', async () => {
    const { fake, group, node } = mixed();
    const heavy = new WebThrottle({ group, weight: 2 });
    expect([heavy.weight, heavy.guaranteed, heavy.group]).toEqual([2, 0, group]);
    const sink = webRecordingSink(() => fake.timers.now);
    webByteSource(1e12, 16384)
      .pipeThrough(heavy)
      .pipeTo(sink)
      .catch(() => {});
    const light = node(16384);
    await advance(fake, 4000);
    const ratio = slope(sink.pieces, 1000, 4000) / slope(light.sink.pieces, 1000, 4000);
    expect(ratio).toBeGreaterThan(1.9);
    expect(ratio).toBeLessThan(2.1);
    heavy.setWeight(1);
    expect(heavy.weight).toBe(1);
    group.destroyAll();
  });

  it('endAll ends a web member: what it holds passes, then its readable side closes', async () => {
    const { fake, group } = mixed();
    const member = group.webThrottle();
    const sink = webRecordingSink(() => fake.timers.now);
    const writer = member.writable.getWriter();
    const piped = member.readable.pipeTo(sink);
    void writer.write(new Uint8Array(40_000)).catch(() => {});
    await settle();
    group.endAll();
    await advance(fake, 200);
    await piped;
    expect(sink.received).toBe(40_000);
    expect(group.size).toBe(0);
    expect(fake.pending()).toBe(0);
  });
});

describe('WebThrottle: cancels, aborts and errors clear the timer', () => {
  it('the reader cancels while it waits: no timer, the group forgets it', async () => {
    const fake = fakeClock();
    const group = new ThrottleGroup({ rate: 1000, clock: fake.clock });
    const throttle = group.webThrottle({ rate: 500 });
    const reader = webByteSource(1e6, 512).pipeThrough(throttle).getReader();
    void (async () => {
      while (!(await reader.read()).done);
    })().catch(() => {});
    await advance(fake, 50);
    expect(fake.pending()).toBeGreaterThan(0);
    await reader.cancel(new Error('user left'));
    await settle();
    expect(fake.pending()).toBe(0);
    expect(group.size).toBe(0);
  });

  it('an aborted signal errors a waiting pipe with its reason; no timer is left', async () => {
    const fake = fakeClock();
    const controller = new AbortController();
    const throttle = new WebThrottle({ rate: 1000, burst: 100, clock: fake.clock, signal: controller.signal });
    const sink = webRecordingSink(() => fake.timers.now);
    const done = webByteSource(1e6, 512).pipeThrough(throttle).pipeTo(sink);
    await advance(fake, 100);
    expect(fake.pending()).toBe(1);
    controller.abort();
    await expect(done).rejects.toMatchObject({ name: 'AbortError' });
    expect(fake.pending()).toBe(0);
    await advance(fake, 500);
    expect(sink.received).toBeLessThanOrEqual(200);
  });

  it('a signal already aborted errors it at once', async () => {
    const throttle = new WebThrottle({ rate: 1000, signal: AbortSignal.abort() });
    await expect(throttle.readable.getReader().read()).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('pipeTo(..., { signal }) aborted mid-wait leaves no timer', async () => {
    const fake = fakeClock();
    const controller = new AbortController();
    const throttle = new WebThrottle({ rate: 1000, burst: 100, clock: fake.clock });
    const sink = webRecordingSink(() => fake.timers.now);
    const done = webByteSource(1e6, 512)
      .pipeThrough(throttle, { signal: controller.signal })
      .pipeTo(sink, { signal: controller.signal });
    await advance(fake, 60);
    controller.abort();
    await expect(done).rejects.toMatchObject({ name: 'AbortError' });
    await settle();
    expect(fake.pending()).toBe(0);
  });

  it('an error downstream and an error upstream both end it with no timer', async () => {
    const fake = fakeClock();
    const throttle = new WebThrottle({ rate: 1000, burst: 100, clock: fake.clock });
    let seen = 0;
    const failing = new WritableStream<Uint8Array>({
      write(chunk) {
        seen += chunk.length;
        if (seen > 150) throw new Error('disk full');
      },
    });
    const caught = (error: unknown) => error;
    const down = webByteSource(1e6, 1000)
      .pipeThrough(throttle)
      .pipeTo(failing)
      .then(() => undefined, caught);
    await advance(fake, 100);
    expect(await down).toMatchObject({ message: 'disk full' });
    await settle();
    expect(fake.pending()).toBe(0);

    const second = new WebThrottle({ rate: 1000, burst: 100, clock: fake.clock });
    let calls = 0;
    const source = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (++calls > 3) controller.error(new Error('socket reset'));
        else controller.enqueue(new Uint8Array(100));
      },
    });
    const up = source
      .pipeThrough(second)
      .pipeTo(webRecordingSink(() => fake.timers.now))
      .then(() => undefined, caught);
    await advance(fake, 300);
    expect(await up).toMatchObject({ message: 'socket reset' });
    await settle();
    expect(fake.pending()).toBe(0);
  });
});
