/**
 * Redis Cluster's key-to-slot rule (CRC16/XMODEM of the key, or of its hash tag,
 * modulo 16384), so a RedisStore can batch only the decisions that one cluster
 * node can run together. A hash tag is the part between the first `{` and the
 * first `}` after it, when that part is not empty.
 */

import { wellFormed, wtf8 } from './client.js';

/** CRC16/XMODEM (polynomial 0x1021, initial 0) of `bytes[start..end)`, a bit at a time. */
function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc ^= (bytes[i] as number) << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The cluster slot (0..16383) Redis assigns to `key`, as sent (WTF-8: ./client.ts). */
export function clusterSlot(key: string): number {
  const bytes = wellFormed(key) ? Buffer.from(key, 'utf8') : wtf8(key);
  const open = bytes.indexOf(0x7b); // {
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) return crc16(bytes, open + 1, close) & 0x3fff;
  }
  return crc16(bytes, 0, bytes.length) & 0x3fff;
}
