#!/usr/bin/env node
/**
 * The `tokenpace` executable: wires the process's streams to `run`.
 * In a checkout, `npx tsx src/cli/main.ts ...` (or `npm run tokenpace -- ...`) runs it from source.
 */

import { run } from './cli.js';

process.exitCode = await run(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  stderrIsTty: process.stderr.isTTY === true,
  columns: process.stdout.columns || undefined,
  stderrColumns: process.stderr.columns || undefined,
});
