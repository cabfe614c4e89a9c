/**
 * Figures over timed reads: the bytes a flow carried in a window, the most
 * any window of T carried against a bound, the least any window of T
 * carried. Times are CLOCK_MONOTONIC milliseconds, shared by the processes
 * of one machine whatever their network namespace.
 */

/** A flow's reads (or writes): `bytes[i]` at `atMs[i]`, in time order. */
export interface Reads {
  atMs: number[];
  bytes: number[];
}

/** CLOCK_MONOTONIC in ms: the same clock in every process of the machine. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Bytes at times in (fromMs, toMs]. */
export function bytesBetween(reads: Reads, fromMs: number, toMs: number): number {
  let sum = 0;
  for (let i = 0; i < reads.atMs.length; i++) {
    const at = reads.atMs[i] as number;
    if (at > fromMs && at <= toMs) sum += reads.bytes[i] as number;
  }
  return sum;
}

/**
 * The most bytes any closed window of `windowMs` carried, over `boundBytes`
 * (burst + rate * T). The fullest window starts at a read, so only those are tried.
 */
export function fullestWindowRatio(reads: Reads, windowMs: number, boundBytes: number): number {
  const { atMs, bytes } = reads;
  let most = 0;
  let sum = 0;
  let end = 0;
  for (let start = 0; start < atMs.length; start++) {
    while (end < atMs.length && (atMs[end] as number) <= (atMs[start] as number) + windowMs) {
      sum += bytes[end] as number;
      end++;
    }
    most = Math.max(most, sum);
    sum -= bytes[start] as number;
  }
  return most / boundBytes;
}

/** The fewest bytes in a window (start, start + windowMs], for starts 1 ms apart from `fromMs` to `toMs - windowMs`. */
export function leanestWindow(reads: Reads, fromMs: number, toMs: number, windowMs: number): number {
  let least = Number.POSITIVE_INFINITY;
  for (let start = fromMs; start + windowMs <= toMs; start++) {
    least = Math.min(least, bytesBetween(reads, start, start + windowMs));
  }
  return least;
}
