/**
 * What a command needs from the process, passed in so tests can run the
 * commands in-process as well as through `main.ts` as a child process.
 */

import type { Readable, Writable } from 'node:stream';

/** The process's streams and terminal facts, as a command sees them. */
export interface Io {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
  /** True if stderr is a terminal (the progress bar is drawn only then). */
  stderrIsTty: boolean;
  /** The width of the terminal stdout goes to, in columns, when known. */
  columns?: number;
  /** The width of the terminal stderr goes to (for the progress bar), when known. */
  stderrColumns?: number;
}

/**
 * A mistake in how the command was called (unknown flag, missing or bad
 * value): the command prints the message and its usage on stderr and exits 2.
 */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Exit codes, as a Unix user expects them. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
