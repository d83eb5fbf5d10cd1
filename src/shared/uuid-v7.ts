/**
 * Time-ordered UUIDs (RFC 9562 version 7), monotonic within this process: ids minted later sort
 * after earlier ones even inside one millisecond. Used where records sharing one last_modified must
 * keep their creation order in lists (stock movements of one import, events of one write).
 */
import { randomBytes } from 'node:crypto';

let lastMs = 0;
let sequence = 0;

export function uuidv7(now: number = Date.now()): string {
  if (now > lastMs) {
    lastMs = now;
    sequence = randomBytes(2).readUInt16BE(0) & 0x3ff; // leave room to count up
  } else {
    sequence++;
    if (sequence > 0xfff) {
      lastMs++; // borrow the next millisecond rather than repeat or go backwards
      sequence = 0;
    }
  }
  const bytes = randomBytes(16);
  const ms = lastMs;
  bytes[0] = Math.floor(ms / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(ms / 2 ** 32) & 0xff;
  bytes[2] = (ms >>> 24) & 0xff;
  bytes[3] = (ms >>> 16) & 0xff;
  bytes[4] = (ms >>> 8) & 0xff;
  bytes[5] = ms & 0xff;
  bytes[6] = 0x70 | ((sequence >>> 8) & 0x0f);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
