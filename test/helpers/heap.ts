/**
 * The live heap after forced collections, for the memory tests: `--expose-gc` is set for this process
 * when the module loads, and `gc` is taken from a fresh context (the flag does not reach globals that
 * exist already).
 */

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** `heapUsed` after four rounds of a turn of the event loop and a full collection. */
export async function heapAfterGc(): Promise<number> {
  for (let i = 0; i < 4; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  return process.memoryUsage().heapUsed;
}
