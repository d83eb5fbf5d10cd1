/**
 * What an answer said besides its body (status, request id, rate-limit budget, validators, raw
 * headers), as Stripe's SDK exposes it: `lastResponse` on the object a call returns, defined
 * non-enumerable so the record's JSON, spread and deep equality are unchanged. Iterators keep the
 * `lastResponse` of their latest request, and a StoreApiError the one of the answer that failed.
 */
import { retryAfterMs } from './retry-policy.ts';

/** The request-id header the service echoes on every answer (its src/ops/request-id.ts). */
const REQUEST_ID_HEADER = 'x-request-id';

/** A key's budget of its rate-limit class, from X-RateLimit-* and the IETF RateLimit header. */
export interface RateLimitInfo {
  /** Requests allowed per window (X-RateLimit-Limit). */
  limit: number;
  /** Requests left in this window (X-RateLimit-Remaining). */
  remaining: number;
  /** When the window ends, Unix epoch seconds (X-RateLimit-Reset). */
  reset: number;
  /** Which budget counted the request (`standard` or `export`, from RateLimit-Policy), when named. */
  policy: string | undefined;
}

/** The metadata of one answer of the service. */
export interface ResponseMetadata {
  /** HTTP status. */
  status: number;
  /** Method and URL of the request, without the token, e.g. `GET /api/v1/products?limit=2`. */
  request: string;
  /** X-Request-Id of the answer: quote it to find the request in the service's logs. */
  requestId: string | undefined;
  /** The key's rate-limit budget after this request; undefined where none is counted (the admin API). */
  rateLimit: RateLimitInfo | undefined;
  /** Retry-After in milliseconds (sent with 429 and some 503), undefined when absent. */
  retryAfterMs: number | undefined;
  /** ETag of the answer, when it has one. */
  etag: string | undefined;
  /** Last-Modified of the answer, when it has one. */
  lastModified: string | undefined;
  /** The Idempotency-Key the client sent (admin POSTs), undefined otherwise. */
  idempotencyKey: string | undefined;
  /** Attempts it took: 1, plus the client's retries of this request. */
  attempts: number;
  /** Every header of the answer, names lower-case. */
  headers: Readonly<Record<string, string>>;
}

/** A value a call returned, carrying the metadata of the answer it came from. */
export type WithResponse<T> = T & { readonly lastResponse: ResponseMetadata };

function integer(value: string | null): number | undefined {
  if (value === null || !/^\s*\d+\s*$/.test(value)) return undefined;
  return Number(value);
}

function rateLimitOf(headers: Headers): RateLimitInfo | undefined {
  const limit = integer(headers.get('x-ratelimit-limit'));
  const remaining = integer(headers.get('x-ratelimit-remaining'));
  const reset = integer(headers.get('x-ratelimit-reset'));
  if (limit === undefined || remaining === undefined || reset === undefined) return undefined;
  const policy = /^\s*"([^"]+)"/.exec(headers.get('ratelimit-policy') ?? headers.get('ratelimit') ?? '')?.[1];
  return { limit, remaining, reset, policy };
}

/** The metadata of `response`, the answer to `request` after `attempts` attempts. */
export function responseMetadata(response: Response, request: string, extra: { attempts?: number; idempotencyKey?: string } = {}): ResponseMetadata {
  const headers = response.headers;
  const raw: Record<string, string> = {};
  headers.forEach((value, name) => {
    raw[name] = value;
  });
  return Object.freeze({
    status: response.status,
    request,
    requestId: headers.get(REQUEST_ID_HEADER) ?? undefined,
    rateLimit: rateLimitOf(headers),
    retryAfterMs: retryAfterMs(headers.get('retry-after')),
    etag: headers.get('etag') ?? undefined,
    lastModified: headers.get('last-modified') ?? undefined,
    idempotencyKey: extra.idempotencyKey,
    attempts: extra.attempts ?? 1,
    headers: Object.freeze(raw),
  });
}

/**
 * `value` with `lastResponse` defined on it, non-enumerable (JSON.stringify, spread and
 * Object.keys do not see it). A value that cannot hold a property (null, a string) is returned as is.
 */
export function withResponse<T>(value: T, metadata: ResponseMetadata): WithResponse<T> {
  if (value !== null && (typeof value === 'object' || typeof value === 'function') && Object.isExtensible(value)) {
    Object.defineProperty(value, 'lastResponse', { value: metadata, enumerable: false, configurable: true, writable: false });
  }
  return value as WithResponse<T>;
}

/**
 * The generator `walk` makes, with `lastResponse`: the metadata `walk` last passed to `track` (one
 * per request of a paged walk), null before the first.
 */
export function trackResponses<T>(
  walk: (track: (metadata: ResponseMetadata) => void) => AsyncGenerator<T>,
): AsyncGenerator<T> & { readonly lastResponse: ResponseMetadata | null } {
  let last: ResponseMetadata | null = null;
  const generator = walk((metadata) => {
    last = metadata;
  });
  return Object.defineProperty(generator, 'lastResponse', { get: () => last, enumerable: false }) as AsyncGenerator<T> & {
    readonly lastResponse: ResponseMetadata | null;
  };
}
