/**
 * A group never calls into one member's stream from inside another member's
 * write. An HTTP client's body parser writes into its member and resumes when
 * that member's write callback or 'drain' comes; if a second member's callback
 * ran inside the first member's write, the second parser would run while the
 * first is still on the stack (undici asserts `currentParser === null`).
 * Cross-member service is deferred to one scheduled pass.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Throttle, ThrottleGroup } from '../../src/index.js';
import { fakeClock } from '../helpers/fake-clock.js';
import { advance, settle } from './support.js';

/**
 * Members fed like parsers: each writes its next chunk from its previous
 * write's callback. `inside` is the member whose write() is on the stack;
 * a callback or 'data' event of another member seen meanwhile is a reentrant call.
 */
function parserLikeMembers(
  group: ThrottleGroup | readonly ThrottleGroup[],
  count: number,
  chunkBytes: number,
  caps: (number | undefined)[] = [],
) {
  const groups = Array.isArray(group) ? group : [group as ThrottleGroup];
  const stack: Throttle[] = [];
  const reentrant: string[] = [];
  const members = Array.from({ length: count }, (_, i) => {
    const rate = caps[i];
    const member = (groups[i % groups.length] as ThrottleGroup).throttle(rate === undefined ? {} : { rate });
    const check = (what: string) => {
      const other = stack.find((m) => m !== member);
      if (other !== undefined) reentrant.push(`${what} of member ${i} inside another member's write`);
    };
    member.on('data', () => check("'data'"));
    let written = 0;
    const writeNext = (): void => {
      written++;
      stack.push(member);
      try {
        member.write(Buffer.alloc(chunkBytes), () => {
          check('write callback');
          if (written < 200) writeNext();
        });
      } finally {
        stack.pop();
      }
    };
    return { member, start: writeNext };
  });
  return { members, reentrant };
}

describe('ThrottleGroup: no reentrant calls between members', () => {
  it("a member's write never runs another member's callbacks or 'data' synchronously", async () => {
    // Small chunks arriving while others are in the ring, one member with a cap of its own
    // (it leaves and rejoins the ring): the shape that served a member inside another's write.
    const fake = fakeClock();
    const group = new ThrottleGroup({ rate: 10_000, clock: fake.clock });
    const { members, reentrant } = parserLikeMembers(group, 3, 3, [undefined, undefined, 1000]);
    for (const [i, { start }] of members.entries()) fake.clock.setTimeout(start, i * 7);
    await advance(fake, 300);
    expect(reentrant).toEqual([]);
    // Deferring the service costs nothing: every member wrote all of its 200 chunks.
    expect(members.map(({ member }) => member.counters.bytes)).toEqual([600, 600, 600]);
  });

  it('a busy group still passes its rate with service deferred', async () => {
    const fake = fakeClock();
    const group = new ThrottleGroup({ rate: 10_000, burst: 1000, quantum: 100, clock: fake.clock });
    const { members, reentrant } = parserLikeMembers(group, 3, 64);
    for (const { start } of members) start();
    await advance(fake, 3000);
    expect(reentrant).toEqual([]);
    const passed = members.reduce((sum, { member }) => sum + member.counters.bytes, 0);
    expect(passed).toBeGreaterThanOrEqual(1000 + 10_000 * 2.9);
    expect(passed).toBeLessThanOrEqual(1000 + 10_000 * 3);
  });

  it('for any members, caps, chunk sizes and arrival times: no reentrant call', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 700 }),
        fc.array(fc.option(fc.integer({ min: 1000, max: 8000 }), { nil: undefined }), { minLength: 4, maxLength: 4 }),
        async (count, chunkBytes, caps) => {
          const fake = fakeClock();
          const group = new ThrottleGroup({ rate: 10_000, clock: fake.clock });
          const { members, reentrant } = parserLikeMembers(group, count, chunkBytes, caps);
          for (const [i, { start }] of members.entries()) fake.clock.setTimeout(start, i * 7);
          await advance(fake, 300);
          for (const { member } of members) member.destroy();
          await settle();
          expect(reentrant).toEqual([]);
        },
      ),
      { numRuns: 30 },
    );
  });

  it('members of subgroups (with and without ceilings): no reentrant call, for any caps and chunk sizes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 1, max: 700 }),
        fc.array(fc.option(fc.integer({ min: 1000, max: 8000 }), { nil: undefined }), { minLength: 6, maxLength: 6 }),
        async (count, chunkBytes, caps) => {
          const fake = fakeClock();
          const root = new ThrottleGroup({ rate: 10_000, clock: fake.clock });
          const a = root.group({ weight: 2 });
          const groups = [a, root.group({ rate: 4000 }), a.group({ rate: 3000 }), root];
          const { members, reentrant } = parserLikeMembers(groups, count, chunkBytes, caps);
          for (const [i, { start }] of members.entries()) fake.clock.setTimeout(start, i * 7);
          await advance(fake, 300);
          for (const { member } of members) member.destroy();
          await settle();
          expect(reentrant).toEqual([]);
          expect(fake.pending()).toBe(0);
        },
      ),
      { numRuns: 30 },
    );
  });

  it("a member's own open turn still passes inside its own write (only its own stream is called)", async () => {
    const fake = fakeClock();
    const group = new ThrottleGroup({ rate: 1000, burst: 225, quantum: 50, clock: fake.clock });
    const a = group.throttle();
    a.resume();
    a.write(Buffer.alloc(1000)); // takes the burst, then waits in the ring
    const b = group.throttle();
    let bPassed = 0;
    b.on('data', (chunk: Buffer) => {
      bPassed += chunk.length;
    });
    b.write(Buffer.alloc(10)); // joins the ring behind A
    await advance(fake, 200);
    expect(bPassed).toBe(10); // served in its turn (50); the turn stays open
    b.write(Buffer.alloc(20));
    expect(bPassed).toBe(30); // synchronously, inside b.write()
    a.destroy();
    b.destroy();
    await settle();
    expect(fake.pending()).toBe(0);
  });
});
