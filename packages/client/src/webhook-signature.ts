/**
 * The one Standard Webhooks v1 signature (https://www.standardwebhooks.com) that both the service's
 * signing and this package's verifyWebhook use: HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{raw body}`.
 * Dependency-free (node:crypto only) so the service can import it through the package export
 * `@store-api/client/webhook-signature`.
 */
import { createHmac, type KeyObject } from 'node:crypto';

/** The signed content: `{id}.{timestamp}.` followed by the raw body, byte for byte. */
export function signedContent(id: string, timestamp: number | string, body: string | Uint8Array): Buffer {
  const raw = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), raw]);
}

/** The v1 signature's HMAC-SHA256 digest (raw bytes; the header carries `v1,` + its base64) of `body` with `key`. */
export function signatureOf(key: KeyObject | Uint8Array, id: string, timestamp: number | string, body: string | Uint8Array): Buffer {
  // The HMAC takes signedContent's two parts one after the other: the same bytes, without copying
  // the body into one buffer with its prefix (a sender signs every delivery).
  return createHmac('sha256', key)
    .update(`${id}.${timestamp}.`, 'utf8')
    .update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body)
    .digest();
}
