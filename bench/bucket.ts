/**
 * TokenBucket.tryTake against limiter's TokenBucket.tryRemoveTokens and
 * against a bare `performance.now()` loop: a decision needs one clock read,
 * so the bare loop is the physical limit.
 */

import { TokenBucket as LimiterBucket } from 'limiter';
import { TokenBucket } from '../src/index.js';
import { compare, ratioTable, type Section } from './harness.js';

export const bucketSection: Section = {
  id: 'bucket',
  title: 'TokenBucket decisions per second',
  async run() {
    // A rate high enough that every decision is an admit after the first
    // second's refill would not exercise refusals; a modest rate with a big
    // burst gives the realistic mix: mostly refusals once the burst is spent.
    const ours = new TokenBucket({ rate: 1e6, burst: 1e6 });
    const peer = new LimiterBucket({ bucketSize: 1e6, tokensPerInterval: 1e6, interval: 'second' });
    const measured = await compare([
      {
        name: 'performance.now() loop',
        run(n) {
          let acc = 0;
          for (let i = 0; i < n; i++) acc += performance.now();
          return acc;
        },
      },
      {
        name: 'tokenpace TokenBucket.tryTake',
        run(n) {
          let admitted = 0;
          for (let i = 0; i < n; i++) if (ours.tryTake()) admitted++;
          return admitted;
        },
      },
      {
        name: 'limiter TokenBucket.tryRemoveTokens',
        run(n) {
          let admitted = 0;
          for (let i = 0; i < n; i++) if (peer.tryRemoveTokens(1)) admitted++;
          return admitted;
        },
      },
    ]);
    return [
      ratioTable(measured, 'performance.now() loop'),
      '',
      'Each decision reads the clock once; the bare loop only reads it. Rate 1M/s, burst 1M: a mix of admits and refusals.',
    ].join('\n');
  },
};
