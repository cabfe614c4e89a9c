/**
 * Child process of interceptor-origins.test.ts (run with --expose-gc): sends one request to each
 * of N distinct origins through throttleInterceptor over a dispatch that answers at once, and
 * prints the heap retained per origin as JSON.
 */

import type { Dispatcher } from 'undici';
import { throttleInterceptor } from '../../src/http/interceptor.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');

const n = Number(process.argv[2] ?? 100_000);
const maxOrigins = process.argv[3] === undefined ? undefined : Number(process.argv[3]);
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
const answer = (_opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean => {
  handler.onRequestStart?.(controller, undefined);
  queueMicrotask(() => {
    handler.onResponseStart?.(controller, 200, {}, 'OK');
    handler.onResponseEnd?.(controller, {});
  });
  return true;
};

async function heap(): Promise<number> {
  for (let i = 0; i < 4; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc?.();
  }
  return process.memoryUsage().heapUsed;
}

const interceptor = throttleInterceptor({ rate: 10, burst: 2, maxOrigins });
const dispatch = interceptor(answer as Dispatcher['dispatch']);
const one = (origin: string) =>
  new Promise<void>((resolve, reject) => {
    dispatch(
      { origin, path: '/', method: 'GET' },
      { onResponseEnd: () => resolve(), onResponseError: (_c, e) => reject(e) },
    );
  });

for (let i = 0; i < 2000; i++) await one(`http://warm${i}.test`);
const before = await heap();
for (let done = 0; done < n; done += 1000) {
  const batch: Promise<void>[] = [];
  for (let i = done; i < done + 1000 && i < n; i++) batch.push(one(`http://o${i}.test`));
  await Promise.all(batch);
}
const after = await heap();
process.stdout.write(JSON.stringify({ n, kept: interceptor.originCount, bytesPerOrigin: (after - before) / n }));
