// Builds dist/ from src/ with the TypeScript compiler, from a clean slate (so no file of a deleted
// module is left behind to be packed). npm runs it through `prepack`, on `npm pack` and `npm publish`
// only: the package has no `prepare`, so installing its tarball runs nothing (and npm has no install
// script to warn about). In a checkout, `npm run build` builds it; a folder dependency is linked as
// it is, so build it there first; a git URL install gets no dist/ (npm runs only `prepare` there).
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
let tsc;
try {
  tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  console.error(
    `tokenpace: building dist/ needs TypeScript, one of its dev dependencies, which is not installed in ${root}.\n` +
      'Run `npm install` there first (a folder dependency is linked as it is, so its dependencies must be there),\n' +
      'or install a tarball made with `npm pack`, which holds dist/ already.',
  );
  process.exit(1);
}
rmSync(join(root, 'dist'), { recursive: true, force: true });
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
process.exit(result.status ?? 1);
