/**
 * throttleInterceptor's memory across origins: bounded by `maxOrigins`, an idle origin whose
 * bucket is full dropped, a busy one never, and an evicted one back with a full bucket. The heap
 * per origin is measured in a child process with --expose-gc (interceptor-origins-child.ts).
 */

import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { isTokenpaceError } from '../../src/errors.js';
import { throttleInterceptor } from '../../src/http/interceptor.js';
import { fakeClock } from '../helpers/fake-clock.js';

const controller = {
  pause() {},
  resume() {},
  abort() {},
  paused: false,
  aborted: false,
  reason: null,
  rawHeaders: null,
  rawTrailers: null,
} as unknown as Dispatcher.DispatchController;

/** A dispatch that records when each request is sent and answers when told. */
function origin() {
  const sent: Array<{ origin: string; finish: () => void }> = [];
  const dispatch = (opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean => {
    handler.onRequestStart?.(controller, undefined);
    sent.push({
      origin: String(opts.origin),
      finish: () => {
        handler.onResponseStart?.(controller, 200, {}, 'OK');
        handler.onResponseEnd?.(controller, {});
      },
    });
    return true;
  };
  return { sent, dispatch: dispatch as Dispatcher['dispatch'] };
}

describe('throttleInterceptor: origins kept', () => {
  it('keeps at most maxOrigins idle origins, never drops a busy one, and an evicted one comes back full', async () => {
    const { clock, timers } = fakeClock(0);
    const interceptor = throttleInterceptor({ rate: 1, burst: 2, maxOrigins: 2, clock });
    const server = origin();
    const dispatch = interceptor(server.dispatch);
    const handler = { onResponseEnd() {}, onResponseError() {} };
    const send = (o: string) => dispatch({ origin: o, path: '/', method: 'GET' }, handler);
    send('http://a.test');
    send('http://a.test'); // a's bucket is empty now
    await timers.tickAsync(0);
    expect(server.sent.length).toBe(2);
    send('http://b.test');
    send('http://c.test'); // a is busy (two running): kept beyond the bound
    await timers.tickAsync(0);
    expect(interceptor.originCount).toBe(3);
    for (const request of server.sent.splice(0)) request.finish();
    await timers.tickAsync(0);
    send('http://d.test'); // a, b idle: the least recently used go
    await timers.tickAsync(0);
    expect(interceptor.originCount).toBeLessThanOrEqual(2);
    // a was evicted with an empty bucket: it comes back as a new origin, its bucket full.
    send('http://a.test');
    send('http://a.test');
    await timers.tickAsync(0);
    expect(server.sent.filter((r) => r.origin === 'http://a.test').length).toBe(2);
  });

  it('drops an idle origin once its bucket is full again, under the bound too', async () => {
    const { clock, timers } = fakeClock(0);
    const interceptor = throttleInterceptor({ rate: 1, burst: 1, clock });
    const server = origin();
    const dispatch = interceptor(server.dispatch);
    const handler = { onResponseEnd() {}, onResponseError() {} };
    dispatch({ origin: 'http://a.test', path: '/', method: 'GET' }, handler);
    await timers.tickAsync(0);
    for (const r of server.sent.splice(0)) r.finish();
    await timers.tickAsync(500);
    dispatch({ origin: 'http://b.test', path: '/', method: 'GET' }, handler);
    expect(interceptor.originCount).toBe(2); // a's bucket is not full yet: kept
    await timers.tickAsync(1000);
    for (const r of server.sent.splice(0)) r.finish();
    dispatch({ origin: 'http://c.test', path: '/', method: 'GET' }, handler);
    expect(interceptor.originCount).toBe(2); // a is full again: dropped
  });

  it('keeps an adaptive origin while the window it adopted still counts, even past `keep`', async () => {
    const { clock, timers } = fakeClock(0);
    const interceptor = throttleInterceptor({ adaptive: { keep: 10 }, clock });
    const sent: Array<() => void> = [];
    const dispatch = interceptor(((_opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) => {
      handler.onRequestStart?.(controller, undefined);
      sent.push(() => {
        handler.onResponseStart?.(controller, 200, { 'ratelimit-policy': '"p";q=2;w=5' }, 'OK');
        handler.onResponseEnd?.(controller, {});
      });
      return true;
    }) as Dispatcher['dispatch']);
    const handler = { onResponseEnd() {}, onResponseError() {} };
    const send = (o: string) => dispatch({ origin: o, path: '/', method: 'GET' }, handler);
    send('http://a.test');
    await timers.tickAsync(0);
    for (const finish of sent.splice(0)) finish(); // a adopts 2 per 5 s
    await timers.tickAsync(1000);
    send('http://b.test');
    expect(interceptor.originCount).toBe(2); // past keep (10 ms), but a's window counts until 5 s after
    await timers.tickAsync(0);
    for (const finish of sent.splice(0)) finish();
    await timers.tickAsync(5000);
    send('http://c.test');
    expect(interceptor.originCount).toBeLessThanOrEqual(2); // a's window slid out: dropped
  });

  it('refuses a bad maxOrigins with a coded error', () => {
    for (const bad of [0, 1.5, -1, Number.NaN, '10']) {
      let error: unknown;
      try {
        throttleInterceptor({ maxOrigins: bad as number });
      } catch (e) {
        error = e;
      }
      expect(isTokenpaceError(error, 'ERR_INVALID_OPTION')).toBe(true);
    }
  });

  it('100,000 distinct origins cost bounded heap (measured with --expose-gc in a child process)', async () => {
    const child = fileURLToPath(new URL('./interceptor-origins-child.ts', import.meta.url));
    const run = async (maxOrigins: number) => {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['--expose-gc', '--import', 'tsx', child, '100000', String(maxOrigins)],
        { timeout: 120_000 },
      );
      const result = JSON.parse(stdout) as { n: number; kept: number; bytesPerOrigin: number };
      console.log(
        `100,000 origins, maxOrigins ${maxOrigins}: ${result.kept} kept, ${result.bytesPerOrigin.toFixed(1)} B per origin retained`,
      );
      return result;
    };
    // How many stay depends on how fast the machine sends (an origin goes once idle with a full
    // bucket), so the bound is on what the kept ones may cost: retained heap per kept origin, spread
    // over all 100,000, plus a small constant. Unbounded, it was 2,587 B for every origin.
    const bounded = await run(1000);
    expect(bounded.kept).toBeLessThanOrEqual(1000);
    expect(bounded.bytesPerOrigin).toBeLessThan(150);
    const byDefault = await run(10_000);
    expect(byDefault.kept).toBeLessThanOrEqual(10_000);
    expect(byDefault.bytesPerOrigin).toBeLessThan(700);
  }, 150_000);
});
