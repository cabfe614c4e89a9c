// The resolve hook of bench/on-dist.mjs: a module of src/ resolves to its build in dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const src = new URL('../src/', import.meta.url).href;
const dist = new URL('../dist/', import.meta.url).href;
if (!existsSync(fileURLToPath(new URL('index.js', dist)))) {
  throw new Error('bench/on-dist.mjs: dist/ is not built; run `npm run build` (npm run bench does)');
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (!resolved.url.startsWith(src)) return resolved;
  const built = `${dist}${resolved.url.slice(src.length).replace(/\.ts$/, '.js')}`;
  return { url: built, format: 'module', shortCircuit: true };
}
