import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Tests that need a browser run apart: `npm run test:plot` (vitest.chromium.config.ts).
    exclude: ['test/**/*.chromium.test.ts'],
    // Starts one redis-server for the Redis suites (fails with the install command if it is missing).
    globalSetup: ['test/helpers/redis-global-setup.ts'],
    reporters: ['default', ['json', { outputFile: '.tmp/vitest.json' }]],
    tags: [
      {
        name: 'long',
        description: 'a long real-time run (about a minute); runs with the rest, CI included',
      },
    ],
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      reporter: ['text-summary', 'text'],
      thresholds: { lines: 90 },
    },
  },
});
