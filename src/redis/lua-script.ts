/**
 * The one way the stores in Redis (`RedisStore`, `RedisWindowStore`,
 * `RedisFleetStore`) load and call their Lua.
 *
 * A {@link LuaScript} is one store's program on one client. A call is
 * `EVALSHA`; when Redis answers `NOSCRIPT` (a restart without persistence,
 * `SCRIPT FLUSH`, a fail-over, a cluster node that never saw the script) the
 * same call goes again as `EVAL`, which loads the script on the node that
 * holds the keys, so a script lost in any of those ways comes back by itself
 * and the caller sees one answer. The script's SHA-1 is computed at the first
 * call, once per LuaScript.
 *
 * Every call is bounded by the store's timeout (src/stores/health.ts): an
 * answer later than that, an error of the client or of Redis, or a reply not
 * of the shape below, rejects; the store then applies its failure policy.
 *
 * Every script starts with {@link LUA_PRELUDE}, so the three programs agree on:
 * - time: `ARGV[1]` is the time in ms on a virtual clock (the store's `now`
 *   option), or empty, and then the script reads Redis's `TIME`, so instances
 *   whose clocks disagree agree on the bucket; the script's own arguments
 *   start at `ARGV[2]`;
 * - replies: a flat array of numbers, each written by `fmt` (`%.17g`, which
 *   reads back as the same double) and read by {@link fromLua}, so a number
 *   crosses from Lua to JavaScript exactly. Numbers go in as JavaScript's
 *   `String(x)`, which Lua's `tonumber` reads back exactly.
 */

import { createHash } from 'node:crypto';
import { StoreUnavailableError } from '../errors.js';
import type { StoreHealth } from '../stores/health.js';
import { faithful, type IoredisLikeClient, type NodeRedisLikeClient, type RedisClientLike } from './client.js';

/** `fmt`: a double as text that reads back as the same double, as {@link fromLua} reads it. */
export const LUA_FMT = `-- a double as text that reads back as the same double: every number of a reply
local function fmt(x) return string.format('%.17g', x) end
`;

/** The Lua every store's script begins with: `fmt` and `now` (see the file's opening comment). */
export const LUA_PRELUDE = `${LUA_FMT}
-- the time, ms: a virtual clock's when given, else Redis's own
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
`;

/** A number of a reply as `fmt` wrote it: `undefined` if it is not one. */
export function fromLua(word: unknown): number | undefined {
  if (typeof word !== 'string' || word === '') return undefined;
  if (word === 'inf') return Number.POSITIVE_INFINITY;
  if (word === '-inf') return Number.NEGATIVE_INFINITY;
  const n = Number(word);
  return Number.isNaN(n) ? undefined : n;
}

/** What a {@link LuaScript} runs on. */
export interface LuaScriptOptions {
  /** Names the script in errors: `'keyed'`, `'window'`, `'fleet'`. */
  name: string;
  /** The script after the prelude. */
  lua: string;
  client: RedisClientLike;
  nodeRedis: boolean;
  /** Bounds every call by the store's timeout. */
  health: StoreHealth;
  /** A virtual clock's time for `ARGV[1]`; Redis's `TIME` when absent. */
  now: (() => number) | undefined;
}

/** One store's Lua on one client: see the file's opening comment. */
export class LuaScript {
  readonly name: string;
  /** The whole script: {@link LUA_PRELUDE}, then the store's Lua. */
  readonly lua: string;
  readonly #client: RedisClientLike;
  readonly #nodeRedis: boolean;
  readonly #health: StoreHealth;
  readonly #now: (() => number) | undefined;
  #sha: string | undefined;

  constructor(options: LuaScriptOptions) {
    this.name = options.name;
    this.lua = `${LUA_PRELUDE}\n${options.lua}`;
    this.#client = options.client;
    this.#nodeRedis = options.nodeRedis;
    this.#health = options.health;
    this.#now = options.now;
  }

  /** The script's SHA-1, as `EVALSHA` names it. */
  get sha(): string {
    this.#sha ??= createHash('sha1').update(this.lua).digest('hex');
    return this.#sha;
  }

  /**
   * Runs the script with `keys` and `args` (`ARGV[2]` on; keys and arguments sent faithfully:
   * src/redis/client.ts) and resolves with its reply's numbers; rejects on an error, a timeout or
   * a reply that is not an array of numbers.
   */
  run(keys: string[], args: string[]): Promise<number[]> {
    const sentKeys = faithful(keys);
    const sentArgs = faithful([this.#now === undefined ? '' : String(this.#now()), ...args]);
    const reply = this.#evalsha(sentKeys, sentArgs).catch((error: unknown) => {
      if (!/NOSCRIPT/.test(error instanceof Error ? error.message : String(error))) throw error;
      return this.#eval(sentKeys, sentArgs);
    });
    return this.#health.withTimeout(reply).then((words) => this.#numbers(words));
  }

  #evalsha(keys: (string | Buffer)[], args: (string | Buffer)[]): Promise<unknown> {
    try {
      if (this.#nodeRedis) return (this.#client as NodeRedisLikeClient).evalSha(this.sha, { keys, arguments: args });
      return (this.#client as IoredisLikeClient).evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (error) {
      return Promise.reject(error); // a client that throws instead of rejecting (a closed one)
    }
  }

  #eval(keys: (string | Buffer)[], args: (string | Buffer)[]): Promise<unknown> {
    try {
      if (this.#nodeRedis) return (this.#client as NodeRedisLikeClient).eval(this.lua, { keys, arguments: args });
      return (this.#client as IoredisLikeClient).eval(this.lua, keys.length, ...keys, ...args);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #numbers(reply: unknown): number[] {
    if (Array.isArray(reply)) {
      const numbers: number[] = [];
      for (const word of reply) {
        const n = fromLua(word);
        if (n === undefined) break;
        numbers.push(n);
      }
      if (numbers.length === reply.length) return numbers;
    }
    throw new StoreUnavailableError(
      `unexpected reply from the ${this.name} script: expected an array of numbers, got ${describe(reply)}`,
    );
  }
}

function describe(reply: unknown): string {
  if (Array.isArray(reply)) return `[${reply.slice(0, 8).map(String).join(', ')}${reply.length > 8 ? ', ...' : ''}]`;
  return typeof reply === 'string' ? JSON.stringify(reply.slice(0, 80)) : typeof reply;
}
