/**
 * A private PostgreSQL cluster for the tests that stop and start a server (the machine's shared
 * server on 5432 is never restarted): `initdb` in a temporary directory and `pg_ctl` to start and
 * stop it, from /usr/lib/postgresql/<version>/bin, on a free loopback port, run as the `postgres`
 * user through `runuser` when this process is root (PostgreSQL refuses to run as root).
 * `postgresBinaries()` says why a test must skip when the binaries are absent.
 */

import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './redis-server.js';

const run = promisify(execFile);

/** The directory of initdb and pg_ctl, or why there is none. */
export function postgresBinaries(): { bin: string } | { missing: string } {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const version of versions) {
    const bin = join(root, version, 'bin');
    if (existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'pg_ctl'))) return { bin };
  }
  return { missing: `no initdb and pg_ctl under ${root}/<version>/bin (install the postgresql server package)` };
}

export interface PostgresServer {
  port: number;
  url: string;
  /** Stops the server now (`-m immediate` with `crash: true`, else `-m fast`). */
  stop(options?: { crash?: boolean }): Promise<void>;
  /** Starts it again on the same port and data directory. */
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  destroy(): Promise<void>;
}

/** Starts a fresh cluster (trust auth, user `postgres`, database `postgres`) on a free port. */
export async function startPostgres(): Promise<PostgresServer> {
  const found = postgresBinaries();
  if ('missing' in found) throw new Error(found.missing);
  const { bin } = found;
  const dir = mkdtempSync(join(tmpdir(), 'tokenpace-pg-'));
  const data = join(dir, 'data');
  const root = userInfo().uid === 0;
  if (root) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
    chmodSync(dir, 0o700);
  }
  const as = (command: string, args: string[]) =>
    root ? run('runuser', ['-u', 'postgres', '--', join(bin, command), ...args]) : run(join(bin, command), args);
  await as('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  const start = async () => {
    await as('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
  };
  const stop = async ({ crash = false } = {}) => {
    await as('pg_ctl', ['-D', data, '-m', crash ? 'immediate' : 'fast', '-w', 'stop']);
  };
  await start();
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop,
    start,
    async destroy() {
      await stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
