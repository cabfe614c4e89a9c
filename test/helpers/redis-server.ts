/**
 * Real redis-server processes for tests, examples and benches: each on a
 * free loopback port, with no persistence, stopped by the caller.
 *
 * `startRedis()` starts one server; `startRedisCluster()` starts three
 * `--cluster-enabled yes` nodes and joins them with `redis-cli --cluster create`.
 */

import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServer {
  port: number;
  host: '127.0.0.1';
  url: string;
  process: ChildProcess;
  /** Sends a signal (SIGSTOP to pause, SIGCONT to resume, SIGKILL to kill). */
  signal(signal: NodeJS.Signals): void;
  /** Stops the server and waits for it to exit. */
  stop(): Promise<void>;
  /** Starts a fresh server on the same port after `stop()` (an empty one: no persistence). */
  restart(): Promise<void>;
}

/** Fails with the fix when redis-server is not installed. */
export function requireRedisServer(): void {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      'redis-server is not installed, and the Redis tests start their own: install it with ' +
        '`apt-get install redis-server` (Debian/Ubuntu) and run the tests again',
    );
  }
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Resolves once a server on `port` answers PING; rejects after `timeoutMs`,
 * or at once if `child` (the server started for it) has exited, with what it printed.
 */
export async function waitForPing(port: number, timeoutMs = 15_000, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child !== undefined && (child.exitCode !== null || child.signalCode !== null)) {
      throw new Error(`redis-server on port ${port} exited before it answered PING:\n${outputOf(child)}`);
    }
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ port, host: '127.0.0.1' });
      let text = '';
      socket.setTimeout(200, () => {
        socket.destroy();
        resolve(false);
      });
      socket.on('connect', () => socket.write('PING\r\n'));
      socket.on('data', (chunk) => {
        text += chunk.toString();
        if (text.includes('\r\n')) {
          socket.destroy();
          resolve(text.startsWith('+PONG'));
        }
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline)
      throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The last lines a server started by {@link spawnRedis} printed (its log goes to stdout). */
const outputs = new WeakMap<ChildProcess, string>();
function outputOf(child: ChildProcess): string {
  return outputs.get(child) ?? '';
}

function spawnRedis(port: number, extra: string[], dir: string): ChildProcess {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  outputs.set(child, '');
  const keep = (chunk: Buffer) => outputs.set(child, (outputOf(child) + chunk.toString()).slice(-2000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.on('error', () => {});
  return child;
}

/** Starts a redis-server on a free port. */
export async function startRedis(extra: string[] = []): Promise<RedisServer> {
  requireRedisServer();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tokenpace-redis-'));
  let child = spawnRedis(port, extra, dir);
  await waitForPing(port, undefined, child);
  const server: RedisServer = {
    port,
    host: '127.0.0.1',
    url: `redis://127.0.0.1:${port}`,
    get process() {
      return child;
    },
    signal(signal) {
      child.kill(signal);
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGCONT'); // a paused server cannot exit
      child.kill('SIGKILL');
      await exited;
    },
    async restart() {
      await server.stop();
      child = spawnRedis(port, extra, dir);
      await waitForPing(port, undefined, child);
    },
  };
  const cleanup = () => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', cleanup);
  return server;
}

export interface RedisCluster {
  nodes: RedisServer[];
  /** `[{ host, port }]` of the nodes, for cluster clients. */
  seeds: { host: string; port: number }[];
  stop(): Promise<void>;
}

function run(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { encoding: 'utf8', timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')} failed: ${error.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/**
 * Starts three cluster-enabled nodes on free ports and creates a cluster of
 * them (no replicas). Each node's bus port is a free port of its own: the
 * default, 10,000 above the node's, does not exist for a node above 55535.
 */
export async function startRedisCluster(): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  for (let i = 0; i < 3; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'tokenpace-cluster-'));
    nodes.push(
      await startRedis([
        '--cluster-enabled',
        'yes',
        '--cluster-port',
        String(await freePort()),
        '--cluster-config-file',
        join(dir, 'nodes.conf'),
        '--cluster-node-timeout',
        '2000',
      ]),
    );
  }
  await run('redis-cli', [
    '--cluster',
    'create',
    ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes',
  ]);
  // Wait until every node agrees the cluster is up.
  const deadline = Date.now() + 15_000;
  for (const node of nodes) {
    for (;;) {
      const info = await run('redis-cli', ['-p', String(node.port), 'cluster', 'info']);
      if (info.includes('cluster_state:ok')) break;
      if (Date.now() > deadline) throw new Error(`cluster node ${node.port} never reached cluster_state:ok`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    nodes,
    seeds: nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}
