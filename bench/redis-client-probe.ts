/**
 * One Redis contender's decisions one call at a time, in a process of its own, for instruction
 * counts of the client side under callgrind (bench/keyed.ts; the server runs outside valgrind):
 *
 *   valgrind --tool=callgrind node --single-threaded --import tsx bench/redis-client-probe.ts <contender> <port> <n>
 *
 * It warms up (3,000 calls), then makes n more. The instructions per call are the difference of two
 * runs (n and a larger n) over the difference of n: startup, compilation and warm-up cancel out.
 * It prints the n calls' wall time and CPU time per call, as JSON (bench/keyed.ts runs it so, each
 * contender alone in a process, for the one-call-at-a-time figures).
 * Half the keys are drained (refused), as in the bench.
 */
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { createClient } from 'redis';
import { KeyedLimiter, RedisStore } from '../src/index.js';

const [which = 'ours-ioredis', portArg = '6379', nArg = '0'] = process.argv.slice(2);
const port = Number(portArg);
const n = Number(nArg);
const burst = 1e9;
const keys = Array.from({ length: 1000 }, (_, i) => (i % 2 === 0 ? `open:client:${i}` : `drained:client:${i}`));
let cursor = 0;
const next = () => keys[cursor++ % keys.length] as string;

const nodeRedis = which.endsWith('node-redis');
const io = nodeRedis ? undefined : new Redis({ port, host: '127.0.0.1' });
const nr = nodeRedis ? createClient({ socket: { port, host: '127.0.0.1' } }) : undefined;
await nr?.connect();
const client = (io ?? nr) as Redis;
const prefix = `probe-${which}`;
let decide: () => Promise<unknown>;
if (which.startsWith('ours')) {
  const limiter = new KeyedLimiter({
    rate: 0.001,
    burst,
    store: new RedisStore({ client, prefix, onError: 'deny', timeout: 60_000 }),
  });
  for (const key of keys.filter((k) => k.startsWith('drained:'))) await limiter.tryTake(key, burst);
  decide = () => limiter.tryTake(next());
} else if (which.startsWith('rlf')) {
  const rlf = new RateLimiterRedis({
    storeClient: client,
    useRedisPackage: nodeRedis,
    points: burst,
    duration: 3600,
    keyPrefix: prefix,
  });
  for (const key of keys.filter((k) => k.startsWith('drained:'))) await rlf.consume(key, burst).catch(() => {});
  decide = () =>
    rlf.consume(next()).catch((e: unknown) => {
      if (e instanceof Error) throw e;
      return false;
    });
} else if (which.startsWith('store')) {
  const store = new RedisStore({ client, prefix, onError: 'deny', timeout: 60_000 });
  const bucket = { ratePerSecond: 0.001, burst };
  const op = (key: string, cost: number) => ({
    mode: 'try' as const,
    key,
    cost,
    bucket,
    global: undefined,
    maxWaitMs: 0,
  });
  for (const key of keys.filter((k) => k.startsWith('drained:'))) await store.decide(op(key, burst));
  decide = () => store.decide(op(next(), 1));
} else if (which.startsWith('ping')) {
  decide = () => client.ping();
} else {
  throw new Error(`redis-client-probe: no contender ${which}`);
}
for (let i = 0; i < 3000; i++) await decide();
const cpu = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < n; i++) await decide();
const wallNs = ((performance.now() - t0) * 1e6) / Math.max(1, n);
const used = process.cpuUsage(cpu);
// The last line: what bench/keyed.ts reads when it runs each contender alone in a process.
console.log(JSON.stringify({ wallNs, cpuNs: ((used.user + used.system) * 1000) / Math.max(1, n) }));
io?.disconnect();
await nr?.close();
