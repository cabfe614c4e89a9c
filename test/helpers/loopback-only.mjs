/**
 * Preloaded (`node --import`) into each docs example that test/docs-examples.test.ts runs: the
 * process may open TCP connections to 127.0.0.1, ::1 and localhost only, and never to port 6379
 * (the machine's own Redis; the examples get a redis-server of their own). A connection or a name
 * lookup for anything else ends the process at once, with exit code 97 and the address on stderr,
 * before a packet leaves: an example that names another host fails instead of reaching it.
 * Unix sockets are allowed.
 */

import dns from 'node:dns';
import net from 'node:net';

const loopback = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1', 'localhost']);
const refusedPorts = new Set([6379]);

/** Ends the process: `what` is not on this machine's loopback, or is the machine's own Redis. */
function refuse(what) {
  process.stderr.write(`loopback-only: refused ${what}: examples reach 127.0.0.1 only (and never port 6379)\n`);
  process.exit(97);
}

function checkHost(host, what = 'a connection to') {
  const name = String(host).replace(/^\[|\]$/g, '');
  if (!loopback.has(name.toLowerCase())) refuse(`${what} ${name}`);
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guardedConnect(...args) {
  // net.connect passes its arguments normalized, as an array [options, callback].
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (first !== null && typeof first === 'object') {
    if (first.path === undefined) {
      checkHost(first.host ?? 'localhost');
      if (refusedPorts.has(Number(first.port))) refuse(`port ${first.port}`);
    }
  } else if (typeof first === 'number' || /^\d+$/.test(String(first))) {
    checkHost(typeof args[1] === 'string' ? args[1] : 'localhost');
    if (refusedPorts.has(Number(first))) refuse(`port ${first}`);
  }
  return connect.apply(this, args);
};

const lookup = dns.lookup;
dns.lookup = function guardedLookup(hostname, ...rest) {
  checkHost(hostname, 'a lookup of');
  return lookup.call(this, hostname, ...rest);
};
const lookupPromise = dns.promises.lookup;
dns.promises.lookup = function guardedLookup(hostname, ...rest) {
  checkHost(hostname, 'a lookup of');
  return lookupPromise.call(this, hostname, ...rest);
};
