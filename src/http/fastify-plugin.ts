/**
 * `rateLimitPlugin`: the Fastify plugin form of `rateLimitHook`, as
 * @fastify/rate-limit users write it: `await fastify.register(rateLimitPlugin,
 * { rate: 20, burst: 40 })` limits every route registered after it, and a
 * route's `config: { rateLimit: { ... } }` gives that route options of its
 * own, or `config: { rateLimit: false }` none. This module is the package's
 * `tokenpace/fastify` entry: its types are Fastify's own (the per-route
 * `config.rateLimit` is declared on Fastify's `FastifyContextConfig`), so it is
 * kept out of the main entry, whose types name no framework. At run time it
 * imports nothing of Fastify's.
 *
 * Invariants: the plugin's options are checked when it is registered, a
 * route's when the route is; routes without options of their own share one
 * limiter (one bucket per key across them), a route with options has its own;
 * the plugin skips Fastify's encapsulation (as fastify-plugin would), so its
 * `onRoute` hook sees the routes of the scope it is registered in and of the
 * scopes below.
 */

import type { FastifyPluginCallback, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { rateLimitHook } from './fastify.js';
import type { RateLimitOptions } from './rate-limit-options.js';

/** The plugin's options, and a route's `config.rateLimit`: `rateLimitHook`'s, over Fastify's request and reply. */
export type FastifyRateLimitOptions = RateLimitOptions<FastifyRequest, FastifyReply>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * This route's options for `rateLimitPlugin` (tokenpace/fastify), each replacing the plugin's
     * own (the route gets buckets of its own), or `false`: the route is not limited.
     */
    rateLimit?: Partial<FastifyRateLimitOptions> | false;
  }
}

/** The options that say where the limits come from: a route that gives one of them gives them all. */
const LIMITER = ['limiter'] as const;
const BUCKETS = ['rate', 'burst', 'global', 'maxKeys'] as const;

/** A route's options: the plugin's, each replaced by the route's; a route's `limiter` or buckets replace the plugin's. */
function routeOptions(
  plugin: FastifyRateLimitOptions,
  route: Partial<FastifyRateLimitOptions>,
): FastifyRateLimitOptions {
  const merged: Record<string, unknown> = { ...plugin, ...route };
  const replaced = 'limiter' in route ? BUCKETS : BUCKETS.some((name) => name in route) ? LIMITER : [];
  for (const name of replaced) if (!(name in route)) delete merged[name];
  return merged as FastifyRateLimitOptions;
}

type Hook = onRequestHookHandler | onRequestHookHandler[] | undefined;

/**
 * The rate limiter as a Fastify plugin: `await fastify.register(rateLimitPlugin, { rate: 20, burst: 40 })`,
 * then per route `{ config: { rateLimit: { rate: 1, burst: 5 } } }` or `{ config: { rateLimit: false } }`.
 * Register it before the routes it limits: Fastify tells a plugin only of the routes added after it.
 */
export const rateLimitPlugin: FastifyPluginCallback<FastifyRateLimitOptions> = Object.assign(
  (
    fastify: Parameters<FastifyPluginCallback<FastifyRateLimitOptions>>[0],
    options: FastifyRateLimitOptions,
    done: (error?: Error) => void,
  ) => {
    let shared: onRequestHookHandler;
    try {
      shared = rateLimitHook(options) as unknown as onRequestHookHandler;
    } catch (error) {
      done(error as Error);
      return;
    }
    fastify.addHook('onRoute', (route) => {
      const own = route.config?.rateLimit;
      if (own === false) return;
      const hook =
        own === undefined ? shared : (rateLimitHook(routeOptions(options, own)) as unknown as onRequestHookHandler);
      const existing = route.onRequest as Hook;
      route.onRequest = existing === undefined ? [hook] : [...(Array.isArray(existing) ? existing : [existing]), hook];
    });
    done();
  },
  {
    // What fastify-plugin sets: run in the registering scope, under this name, for Fastify 5.
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: 'tokenpace',
    [Symbol.for('plugin-meta')]: { name: 'tokenpace', fastify: '5.x' },
  },
);
