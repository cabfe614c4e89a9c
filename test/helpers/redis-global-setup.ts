/**
 * vitest globalSetup: one redis-server on a free port for the whole run,
 * provided to the tests as `inject('redisPort')`. Tests that kill, pause or
 * restart a server start their own instead.
 */

import type { TestProject } from 'vitest/node';
import { startRedis } from './redis-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisPort: number;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startRedis();
  project.provide('redisPort', server.port);
  return () => server.stop();
}
