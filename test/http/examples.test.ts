/**
 * The HTTP examples, run for real on loopback. Real time, so the bounds are
 * tolerant: what must hold exactly is what no timing can change.
 */

import { describe, expect, it } from 'vitest';
import { main as apiClient } from '../../examples/api-client.js';
import { main as httpServer } from '../../examples/http-server.js';

const quiet = (): void => {};

describe('examples/http-server.ts', () => {
  it('limits one key to its burst and many keys to the global burst', async () => {
    const { oneKey, manyKeys, refused } = await httpServer({ log: quiet });
    expect(oneKey.ok + oneKey.tooMany).toBe(60);
    expect(oneKey.ok).toBeGreaterThanOrEqual(40); // the burst passes at once
    expect(oneKey.ok).toBeLessThan(60); // and the key's limit refuses some
    expect(manyKeys.ok + manyKeys.tooMany).toBe(400);
    expect(manyKeys.ok).toBeGreaterThanOrEqual(200); // the global burst (no key's own limit is reached)
    expect(manyKeys.ok).toBeLessThan(400); // the global limit refused some
    expect(refused.retryAfter).toBe('1');
    expect(refused.policy).toBe('"default";q=40;w=2');
    expect(JSON.parse(refused.body)).toMatchObject({ status: 429 });
  }, 30_000);
});

describe('examples/api-client.ts', () => {
  it('gets every answer through the interceptor, with and without 429s on the way', async () => {
    const { unpaced, paced, pushback } = await apiClient({ requests: 40, log: quiet });
    expect(unpaced.tooMany).toBeGreaterThan(0);
    expect(paced).toMatchObject({ ok: 40, tooMany: 0 });
    expect(pushback).toMatchObject({ ok: 40, tooMany: 0 });
    expect(pushback.served429).toBeGreaterThan(0); // it did go too fast, and recovered
  }, 30_000);
});
