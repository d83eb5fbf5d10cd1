/**
 * Stored idempotent answers are sealed (decision 0040): an answer of a keyed admin POST may hold a
 * secret shown once (a new `sia_` token, a TOTP secret, recovery codes, an invitation or reset
 * link), and it is kept 24 h to be replayed. The database keeps only
 *  - `key_hash`: SHA-256 of the Idempotency-Key (what lookups use),
 *  - `request_hash`: HMAC-SHA256 of the request's hash under a key derived from the Idempotency-Key,
 *  - `response_body`: the answer encrypted with AES-256-GCM under a key derived from the
 *    Idempotency-Key,
 * both keys derived with HKDF-SHA256 from the Idempotency-Key itself, salted with the principal that
 * used it. Only a retry that sends the key again (by the same principal) can open the answer; the
 * database alone cannot. That holds as far as the key cannot be guessed: our client sends a random
 * UUID; a caller choosing guessable keys (`order-1001`) gets less protection (decision 0040).
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/** Tells the format of a sealed body (version 1: AES-256-GCM, 12-byte nonce, 16-byte tag). */
const SEALED_PREFIX = 'v1:';
const HKDF_INFO = 'store-api idempotent answer v1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** The two keys of one Idempotency-Key used by one principal. */
export interface AnswerKeys {
  /** AES-256-GCM key of the answer. */
  readonly seal: Buffer;
  /** HMAC-SHA256 key of the request's hash. */
  readonly mac: Buffer;
}

/** What the table stores instead of the Idempotency-Key: its SHA-256, hex. */
export function idempotencyKeyHash(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Derives the keys of `key` used by `principal` (HKDF-SHA256, the principal as salt). */
export function answerKeys(key: string, principal: string): AnswerKeys {
  const okm = Buffer.from(hkdfSync('sha256', Buffer.from(key, 'utf8'), Buffer.from(principal, 'utf8'), HKDF_INFO, 64));
  return { seal: okm.subarray(0, 32), mac: okm.subarray(32) };
}

/** What the table stores instead of the request's hash: its HMAC under the key's MAC key, hex. */
export function requestTag(keys: AnswerKeys, requestHash: string): string {
  return createHmac('sha256', keys.mac).update(requestHash, 'utf8').digest('hex');
}

/** The additional data a sealed answer is bound to: its status and content type, stored in clear. */
function boundData(status: number, type: string | null): Buffer {
  return Buffer.from(`${status}\n${type ?? ''}`, 'utf8');
}

/** Encrypts an answer's body; the result is `v1:` and base64 of nonce, ciphertext and tag. */
export function sealAnswer(keys: AnswerKeys, status: number, type: string | null, body: string): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keys.seal, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(boundData(status, type));
  const sealed = Buffer.concat([nonce, cipher.update(body, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return SEALED_PREFIX + sealed.toString('base64');
}

/** Decrypts a body sealed by `sealAnswer`; throws when it was not sealed with these keys, status and type. */
export function openAnswer(keys: AnswerKeys, status: number, type: string | null, sealed: string): string {
  if (!sealed.startsWith(SEALED_PREFIX)) throw new Error('stored idempotent answer is not sealed (unknown format)');
  const bytes = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64');
  if (bytes.length < NONCE_BYTES + TAG_BYTES) throw new Error('stored idempotent answer is truncated');
  const decipher = createDecipheriv('aes-256-gcm', keys.seal, bytes.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES });
  decipher.setAAD(boundData(status, type));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  return Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
}
