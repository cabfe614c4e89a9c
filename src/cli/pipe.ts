/**
 * `tokenpace pipe`: copies stdin (or a file) to stdout at a capped rate, like
 * `pv -L`, through a real `Throttle`. A progress bar (bytes, rate, ETA when
 * the size is known) is drawn on stderr only when stderr is a terminal, so
 * scripts and logs stay clean. A reader that goes away (`| head -c 100`)
 * ends the copy quietly, as Unix tools do when their output closes.
 */

import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { isTokenpaceError } from '../errors.js';
import { Throttle } from '../stream/throttle.js';
import { EXIT_FAILURE, EXIT_OK, type Io, UsageError } from './io.js';

/** What `pipe` was asked to do. */
export interface PipeOptions {
  ratePerSecond: number;
  burst: number | undefined;
  peakRate: number | undefined;
  /** A file to read, or undefined (or '-') for stdin. */
  file: string | undefined;
}

function short(bytes: number): string {
  if (bytes < 1024) return `${Math.round(bytes)} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  return `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${units[i]}`;
}

function clock(seconds: number): string {
  if (!Number.isFinite(seconds)) return '--:--';
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${rest}` : `${m}:${rest}`;
}

/** One progress line: bytes, percentage and bar (when the total is known), rate, ETA or elapsed time. */
export function progressLine(
  bytes: number,
  total: number | undefined,
  bytesPerSecond: number,
  elapsedMs: number,
  columns = 80,
): string {
  const rate = `${short(bytesPerSecond)}/s`;
  if (total === undefined || total === 0) {
    return `${short(bytes)}  ${rate}  ${clock(elapsedMs / 1000)}`;
  }
  const share = Math.min(1, bytes / total);
  const eta = bytesPerSecond > 0 ? (total - bytes) / bytesPerSecond : Number.POSITIVE_INFINITY;
  const left = `${short(bytes)} / ${short(total)} ${String(Math.floor(share * 100)).padStart(3)}% `;
  const right = ` ${rate}  ETA ${clock(eta)}`;
  const width = columns > 0 ? columns : 80;
  const barWidth = Math.max(10, Math.min(40, width - left.length - right.length - 3));
  const filled = Math.round(share * barWidth);
  return `${left}[${'#'.repeat(filled)}${'.'.repeat(barWidth - filled)}]${right}`;
}

/** Runs the copy. Returns the exit code. */
export async function runPipe(options: PipeOptions, io: Io): Promise<number> {
  let throttle: Throttle;
  try {
    throttle = new Throttle({
      rate: options.ratePerSecond,
      ...(options.burst === undefined ? {} : { burst: options.burst }),
      ...(options.peakRate === undefined ? {} : { peakRate: options.peakRate }),
    });
  } catch (error) {
    if (isTokenpaceError(error)) throw new UsageError(error.message);
    throw error;
  }
  const file = options.file === '-' ? undefined : options.file;
  let total: number | undefined;
  let input: Readable = io.stdin;
  if (file !== undefined) {
    try {
      const info = await stat(file);
      if (info.isDirectory()) {
        io.stderr.write(`tokenpace pipe: ${file}: is a directory\n`);
        return EXIT_FAILURE;
      }
      total = info.isFile() ? info.size : undefined;
    } catch (error) {
      io.stderr.write(`tokenpace pipe: cannot read ${file}: ${describeFsError(error)}\n`);
      return EXIT_FAILURE;
    }
    input = createReadStream(file);
  }

  let timer: ReturnType<typeof setInterval> | undefined;
  const draw = (final: boolean): void => {
    const c = throttle.counters;
    const bytesPerSecond = final ? c.averageBytesPerSecond : c.currentBytesPerSecond;
    io.stderr.write(
      `\r\x1b[K${progressLine(c.bytes, total, bytesPerSecond, c.elapsedMs, io.stderrColumns)}${final ? '\n' : ''}`,
    );
  };
  if (io.stderrIsTty) {
    timer = setInterval(() => draw(false), 200);
    draw(false);
  }
  try {
    await pipeline(input, throttle, io.stdout);
    if (timer) draw(true);
    return EXIT_OK;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EPIPE' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'ERR_STREAM_DESTROYED') {
      if (timer) io.stderr.write('\n');
      return EXIT_OK; // the reader went away: stop quietly, as `cat | head` does
    }
    if (timer) io.stderr.write('\n');
    const path = (error as NodeJS.ErrnoException).path;
    io.stderr.write(`tokenpace pipe: ${path ? `${path}: ` : ''}${describeFsError(error)}\n`);
    return EXIT_FAILURE;
  } finally {
    if (timer) clearInterval(timer);
  }
}

function describeFsError(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  switch (e.code) {
    case 'ENOENT':
      return 'no such file';
    case 'EACCES':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory';
    default:
      return e.message ?? String(error);
  }
}
