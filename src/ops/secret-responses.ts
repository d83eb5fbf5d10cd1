/**
 * Responses that carry a secret are never stored by a cache (issue 19, point 5): an API token
 * (`POST /tokens`), a webhook signing secret (`POST /webhooks/endpoints`, `GET …/secret`,
 * `POST …/rotate-secret`) or any other response whose body holds one gets `Cache-Control: no-store`.
 * Recognised by shape in the serialised body — a whole `sia_` token or a `whsec_` secret — so a
 * route added later that returns one is covered without remembering to mark it. Token prefixes shown
 * in lists (`sia_` + 8 characters) are not secrets and do not match.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/** A whole API token (`sia_` + 43 base64url characters) or a webhook signing secret. */
export const SECRET_IN_BODY = /sia_[A-Za-z0-9_-]{40,}|whsec_[A-Za-z0-9+/=_-]{20,}/;

/** Bodies scanned once and sent many times (cached list pages): whether each holds a secret. */
const scanned = new WeakMap<Buffer, boolean>();

/**
 * Scans `body` now, once, for a body that will be sent again unchanged (never mutate it after): the
 * hook then reads the answer instead of decoding and scanning ~200 KiB per response.
 */
export function scanOnce(body: Buffer): Buffer {
  scanned.set(body, SECRET_IN_BODY.test(body.toString('latin1')));
  return body;
}

export const secretResponsesPlugin = fp(
  async function secretResponses(app: FastifyInstance) {
    // Registered before compression and ETags, so the body is still the serialised text here.
    app.addHook('onSend', async (_request, reply, payload) => {
      const known = Buffer.isBuffer(payload) ? scanned.get(payload) : undefined;
      if (known !== undefined) {
        if (known) reply.header('Cache-Control', 'no-store');
        return payload;
      }
      const text = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('latin1') : undefined;
      if (text !== undefined && SECRET_IN_BODY.test(text)) reply.header('Cache-Control', 'no-store');
      return payload;
    });
  },
  { name: 'store-api-secret-responses' },
);
