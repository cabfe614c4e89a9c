/**
 * Loopback servers and clients for the HTTP tests: a real node:http server
 * on 127.0.0.1 (a free port) and an undici Agent to talk to it.
 */

import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, type Dispatcher, request } from 'undici';

export interface Loopback {
  server: Server;
  url: string;
  /** Requests that reached the server (counted before the handler runs). */
  arrived(): number;
  close(): Promise<void>;
}

/** Starts `handler` on 127.0.0.1:0. */
export async function listen(handler: RequestListener): Promise<Loopback> {
  let arrived = 0;
  const server = createServer((req, res) => {
    arrived++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    arrived: () => arrived,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type Middleware = (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void;

/** A server whose every request goes through `middleware` and then answers 200 `ok`. */
export function serve(middleware: Middleware): Promise<Loopback> {
  return listen((req, res) => {
    middleware(req, res, () => {
      res.setHeader('content-type', 'text/plain');
      res.end('ok');
    });
  });
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request; the body is read in full. */
export async function call(
  url: string,
  options: {
    headers?: Record<string, string>;
    dispatcher?: Dispatcher;
    signal?: AbortSignal;
    method?: 'GET' | 'POST' | 'HEAD';
  } = {},
): Promise<Reply> {
  const response = await request(url, {
    method: options.method ?? 'GET',
    headers: options.headers,
    dispatcher: options.dispatcher,
    signal: options.signal,
  });
  const body = await response.body.text();
  return { status: response.statusCode, headers: response.headers, body };
}

/** An agent with enough connections for a burst of concurrent calls. */
export function agent(): Agent {
  return new Agent({ connections: 64 });
}

/** Waits (real time, short polls) until `condition` holds. */
export async function until(condition: () => boolean, what = 'condition', timeoutMs = 5000): Promise<void> {
  const start = performance.now();
  while (!condition()) {
    if (performance.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
