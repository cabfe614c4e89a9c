/**
 * What a user writes type-checks as it reads: a Throttle given a rate has a burst (`number`), a group
 * member without a rate of its own may not (`number | undefined`). Compiled by `npm run typecheck`.
 */

import { describe, expect, it } from 'vitest';
import { Throttle, ThrottleGroup, WebThrottle } from '../../src/index.js';

describe('Throttle types (compiled by npm run typecheck)', () => {
  it('burst is a number wherever a rate was given', () => {
    const lone = new Throttle({ rate: '1MiB/s' });
    const burst: number = lone.burst;
    const group = new ThrottleGroup({ rate: '10MiB/s' });
    const capped = group.throttle({ rate: '1MiB/s' });
    const cappedBurst: number = capped.burst;
    const member = group.throttle();
    // @ts-expect-error a member without a rate of its own has no burst of its own
    const memberBurst: number = member.burst;
    const anyThrottle: Throttle = capped; // every form is a Throttle
    expect([burst, cappedBurst, memberBurst, anyThrottle.burst]).toEqual([131072, 131072, undefined, 131072]);
    for (const t of [lone, capped, member]) t.destroy();
  });

  it('WebThrottle fits fetch without a cast: a download body, an upload body; burst typed as for Throttle', () => {
    const download = async (url: string): Promise<ReadableStream<Uint8Array> | undefined> => {
      const res = await fetch(url);
      return res.body?.pipeThrough(new WebThrottle({ rate: '1MiB/s' }));
    };
    const upload = (url: string, source: ReadableStream<Uint8Array>) =>
      fetch(url, { method: 'POST', body: source.pipeThrough(new WebThrottle({ rate: '1MiB/s' })), duplex: 'half' });
    const web = new WebThrottle({ rate: '1MiB/s' });
    const burst: number = web.burst;
    const member = new ThrottleGroup({ rate: '10MiB/s' }).webThrottle();
    // @ts-expect-error a member without a rate of its own has no burst of its own
    const memberBurst: number = member.burst;
    const stream: TransformStream<Uint8Array, Uint8Array> = member; // a TransformStream wherever one is taken
    expect([typeof download, typeof upload, burst, memberBurst, stream === member]).toEqual([
      'function',
      'function',
      131072,
      undefined,
      true,
    ]);
  });
});
