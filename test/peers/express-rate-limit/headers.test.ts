/**
 * express-rate-limit's own tests, from test/library/headers-test.ts of express-rate-limit/express-rate-limit
 * (commit 3828a5b, 8.6.2; MIT License, (c) Nathan Friedly and contributors), run against tokenpace's
 * `rateLimit` in a real Express app over real HTTP (./harness.ts). Each case keeps its assertions where
 * they apply; lines marked `tokenpace:` state tokenpace's behaviour where it differs on purpose, and
 * docs/peer-suites.md lists every case.
 *
 * The one difference behind most of these: a token bucket of `burst: 5, rate: 5 per minute` is full
 * again 12 s after one request (one token at 5/min), where express-rate-limit's window resets 60 s
 * after its start. So `reset`, `t` and `X-RateLimit-Reset` say 12 s where express-rate-limit says 60.
 */

import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/errors.js';
import { rateLimit } from '../../../src/http/middleware.js';
import { createServer, erl, request, testClock, WALL_MS } from './harness.js';

describe('headers test', () => {
  it('should send correct `x-ratelimit-limit`, `x-ratelimit-remaining`, and `x-ratelimit-reset` headers', async () => {
    const { clock } = testClock();
    const app = createServer(rateLimit(erl(clock, { windowMs: 60 * 1000, limit: 5 }, { legacyHeaders: true })));
    const response = await request(app);
    expect(response.status).toBe(200);
    expect(response.text).toBe('Hi there!');
    expect(response.get('x-ratelimit-limit')).toBe('5');
    expect(response.get('x-ratelimit-remaining')).toBe('4');
    // tokenpace: the bucket is full again 12 s later (express-rate-limit: the window's end, 60 s).
    expect(Number(response.get('x-ratelimit-reset'))).toBe(Math.ceil(WALL_MS / 1000) + 12);
  });

  it('should send correct `ratelimit-*` headers for the standard headers draft 6', async () => {
    const { clock } = testClock();
    const app = createServer(rateLimit(erl(clock, { windowMs: 60 * 1000, limit: 5 }, { headers: 'draft-6' })));
    const response = await request(app);
    expect(response.status).toBe(200);
    expect(response.get('ratelimit-policy')).toBe('5;w=60');
    expect(response.get('ratelimit-limit')).toBe('5');
    expect(response.get('ratelimit-remaining')).toBe('4');
    expect(response.get('ratelimit-reset')).toBe('12'); // tokenpace: 12 (express-rate-limit: 60)
  });

  it('should send policy and combined ratelimit headers for the standard draft 7', async () => {
    const { clock } = testClock();
    const app = createServer(rateLimit(erl(clock, { windowMs: 60 * 1000, limit: 5 }, { headers: 'draft-7' })));
    const response = await request(app);
    expect(response.status).toBe(200);
    expect(response.get('ratelimit-policy')).toBe('5;w=60');
    expect(response.get('ratelimit')).toBe('limit=5, remaining=4, reset=12'); // tokenpace: reset=12 (ERL: 60)
  });

  it('should send correct headers for the standard draft 8', async () => {
    const { clock } = testClock();
    const app = createServer(
      rateLimit(erl(clock, { windowMs: 2 * 60 * 60 * 1000, limit: 5 }, { headers: 'draft-8', key: () => 'foo' })),
    );
    const response = await request(app);
    expect(response.status).toBe(200);
    // tokenpace: the policy is named `policyName` ('default'), with no `pk` partition key (ERL:
    // '"5-in-2hrs"; q=5; w=7200; pk=:MmMyNmI0NmI2OGZm:'); `t` is the time to full, 1440 s (ERL: 7200).
    expect(response.get('ratelimit-policy')).toBe('"default";q=5;w=7200');
    expect(response.get('ratelimit')).toBe('"default";r=4;t=1440');
  });

  it('should send multiple headers correctly for the standard draft 8', async () => {
    const { clock } = testClock();
    const options = { headers: 'draft-8', key: () => 'foo' } as const;
    const app = createServer([
      rateLimit(erl(clock, { windowMs: 5 * 1000, limit: 1 }, options)),
      rateLimit(erl(clock, { windowMs: 60 * 1000, limit: 5 }, options)),
      rateLimit(erl(clock, { windowMs: 60 * 60 * 1000, limit: 6 }, options)),
      rateLimit(erl(clock, { windowMs: 24 * 60 * 60 * 1000, limit: 7 }, options)),
      rateLimit(erl(clock, { windowMs: 2 * 24 * 60 * 60 * 1000, limit: 8 }, options)),
    ]);
    const response = await request(app);
    expect(response.status).toBe(200);
    // tokenpace: stacked limiters left at one name are `default`, `default-2`, ... (ERL names each by its
    // limit and window); each `t` is its bucket's time to full.
    expect(response.get('ratelimit-policy')).toBe(
      [
        '"default";q=1;w=5',
        '"default-2";q=5;w=60',
        '"default-3";q=6;w=3600',
        '"default-4";q=7;w=86400',
        '"default-5";q=8;w=172800',
      ].join(', '),
    );
    expect(response.get('ratelimit')).toBe(
      [
        '"default";r=0;t=5',
        '"default-2";r=4;t=12',
        '"default-3";r=5;t=600',
        '"default-4";r=6;t=12343',
        '"default-5";r=7;t=21600',
      ].join(', '),
    );
  });

  it('should override the quota name if specified for the standard draft 8', async () => {
    const { clock } = testClock();
    const app = createServer(
      rateLimit(
        erl(
          clock,
          { windowMs: 2 * 60 * 60 * 1000, limit: 5 },
          { policyName: 'keep-kalm', headers: 'draft-8', key: () => 'foo' },
        ),
      ),
    );
    const response = await request(app);
    expect(response.status).toBe(200);
    expect(response.get('ratelimit-policy')).toBe('"keep-kalm";q=5;w=7200');
    expect(response.get('ratelimit')).toBe('"keep-kalm";r=4;t=1440');
  });

  it('should return the `retry-after` header once IP has reached the max', async () => {
    const { clock } = testClock();
    const app = createServer(rateLimit(erl(clock, { windowMs: 60 * 1000, limit: 1 })));
    expect((await request(app)).status).toBe(200);
    const refused = await request(app);
    expect(refused.status).toBe(429);
    expect(refused.get('retry-after')).toBe('60');
  });

  it('should not set the `retry-after` header if all headers have been disabled', async () => {
    const { clock } = testClock();
    const app = createServer(
      rateLimit(erl(clock, { windowMs: 60 * 1000, limit: 1 }, { legacyHeaders: false, headers: false })),
    );
    expect((await request(app)).status).toBe(200);
    const response = await request(app);
    expect(response.status).toBe(429);
    // tokenpace: `Retry-After` goes with every refusal, whatever the header style (RFC 6585 suggests it).
    expect(response.get('retry-after')).toBe('60');
    expect(response.get('ratelimit')).toBeUndefined();
    expect(response.get('ratelimit-policy')).toBeUndefined();
  });

  it('should not attempt to set headers if request.headersSent is true', async () => {
    // express-rate-limit calls its header setters on a response whose headers are sent; here an earlier
    // handler sends them, and the refusal goes to the user's handler (`onLimit`) with nothing set.
    const { clock } = testClock();
    const answered: boolean[] = [];
    const app = createServer([
      (_request, response, next) => {
        response.writeHead(200, { 'content-type': 'text/plain' });
        response.write('partial ');
        next();
      },
      rateLimit(
        erl(
          clock,
          { limit: 1 },
          {
            legacyHeaders: true,
            onLimit: (_request, response) => {
              answered.push(response.headersSent);
              response.end('refused after the headers');
            },
          },
        ),
      ),
    ]);
    app.get('/late', (_request, response) => {
      response.end('admitted');
    });
    const first = await request(app, '/late');
    expect(first.text).toBe('partial admitted');
    expect(first.get('x-ratelimit-remaining')).toBeUndefined();
    const second = await request(app, '/late');
    expect(second.status).toBe(200);
    expect(second.text).toBe('partial refused after the headers');
    expect(second.get('retry-after')).toBeUndefined();
    expect(answered).toEqual([true]);
  });

  it('should not send headers for an incorrect draft number', () => {
    const { clock } = testClock();
    // tokenpace: an unknown style is refused when the middleware is made (ERL sends no header, after a
    // validation error in its log).
    expect(() => rateLimit(erl(clock, {}, { headers: 'invalid-draft' as never }))).toThrow(InvalidOptionError);
  });
});
