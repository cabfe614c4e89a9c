/**
 * The Redis clients tokenpace accepts (ioredis and node-redis, single node or
 * cluster), as the stores in Redis use them; src/redis/lua-script.ts runs
 * their scripts on either. Besides the methods below, a store reads Redis's
 * eviction policy with the client's `config`/`configGet` or `info` where it
 * has them (src/redis/eviction.ts).
 *
 * Keys are sent faithfully: a string that is not well-formed UTF-16 (a lone
 * surrogate) goes as its WTF-8 bytes (a Buffer), which differ for different
 * strings, where UTF-8 would turn every lone surrogate into U+FFFD and merge
 * `'user-\uD800'` with `'user-\uDBFF'`. A well-formed string goes as itself
 * (WTF-8 and UTF-8 agree on it).
 */

import { InvalidOptionError } from '../errors.js';

/** The subset of an `ioredis` client (or `Cluster`) that the stores in Redis use. */
export interface IoredisLikeClient {
  evalsha(sha: string, numKeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  del(...keys: (string | Buffer)[]): Promise<unknown>;
  /** `true` on an ioredis `Cluster`. */
  isCluster?: boolean;
}

/** The subset of a `redis` (node-redis) client (or cluster) that the stores in Redis use. */
export interface NodeRedisLikeClient {
  evalSha(sha: string, options: { keys: (string | Buffer)[]; arguments: (string | Buffer)[] }): Promise<unknown>;
  eval(script: string, options: { keys: (string | Buffer)[]; arguments: (string | Buffer)[] }): Promise<unknown>;
  del(keys: string | Buffer | (string | Buffer)[]): Promise<unknown>;
}

/** A Redis client: an `ioredis` `Redis`/`Cluster` or a node-redis client/cluster, connected by you. */
export type RedisClientLike = IoredisLikeClient | NodeRedisLikeClient;

/** Whether `client` is a node-redis client (`evalSha`) rather than ioredis (`evalsha`); neither is an option error. */
export function isNodeRedis(client: IoredisLikeClient | NodeRedisLikeClient): boolean {
  if (typeof (client as NodeRedisLikeClient).evalSha === 'function') return true;
  if (typeof (client as IoredisLikeClient).evalsha === 'function') return false;
  throw new InvalidOptionError(
    'client',
    client,
    'Expected `client` to be an ioredis client (with evalsha) or a node-redis client (with evalSha)',
  );
}

/** `text`'s WTF-8 bytes: UTF-8, with each lone surrogate as its own three bytes. */
export function wtf8(text: string): Uint8Array {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (c < 0x80) bytes.push(c);
    else if (c < 0x800) bytes.push(0xc0 | (c >> 6), 0x80 | (c & 0x3f));
    else if (c < 0x10000) bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
    else bytes.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 0x3f), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
  }
  return Uint8Array.from(bytes);
}

/** Whether `text` is well-formed UTF-16 (no lone surrogate). */
export function wellFormed(text: string): boolean {
  return (text as string & { isWellFormed(): boolean }).isWellFormed(); // Node 20 (ES2024's, not in lib ES2023)
}

/** A key or argument as sent: itself when well-formed, else its WTF-8 bytes (see the file's opening comment). */
export function redisArg(text: string): string | Buffer {
  return wellFormed(text) ? text : Buffer.from(wtf8(text));
}

/** `texts` as sent: themselves when all are well-formed (almost always), else each by {@link redisArg}. */
export function faithful(texts: string[]): (string | Buffer)[] {
  for (const text of texts) if (!wellFormed(text)) return texts.map(redisArg);
  return texts;
}

/** `DEL` of `keys` on an ioredis or a node-redis client, sent faithfully. */
export function delKeys(
  client: IoredisLikeClient | NodeRedisLikeClient,
  nodeRedis: boolean,
  keys: string[],
): Promise<unknown> {
  const sent = faithful(keys);
  return nodeRedis ? (client as NodeRedisLikeClient).del(sent) : (client as IoredisLikeClient).del(...sent);
}

/** How a store in Redis names its `client` option in messages (src/stores/health.ts `failureOptions`). */
export const REDIS_CLIENT = { example: 'new Redis(url)', what: 'a connected ioredis or node-redis client' } as const;
