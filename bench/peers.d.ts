/**
 * Minimal types for the stream peers the bench measures (CommonJS packages
 * without types of their own). Only what bench/stream.ts uses.
 */

declare module 'stream-throttle' {
  import type { Transform, TransformOptions } from 'node:stream';

  namespace streamThrottle {
    interface Options extends TransformOptions {
      /** Bytes per second. */
      rate: number;
      /** Largest slice a write is cut into. @default rate / 10 */
      chunksize?: number;
    }
    class Throttle extends Transform {
      constructor(options: Options, group?: ThrottleGroup);
    }
    class ThrottleGroup {
      constructor(options: Options);
      throttle(options?: TransformOptions): Throttle;
    }
  }
  export = streamThrottle;
}

declare module 'throttle' {
  import type { Transform, TransformOptions } from 'node:stream';

  interface ThrottleOptions extends TransformOptions {
    /** Bytes per second. */
    bps: number;
    /** Bytes passed between two checks of the clock. @default bps / 10 */
    chunkSize?: number;
  }
  class Throttle extends Transform {
    constructor(options: number | ThrottleOptions);
  }
  export = Throttle;
}
