/**
 * The Redis clients tokenpace accepts, and running a Lua script on either: `EVALSHA`, and `EVAL` when the
 * server does not know the script (a restart, a fail-over, a new node). One
 * copy for every store that keeps its state in Redis (`RedisStore`,
 * `RedisWindowStore`, `RedisFleetStore`); each passes its own script.
 *
 * Keys are sent faithfully: a string that is not well-formed UTF-16 (a lone
 * surrogate) goes as its WTF-8 bytes (a Buffer), which differ for different
 * strings, where UTF-8 would turn every lone surrogate into U+FFFD and merge
 * `'user-\uD800'` with `'user-\uDBFF'`. A well-formed string goes as itself
 * (WTF-8 and UTF-8 agree on it), so keys written before are the same keys.
 */

import { InvalidOptionError } from '../errors.js';

/** The subset of an `ioredis` client (or `Cluster`) that the stores in Redis use. */
export interface IoredisLikeClient {
  evalsha(sha: string, numKeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  del(...keys: (string | Buffer)[]): Promise<unknown>;
  ping(): Promise<unknown>;
  /** `FCALL` (Redis 7 Functions, src/redis/functions.ts); without it the stores run scripts. */
  fcall?(fn: string, numKeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  /** Any command (`FUNCTION LOAD`). */
  call?(command: string, ...args: (string | Buffer)[]): Promise<unknown>;
  /** `FCALL`, `EVALSHA` and `EVAL` with bulk replies as Buffers (a program's reply in bytes, {@link inBytes}). */
  fcallBuffer?(fn: string, numKeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  evalshaBuffer?(sha: string, numKeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  evalBuffer?(script: string, numKeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  /** `true` on an ioredis `Cluster`. */
  isCluster?: boolean;
}

/** The subset of a `redis` (node-redis) client (or cluster) that the stores in Redis use. */
export interface NodeRedisLikeClient {
  evalSha(sha: string, options: { keys: (string | Buffer)[]; arguments: (string | Buffer)[] }): Promise<unknown>;
  eval(script: string, options: { keys: (string | Buffer)[]; arguments: (string | Buffer)[] }): Promise<unknown>;
  del(keys: string | Buffer | (string | Buffer)[]): Promise<unknown>;
  ping(): Promise<unknown>;
  /** `FCALL` (Redis 7 Functions, src/redis/functions.ts); without it the stores run scripts. */
  fCall?(fn: string, options: { keys: (string | Buffer)[]; arguments: (string | Buffer)[] }): Promise<unknown>;
  /** `FUNCTION LOAD`. */
  functionLoad?(code: string): Promise<unknown>;
  /** node-redis 5: the same client with other reply types (bulk strings as Buffers, {@link inBytes}). */
  withTypeMapping?(mapping: { [type: number]: unknown }): unknown;
  /** node-redis 5: the same client with other command options (reply types, no timeout of its own: {@link inBytes}). */
  withCommandOptions?(options: { typeMapping?: { [type: number]: unknown }; timeout?: number }): unknown;
}

/** RESP's bulk string type, as node-redis numbers it (`RESP_TYPES.BLOB_STRING`, the byte `$`). */
const RESP_BULK_STRING = 36;
const byteClients = new WeakMap<object, RedisClientLike>();

/**
 * `client` as one whose bulk replies are Buffers: for ioredis the client itself (its `*Buffer`
 * methods, which {@link evalScript} and src/redis/functions.ts call when `bytes` is set), for
 * node-redis its twin with bulk strings mapped to Buffers, made once; `undefined` when the client
 * has neither, and its program replies must be text. node-redis's twin also has no timeout of its
 * own per command (node-redis 5 arms an `AbortSignal.timeout`, 5 s by default, for every command:
 * several microseconds a call): every call the stores make through it is bounded by the store's
 * `timeoutMs` already (src/redis/health.ts), as with ioredis, which arms none by default.
 */
export function inBytes(client: RedisClientLike, nodeRedis: boolean): RedisClientLike | undefined {
  if (!nodeRedis) {
    const c = client as IoredisLikeClient;
    const ok =
      typeof c.fcallBuffer === 'function' &&
      typeof c.evalshaBuffer === 'function' &&
      typeof c.evalBuffer === 'function';
    return ok ? client : undefined;
  }
  let twin = byteClients.get(client);
  if (twin === undefined) {
    const c = client as NodeRedisLikeClient;
    const typeMapping = { [RESP_BULK_STRING]: Buffer };
    if (typeof c.withCommandOptions === 'function') {
      twin = c.withCommandOptions({ typeMapping, timeout: 0 }) as RedisClientLike;
    } else if (typeof c.withTypeMapping === 'function') {
      twin = c.withTypeMapping(typeMapping) as RedisClientLike;
    } else {
      return undefined;
    }
    byteClients.set(client, twin);
  }
  return twin;
}

/** A Redis client: an `ioredis` `Redis`/`Cluster` or a node-redis client/cluster, connected by you. */
export type RedisClientLike = IoredisLikeClient | NodeRedisLikeClient;

/**
 * The Lua that sets `now` (ms) in every script: Redis's own `TIME`, so instances with skewed clocks
 * agree, unless `ARGV[arg]` carries a time (tests on a virtual clock pass one). `declare: false`
 * assigns a `now` declared outside; `parts: true` also keeps TIME's two integers as Redis wrote them
 * in `now_sec` and `now_usec` (`'-'` on a virtual clock), for a reply that {@link timeMs} turns into
 * the same double; `keep: true` (a Function library, whose upvalues outlive a call) parses TIME's
 * seconds only when they change, into `now_sec_text` and `now_sec_ms` declared outside: the same
 * operations in the same order, so the same double. `given` replaces the test for a time in
 * `ARGV[arg]` (a Lua expression: true when there is one); `call` is the name `redis.call` is kept
 * under, where a library keeps it in a local.
 */
export function luaNow(
  arg: number,
  options: { declare?: boolean; parts?: boolean; keep?: boolean; given?: string; call?: string } = {},
): string {
  const { declare = true, parts = false, keep = false, given = `ARGV[${arg}] ~= ''`, call = 'redis.call' } = options;
  // with parts, TIME's two strings are read from the table once, into now_sec and now_usec
  const [sec, usec] = parts ? ['now_sec', 'now_usec'] : ['t[1]', 't[2]'];
  const fromTime = keep
    ? `if ${sec} ~= now_sec_text then now_sec_text = ${sec}; now_sec_ms = tonumber(${sec}) * 1000 end
  now = now_sec_ms + ${usec} / 1000 -- the string read by arithmetic: tonumber's strtod, without the call`
    : `now = tonumber(${sec}) * 1000 + tonumber(${usec}) / 1000`;
  return `${declare ? 'local now\n' : ''}${parts ? "local now_sec, now_usec = '-', '-'\n" : ''}if ${given} then
  now = tonumber(ARGV[${arg}])
else
  local t = ${call}('TIME')
  ${parts ? 'now_sec, now_usec = t[1], t[2]\n  ' : ''}${fromTime}
end`;
}

/** luaNow's `now` from TIME's seconds and microseconds as Redis wrote them: the same operations, so the same double. */
export function timeMs(seconds: string, microseconds: string): number {
  return Number(seconds) * 1000 + Number(microseconds) / 1000;
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

/**
 * Runs `script` (known by `sha`) with `keys` and `args` on an ioredis or a node-redis client; with
 * `bytes`, on a client from {@link inBytes}, a bulk reply comes as a Buffer.
 */
export async function evalScript(
  client: IoredisLikeClient | NodeRedisLikeClient,
  nodeRedis: boolean,
  script: string,
  sha: string,
  keys: string[],
  args: string[],
  bytes = false,
): Promise<unknown> {
  try {
    return await evalOnce(client, nodeRedis, script, sha, true, keys, args, bytes);
  } catch (error) {
    if (!/NOSCRIPT/.test(error instanceof Error ? error.message : String(error))) throw error;
    return evalOnce(client, nodeRedis, script, sha, false, keys, args, bytes);
  }
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

function evalOnce(
  client: IoredisLikeClient | NodeRedisLikeClient,
  nodeRedis: boolean,
  script: string,
  sha: string,
  bySha: boolean,
  keyTexts: string[],
  texts: string[],
  bytes: boolean,
): Promise<unknown> {
  const keys = faithful(keyTexts);
  const args = faithful(texts);
  if (nodeRedis) {
    const c = client as NodeRedisLikeClient;
    const options = { keys, arguments: args };
    return bySha ? c.evalSha(sha, options) : c.eval(script, options);
  }
  const c = client as Required<IoredisLikeClient>;
  if (bytes) {
    return bySha
      ? c.evalshaBuffer(sha, keys.length, ...keys, ...args)
      : c.evalBuffer(script, keys.length, ...keys, ...args);
  }
  return bySha ? c.evalsha(sha, keys.length, ...keys, ...args) : c.eval(script, keys.length, ...keys, ...args);
}
