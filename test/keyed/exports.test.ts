import { readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import type { Decision, KeyedStore, RedisClientLike } from '../../src/index.js';
import * as tokenpace from '../../src/index.js';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');
/** The folders of the keyed part: the limiter and its stores, the Redis glue and the failure policy they use. */
const FOLDERS = ['keyed', 'redis', 'stores'];

/** The values the package root exports from the keyed part, exactly: a new one is a decision, so it shows up here. */
const PUBLIC = ['KeyedLimiter', 'MemoryStore', 'MemoryWindowStore', 'RedisStore', 'RedisWindowStore'];

/**
 * Helpers the keyed part exports to its own files, which must stay off the root. Each is checked to
 * exist in some module of the keyed part, so this list cannot name something that is not there.
 */
const INTERNAL = [
  'DEFAULT_MAX_KEYS', // memory-store.ts
  'KEYED_LUA', // redis-script.ts
  'DENY_RETRY_AFTER_MS', // policy-answers.ts
  'decideByPolicy',
  'resultOf',
  'DEFAULT_TIMEOUT_MS', // stores/health.ts, re-exported by redis-store.ts
  'windowStep', // window-store.ts
  'StoreHealth', // stores/health.ts
  'failureOptions',
  'errorOf',
  'DEFAULT_PROBE_INTERVAL_MS',
  'isNodeRedis', // redis/client.ts
  'clusterSlot', // redis/cluster-slot.ts
  'WINDOW_LUA', // redis/window-lua.ts
  'WINDOW_STEPS',
  'LuaScript', // redis/lua-script.ts
  'LUA_PRELUDE',
  'LUA_FMT',
  'fromLua',
];

/** Every runtime export of every module in the keyed part: module (relative to src/) -> its namespace. */
const modules = new Map<string, Record<string, unknown>>();

beforeAll(async () => {
  for (const folder of FOLDERS) {
    for (const name of readdirSync(join(SRC, folder)).sort()) {
      if (!name.endsWith('.ts')) continue;
      const path = join(SRC, folder, name);
      modules.set(relative(SRC, path), (await import(pathToFileURL(path).href)) as Record<string, unknown>);
    }
  }
});

describe('keyed: public exports', () => {
  it.each(PUBLIC)('exports %s', (name) => {
    expect(tokenpace).toHaveProperty(name);
  });

  it('exports exactly the intended values of the keyed part, each the very object its module defines', () => {
    expect(modules.size).toBeGreaterThanOrEqual(6); // the scan found the part's modules
    const root = tokenpace as Record<string, unknown>;
    const fromKeyed = new Set<string>();
    for (const [file, namespace] of modules) {
      for (const [name, value] of Object.entries(namespace)) {
        if (!Object.hasOwn(root, name)) continue;
        fromKeyed.add(name);
        expect(root[name], `${name} (from ${file})`).toBe(value);
      }
    }
    expect([...fromKeyed].sort()).toEqual([...PUBLIC].sort());
  });

  it('exports nothing internal: helpers that exist in the keyed part stay off the root', () => {
    const exported = new Set([...modules.values()].flatMap((namespace) => Object.keys(namespace)));
    for (const internal of INTERNAL) {
      expect(exported.has(internal), `${internal} exists in the keyed part`).toBe(true);
      expect(tokenpace).not.toHaveProperty(internal);
    }
  });

  it('types the keyed API precisely, and both client libraries fit the structural client type', () => {
    const limiter = new tokenpace.KeyedLimiter({ rate: '10/s', burst: 20 });
    expectTypeOf(limiter.tryTake).returns.toEqualTypeOf<Promise<Decision>>();
    expectTypeOf(limiter.take).returns.toEqualTypeOf<Promise<Decision>>();
    expectTypeOf(limiter.peek).returns.toEqualTypeOf<Promise<Decision>>();
    expectTypeOf<Decision>().toEqualTypeOf<{
      allowed: boolean;
      remaining: number;
      retryAfterMs: number;
      resetAfterMs: number;
      limit: number;
    }>();
    expectTypeOf(limiter.store).toEqualTypeOf<KeyedStore>();
    // Compile-time checks (never called): each client type is accepted as is.
    const fits = () => {
      const a: RedisClientLike = new Redis({ lazyConnect: true });
      const b: RedisClientLike = createClient();
      const c: RedisClientLike = createCluster({ rootNodes: [] });
      return [a, b, c];
    };
    expectTypeOf(fits).toBeFunction();
  });
});
