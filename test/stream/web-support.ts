/**
 * Web-stream twins of support.ts's helpers: a `ReadableStream` of pattern
 * bytes and a `WritableStream` that records every piece with the clock's time.
 */

import type { Piece } from './support.js';
import { patternByte } from './support.js';

/** A source of `totalBytes` pattern bytes in chunks of the given sizes (cycled), pulled as the stream asks. */
export function webByteSource(totalBytes: number, chunkSizes: number | readonly number[]): ReadableStream<Uint8Array> {
  const sizes = typeof chunkSizes === 'number' ? [chunkSizes] : chunkSizes;
  let position = 0;
  let index = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (position >= totalBytes) {
        controller.close();
        return;
      }
      const size = Math.min(sizes[index++ % sizes.length] as number, totalBytes - position);
      const chunk = new Uint8Array(size);
      for (let i = 0; i < size; i++) chunk[i] = patternByte(position + i);
      position += size;
      controller.enqueue(chunk);
    },
  });
}

/** A web sink: every piece with the clock's time, and the bytes. */
export type WebRecordingSink = WritableStream<Uint8Array> & { pieces: Piece[]; received: number; data(): Buffer };

/** A sink that records every piece with the clock's time, and keeps the bytes. */
export function webRecordingSink(now: () => number): WebRecordingSink {
  const chunks: Uint8Array[] = [];
  const sink = new WritableStream<Uint8Array>({
    write(chunk) {
      sink.pieces.push({ atMs: now(), bytes: chunk.length });
      sink.received += chunk.length;
      chunks.push(chunk);
    },
  }) as WebRecordingSink;
  sink.pieces = [];
  sink.received = 0;
  sink.data = () => Buffer.concat(chunks);
  return sink;
}
