/**
 * Every TypeScript block of docs/ that a reader would run runs here, as a reader would run it, and
 * must exit 0 within {@link TIME_LIMIT_MS}. test/readme.test.ts type-checks the same blocks; the
 * README's own blocks run against the packed package in .ci/readme-examples.mjs.
 *
 * - Which blocks: a fence whose info string starts with `ts` or `typescript`, except those marked
 *   `no-run` (type-checked, not run: an interface shown for its fields, a fragment) or `no-check`
 *   (neither).
 * - How: each block is a module of its own, run by `node` in an empty temporary folder, with
 *   test/helpers/loopback-only.mjs preloaded (a connection or a name lookup for anything but
 *   127.0.0.1, or to port 6379, ends the process). TypeScript strips the types, file by file, from
 *   the block and from src/ (as tsx would; test/readme.test.ts does the type-checking), and
 *   `'tokenpace'`, `'tokenpace/p-queue'` and `'tokenpace/fastify'` are src/'s: nothing is built.
 * - Servers the blocks name: `http://127.0.0.1:8080` is a loopback server of this file
 *   (`/file.bin`: 1 MiB; any other path: 200 with `{"ok":true}`); `redis://127.0.0.1:6379`,
 *   `new Redis()` and `createClient()` reach a redis-server this file starts on a free port (also
 *   in `REDIS_URL`); PostgreSQL is the one on 127.0.0.1:5432, database `test`, user `postgres` (`PGHOST`, ...).
 * - A block that names a host other than 127.0.0.1 or localhost fails without running.
 * - A block that calls `.listen(8080)` is a server: it runs on a free port instead, must answer
 *   `GET /` with a 2xx, and is then stopped.
 * - A comment `// prints X` after a statement says what it prints: a block with such comments must
 *   print exactly those lines, in order. X ends at the first `: ` (so the comment can go on), or is
 *   a JSON string (`// prints "a: b"`).
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { typescriptBlocks } from './helpers/markdown-blocks.js';
import { freePort, type RedisServer, startRedis } from './helpers/redis-server.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The longest a block may run (its own work is a few seconds at most; this is for a loaded machine). */
const TIME_LIMIT_MS = 30_000;
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

interface DocBlock {
  /** The Markdown file, relative to the repository. */
  doc: string;
  /** The line of the opening fence (1-based). */
  line: number;
  info: string;
  code: string;
}

/**
 * Blocks known to fail here, each waiting for the fix to its doc (listed in the change that added
 * it): they must still fail, so that the entry goes once the doc is fixed. `contains` picks the
 * block by a line of its code.
 */
const PENDING: readonly { doc: string; contains: string; why: string }[] = [];

/** The fenced TypeScript blocks of one doc, with the doc's path. */
function blocksOfDoc(doc: string, markdown: string): DocBlock[] {
  return typescriptBlocks(markdown).map((block) => ({ doc, ...block }));
}

/** Whether a block is run: not marked `no-run` or `no-check`. */
function isRunnable(block: Pick<DocBlock, 'info'>): boolean {
  return !/\bno-(run|check)\b/.test(block.info);
}

/** The hosts a block's URLs name other than 127.0.0.1 and localhost (a `${...}` host is not judged here). */
function foreignHosts(code: string): string[] {
  const hosts: string[] = [];
  for (const match of code.matchAll(/\b[a-z][a-z0-9+.-]*:\/\/(?:[^\s@/'"`]*@)?(\[[^\]\s]*\]|[^\s/:'"`?#]+)/gi)) {
    const host = (match[1] as string).toLowerCase();
    if (!LOOPBACK.has(host) && !host.startsWith('$')) hosts.push(host);
  }
  return [...new Set(hosts)];
}

/** The lines a block says it prints (`// prints X`), or undefined when it says nothing. */
function statedOutput(code: string): string[] | undefined {
  const lines: string[] = [];
  for (const match of code.matchAll(/\/\/ prints (.*)$/gm)) {
    const text = (match[1] as string).trim();
    const quoted = /^"(?:[^"\\]|\\.)*"/.exec(text);
    lines.push(quoted ? (JSON.parse(quoted[0]) as string) : (text.split(': ')[0] as string));
  }
  return lines.length > 0 ? lines : undefined;
}

const scratch = join(root, '.tmp', 'docs-examples');
/** src/ as JavaScript, file by file, for the blocks to import. */
const stripped = join(scratch, 'src');
const strippedUrl = (path: string) => pathToFileURL(join(stripped, path)).href;

/** Writes src/'s modules with their types stripped to {@link stripped}. */
function stripSources(): void {
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(root, 'src', dir))) {
      const path = join(dir, name);
      if (statSync(join(root, 'src', path)).isDirectory()) walk(path);
      else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) {
        const { outputText } = ts.transpileModule(readFileSync(join(root, 'src', path), 'utf8'), {
          fileName: path,
          compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2023, verbatimModuleSyntax: true },
        });
        mkdirSync(dirname(join(stripped, path)), { recursive: true });
        writeFileSync(join(stripped, path.replace(/\.ts$/, '.js')), outputText);
      }
    }
  };
  walk('');
}

/** The block as this file runs it: imports of tokenpace from src/, stand-in servers in place of the ones it names. */
function prepare(code: string, stand: { base: string; redisUrl: string; serverPort?: number }): string {
  let out = code
    .replace(/(\bfrom\s*|\bimport\s*\(\s*)(['"])tokenpace\/p-queue\2/g, `$1'${strippedUrl('scheduler/p-queue.js')}'`)
    .replace(/(\bfrom\s*|\bimport\s*\(\s*)(['"])tokenpace\/fastify\2/g, `$1'${strippedUrl('http/fastify-plugin.js')}'`)
    .replace(/(\bfrom\s*|\bimport\s*\(\s*)(['"])tokenpace\2/g, `$1'${strippedUrl('index.js')}'`)
    .replaceAll('http://127.0.0.1:8080', stand.base)
    .replaceAll('redis://127.0.0.1:6379', stand.redisUrl)
    .replace(/\bnew Redis\(\s*\)/g, 'new Redis(process.env.REDIS_URL)')
    .replace(/\bcreateClient\(\s*\)/g, 'createClient({ url: process.env.REDIS_URL })');
  if (stand.serverPort !== undefined) out = out.replace(/\.listen\(8080\b/g, `.listen(${stand.serverPort}`);
  return out;
}

/** Whether a block is a server: it listens on 8080 and keeps running. */
const isServer = (code: string) => /\.listen\(8080\b/.test(code);

/** How a child process ended. */
interface Exit {
  status: number | null;
  signal: string | null;
}

interface Outcome {
  /** Why the block failed, or undefined when it passed. */
  problem: string | undefined;
  stdout: string;
  stderr: string;
  ms: number;
}

const guard = pathToFileURL(join(root, 'test/helpers/loopback-only.mjs')).href;

let standIn: Server | undefined;
let base = '';
let redis: RedisServer | undefined;
let requests = 0;

function startChild(file: string, cwd: string): ChildProcess {
  return spawn(process.execPath, ['--import', guard, file], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      REDIS_URL: redis?.url ?? 'redis://127.0.0.1:1',
      PGHOST: '127.0.0.1',
      PGPORT: '5432',
      PGDATABASE: 'test',
      PGUSER: 'postgres',
    },
  });
}

/** Runs one block as a reader would, against the stand-ins, and says how it went. */
async function runBlock(block: DocBlock, timeLimitMs = TIME_LIMIT_MS): Promise<Outcome> {
  const started = performance.now();
  const done = (problem: string | undefined, stdout = '', stderr = ''): Outcome => ({
    problem,
    stdout,
    stderr,
    ms: Math.round(performance.now() - started),
  });
  const hosts = foreignHosts(block.code);
  if (hosts.length > 0) return done(`names ${hosts.join(', ')}: point it at 127.0.0.1 in the doc`);
  const server = isServer(block.code);
  const serverPort = server ? await freePort() : undefined;
  const code = prepare(block.code, { base, redisUrl: redis?.url ?? 'redis://127.0.0.1:1', serverPort });
  const { outputText } = ts.transpileModule(`${code}\nexport {};\n`, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2023, verbatimModuleSyntax: false },
  });
  mkdirSync(scratch, { recursive: true });
  const file = join(scratch, `${block.doc.replace(/[^a-z0-9]+/gi, '-')}-line-${block.line}.mjs`);
  writeFileSync(file, outputText);
  const cwd = mkdtempSync(join(tmpdir(), 'tokenpace-docs-'));
  const child = startChild(file, cwd);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => (stdout += d));
  child.stderr?.on('data', (d) => (stderr += d));
  const exited = new Promise<Exit>((resolve) => child.on('close', (status, signal) => resolve({ status, signal })));
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<'limit'>((resolve) => {
    timer = setTimeout(() => resolve('limit'), timeLimitMs);
  });
  try {
    if (server) {
      const answer = await Promise.race([askServer(serverPort as number, exited), limit]);
      child.kill('SIGTERM');
      await exited;
      if (answer === 'limit') return done(`served nothing within ${timeLimitMs} ms`, stdout, stderr);
      if (answer instanceof Error) {
        const cause = (answer as { cause?: { message?: string } }).cause?.message;
        return done(`answered GET / with no response (${cause ?? answer.message})`, stdout, stderr);
      }
      if (typeof answer !== 'number')
        return done(`exited (${answer.status ?? answer.signal}) instead of serving`, stdout, stderr);
      if (answer < 200 || answer > 299) return done(`answered GET / with ${answer}`, stdout, stderr);
      return done(undefined, stdout, stderr);
    }
    const result = await Promise.race([exited, limit]);
    if (result === 'limit') {
      child.kill('SIGKILL');
      await exited;
      return done(`still running after ${timeLimitMs} ms`, stdout, stderr);
    }
    if (result.status !== 0) return done(`exited with ${result.status ?? result.signal}`, stdout, stderr);
    const stated = statedOutput(block.code);
    const printed = stdout.split('\n').filter((line, i, all) => line !== '' || i < all.length - 1);
    if (stated !== undefined && JSON.stringify(printed) !== JSON.stringify(stated)) {
      return done(`printed ${JSON.stringify(printed)}, its comments say ${JSON.stringify(stated)}`, stdout, stderr);
    }
    return done(undefined, stdout, stderr);
  } finally {
    clearTimeout(timer);
    rmSync(cwd, { recursive: true, force: true });
  }
}

/**
 * Asks a block's server `GET /` until it answers: its status, the error of a connection it took
 * and dropped, or how it exited.
 */
async function askServer(port: number, exited: Promise<Exit>): Promise<number | Error | Exit> {
  let gone: Exit | undefined;
  void exited.then((result) => {
    gone = result;
  });
  for (;;) {
    if (gone !== undefined) return gone;
    try {
      const response = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(5000) });
      await response.body?.cancel();
      return response.status;
    } catch (error) {
      // Refused: not listening yet. Anything else: it took the connection and gave no answer.
      if ((error as { cause?: { code?: string } }).cause?.code !== 'ECONNREFUSED') return error as Error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

function docBlocks(): DocBlock[] {
  const out: DocBlock[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const path = join(dir, name);
      if (statSync(join(root, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) out.push(...blocksOfDoc(path, readFileSync(join(root, path), 'utf8')));
    }
  };
  walk('docs');
  return out;
}

const blocks = docBlocks();
const runnable = blocks.filter(isRunnable);
const pendingFor = (block: DocBlock) =>
  PENDING.find((p) => p.doc === block.doc && block.code.split('\n').some((line) => line.includes(p.contains)));

beforeAll(async () => {
  const file = Buffer.alloc(1024 * 1024, 7);
  standIn = createServer((req, res) => {
    requests++;
    req.resume();
    if (req.url?.startsWith('/file.bin')) {
      res.writeHead(200, { 'content-length': file.length });
      res.end(file);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((resolve) => standIn?.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(standIn.address() as AddressInfo).port}`;
  redis = await startRedis();
  stripSources();
}, 60_000);

afterAll(async () => {
  await redis?.stop();
  await new Promise((resolve) => standIn?.close(resolve));
  rmSync(scratch, { recursive: true, force: true });
});

describe('docs/', () => {
  it('has blocks to run, and runs all but the ones marked no-run or no-check', () => {
    expect(runnable.length).toBeGreaterThanOrEqual(25);
    for (const block of blocks.filter((b) => !isRunnable(b))) expect(block.info).toMatch(/\bno-(run|check)\b/);
  });

  it('lists as pending only blocks that exist', () => {
    for (const pending of PENDING) expect(runnable.some((b) => pendingFor(b) === pending)).toBe(true);
  });

  describe.concurrent.each(runnable.map((block) => [`${block.doc}:${block.line}`, block] as const))(
    '%s',
    (_, block) => {
      const pending = pendingFor(block);
      (pending ? it.fails : it)(
        pending ? `fails until its doc is fixed: ${pending.why}` : 'runs as written, and exits 0',
        async () => {
          const outcome = await runBlock(block);
          if (outcome.problem !== undefined) {
            const printed = `${outcome.stdout}${outcome.stderr}`.trim().slice(-2000);
            expect.fail(`${block.doc}:${block.line} ${outcome.problem}${printed ? `\n${printed}` : ''}`);
          }
        },
        TIME_LIMIT_MS + 10_000,
      );
    },
  );
});

describe('the runner', () => {
  const fixture = (code: string, info = 'ts'): DocBlock => ({ doc: 'FIXTURE.md', line: 1, info, code });

  it('finds blocks and their info strings, and skips no-run and no-check', () => {
    const found = blocksOfDoc(
      'X.md',
      ['```ts', 'a();', '```', '```ts no-run', 'b();', '```', '```sh', 'c', '```'].join('\n'),
    );
    expect(found.map((b) => [b.line, b.info, isRunnable(b)])).toEqual([
      [1, 'ts', true],
      [4, 'ts no-run', false],
    ]);
    expect(isRunnable({ info: 'ts no-check' })).toBe(false);
  });

  it('judges the hosts a block names', () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a block's template literal, as text
    expect(foreignHosts("fetch('http://127.0.0.1:8080/x'); fetch(`${api}/y`); new Redis('redis://localhost')")).toEqual(
      [],
    );
    expect(foreignHosts("fetch('https://example.com'); request('https://api.example.com/items?x=1')")).toEqual([
      'example.com',
      'api.example.com',
    ]);
  });

  it('reads what a block says it prints', () => {
    expect(statedOutput('a(); // no\nconsole.log(1); // prints 1: one\nconsole.log(s); // prints "x: y"')).toEqual([
      '1',
      'x: y',
    ]);
    expect(statedOutput('console.log(1);')).toBeUndefined();
  });

  it('rewrites what the block imports and reaches', () => {
    const code = prepare(
      "import { Throttle } from 'tokenpace';\nimport P from 'tokenpace/p-queue';\nmetrics.getMeter('tokenpace');\n" +
        "fetch('http://127.0.0.1:8080/a');\nnew Redis();\ncreateClient();\nserver.listen(8080);",
      { base: 'http://127.0.0.1:1234', redisUrl: 'redis://127.0.0.1:5', serverPort: 4321 },
    );
    expect(code).toContain(`from '${strippedUrl('index.js')}'`);
    expect(code).toContain(`from '${strippedUrl('scheduler/p-queue.js')}'`);
    expect(code).toContain("getMeter('tokenpace')");
    expect(code).toContain("fetch('http://127.0.0.1:1234/a')");
    expect(code).toContain('new Redis(process.env.REDIS_URL)');
    expect(code).toContain('createClient({ url: process.env.REDIS_URL })');
    expect(code).toContain('server.listen(4321)');
  });

  it('runs a block against src/ and the stand-ins, and checks what it prints', async () => {
    const before = requests;
    const outcome = await runBlock(
      fixture(
        [
          "import { Redis } from 'ioredis';",
          "import { TokenBucket } from 'tokenpace';",
          'console.log(new TokenBucket({ rate: 1, burst: 2 }).tokens); // prints 2',
          "console.log((await fetch('http://127.0.0.1:8080/x')).status); // prints 200",
          'const client = new Redis();',
          'console.log(await client.ping()); // prints PONG',
          'await client.quit();',
        ].join('\n'),
      ),
    );
    expect(outcome.problem).toBeUndefined();
    expect(requests).toBe(before + 1);
    const wrong = await runBlock(fixture('console.log(3); // prints 2'));
    expect(wrong.problem).toBe('printed ["3"], its comments say ["2"]');
  }, 60_000);

  it('fails a block that throws, and one that does not end in time', async () => {
    const thrown = await runBlock(fixture("throw new Error('boom');"));
    expect(thrown.problem).toBe('exited with 1');
    expect(thrown.stderr).toContain('boom');
    const endless = await runBlock(fixture('setInterval(() => {}, 1000);'), 3000);
    expect(endless.problem).toBe('still running after 3000 ms');
  }, 60_000);

  it('lets a block reach nothing but 127.0.0.1, and not port 6379', async () => {
    const named = await runBlock(fixture("await fetch('https://example.com');"));
    expect(named).toMatchObject({ problem: 'names example.com: point it at 127.0.0.1 in the doc', stderr: '' });
    // 127.0.0.2 is loopback too, so nothing could leave the machine even if the guard failed.
    const other = await runBlock(fixture("await fetch('http://' + ['127', '0', '0', '2'].join('.') + ':8080/');"));
    expect(other.problem).toBe('exited with 97');
    expect(other.stderr).toContain('refused a connection to 127.0.0.2');
    const redisPort = await runBlock(
      fixture("import { createConnection } from 'node:net';\ncreateConnection({ host: '127.0.0.1', port: 6379 });"),
    );
    expect(redisPort.stderr).toContain('refused port 6379');
  }, 60_000);

  it('runs a server block on a free port, asks it GET /, and stops it', async () => {
    const served = await runBlock(
      fixture("import { createServer } from 'node:http';\ncreateServer((req, res) => res.end('ok')).listen(8080);"),
    );
    expect(served.problem).toBeUndefined();
    const refusing = await runBlock(
      fixture(
        "import { createServer } from 'node:http';\ncreateServer((req, res) => { res.statusCode = 500; res.end(); }).listen(8080);",
      ),
    );
    expect(refusing.problem).toBe('answered GET / with 500');
    const dropping = await runBlock(
      fixture("import { createServer } from 'node:http';\ncreateServer((req, res) => res.destroy()).listen(8080);"),
    );
    expect(dropping.problem).toMatch(/^answered GET \/ with no response/);
  }, 60_000);
});
