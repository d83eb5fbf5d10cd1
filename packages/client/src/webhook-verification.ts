/**
 * Verification of the service's webhook deliveries per Standard Webhooks (https://www.standardwebhooks.com):
 * HMAC-SHA256, keyed with the base64 part of a `whsec_…` secret, over `{webhook-id}.{webhook-timestamp}.{raw body}`,
 * sent as `v1,<base64>`; during a secret rotation the header carries two signatures, space-separated.
 */
import { timingSafeEqual } from 'node:crypto';
import type { WebhookEvent } from './resource-types.ts';
import { signatureOf } from './webhook-signature.ts';

/** Why a delivery was refused. */
export type WebhookVerificationCode = 'missing_header' | 'invalid_timestamp' | 'stale_timestamp' | 'invalid_signature' | 'invalid_secret' | 'invalid_payload';

/** A delivery that must not be trusted; answer it with a 4xx. `message` is one line. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  constructor(
    readonly code: WebhookVerificationCode,
    message: string,
  ) {
    super(message);
  }
}

/** Request headers as Node (IncomingHttpHeaders), fetch (Headers) or a plain object give them. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/** Options of verifyWebhook. */
export interface VerifyWebhookOptions {
  /** Largest accepted distance between webhook-timestamp and now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The current time (ms since the epoch); for tests and replays of stored deliveries. */
  now?: number;
}

const SECRET_PREFIX = 'whsec_';

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value.join(' ') : value;
}

function keyOf(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  const key = Buffer.from(encoded, 'base64');
  if (encoded.trim() === '' || key.length === 0)
    throw new WebhookVerificationError(
      'invalid_secret',
      'The webhook signing secret is empty or not base64; use the whsec_… secret shown when the endpoint was created',
    );
  return key;
}

/**
 * Verifies a delivery and returns its event, typed by `type`. `body` must be the raw request body,
 * byte for byte (not re-serialised JSON). `secret` may be several (e.g. old and new during your own
 * rotation): any one matching any signature is enough. Throws WebhookVerificationError otherwise.
 */
export function verifyWebhook(
  body: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  const event = verifiedJson(body, headers, secret, options);
  if (!isEvent(event)) {
    throw new WebhookVerificationError('invalid_payload', 'The webhook body is not a Store API event ({ id, type, created_at, data })');
  }
  return event;
}

/**
 * Verifies a FIFO endpoint's batch (one request, signed as one body, `webhook-id` the batch's id) and
 * returns its events in the order they were written: apply them in that order, and skip those you
 * have applied already (a batch can arrive again after a failure, or grown behind the same head).
 * Same arguments and errors as verifyWebhook.
 */
export function verifyWebhookBatch(
  body: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  options: VerifyWebhookOptions = {},
): WebhookEvent[] {
  const batch = verifiedJson(body, headers, secret, options);
  if (!Array.isArray(batch) || !batch.every(isEvent)) {
    throw new WebhookVerificationError('invalid_payload', 'The webhook body is not a FIFO batch (a JSON array of Store API events)');
  }
  return batch;
}

function isEvent(value: unknown): value is WebhookEvent {
  const e = value as Partial<WebhookEvent> | null;
  return !!e && typeof e === 'object' && typeof e.type === 'string' && typeof e.id === 'string' && typeof e.data === 'object' && e.data !== null;
}

/** The body parsed, once its signature and timestamp are verified. */
function verifiedJson(body: string | Uint8Array, headers: WebhookHeaders, secret: string | readonly string[], options: VerifyWebhookOptions): unknown {
  const secrets = typeof secret === 'string' ? [secret] : [...secret];
  if (secrets.length === 0) throw new WebhookVerificationError('invalid_secret', 'No webhook signing secret given');
  const keys = secrets.map(keyOf);

  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  for (const [name, value] of [
    ['webhook-id', id],
    ['webhook-timestamp', timestamp],
    ['webhook-signature', signatures],
  ] as const) {
    if (value === undefined || value.trim() === '')
      throw new WebhookVerificationError('missing_header', `The ${name} header is missing; this is not a signed Store API delivery`);
  }
  if (!/^\d{1,15}$/.test(timestamp!.trim()))
    throw new WebhookVerificationError('invalid_timestamp', `The webhook-timestamp header is not Unix seconds: ${JSON.stringify(timestamp)}`);
  const seconds = Number(timestamp!.trim());
  const tolerance = options.toleranceSeconds ?? 300;
  const nowSeconds = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - seconds) > tolerance) {
    const side = seconds < nowSeconds ? 'old' : 'in the future';
    throw new WebhookVerificationError(
      'stale_timestamp',
      `The webhook timestamp is ${Math.abs(nowSeconds - seconds)} s ${side} (tolerance ${tolerance} s): a replay or a wrong clock`,
    );
  }

  const raw = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const expected = keys.map((key) => signatureOf(key, id!, timestamp!.trim(), raw));
  let matched = false;
  for (const part of signatures!.trim().split(/\s+/)) {
    const comma = part.indexOf(',');
    if (comma === -1 || part.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(part.slice(comma + 1), 'base64');
    for (const mac of expected) {
      // Compare every pair (no early exit on a match) so timing says nothing about which one matched.
      if (given.length === mac.length && timingSafeEqual(given, mac)) matched = true;
    }
  }
  if (!matched)
    throw new WebhookVerificationError(
      'invalid_signature',
      'No webhook signature matches the signing secret: a wrong secret, or a body changed after signing (verify the raw body)',
    );

  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'The webhook body is not JSON');
  }
}
