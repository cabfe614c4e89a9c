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
import { RedisBandwidthStore } from '../fleet/redis-bandwidth-store.js';
import type { FailurePolicy } from '../stores/health.js';
import { ThrottleGroup } from '../stream/group.js';
import { Throttle } from '../stream/throttle.js';
import { formatRate, formatSize } from '../units.js';
import { EXIT_FAILURE, EXIT_OK, type Io, UsageError } from './io.js';

/** What `pipe` was asked to do. */
export interface PipeOptions {
  ratePerSecond: number;
  burst: number | undefined;
  peakRate: number | undefined;
  /** A file to read, or undefined (or '-') for stdin. */
  file: string | undefined;
  /** With `key`: a Redis URL whose fleet group shares the rate with every pipe on the same key. */
  redis?: string | undefined;
  key?: string | undefined;
  /** The fleet group's failure policy (with `redis`). @default 'deny' */
  onError?: FailurePolicy | undefined;
  /** With `onError: 'local'`: how many pipes share the rate. */
  workers?: number | undefined;
}

/** The pipe's throttle: its own cap, or a member of a fleet group on Redis (closed by `close`). */
async function pipeThrottle(options: PipeOptions): Promise<{ throttle: Throttle; close(): Promise<void> }> {
  const rate = {
    rate: options.ratePerSecond,
    ...(options.burst === undefined ? {} : { burst: options.burst }),
  };
  if (options.redis === undefined) {
    const throttle = new Throttle({
      ...rate,
      ...(options.peakRate === undefined ? {} : { peakRate: options.peakRate }),
    });
    return { throttle, close: async () => {} };
  }
  // ioredis is an optional peer: loaded only by a fleet pipe.
  const { Redis } = await import('ioredis');
  const client = new Redis(options.redis, { maxRetriesPerRequest: 1 });
  client.on('error', () => {}); // the store's policy answers while Redis is away
  try {
    const store = new RedisBandwidthStore({
      client,
      onError: options.onError ?? 'deny',
      ...(options.workers === undefined ? {} : { expectedWorkers: options.workers }),
    });
    const group = new ThrottleGroup({ ...rate, store, key: options.key as string });
    return {
      throttle: group.throttle(),
      close: async () => {
        group.destroy();
        store.close();
        await client.quit().catch(() => client.disconnect());
      },
    };
  } catch (error) {
    client.disconnect();
    throw error;
  }
}

/** The widest a size or a rate from formatSize/formatRate gets below 1024 TiB: `~1023 KiB`, `~1023 KiB/s`. */
const SIZE_WIDTH = 9;
const RATE_WIDTH = SIZE_WIDTH + 2;
/** `h:mm:ss`, as pv writes times: one width up to 9:59:59. */
const CLOCK_WIDTH = 7;
const BAR_MIN = 10;
const BAR_MAX = 40;

function clock(seconds: number): string {
  if (!Number.isFinite(seconds)) return '-:--:--';
  const s = Math.max(0, Math.round(seconds));
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${Math.floor(s / 3600)}:${two(Math.floor((s % 3600) / 60))}:${two(s % 60)}`;
}

/**
 * One progress line, laid out like pv's: bytes so far (of the total, with a percentage and a bar,
 * when the size is known), the rate, the elapsed time, and the ETA while the copy runs. Every
 * field has a fixed width and the bar's width depends on `columns` alone, so the line keeps its
 * layout from the first frame to the last; the last (`final`) shows the average rate and the
 * elapsed time, with no ETA.
 */
export function progressLine(
  bytes: number,
  total: number | undefined,
  bytesPerSecond: number,
  elapsedMs: number,
  columns = 80,
  final = false,
): string {
  const size = formatSize(bytes).padStart(SIZE_WIDTH);
  const rate = formatRate(bytesPerSecond, 'bytes').padStart(RATE_WIDTH);
  const elapsed = clock(elapsedMs / 1000);
  if (total === undefined || total === 0) return `${size}  ${rate}  ${elapsed}`;
  const share = Math.min(1, bytes / total);
  const eta = bytesPerSecond > 0 ? (total - bytes) / bytesPerSecond : Number.POSITIVE_INFINITY;
  const totalText = formatSize(total);
  const percent = `${Math.floor(share * 100)}%`.padStart(4);
  // What the fields take at their fixed widths (the ETA's too, on the last frame), plus one column
  // spare so the line never reaches the terminal's edge: the same on every frame.
  const reserved =
    `${''.padEnd(SIZE_WIDTH)} / ${totalText} 100% [] ${''.padEnd(RATE_WIDTH)}  ${''.padEnd(CLOCK_WIDTH)}  ETA ${''.padEnd(CLOCK_WIDTH)} `
      .length;
  const barWidth = Math.max(BAR_MIN, Math.min(BAR_MAX, (columns > 0 ? columns : 80) - reserved));
  const filled = Math.round(share * barWidth);
  const bar = `[${'#'.repeat(filled)}${'.'.repeat(barWidth - filled)}]`;
  return `${size} / ${totalText} ${percent} ${bar} ${rate}  ${elapsed}${final ? '' : `  ETA ${clock(eta)}`}`;
}

/** Runs the copy. Returns the exit code. */
export async function runPipe(options: PipeOptions, io: Io): Promise<number> {
  let throttle: Throttle;
  let close: () => Promise<void>;
  try {
    ({ throttle, close } = await pipeThrottle(options));
  } catch (error) {
    if (isTokenpaceError(error)) throw new UsageError(error.message);
    throw error;
  }
  try {
    return await copy(throttle, options, io);
  } finally {
    await close();
  }
}

async function copy(throttle: Throttle, options: PipeOptions, io: Io): Promise<number> {
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
    const line = progressLine(c.bytes, total, bytesPerSecond, c.elapsedMs, io.stderrColumns, final);
    io.stderr.write(`\r\x1b[K${line}${final ? '\n' : ''}`);
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
