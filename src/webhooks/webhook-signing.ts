/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): headers `webhook-id`,
 * `webhook-timestamp` (Unix seconds) and `webhook-signature: v1,<base64 HMAC-SHA256>` over
 * `{id}.{timestamp}.{body}`, keyed with the base64-decoded part of a `whsec_<base64>` secret.
 * During a secret rotation's overlap both signatures are sent, space-separated, newest first.
 */
import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { signatureOf } from '@store-api/client/webhook-signature';

const PREFIX = 'whsec_';
/** Decoded keys by secret: a worker signs every delivery, with a handful of secrets. */
const keys = new Map<string, KeyObject>();
const KEYS_CACHED_MAX = 1000;

function keyOf(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size >= KEYS_CACHED_MAX) keys.clear();
    key = createSecretKey(Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64'));
    keys.set(secret, key);
  }
  return key;
}

/** A new signing secret: `whsec_` + base64 of 24 random bytes. */
export function generateSecret(): string {
  return PREFIX + randomBytes(24).toString('base64');
}

/** `v1,<base64>` signature of `body` for message `id` at `timestampSeconds` with `secret`. */
export function sign(secret: string, id: string, timestampSeconds: number, body: string | Uint8Array): string {
  // The signed content is built by the client package's verifier's own function, so the two cannot drift.
  return `v1,${signatureOf(keyOf(secret), id, timestampSeconds, body).toString('base64')}`;
}

/** The three Standard Webhooks headers for `body` (its text, or its UTF-8 bytes), signed with every secret in `secrets`. */
export function signatureHeaders(secrets: readonly string[], id: string, timestampSeconds: number, body: string | Uint8Array): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': secrets.map((s) => sign(s, id, timestampSeconds, body)).join(' '),
  };
}
