/**
 * Request ids: a caller's `X-Request-Id` is kept when it looks like an id (so one id can follow a
 * request through a load balancer and our logs), otherwise a fresh UUID. The id is on every log line
 * of the request (`request_id`) and echoed in the response's `X-Request-Id`.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isSafeRequestId } from './log-redaction.ts';

export const REQUEST_ID_HEADER = 'x-request-id';
/** Log field carrying the id on every line logged for a request. */
export const REQUEST_ID_LOG_LABEL = 'request_id';

/**
 * Up to 128 characters of letters, digits and `-_.:` that cannot be a credential (no token prefix,
 * no long random-looking run: a token pasted as an id would otherwise be logged and echoed);
 * anything else is replaced, never logged raw.
 */
const ACCEPTABLE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Fastify `genReqId`: the caller's id when acceptable, else a new UUID. */
export function generateRequestId(request: IncomingMessage): string {
  const given = request.headers[REQUEST_ID_HEADER];
  const value = Array.isArray(given) ? given[0] : given;
  return value && ACCEPTABLE_ID.test(value) && isSafeRequestId(value) ? value : randomUUID();
}
