// The README's quick starts, run as a user would: each TypeScript block, type-stripped to plain
// JavaScript, runs in a consumer project that installed the packed tarball (`app`, the first
// argument), against loopback servers that stand in for the ones the examples name
// (http://127.0.0.1:8080: a file to download, and an API that allows 40 requests in any second).
// The database example uses the PostgreSQL on 127.0.0.1:5432 (database `test`) that CI starts.
// Each block must exit 0, and the API example must print 0 (no 429).
//
// Usage: node readme-examples.mjs APP REPO [RUNTIME...]: each block runs on each RUNTIME, the path of
// a node, bun or deno binary (scripts/runtime.sh prints them); on this Node when none is given. On Bun
// a block imports undici as 'undici/index.js', the one change the README and docs/runtimes.md tell Bun
// users to make: Bun answers 'undici' with a module of its own, whose Agent cannot compose interceptors.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';

const [app, repo, ...given] = process.argv.slice(2);
const runtimes = given.length > 0 ? given : [process.execPath];
/** How a runtime binary runs a file, and the README's code as that runtime's users write it. */
function runtimeOf(binary) {
  const kind = /(^|\/)(bun|deno)$/.exec(binary)?.[2] ?? 'node';
  return {
    kind,
    args: (file) => (kind === 'deno' ? ['run', '-A', file] : [file]),
    adapt: (code) => (kind === 'bun' ? code.replaceAll("from 'undici';", "from 'undici/index.js';") : code),
  };
}
const ts = (await import(join(repo, 'node_modules/typescript/lib/typescript.js'))).default;

const readme = readFileSync(join(repo, 'README.md'), 'utf8');
const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
if (blocks.length < 3) throw new Error(`expected the README's three quick starts, found ${blocks.length} blocks`);

// The stand-in servers: a 4 MiB file, and an API allowing 40 in any 1000 ms (a sliding log).
const file = Buffer.alloc(4 * 1024 * 1024, 7);
const arrivals = [];
let tooMany = 0;
const server = createServer((req, res) => {
  if (req.url?.startsWith('/file.bin')) {
    res.writeHead(200, { 'content-length': file.length });
    res.end(file);
    return;
  }
  const now = performance.now();
  while (arrivals.length > 0 && arrivals[0] <= now - 1000) arrivals.shift();
  if (arrivals.length >= 40) {
    tooMany++;
    res.writeHead(429, { 'retry-after': '1' });
    res.end();
    return;
  }
  arrivals.push(now);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end('{"ok":true}');
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${server.address().port}`;

let failed = 0;
for (const binary of runtimes) {
  const runtime = runtimeOf(binary);
  for (const [i, code] of blocks.entries()) {
    const js = ts.transpileModule(runtime.adapt(code).replaceAll('http://127.0.0.1:8080', base), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
    }).outputText;
    const path = join(app, `readme-${i + 1}-${runtime.kind}.mjs`);
    writeFileSync(path, js);
    // A block starts once the stand-in API's window holds no request of the block before it.
    const windowClearsMs = arrivals.length > 0 ? arrivals[arrivals.length - 1] + 1000 - performance.now() : 0;
    if (windowClearsMs > 0) await new Promise((resolve) => setTimeout(resolve, windowClearsMs));
    const started = performance.now();
    // The child runs while this process keeps serving, so it is spawned, not run synchronously.
    const result = await new Promise((resolve) => {
      const p = spawn(binary, runtime.args(path), { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      p.stdout.on('data', (d) => (out += d));
      p.stderr.on('data', (d) => (err += d));
      const timer = setTimeout(() => p.kill('SIGKILL'), 60_000);
      p.on('close', (status) => {
        clearTimeout(timer);
        resolve({ status, out, err });
      });
    });
    const ms = Math.round(performance.now() - started);
    const first = code.split('\n').find((l) => l.includes("from 'tokenpace'")) ?? '';
    console.log(
      `README block ${i + 1} on ${runtime.kind} (${first.trim()}): exit ${result.status} in ${ms} ms; printed ${JSON.stringify(result.out.trim())}`,
    );
    if (result.status !== 0) {
      failed++;
      console.error(result.err);
    }
  }
}
server.close();
console.log(`the stand-in API answered ${tooMany} x 429`);
if (tooMany > 0) failed++;
if (failed > 0) process.exit(1);
