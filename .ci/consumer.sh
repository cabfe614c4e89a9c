#!/usr/bin/env bash
# The package as a user gets it: `npm pack` (which builds dist/ through `prepack`), then install the
# tarball into a scratch project in a temporary folder and use it from there:
#   - the tarball holds dist/'s JavaScript and .d.ts, LICENSE, README, CHANGELOG, and nothing else:
#     no src/, no source maps, nothing of test/, bench/ or examples/ (the JavaScript is tsc's, with
#     its comments, and reads as the source does);
#   - its package.json has no install-time script (`prepare`, `install`, ...), and installing it
#     prints no npm warning;
#   - ESM: `import { ... } from 'tokenpace'` runs;
#   - CommonJS: `require('tokenpace')` runs where Node can require ES modules (20.19+, 22.12+), and
#     fails with Node's ERR_REQUIRE_ESM elsewhere (the README says so);
#   - TypeScript --strict type-checks a consumer with moduleResolution `nodenext` (an ES module and a
#     CommonJS .cts file, both compiled and run) and with `bundler`;
#   - the README's quick starts run as written, on this Node, on Bun and on Deno (.ci/readme-examples.mjs);
#   - the smoke suite (test/runtimes/smoke.mjs) passes on this Node, on Bun and on Deno;
#   - `npm install <this folder>` links it as it is (dist/ is the one `npm pack` built), and the link
#     imports.
# Offline but for fetching Bun and Deno the first time (scripts/runtime.sh): the package has no runtime
# dependencies, and the TypeScript compiler, @types/node, undici, pg and the Redis clients come from this
# checkout's node_modules. Usage: .ci/consumer.sh (or npm run test:consumer).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/tokenpace-consumer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tsc=("node" "$repo/node_modules/typescript/bin/tsc")
started=$SECONDS
step() { echo "== consumer [$((SECONDS - started)) s]: $*"; }

step "npm pack (builds dist/ through prepack)"
(cd "$repo" && npm pack --pack-destination "$work" --loglevel=error >"$work/pack.log" 2>&1) || {
  cat "$work/pack.log"
  exit 1
}
tarball="$(ls "$work"/tokenpace-*.tgz)"

step "tarball contents"
mkdir "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked"
node --input-type=module - "$work/unpacked/package" "$repo" <<'EOF'
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const [root, repo] = process.argv.slice(2);
const files = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : [relative(root, join(dir, e.name))],
  );
const shipped = files(root);
const problems = [];
for (const required of ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts']) {
  if (!shipped.includes(required)) problems.push(`missing ${required}`);
}
// Every source module has its JavaScript and its declarations.
const srcRoot = join(repo, 'src');
const srcFiles = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? srcFiles(join(dir, e.name)) : [relative(srcRoot, join(dir, e.name)).replaceAll('\\', '/')],
  );
for (const rel of srcFiles(srcRoot).filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))) {
  for (const built of [`dist/${rel.replace(/\.ts$/, '.js')}`, `dist/${rel.replace(/\.ts$/, '.d.ts')}`]) {
    if (!shipped.includes(built)) problems.push(`missing ${built} (built from src/${rel})`);
  }
}
for (const f of shipped) {
  if (/^(src|test|bench|examples|scripts|node_modules|coverage|\.ci|\.tmp)\//.test(f)) problems.push(`ships ${f}`);
  // A map would point at src/, which is not shipped: "files" in package.json leaves them out.
  if (f.endsWith('.map')) problems.push(`ships ${f}`);
}
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
for (const script of ['preinstall', 'install', 'postinstall', 'prepare']) {
  // npm runs none of these for a tarball, yet lists them as install scripts awaiting approval.
  if (pkg.scripts?.[script]) problems.push(`package.json has a \`${script}\` script: build through prepack instead`);
}
if (pkg.license !== 'MIT' || !readFileSync(join(root, 'LICENSE'), 'utf8').startsWith('MIT License')) {
  problems.push('license: package.json and LICENSE must both say MIT');
}
if (Object.keys(pkg.dependencies ?? {}).length > 0) problems.push('runtime dependencies appeared: update this check');
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`tarball ok: ${shipped.length} files, no maps, no install scripts`);
EOF

step "npm install the tarball into a scratch project (offline)"
app="$work/app"
mkdir "$app"
cat >"$app/package.json" <<'EOF'
{ "name": "tokenpace-consumer", "version": "1.0.0", "private": true, "type": "module" }
EOF
(cd "$app" && npm install --offline --no-audit --no-fund "$tarball" >/dev/null 2>"$work/install.err") || {
  cat "$work/install.err"
  exit 1
}
if grep -qi 'warn' "$work/install.err"; then
  echo "installing the tarball printed warnings:" && cat "$work/install.err"
  exit 1
fi

step "ESM import"
cat >"$app/esm.mjs" <<'EOF'
import { parseRate, Scheduler, Throttle, TokenBucket } from 'tokenpace';
const bucket = new TokenBucket({ rate: '100/s', burst: 2 });
if (!(bucket.tryTake() && bucket.tryTake() && !bucket.tryTake())) throw new Error('TokenBucket misbehaves');
if (parseRate('6000/min') !== 100) throw new Error('parseRate misbehaves');
const scheduler = new Scheduler({ concurrency: 1 });
if ((await scheduler.schedule(async () => 42)) !== 42) throw new Error('Scheduler misbehaves');
if (typeof Throttle !== 'function') throw new Error('no Throttle');
// p-queue's names live at their own subpath.
const { default: PQueue } = await import('tokenpace/p-queue');
const queue = new PQueue({ concurrency: 2 });
if ((await queue.add(async () => 7)) !== 7) throw new Error('tokenpace/p-queue misbehaves');
await queue.onIdle();
console.log('esm ok');
EOF
(cd "$app" && node esm.mjs)

step "importing the installed package changes nothing outside it (test/fixtures/import-probe.mjs)"
cp "$repo/test/fixtures/import-probe.mjs" "$app/import-probe.mjs" # resolves 'tokenpace' from the app
report="$(cd "$app" && timeout 30 node import-probe.mjs tokenpace tokenpace/p-queue)"
echo "$report"
node -e '
  const r = JSON.parse(process.argv[1]);
  const found = [...r.changes, ...r.opened, ...r.instances];
  if (found.length > 0) { console.error("the import changed the process: " + found.join("; ")); process.exit(1); }
' "$report"

step "CommonJS require"
cat >"$app/cjs.cjs" <<'EOF'
const [major, minor] = process.versions.node.split('.').map(Number);
const canRequireEsm = (major === 20 && minor >= 19) || (major === 22 && minor >= 12) || major >= 23;
let tokenpace;
try {
  tokenpace = require('tokenpace');
} catch (error) {
  if (!canRequireEsm && error.code === 'ERR_REQUIRE_ESM') {
    console.log(`cjs: Node ${process.versions.node} cannot require ES modules; refused with ERR_REQUIRE_ESM as documented`);
    process.exit(0);
  }
  throw error;
}
if (!canRequireEsm) throw new Error(`require worked on Node ${process.versions.node}: update the README and engines`);
const { TokenBucket, isTokenpaceError } = tokenpace;
const bucket = new TokenBucket({ rate: 10, burst: 1 });
if (!bucket.tryTake() || bucket.tryTake()) throw new Error('TokenBucket misbehaves under require');
let caught;
try {
  bucket.tryTake(5);
} catch (error) {
  caught = error;
}
if (!isTokenpaceError(caught, 'ERR_COST_EXCEEDS_CAPACITY')) throw new Error('errors misbehave under require');
// require() and import() give the same module instance: one class, so instanceof holds across both.
import('tokenpace').then((esm) => {
  if (esm.TokenBucket !== TokenBucket) throw new Error('require and import load two copies');
  console.log('cjs ok');
});
EOF
(cd "$app" && node cjs.cjs 2>"$work/cjs.err") || {
  cat "$work/cjs.err"
  exit 1
}
if [ -s "$work/cjs.err" ]; then
  echo "require('tokenpace') printed to stderr:" && cat "$work/cjs.err"
fi

step "TypeScript --strict, moduleResolution nodenext (ESM and CommonJS)"
cat >"$app/consumer.ts" <<'EOF'
import {
  type Clock,
  isTokenpaceError,
  parseRate,
  type RateInput,
  Scheduler,
  Throttle,
  ThrottleGroup,
  TokenBucket,
  type TokenBucketOptions,
} from 'tokenpace';
import PQueue from 'tokenpace/p-queue';

const clock: Clock = { now: () => performance.now(), setTimeout, clearTimeout };
const options: TokenBucketOptions = { rate: '100/s', burst: 200, clock };
const bucket = new TokenBucket(options);
const admitted: boolean = bucket.tryTake(5);
const delayMs: number = bucket.delayFor(50);
const rate: RateInput = '10MiB/s';
const bytesPerSecond: number = parseRate(rate);

const scheduler = new Scheduler({ rate: '20/s', burst: 5, concurrency: 4, maxQueue: 100 });
const answer: number = await scheduler.schedule(async ({ signal }) => (signal?.aborted ? 0 : 42), { cost: 2 });
try {
  await scheduler.schedule(() => 'x', { signal: AbortSignal.timeout(1000) });
} catch (error) {
  if (isTokenpaceError(error, 'ERR_QUEUE_FULL')) {
    const retryAfterMs: number = error.retryAfterMs;
    console.log(retryAfterMs);
  }
}
const group = new ThrottleGroup({ rate: '1MiB/s' });
const member: Throttle = group.throttle({ rate: '512KiB/s' });
member.destroy();
const cap = new Throttle({ rate: bytesPerSecond });
cap.end();
const pqueue = new PQueue({ concurrency: 2, intervalCap: 10, interval: 1000 });
const fromPQueue: number | void = await pqueue.add(async () => 1);

// A compile-time check only (never called): rate is required.
export const missingRate = () =>
  // @ts-expect-error rate is missing
  new TokenBucket({ burst: 1 });

console.log(`ts ok: ${admitted} ${delayMs} ${answer} ${fromPQueue}`);
EOF
cat >"$app/consumer.cts" <<'EOF'
import { isTokenpaceError, TokenBucket } from 'tokenpace';

const bucket = new TokenBucket({ rate: 10, burst: 1 });
const first: boolean = bucket.tryTake();
let code: string | undefined;
try {
  bucket.tryTake(5);
} catch (error) {
  if (isTokenpaceError(error)) code = error.code;
}
if (!first || code !== 'ERR_COST_EXCEEDS_CAPACITY') throw new Error('TokenBucket misbehaves under require');
console.log('ts cjs ok');
EOF
# What Express and Fastify users write, without type parameters: the callbacks see their framework's
# own request type. The frameworks and their types come from this checkout (linked, offline).
mkdir -p "$app/node_modules/@types"
for dep in express fastify; do ln -sfn "$repo/node_modules/$dep" "$app/node_modules/$dep"; done
for dep in "$repo"/node_modules/@types/*; do ln -sfn "$dep" "$app/node_modules/@types/$(basename "$dep")"; done
cat >"$app/frameworks.ts" <<'EOF'
import express from 'express';
import Fastify from 'fastify';
import { rateLimit, rateLimitHook } from 'tokenpace';

const app = express();
app.set('trust proxy', 'loopback');
app.use(rateLimit({ rate: 10, burst: 20, key: (req) => req.ip ?? 'unknown' }));
app.get('/report', rateLimit({ rate: 1, burst: 5, key: (req) => `${req.ip}`, cost: () => 5 }), (_req, res) => {
  res.send('ok');
});

const server = Fastify();
server.addHook('onRequest', rateLimitHook({ rate: 10, burst: 20, key: (request) => request.ip ?? 'x' }));
export { app, server };
EOF
# The nodenext run also checks the shipped .d.ts themselves (skipLibCheck false); the bundler run
# differs only in how 'tokenpace' is resolved, so it skips them, which halves its time.
common='"strict": true, "target": "ES2022", "lib": ["ES2023"],
  "types": ["node"], "typeRoots": ["'"$repo"'/node_modules/@types"]'
cat >"$app/tsconfig.nodenext.json" <<EOF
{ "compilerOptions": { $common, "skipLibCheck": false, "module": "nodenext", "moduleResolution": "nodenext",
  "outDir": "out" }, "files": ["consumer.ts", "consumer.cts", "frameworks.ts"] }
EOF
cat >"$app/tsconfig.bundler.json" <<EOF
{ "compilerOptions": { $common, "skipLibCheck": true, "module": "preserve", "moduleResolution": "bundler",
  "noEmit": true }, "files": ["consumer.ts", "frameworks.ts"] }
EOF
(cd "$app" && "${tsc[@]}" -p tsconfig.nodenext.json)
step "TypeScript --strict, moduleResolution bundler"
(cd "$app" && "${tsc[@]}" -p tsconfig.bundler.json)
step "run the compiled TypeScript consumers"
(cd "$app" && node out/consumer.js >/dev/null && node out/consumer.cjs)

step "fetch Bun and Deno (scripts/runtime.sh)"
bun="$("$repo/scripts/runtime.sh" bun)"
deno="$("$repo/scripts/runtime.sh" deno)"
echo "node $(node --version), bun $("$bun" --version), $("$deno" --version | head -n 1)"
runtimes=("$(node -p process.execPath)" "$bun" "$deno")

step "the README's quick starts, as plain JavaScript in the consumer project, on Node, Bun and Deno"
# The examples import undici and pg, the smoke suite the Redis clients: the consumer gets this
# checkout's copies (offline; a link resolves its own dependencies from the checkout).
for dep in undici ioredis redis @redis fastify koa hono pg pg-types pg-protocol pg-pool pg-connection-string pgpass pg-int8 postgres-array postgres-bytea postgres-date postgres-interval split2 xtend pg-cloudflare; do
  [ -e "$repo/node_modules/$dep" ] && ln -sfn "$repo/node_modules/$dep" "$app/node_modules/$dep"
done
node "$repo/.ci/readme-examples.mjs" "$app" "$repo" "${runtimes[@]}"

step "the smoke suite (test/runtimes/smoke.mjs) on Node, Bun and Deno"
cp "$repo/test/runtimes/smoke.mjs" "$app/smoke.mjs"
mkdir -p "$repo/.tmp"
smoke_failed=0
for runtime in "${runtimes[@]}"; do
  kind="$(basename "$runtime")"
  args=("$app/smoke.mjs")
  [ "$kind" = deno ] && args=(run -A "$app/smoke.mjs")
  (cd "$app" && TOKENPACE_SMOKE_REPORT="$repo/.tmp/smoke-$kind.json" "$runtime" "${args[@]}") || smoke_failed=1
done
[ "$smoke_failed" -eq 0 ] || { echo "the smoke suite failed: the cases marked 'not ok' above"; exit 1; }

step "npm install of the folder (a link to it as it is)"
linked="$work/linked"
mkdir "$linked"
echo '{ "name": "tokenpace-linked-consumer", "version": "1.0.0", "private": true, "type": "module" }' >"$linked/package.json"
(cd "$linked" && npm install --offline --no-audit --no-fund --loglevel=error "$repo" >/dev/null 2>"$work/link.err") || {
  cat "$work/link.err"
  exit 1
}
(cd "$linked" && node --input-type=module -e "
  const { TokenBucket } = await import('tokenpace');
  if (!new TokenBucket({ rate: 1, burst: 1 }).tryTake()) throw new Error('linked TokenBucket misbehaves');
  console.log('folder install ok');
")

step "no source maps referenced: dist/ is tsc's JavaScript with its comments, shipped without maps or src/"
if grep -rl 'sourceMappingURL' "$work/unpacked/package" --include='*.js' --include='*.d.ts'; then
  echo "the files above point at source maps the package does not ship: tsconfig.build.json emits none"
  exit 1
fi

step "TypeScript: await using / using, the Fastify plugin (tokenpace/fastify), Hono and Koa"
cat >"$app/adapters.ts" <<'EOF'
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { honoRateLimit, koaRateLimit, type RedisClientLike, RedisStore, rateLimitHook, Scheduler } from 'tokenpace';
import { rateLimitPlugin } from 'tokenpace/fastify';

export async function disposing(client: RedisClientLike): Promise<number> {
  await using scheduler = new Scheduler({ concurrency: 1 });
  using store = new RedisStore({ client, onError: 'deny' });
  return (await scheduler.schedule(async () => 1)) + store.listenerCount('error');
}

const fastify = Fastify();
await fastify.register(rateLimitPlugin, { rate: 10, burst: 20, key: (request) => request.routeOptions.url ?? '' });
fastify.get('/report', { config: { rateLimit: { burst: 5 } } }, async () => 'ok');
fastify.get('/health', { config: { rateLimit: false } }, async () => 'up');
fastify.get('/one', { onRequest: rateLimitHook({ rate: 1, burst: 5, key: (request) => request.ip ?? '' }) }, async () => 1);
const hono = new Hono();
hono.use(honoRateLimit({ rate: 10, burst: 20, key: (c) => c.req.header('x-api-key') ?? 'anonymous' }));
const koa = new Koa();
koa.use(koaRateLimit({ rate: 10, burst: 20, key: (ctx) => ctx.ip }));
export { fastify, hono, koa };
EOF
# skipLibCheck: @types/koa's own declarations do not check against this content-disposition's (ours
# are checked by the nodenext run above); what a user writes against them is still checked.
cat >"$app/tsconfig.adapters.json" <<EOF
{ "compilerOptions": { $common, "lib": ["ES2023", "esnext.disposable"], "skipLibCheck": true,
  "module": "nodenext", "moduleResolution": "nodenext", "noEmit": true }, "files": ["adapters.ts"] }
EOF
(cd "$app" && "${tsc[@]}" -p tsconfig.adapters.json)

step "TypeScript: the main entry's types need no framework installed"
bare="$work/bare"
mkdir -p "$bare/node_modules"
echo '{ "name": "tokenpace-bare-consumer", "version": "1.0.0", "private": true, "type": "module" }' >"$bare/package.json"
ln -sfn "$app/node_modules/tokenpace" "$bare/node_modules/tokenpace"
cat >"$bare/bare.ts" <<'EOF'
import { honoRateLimit, koaRateLimit, rateLimit, rateLimitHook } from 'tokenpace';
export const limiters = [rateLimit({ rate: 1, burst: 1 }), rateLimitHook({ rate: 1, burst: 1 })];
export const adapters = [honoRateLimit({ rate: 1, burst: 1 }), koaRateLimit({ rate: 1, burst: 1 })];
EOF
cat >"$bare/tsconfig.json" <<EOF
{ "compilerOptions": { $common, "skipLibCheck": false, "module": "nodenext", "moduleResolution": "nodenext",
  "noEmit": true }, "files": ["bare.ts"] }
EOF
(cd "$bare" && "${tsc[@]}" -p tsconfig.json)

step "all checks passed"
