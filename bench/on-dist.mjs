// `node --import tsx --import ./bench/on-dist.mjs bench/index.ts`: the bench's imports of src/ load
// tsc's build in dist/ instead (`npm run bench` builds it first), so the bench measures the code the
// package ships. Through tsx, src/ runs with esbuild's keepNames, which wraps each named closure in
// a naming call every time one is made: a cost per call that the package does not have.
import { register } from 'node:module';

register('./dist-hooks.mjs', import.meta.url);
