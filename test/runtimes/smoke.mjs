// The smoke suite: each part of tokenpace used once, as a user would, from the installed package, on
// whichever runtime runs this file (Node, Bun or Deno; docs/runtimes.md lists what each supports).
// Run from a project where `tokenpace` is installed (with undici, ioredis, redis, fastify and koa beside it):
//   node smoke.mjs | bun smoke.mjs | deno run -A smoke.mjs
// It starts its own redis-server on a free loopback port. Plain node:assert and a runner of a few lines,
// so that one file runs unchanged on the three runtimes: each case prints `ok` or `not ok` with its name
// and the error, and the closing line counts them; the exit code is 1 if any case failed. Times are real
// and the checks on them tolerant: the pace must not be faster than the cap, and not far slower.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tokenpace from 'tokenpace';

const { isTokenpaceError, KeyedLimiter, rateLimit, RedisStore, Scheduler, Throttle, ThrottleGroup, TokenBucket } =
  tokenpace;

const runtime = globalThis.Bun
  ? `bun ${globalThis.Bun.version}`
  : globalThis.Deno
    ? `deno ${globalThis.Deno.version.deno}`
    : `node ${process.versions.node}`;
const onBun = runtime.startsWith('bun');

const CASE_TIMEOUT_MS = 15_000;
let passed = 0;
let failed = 0;

/** Runs one case: prints `ok <name> (<ms>)` or `not ok <name>: <error>`, never throws. */
async function check(name, fn) {
  const started = performance.now();
  let timer;
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`did not finish within ${CASE_TIMEOUT_MS} ms`)), CASE_TIMEOUT_MS);
      }),
    ]);
    passed++;
    console.log(`ok ${name} (${Math.round(performance.now() - started)} ms)`);
  } catch (error) {
    failed++;
    console.log(`not ok ${name}: ${error?.stack ?? error}`);
  } finally {
    clearTimeout(timer);
  }
}

const KiB = 1024;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** `bytes` in `chunkBytes` pieces, numbered so that order and content can be checked. */
function payload(bytes, chunkBytes = 16 * KiB) {
  const chunks = [];
  for (let at = 0; at < bytes; at += chunkBytes) {
    const chunk = new Uint8Array(Math.min(chunkBytes, bytes - at));
    for (let i = 0; i < chunk.length; i++) chunk[i] = (at + i) % 251;
    chunks.push(chunk);
  }
  return chunks;
}

function assertPayload(received, bytes) {
  assert.equal(received.length, bytes, 'every byte arrives once');
  for (let i = 0; i < received.length; i += 997) assert.equal(received[i], i % 251, `byte ${i} in order`);
}

/** Elapsed seconds for `bytes` through a cap of `rate` with `burst`: not less than (bytes - burst) / rate. */
function assertPace(elapsedMs, bytes, rate, burst) {
  const floorMs = ((bytes - burst) / rate) * 1000;
  assert.ok(
    elapsedMs >= floorMs * 0.97,
    `took ${Math.round(elapsedMs)} ms, faster than the cap allows (${floorMs} ms)`,
  );
  assert.ok(
    elapsedMs <= floorMs * 3 + 1000,
    `took ${Math.round(elapsedMs)} ms, far slower than the cap (${floorMs} ms)`,
  );
}

/** A Node Writable that keeps what it receives. */
function collector() {
  const parts = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      parts.push(chunk);
      callback();
    },
  });
  return { sink, bytes: () => new Uint8Array(Buffer.concat(parts)) };
}

/** Everything a web ReadableStream yields, as one array. */
async function readAll(readable) {
  const parts = [];
  const reader = readable.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
  }
  return new Uint8Array(Buffer.concat(parts));
}

function webSource(chunks) {
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++]);
      else controller.close();
    },
  });
}

/** A port that was free a moment ago on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A loopback HTTP server for `handler`; resolves to its base URL and a close function. */
async function serve(handler) {
  const server = createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** A redis-server of its own on a free loopback port, no persistence. */
async function startRedis() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tokenpace-smoke-'));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const error = new Promise((_, reject) =>
    child.once('error', (e) => reject(new Error(`redis-server could not start (${e.message}): install it`))),
  );
  const { Redis } = await import('ioredis');
  const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
  probe.on('error', () => {});
  for (let i = 0; ; i++) {
    try {
      await Promise.race([probe.connect().then(() => probe.ping()), error]);
      break;
    } catch (e) {
      if (i >= 50) throw e;
      probe.disconnect();
      await sleep(100);
    }
  }
  probe.disconnect();
  return {
    port,
    stop: async () => {
      child.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

console.log(`# tokenpace smoke suite on ${runtime}`);

await check('TokenBucket: starts full, refuses past the burst, refills at the rate', async () => {
  // 5/s: a token comes back 200 ms after it was taken, so a stalled moment cannot refill one early.
  const bucket = new TokenBucket({ rate: 5, burst: 2 });
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), false);
  const delayMs = bucket.delayFor(1);
  assert.ok(delayMs > 0 && delayMs <= 200, `delayFor(1) is ${delayMs} ms at 5/s`);
  await sleep(250);
  assert.equal(bucket.tryTake(), true);
  assert.throws(
    () => bucket.tryTake(3),
    (error) => isTokenpaceError(error, 'ERR_COST_EXCEEDS_CAPACITY'),
  );
});

const RATE = 256 * KiB;
const BURST = 32 * KiB;
const BYTES = 160 * KiB; // (160 - 32) / 256 = 0.5 s at the cap

await check('Throttle (Node stream): every byte in order, at the cap', async () => {
  const cap = new Throttle({ rate: RATE, burst: BURST });
  const out = collector();
  const started = performance.now();
  await pipeline(Readable.from(payload(BYTES)), cap, out.sink);
  assertPace(performance.now() - started, BYTES, RATE, BURST);
  assertPayload(out.bytes(), BYTES);
  assert.equal(cap.counters.bytes, BYTES);
});

await check('WebThrottle (Web stream): every byte in order, at the cap', async () => {
  assert.equal(typeof tokenpace.WebThrottle, 'function', 'tokenpace exports WebThrottle');
  const cap = new tokenpace.WebThrottle({ rate: RATE, burst: BURST });
  const started = performance.now();
  const received = await readAll(webSource(payload(BYTES)).pipeThrough(cap));
  assertPace(performance.now() - started, BYTES, RATE, BURST);
  assertPayload(received, BYTES);
  assert.equal(cap.counters.bytes, BYTES);
});

await check("WebThrottle on the runtime's own fetch body", async () => {
  const chunks = payload(BYTES);
  const server = await serve((_req, res) => {
    res.writeHead(200, { 'content-length': BYTES });
    res.end(Buffer.concat(chunks));
  });
  try {
    const started = performance.now();
    const response = await fetch(`${server.base}/file.bin`);
    const received = await readAll(response.body.pipeThrough(new tokenpace.WebThrottle({ rate: RATE, burst: BURST })));
    assertPace(performance.now() - started, BYTES, RATE, BURST);
    assertPayload(received, BYTES);
  } finally {
    await server.close();
  }
});

/** Two members of one group, each sending half of BYTES: together at the cap, each about half of it. */
async function groupCase(members) {
  const each = BYTES / 2;
  const started = performance.now();
  const finished = [];
  await Promise.all(
    members.map(async ({ form, member }) => {
      let received;
      if (form === 'node') {
        const out = collector();
        await pipeline(Readable.from(payload(each)), member, out.sink);
        received = out.bytes();
      } else {
        received = await readAll(webSource(payload(each)).pipeThrough(member));
      }
      finished.push(performance.now() - started);
      assertPayload(received, each);
    }),
  );
  assertPace(performance.now() - started, BYTES, RATE, BURST);
  assert.equal(members[0].member.counters.bytes + members[1].member.counters.bytes, BYTES);
  // Fair shares: the first to finish did not take the whole cap and leave the other the rest.
  const [first, last] = finished.sort((a, b) => a - b);
  assert.ok(first >= last * 0.6, `members finished at ${Math.round(first)} and ${Math.round(last)} ms`);
}

await check('ThrottleGroup: two Node-stream members share one cap, each about half', async () => {
  const group = new ThrottleGroup({ rate: RATE, burst: BURST });
  await groupCase([
    { form: 'node', member: group.throttle() },
    { form: 'node', member: group.throttle() },
  ]);
});

await check('ThrottleGroup: a Node-stream and a Web-stream member share one cap, each about half', async () => {
  const group = new ThrottleGroup({ rate: RATE, burst: BURST });
  assert.equal(typeof group.webThrottle, 'function', 'a ThrottleGroup has webThrottle()');
  await groupCase([
    { form: 'node', member: group.throttle() },
    { form: 'web', member: group.webThrottle() },
  ]);
});

await check('Scheduler: cost holds concurrency, maxQueue refuses at once, the rate paces', async () => {
  const scheduler = new Scheduler({ concurrency: 2, maxQueue: 2 });
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  let running = 0;
  let most = 0;
  const job = (ms) => async () => {
    running++;
    most = Math.max(most, running);
    await (ms === undefined ? gate : sleep(ms));
    running--;
  };
  const heavy = scheduler.schedule(job(), { cost: 2 }); // holds both units of concurrency
  const light = [scheduler.schedule(job(20)), scheduler.schedule(job(20))]; // wait: the queue is now full
  await assert.rejects(scheduler.schedule(job(0)), (error) => isTokenpaceError(error, 'ERR_QUEUE_FULL'));
  assert.equal(scheduler.size, 2);
  assert.equal(most, 1);
  release();
  await Promise.all([heavy, ...light]);
  assert.equal(most, 2, 'the two light jobs ran together once the heavy one ended');

  const paced = new Scheduler({ rate: 20, burst: 1 });
  const started = performance.now();
  await Promise.all(Array.from({ length: 5 }, () => paced.schedule(async () => {})));
  const elapsedMs = performance.now() - started;
  assert.ok(elapsedMs >= 190 && elapsedMs < 1500, `5 jobs at 20/s, burst 1, took ${Math.round(elapsedMs)} ms`);
});

/** burst 2 at 1/s: two admitted, the third refused with the time to wait; another key is apart. */
async function keyedCase(limiter) {
  assert.equal((await limiter.tryTake('a')).allowed, true);
  assert.equal((await limiter.tryTake('a')).allowed, true);
  const refused = await limiter.tryTake('a');
  assert.equal(refused.allowed, false);
  assert.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= 1000, `retryAfterMs ${refused.retryAfterMs}`);
  assert.equal((await limiter.tryTake('b')).allowed, true);
}

await check('KeyedLimiter in memory', () => keyedCase(new KeyedLimiter({ rate: 1, burst: 2 })));

let redis;
await check('redis-server starts on a free port', async () => {
  redis = await startRedis();
});
const prefix = `smoke-${runtime.replace(/\W/g, '-')}-${Date.now()}`;
// A call slower than the store's timeout follows onError ('deny' here): on a loaded machine the first
// ones (connecting, loading the script) can outlast the default, and a refusal must mean the bucket's.
const STORE_TIMEOUT = '5s';

await check('KeyedLimiter on RedisStore with an ioredis client', async () => {
  assert.ok(redis, 'no redis-server');
  const { Redis } = await import('ioredis');
  const client = new Redis({ port: redis.port, host: '127.0.0.1' });
  try {
    await client.ping();
    const store = new RedisStore({ client, prefix, onError: 'deny', timeout: STORE_TIMEOUT });
    await keyedCase(new KeyedLimiter({ rate: 1, burst: 2, store }));
  } finally {
    await client.quit();
  }
});

await check('KeyedLimiter on RedisStore with a node-redis client', async () => {
  assert.ok(redis, 'no redis-server');
  const { createClient } = await import('redis');
  const client = createClient({ socket: { port: redis.port, host: '127.0.0.1' } });
  await client.connect();
  try {
    const store = new RedisStore({ client, prefix: `${prefix}-node-redis`, onError: 'deny', timeout: STORE_TIMEOUT });
    await keyedCase(new KeyedLimiter({ rate: 1, burst: 2, store }));
  } finally {
    await client.quit();
  }
});

await redis?.stop();

await check('rateLimit on node:http: 429 with Retry-After and a problem body past the burst', async () => {
  const limit = rateLimit({ rate: 1, burst: 2 });
  const server = await serve((req, res) => limit(req, res, () => res.end('ok')));
  try {
    const statuses = [];
    let refused;
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${server.base}/`);
      statuses.push(response.status);
      if (response.status === 429) refused = response;
      else await response.text();
    }
    assert.deepEqual(statuses, [200, 200, 429]);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.equal((await refused.json()).status, 429);
  } finally {
    await server.close();
  }
});

/** GETs `base` three times; the statuses and the refused response. */
async function threeGets(base) {
  const statuses = [];
  let refused;
  for (let i = 0; i < 3; i++) {
    const response = await fetch(`${base}/`);
    statuses.push(response.status);
    if (response.status === 429) refused = response;
    else await response.text();
  }
  return { statuses, refused };
}

await check('rateLimitPlugin (tokenpace/fastify) on a real Fastify server: 429 past the burst', async () => {
  const { default: Fastify } = await import('fastify');
  const { rateLimitPlugin } = await import('tokenpace/fastify');
  const app = Fastify();
  await app.register(rateLimitPlugin, { rate: 1, burst: 2 });
  app.get('/', async () => ({ ok: true }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const { statuses, refused } = await threeGets(`http://127.0.0.1:${app.server.address().port}`);
    assert.deepEqual(statuses, [200, 200, 429]);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal((await refused.json()).status, 429);
  } finally {
    await app.close();
  }
});

await check('koaRateLimit on a real Koa server: 429 past the burst, the refused promise settled', async () => {
  const { default: Koa } = await import('koa');
  const app = new Koa();
  let settled = 0;
  app.use(async (_ctx, next) => {
    await next();
    settled++; // a refused request's middleware promise settles too
  });
  app.use(tokenpace.koaRateLimit({ rate: 1, burst: 2 }));
  app.use((ctx) => {
    ctx.body = 'ok';
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const { statuses, refused } = await threeGets(`http://127.0.0.1:${server.address().port}`);
    assert.deepEqual(statuses, [200, 200, 429]);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal((await refused.json()).status, 429);
    assert.equal(settled, 3);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

if (onBun) {
  await check(
    "Bun: 'undici' is Bun's own module, whose Agent has no compose (so docs/runtimes.md says undici/index.js)",
    async () => {
      const builtin = await import('undici');
      assert.equal(typeof new builtin.Agent().compose, 'undefined');
    },
  );
}

await check('throttleInterceptor on an undici Agent paces request() and undici fetch()', async () => {
  // The documented way on Bun: the package by its file, since 'undici' is Bun's own module there.
  const { Agent, fetch: undiciFetch, request } = await import(onBun ? 'undici/index.js' : 'undici');
  const server = await serve((_req, res) => res.end('{"ok":true}'));
  const dispatcher = new Agent().compose(tokenpace.throttleInterceptor({ rate: 20, burst: 1 }));
  try {
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        const { statusCode, body } = await request(`${server.base}/items/${i}`, { dispatcher });
        await body.text();
        return statusCode;
      }),
    );
    const fetched = await undiciFetch(`${server.base}/items/4`, { dispatcher });
    assert.equal(fetched.status, 200);
    await fetched.text();
    const elapsedMs = performance.now() - started;
    assert.deepEqual(answers, [200, 200, 200, 200]);
    assert.ok(elapsedMs >= 190 && elapsedMs < 2000, `5 requests at 20/s, burst 1, took ${Math.round(elapsedMs)} ms`);
  } finally {
    await dispatcher.close();
    await server.close();
  }
});

console.log(`smoke on ${runtime}: ${passed} passed, ${failed} failed`);
// For CI's closing line (.ci/run), in the shape of vitest's JSON report.
if (process.env.TOKENPACE_SMOKE_REPORT) {
  const report = { runtime, numPassedTests: passed, numFailedTests: failed, numPendingTests: 0 };
  writeFileSync(process.env.TOKENPACE_SMOKE_REPORT, `${JSON.stringify(report)}\n`);
}
process.exitCode = failed > 0 ? 1 : 0;
