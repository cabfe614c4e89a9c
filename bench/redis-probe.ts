/**
 * Where one Redis decision's time goes, one call at a time (a probe, not part of `npm run bench`):
 *
 *   npx tsx bench/redis-probe.ts [rounds]
 *
 * On a redis-server started for it, each contender runs alone for a sample, in interleaved rounds;
 * per call it reports the wall time, the client's CPU (process.cpuUsage), redis-server's CPU (its
 * /proc stat: the script, the command and the socket work) and the command's own time in Redis
 * (`INFO commandstats`, usec_per_call). Medians over the rounds.
 */
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { createClient } from 'redis';
import { KeyedLimiter, RedisStore } from '../src/index.js';
import { KEYED_LUA } from '../src/keyed/redis-script.js';
import { LUA_PRELUDE } from '../src/redis/lua-script.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { median } from './harness.js';

const rounds = Number(process.argv[2] ?? 5);
const only = process.argv[3];
const server = await startRedis();
const io = new Redis({ port: server.port, host: '127.0.0.1' });
const io2 = new Redis({ port: server.port, host: '127.0.0.1' });
const nr = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
await nr.connect();
const pid = server.process.pid as number;
const ticks = 100; // USER_HZ
function serverCpuUs(): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return ((Number(f[11]) + Number(f[12])) * 1e6) / ticks;
}
async function commandstats(): Promise<Map<string, { calls: number; usec: number }>> {
  const text = String(await io2.info('commandstats'));
  const out = new Map<string, { calls: number; usec: number }>();
  for (const m of text.matchAll(/cmdstat_(\w+(?:\|\w+)?):calls=(\d+),usec=(\d+)/g)) {
    out.set(m[1] as string, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return out;
}

const keys = Array.from({ length: 1000 }, (_, i) => (i % 2 === 0 ? `open:client:${i}` : `drained:client:${i}`));
let cursor = 0;
const next = () => keys[cursor++ % keys.length] as string;
const burst = 1e9;
const ours = new KeyedLimiter({
  rate: 0.001,
  burst,
  store: new RedisStore({ client: io, prefix: 'p1', onError: 'deny', timeout: 5000 }),
});
const oursNr = new KeyedLimiter({
  rate: 0.001,
  burst,
  store: new RedisStore({ client: nr, prefix: 'p2', onError: 'deny', timeout: 5000 }),
});
const rlf = new RateLimiterRedis({ storeClient: io, points: burst, duration: 3600, keyPrefix: 'r1' });
const rlfNr = new RateLimiterRedis({
  storeClient: nr,
  points: burst,
  duration: 3600,
  keyPrefix: 'r2',
  useRedisPackage: true,
});
for (const key of keys.filter((k) => k.startsWith('drained:'))) {
  await ours.tryTake(key, burst);
  await oursNr.tryTake(key, burst);
  await rlf.consume(key, burst);
  await rlfNr.consume(key, burst);
}
const sha = String(await io.script('LOAD', `${LUA_PRELUDE}\n${KEYED_LUA}`));
const storeIo = ours.store as RedisStore;
const contenders: [string, () => Promise<unknown>][] = [
  ['ours ioredis', () => ours.tryTake(next())],
  ['rlf ioredis', () => rlf.consume(next()).catch(() => false)],
  ['ours node-redis', () => oursNr.tryTake(next())],
  ['rlf node-redis', () => rlfNr.consume(next()).catch(() => false)],
  [
    'store.decide ioredis',
    () =>
      storeIo.decide({
        mode: 'try',
        key: `p:${next()}`,
        cost: 1,
        bucket: { ratePerSecond: 0.001, burst },
        global: undefined,
        maxWaitMs: 0,
      } as never),
  ],
  ['raw evalsha ioredis', () => io.evalsha(sha, 1, `p3:k:${next()}`, '', '0.001:1000000000', '', 't1')],
  ['ping ioredis', () => io.ping()],
  ['ping node-redis', () => nr.ping()],
];
const picked = only ? contenders.filter(([n]) => n.includes(only)) : contenders;
const N = Number(process.env.PROBE_N ?? 10000);
const rows = new Map<string, { wall: number[]; cpu: number[]; srv: number[]; cmd: number[]; cmdName: string[] }>();
for (let r = 0; r < rounds + 1; r++) {
  for (const [name, call] of picked) {
    const before = await commandstats();
    const s0 = serverCpuUs();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < N; i++) await call();
    const wall = ((performance.now() - t0) * 1000) / N;
    const c = process.cpuUsage(c0);
    const srv = (serverCpuUs() - s0) / N;
    const after = await commandstats();
    let best = { name: '', calls: 0, usec: 0 };
    for (const [cmd, v] of after) {
      const b = before.get(cmd) ?? { calls: 0, usec: 0 };
      const calls = v.calls - b.calls;
      const top = /^(evalsha|eval|ping)$/.test(cmd);
      if (calls > 0 && top && (best.name === '' || calls > best.calls))
        best = { name: cmd, calls, usec: v.usec - b.usec };
    }
    if (r === 0) continue; // warm-up
    let row = rows.get(name);
    if (!row) {
      row = { wall: [], cpu: [], srv: [], cmd: [], cmdName: [] };
      rows.set(name, row);
    }
    row.wall.push(wall);
    row.cpu.push((c.user + c.system) / N);
    row.srv.push(srv);
    row.cmd.push(best.usec / Math.max(1, best.calls));
    row.cmdName[0] = `${best.name} x${(best.calls / N).toFixed(2)}`;
  }
}
const f = (xs: number[]) => `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)})`;
console.log(`load ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
console.log('contender | wall us | client CPU us | server CPU us | command usec_per_call | command');
for (const [name, row] of rows)
  console.log(`${name} | ${f(row.wall)} | ${f(row.cpu)} | ${f(row.srv)} | ${f(row.cmd)} | ${row.cmdName[0]}`);
io.disconnect();
io2.disconnect();
await nr.close();
await server.stop();
