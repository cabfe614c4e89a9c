/**
 * What the rate-limit engine (engine.ts) needs of a connection, whatever
 * server carries it: the socket's peer and a request header (for the default
 * key), whether the client has gone, a signal when it goes while a request
 * is held (`maxWait`), and the end of an admitted request's response
 * (`skipSuccessfulRequests`, `skipFailedRequests`). node:http's request and
 * response give all of it ({@link nodeTransport}: Connect, Express, Fastify,
 * Koa, Hono's Node server); hono.ts gives it for web `Request`s (Hono on Bun,
 * Deno, Workers).
 *
 * Invariants: `onAbort`'s listener runs at most once, and never after the
 * function it returned was called; `onDone`'s runs exactly once per admitted
 * request, when the response has completed (`true` and its status) or was cut
 * short (`false`).
 */

import type { IncomingMessage, ServerResponse } from 'node:http';

/** A connection as the engine sees it: `Raw` carries the request, `RawRes` the response. */
export interface Transport<Raw, RawRes> {
  /** The request as the diagnostics messages carry it. */
  message(raw: Raw): IncomingMessage | Request;
  /** The socket's peer address; `''` when there is none (a Unix socket, a runtime that does not say). */
  peer(raw: Raw): string;
  /** A request header's value (lowercase name). */
  header(raw: Raw, name: string): string | readonly string[] | undefined;
  /** Whether the client has gone: nobody is left to answer. */
  closed(raw: Raw): boolean;
  /** Calls `listener` if the client goes away; the function returned stops listening. */
  onAbort(rawRes: RawRes, listener: () => void): () => void;
  /** Calls `listener` once the response is done: whether it completed, and its status. */
  onDone(rawRes: RawRes, listener: (completed: boolean, statusCode: number) => void): void;
}

/** node:http's request and response. */
export const nodeTransport: Transport<IncomingMessage, ServerResponse> = {
  message: (req) => req,
  peer: (req) => req.socket?.remoteAddress ?? '',
  header: (req, name) => req.headers[name],
  closed: (req) => req.socket?.destroyed !== false,
  onAbort: (res, listener) => {
    res.once('close', listener);
    return () => res.off('close', listener);
  },
  onDone: (res, listener) => {
    res.once('close', () => listener(res.writableFinished, res.statusCode));
  },
};
