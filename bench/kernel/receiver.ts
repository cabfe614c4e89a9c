/**
 * The receiving end of the kernel comparison, run in the receiver's network
 * namespace: a TCP server on each port it is given, one flow per port. Every
 * read is recorded as (CLOCK_MONOTONIC ms, bytes), the clock the sender's
 * process shares. It prints `ready` once it listens; a line on stdin ends the
 * run, and it prints every flow's reads as one JSON line.
 *
 * `node receiver.ts HOST PORT...`
 */

import { createServer, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { monotonicMs, type Reads } from './windows.js';

const [host, ...portArgs] = process.argv.slice(2);
if (host === undefined || portArgs.length === 0) throw new Error('usage: receiver.ts HOST PORT...');
const ports = portArgs.map(Number);

const reads: Record<number, Reads> = {};
const sockets = new Set<Socket>();
await Promise.all(
  ports.map(
    (port) =>
      new Promise<void>((resolve, reject) => {
        const flow: Reads = { atMs: [], bytes: [] };
        reads[port] = flow;
        const server = createServer((socket) => {
          sockets.add(socket);
          socket.on('data', (chunk: Buffer) => {
            flow.atMs.push(monotonicMs());
            flow.bytes.push(chunk.length);
          });
          socket.on('error', () => {});
          socket.on('close', () => sockets.delete(socket));
        });
        server.on('error', reject);
        server.listen(port, host, () => resolve());
      }),
  ),
);
console.log('ready');

createInterface({ input: process.stdin }).once('line', () => {
  for (const socket of sockets) socket.destroy();
  // Exit once the line is written (see sender.ts).
  process.stdout.write(`${JSON.stringify(reads)}\n`, () => process.exit(0));
});
