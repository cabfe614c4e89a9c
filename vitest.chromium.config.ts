import { defineConfig } from 'vitest/config';

// `npm run test:plot`: the tests that need a browser (Chromium), apart from `npm test`.
export default defineConfig({
  test: {
    include: ['test/**/*.chromium.test.ts'],
  },
});
