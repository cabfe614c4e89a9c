// honoRateLimit on Bun's own server (Bun.serve), from the built package: run by hono-bun.test.ts as
// `bun hono-bun.mjs <dist/index.js>`. Prints one JSON line of what a real client (Bun's fetch) saw.
import { Hono } from 'hono';

const { honoRateLimit } = await import(process.argv[2]);

const app = new Hono();
const limited = (options) => honoRateLimit({ policyName: 'p', ...options });
app.use('/burst', limited({ rate: 0.001, burst: 2 }));
app.use('/held', limited({ rate: 10, burst: 1, maxWait: '2s' }));
app.use('/logins', limited({ rate: 0.001, burst: 1, skipSuccessfulRequests: true }));
app.all('*', (c) => c.json({ rateLimit: c.get('rateLimit') ?? null }, Number(c.req.header('x-status') ?? 200)));
const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch });
const base = `http://127.0.0.1:${server.port}`;

const get = async (path, status) => {
  const started = performance.now();
  const response = await fetch(`${base}${path}`, { headers: status ? { 'x-status': String(status) } : {} });
  const body = await response.json();
  return {
    status: response.status,
    headers: Object.fromEntries(response.headers),
    body,
    ms: Math.round(performance.now() - started),
  };
};

const burst = [];
for (let i = 0; i < 3; i++) burst.push(await get('/burst'));
const held = await Promise.all([get('/held'), get('/held')]);
const logins = [];
for (const status of [200, 200, 401, 200]) logins.push(await get('/logins', status));
console.log(JSON.stringify({ runtime: `bun ${Bun.version}`, burst, held, logins }));
server.stop(true);
