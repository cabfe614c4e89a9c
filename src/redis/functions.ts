/**
 * A Lua program that runs as a Redis Function where it can and as a script
 * where it cannot. The program is a body (local functions, no global read
 * while it loads) and named entry points. As a Function library (`FUNCTION
 * LOAD`, Redis 7) the body runs once, when the library loads, so a call
 * (`FCALL`) pays only for its own work; as a script (`EVALSHA`, `EVAL` on
 * `NOSCRIPT`: src/redis/client.ts) Redis runs the body, and re-creates its
 * functions, on every call. The answers are the same either way.
 *
 * The library's name and its functions' names (`tp_<hash>_<entry>`) carry a
 * hash of the program, so two versions of tokenpace on one server never call
 * each other's code.
 *
 * Which way, per client (the first call decides, and it is kept):
 * - Functions: a single node whose client can send `FCALL`. A server that
 *   has lost the library (a restart without persistence, `FUNCTION FLUSH`, a
 *   fail-over to a node that never had it) answers "Function not found": the
 *   library is loaded again (one `FUNCTION LOAD` at a time per client, "already
 *   exists" counting as loaded) and the call is sent again, once.
 * - Scripts: a cluster (a library must be loaded on every node, and the
 *   clients send `FUNCTION LOAD` to any one node), a client without `FCALL`,
 *   or a server that answers `FCALL` or `FUNCTION LOAD` with an unknown
 *   command (before Redis 7) or a refusal (ACL `NOPERM`).
 * Any other error is the call's failure, for the store's policy.
 */

import { createHash } from 'node:crypto';
import {
  evalScript,
  faithful,
  type IoredisLikeClient,
  type NodeRedisLikeClient,
  type RedisClientLike,
} from './client.js';

/** One entry point of a {@link RedisProgram}. */
export interface RedisEntry {
  /** The Function's name in the library. */
  readonly fn: string;
  /** The same entry as a script of its own. */
  readonly script: string;
  /** The script's SHA-1. */
  readonly sha: string;
}

/** A Lua program with named entry points, for {@link runProgram}. */
export interface RedisProgram<Entry extends string> {
  /** The library's name (with the program's hash). */
  readonly name: string;
  /** The `FUNCTION LOAD` text. */
  readonly library: string;
  readonly entries: Readonly<Record<Entry, RedisEntry>>;
}

/**
 * A program from its `body` and, per entry point, the Lua expression it returns (over `KEYS` and
 * `ARGV`, as in a script), for instance `{ keyed: 'keyed(KEYS, ARGV, false)' }`.
 */
export function redisProgram<Entry extends string>(
  name: string,
  body: string,
  calls: Readonly<Record<Entry, string>>,
): RedisProgram<Entry> {
  const hash = sha1(`${body}\n${JSON.stringify(calls)}`).slice(0, 12);
  const library = `${name}_${hash}`;
  const entries = {} as Record<Entry, RedisEntry>;
  const registrations: string[] = [];
  for (const entry of Object.keys(calls) as Entry[]) {
    const call = calls[entry];
    const script = `${body}\nreturn ${call}\n`;
    const fn = `tp_${hash}_${entry}`; // short: the name goes with every call
    entries[entry] = { fn, script, sha: sha1(script) };
    registrations.push(`redis.register_function('${fn}', function(KEYS, ARGV) return ${call} end)`);
  }
  return { name: library, library: `#!lua name=${library}\n${body}\n${registrations.join('\n')}\n`, entries };
}

/** A client that can send Functions (canCallFunctions). */
type IoredisFunctions = Required<Pick<IoredisLikeClient, 'fcall' | 'call' | 'fcallBuffer'>>;
type NodeRedisFunctions = Required<Pick<NodeRedisLikeClient, 'fCall' | 'functionLoad'>>;

/** How a client runs programs, and the library loads under way. */
interface ClientWay {
  functions: boolean;
  loads: Map<string, Promise<unknown>>;
}

const ways = new WeakMap<object, ClientWay>();

/** The answer of a server that has no library of that name. */
const NOT_FOUND = /function not found/i;
/** The answers of a server without Functions, or that refuses them to this client. */
const REFUSED = /unknown command|unknown subcommand|NOPERM|not allowed/i;
const EXISTS = /already exists/i;

/**
 * Runs `entry` of `program` with `keys` and `args` (sent faithfully: client.ts) on an ioredis or
 * node-redis client, as a Function where it can, as a script otherwise (see the file's opening
 * comment), and calls `onReply` or `onError` once. With `bytes` (on a client from client.ts's
 * `inBytes`), a bulk reply comes as a Buffer. (Callbacks, not a promise: the store hands the
 * reply on without a promise of its own in between.)
 */
export function callProgram<Entry extends string>(
  client: RedisClientLike,
  nodeRedis: boolean,
  cluster: boolean,
  program: RedisProgram<Entry>,
  entry: Entry,
  keys: string[],
  args: string[],
  onReply: (reply: unknown) => void,
  onError: (error: unknown) => void,
  bytes = false,
): void {
  let way = ways.get(client);
  if (way === undefined) {
    way = { functions: !cluster && canCallFunctions(client, nodeRedis), loads: new Map() };
    ways.set(client, way);
  }
  const e = program.entries[entry];
  if (!way.functions) {
    evalScript(client, nodeRedis, e.script, e.sha, keys, args, bytes).then(onReply, onError);
    return;
  }
  const state = way;
  const sentKeys = faithful(keys);
  const sentArgs = faithful(args);
  const asScript = () => {
    state.functions = false;
    evalScript(client, nodeRedis, e.script, e.sha, keys, args, bytes).then(onReply, onError);
  };
  fcall(client, nodeRedis, e.fn, sentKeys, sentArgs, bytes).then(onReply, (error: unknown) => {
    const message = messageOf(error);
    if (NOT_FOUND.test(message)) {
      load(state, client, nodeRedis, program).then(
        () => fcall(client, nodeRedis, e.fn, sentKeys, sentArgs, bytes).then(onReply, onError),
        (loadError: unknown) => {
          if (REFUSED.test(messageOf(loadError))) asScript();
          else onError(loadError);
        },
      );
    } else if (REFUSED.test(message)) {
      asScript();
    } else {
      onError(error);
    }
  });
}

/** {@link callProgram} as a promise. */
export function runProgram<Entry extends string>(
  client: RedisClientLike,
  nodeRedis: boolean,
  cluster: boolean,
  program: RedisProgram<Entry>,
  entry: Entry,
  keys: string[],
  args: string[],
): Promise<unknown> {
  return new Promise((resolve, reject) =>
    callProgram(client, nodeRedis, cluster, program, entry, keys, args, resolve, reject),
  );
}

function canCallFunctions(client: RedisClientLike, nodeRedis: boolean): boolean {
  if (nodeRedis) {
    const c = client as NodeRedisLikeClient;
    return typeof c.fCall === 'function' && typeof c.functionLoad === 'function';
  }
  const c = client as IoredisLikeClient;
  return typeof c.fcall === 'function' && typeof c.call === 'function';
}

/** `FCALL`; a client that throws instead of rejecting (a closed one) rejects here. */
function fcall(
  client: RedisClientLike,
  nodeRedis: boolean,
  fn: string,
  keys: (string | Buffer)[],
  args: (string | Buffer)[],
  bytes: boolean,
): Promise<unknown> {
  try {
    if (nodeRedis) return (client as NodeRedisFunctions).fCall(fn, { keys, arguments: args });
    const c = client as IoredisFunctions;
    if (bytes) return c.fcallBuffer(fn, keys.length, ...keys, ...args);
    return c.fcall(fn, keys.length, ...keys, ...args);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Loads `program`'s library, once at a time per client; a library that already exists is loaded. */
function load<Entry extends string>(
  way: ClientWay,
  client: RedisClientLike,
  nodeRedis: boolean,
  program: RedisProgram<Entry>,
): Promise<unknown> {
  let loading = way.loads.get(program.name);
  if (loading === undefined) {
    let sent: Promise<unknown>;
    try {
      sent = nodeRedis
        ? (client as NodeRedisFunctions).functionLoad(program.library)
        : (client as IoredisFunctions).call('FUNCTION', 'LOAD', program.library);
    } catch (error) {
      sent = Promise.reject(error);
    }
    loading = sent.then(undefined, (error: unknown) => {
      if (!EXISTS.test(messageOf(error))) throw error;
    });
    const done = () => way.loads.delete(program.name);
    loading.then(done, done);
    way.loads.set(program.name, loading);
  }
  return loading;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function sha1(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}
