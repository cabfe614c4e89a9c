/**
 * Whether Redis may evict a store's keys.
 *
 * Redis deletes keys to stay under its `maxmemory`, as its `maxmemory-policy`
 * says. An evicted bucket, window or fleet state reads as absent: a bucket
 * full, a window empty, a fleet's leases gone, so the key admits its whole
 * burst again and no bound of the store holds. Every key the stores write has
 * an expiry, so the `volatile-*` policies may evict them as the `allkeys-*`
 * ones may. Only `noeviction` never evicts: Redis then refuses writes when it
 * is full, the call fails, and the store's failure policy decides.
 *
 * A store reads the policy at its first call and after each recovery
 * (src/stores/health.ts): `CONFIG GET maxmemory*`, or, where CONFIG is refused
 * (an ACL, a renamed command, a managed service), the same two values from
 * `INFO memory`. A client without either command, or a Redis that refuses
 * both, leaves the policy unknown.
 */

import type { MaxmemorySettings } from '../stores/health.js';
import type { RedisClientLike } from './client.js';

/** Whether Redis, under `policy`, may delete a store's keys (every policy but `noeviction`). */
export function mayEvict(policy: string): boolean {
  return policy !== 'noeviction';
}

type Command = (...args: string[]) => Promise<unknown>;

/** `client`'s method `name`, bound, if it has one. */
function method(client: RedisClientLike, name: string): Command | undefined {
  const fn = (client as unknown as Record<string, unknown>)[name];
  return typeof fn === 'function' ? (fn as Command).bind(client) : undefined;
}

/**
 * Redis's `maxmemory-policy` and `maxmemory`, by `CONFIG GET`, else by `INFO memory`; `undefined`
 * when neither answers with them. Never rejects.
 */
export async function readMaxmemory(
  client: RedisClientLike,
  nodeRedis: boolean,
): Promise<MaxmemorySettings | undefined> {
  try {
    const configGet = nodeRedis ? method(client, 'configGet') : method(client, 'config');
    if (configGet !== undefined) {
      const reply = nodeRedis ? await configGet('maxmemory*') : await configGet('GET', 'maxmemory*');
      const settings = fromPairs(pairsOf(reply));
      if (settings !== undefined) return settings;
    }
  } catch {
    // refused (an ACL, a renamed command): INFO next
  }
  try {
    const info = method(client, 'info');
    if (info === undefined) return undefined;
    const reply = await info('memory');
    // a string; a Buffer or a String object (a verbatim string) from some clients
    const text = Buffer.isBuffer(reply) || reply instanceof String ? reply.toString() : reply;
    if (typeof text !== 'string') return undefined;
    const pairs: [string, unknown][] = [];
    for (const line of text.split(/\r?\n/)) {
      const colon = line.indexOf(':');
      if (colon > 0) pairs.push([line.slice(0, colon).replace('_', '-'), line.slice(colon + 1)]);
    }
    return fromPairs(pairs);
  } catch {
    return undefined;
  }
}

/** A CONFIG GET reply as name/value pairs: a flat array (RESP2), a Map or an object (RESP3, node-redis). */
function pairsOf(reply: unknown): [string, unknown][] {
  if (Array.isArray(reply)) {
    const pairs: [string, unknown][] = [];
    for (let i = 0; i + 1 < reply.length; i += 2) pairs.push([String(reply[i]), reply[i + 1]]);
    return pairs;
  }
  if (reply instanceof Map) return [...reply].map(([k, v]) => [String(k), v]);
  if (typeof reply === 'object' && reply !== null) return Object.entries(reply);
  return [];
}

function fromPairs(pairs: [string, unknown][]): MaxmemorySettings | undefined {
  let policy: string | undefined;
  let maxmemoryBytes: number | undefined;
  for (const [name, value] of pairs) {
    const text = String(value).trim();
    if (name === 'maxmemory-policy' && text !== '') policy = text;
    if (name === 'maxmemory' && /^\d+$/.test(text)) maxmemoryBytes = Number(text);
  }
  return policy === undefined ? undefined : { policy, maxmemoryBytes };
}

/** The eviction check a store in Redis gives its health keeper (src/stores/health.ts). */
export function redisEviction(
  client: RedisClientLike,
  nodeRedis: boolean,
): { read: () => Promise<MaxmemorySettings | undefined>; mayEvict: (policy: string) => boolean } {
  return { read: () => readMaxmemory(client, nodeRedis), mayEvict };
}
