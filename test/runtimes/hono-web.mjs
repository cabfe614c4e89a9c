// honoRateLimit on the runtime's own server (Bun.serve, Deno.serve), from the built package: run by
// hono-web.test.ts as `bun hono-web.mjs <dist/index.js>` or `deno run -A hono-web.mjs <dist/index.js>`.
// Prints one JSON line of what a real client (the runtime's fetch) saw.
import { Hono } from 'hono';

const deno = globalThis.Deno;
const built = deno === undefined ? process.argv[2] : deno.args[0];
const { honoRateLimit } = await import(new URL(`file://${built}`).href);

const app = new Hono();
const limited = (options) => honoRateLimit({ policyName: 'p', ...options });
app.use('/burst', limited({ rate: 0.001, burst: 2 }));
app.use('/held', limited({ rate: 10, burst: 1, maxWait: '2s' }));
app.use('/logins', limited({ rate: 0.001, burst: 1, skipSuccessfulRequests: true }));
app.all('*', (c) => c.json({ rateLimit: c.get('rateLimit') ?? null }, Number(c.req.header('x-status') ?? 200)));
// Hono's bindings (`c.env`) are what each server hands its handler: Bun's server, Deno's ServeHandlerInfo.
const server =
  deno === undefined
    ? Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: app.fetch })
    : deno.serve({ port: 0, hostname: '127.0.0.1', onListen() {} }, app.fetch);
const port = deno === undefined ? server.port : server.addr.port;
const base = `http://127.0.0.1:${port}`;

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
const runtime = deno === undefined ? `bun ${Bun.version}` : `deno ${deno.version.deno}`;
console.log(JSON.stringify({ runtime, burst, held, logins }));
await (deno === undefined ? server.stop(true) : server.shutdown());
