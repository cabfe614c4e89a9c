/**
 * The Redis clients tokenpace accepts, and running a Lua script on either: `EVALSHA`, and `EVAL` when the
 * server does not know the script (a restart, a fail-over, a new node). One
 * copy for every store that keeps its state in Redis (`RedisStore`,
 * `RedisWindowStore`, `RedisFleetStore`); each passes its own script.
 */

import { InvalidOptionError } from '../errors.js';

/** The subset of an `ioredis` client (or `Cluster`) that the stores in Redis use. */
export interface IoredisLikeClient {
  evalsha(sha: string, numKeys: number, ...args: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: string[]): Promise<unknown>;
  del(...keys: string[]): Promise<unknown>;
  ping(): Promise<unknown>;
  /** `true` on an ioredis `Cluster`. */
  isCluster?: boolean;
}

/** The subset of a `redis` (node-redis) client (or cluster) that the stores in Redis use. */
export interface NodeRedisLikeClient {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  del(keys: string | string[]): Promise<unknown>;
  ping(): Promise<unknown>;
}

/** A Redis client: an `ioredis` `Redis`/`Cluster` or a node-redis client/cluster, connected by you. */
export type RedisClientLike = IoredisLikeClient | NodeRedisLikeClient;

/**
 * The Lua that sets `now` (ms) in every script: Redis's own `TIME`, so instances with skewed clocks
 * agree, unless `ARGV[arg]` carries a time (tests on a virtual clock pass one).
 */
export function luaNow(arg: number): string {
  return `local now
if ARGV[${arg}] ~= '' then
  now = tonumber(ARGV[${arg}])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end`;
}

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

/** Runs `script` (known by `sha`) with `keys` and `args` on an ioredis or a node-redis client. */
export async function evalScript(
  client: IoredisLikeClient | NodeRedisLikeClient,
  nodeRedis: boolean,
  script: string,
  sha: string,
  keys: string[],
  args: string[],
): Promise<unknown> {
  try {
    return await evalOnce(client, nodeRedis, script, sha, true, keys, args);
  } catch (error) {
    if (!/NOSCRIPT/.test(error instanceof Error ? error.message : String(error))) throw error;
    return evalOnce(client, nodeRedis, script, sha, false, keys, args);
  }
}

function evalOnce(
  client: IoredisLikeClient | NodeRedisLikeClient,
  nodeRedis: boolean,
  script: string,
  sha: string,
  bySha: boolean,
  keys: string[],
  args: string[],
): Promise<unknown> {
  if (nodeRedis) {
    const c = client as NodeRedisLikeClient;
    const options = { keys, arguments: args };
    return bySha ? c.evalSha(sha, options) : c.eval(script, options);
  }
  const c = client as IoredisLikeClient;
  return bySha ? c.evalsha(sha, keys.length, ...keys, ...args) : c.eval(script, keys.length, ...keys, ...args);
}
