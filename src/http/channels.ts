/**
 * The HTTP adapters' diagnostics channels live in the one registry of
 * tokenpace's channels, src/channels.ts (with the keyed limiter's and the
 * RedisStore's); this module re-exports it for the adapters.
 */

export * from '../channels.js';
