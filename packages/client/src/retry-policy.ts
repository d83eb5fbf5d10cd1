/**
 * The client's retry policy as data plus one pure decision, tested without I/O. Only a request that
 * is safe to repeat is retried: a GET, or a POST carrying an Idempotency-Key (the client sends one on
 * every admin POST). A POST without a key is retried only when it surely never ran: connection
 * refused, or a 429 (the service refused it before doing anything). What is worth repeating:
 *
 * | Outcome                                   | Retried? | Wait                                   |
 * |-------------------------------------------|----------|----------------------------------------|
 * | 429 Too Many Requests                     | yes      | Retry-After (backoff if absent); fails at once if longer than maxRetryAfterMs |
 * | 5xx                                       | yes      | jittered exponential backoff           |
 * | network: refused, reset, timeout, DNS try-again, no code | yes | jittered exponential backoff |
 * | network: host not found, TLS/certificate  | no       | (a wrong base URL does not heal)       |
 * | our own timeout (timeoutMs, idleTimeoutMs) | only `maxTimeoutRetries` times (default 0) | backoff |
 * | 409 idempotency_key_in_use (keyed POST)   | yes      | Retry-After                            |
 * | any other status (400, 401, 403, 404 …)   | no       |                                        |
 *
 * At most `maxRetries` retries per request. A hung service is not retried blindly: by default a
 * timeout fails the call at once, so it fails within timeoutMs.
 */

/** Retry settings (see StoreApiClientOptions for the defaults). */
export interface RetrySettings {
  /** Retries of one request; 0 disables. */
  maxRetries: number;
  /** First backoff step (ms); doubles per retry. */
  retryBaseDelayMs: number;
  /** Longest backoff step (ms). */
  retryMaxDelayMs: number;
  /** A Retry-After longer than this (ms) fails instead of waiting. */
  maxRetryAfterMs: number;
  /** Retries after the client's own timeout fired (0: a timeout fails the call). Optional: 0. */
  maxTimeoutRetries?: number;
}

/** Network error codes worth another try (the service restarting, a dropped connection, a DNS hiccup). */
export const TRANSIENT_NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/** What came back from one attempt. */
export type AttemptOutcome =
  | { kind: 'network'; code: string | undefined }
  | { kind: 'timeout' }
  | { kind: 'status'; status: number; retryAfter: string | null; code?: string };

/** Whether repeating the request is safe: a GET, or a POST with an Idempotency-Key. Default true. */
export interface RequestSafety {
  idempotent?: boolean;
}

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: 'not_retryable' | 'retries_exhausted' | 'retry_after_too_long' };

/** Jittered exponential backoff: half of min(cap, base·2^(attempt-1)) plus up to as much again at random. */
export function backoffDelay(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/** Retry-After in milliseconds (delta-seconds or an HTTP date); undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Whether a network failure with this error code is worth another try (no code: fetch's bare "fetch failed"). */
export function isTransientNetworkCode(code: string | undefined): boolean {
  return code === undefined || TRANSIENT_NETWORK_CODES.has(code);
}

/** Whether to retry after attempt number `attempt` (1-based) ended with `outcome`, and how long to wait first. */
export function decideRetry(
  outcome: AttemptOutcome,
  attempt: number,
  settings: RetrySettings,
  { random = Math.random, now = Date.now(), idempotent = true }: { random?: () => number; now?: number } & RequestSafety = {},
): RetryDecision {
  let retryable: boolean;
  if (outcome.kind === 'timeout') {
    if (!idempotent) return { retry: false, reason: 'not_retryable' };
    if (attempt > (settings.maxTimeoutRetries ?? 0)) return { retry: false, reason: 'retries_exhausted' };
    retryable = true;
  } else if (outcome.kind === 'network') {
    // Refused: the request never reached the service, so even an unkeyed POST may go again.
    retryable = isTransientNetworkCode(outcome.code) && (idempotent || outcome.code === 'ECONNREFUSED');
  } else {
    retryable =
      outcome.status === 429 || (idempotent && outcome.status >= 500) || (idempotent && outcome.status === 409 && outcome.code === 'idempotency_key_in_use');
  }
  if (!retryable) return { retry: false, reason: 'not_retryable' };
  if (attempt > settings.maxRetries) return { retry: false, reason: 'retries_exhausted' };
  const backoff = backoffDelay(attempt, settings.retryBaseDelayMs, settings.retryMaxDelayMs, random);
  if (outcome.kind === 'status' && (outcome.status === 429 || outcome.status === 409)) {
    const asked = retryAfterMs(outcome.retryAfter, now);
    if (asked !== undefined && asked > settings.maxRetryAfterMs) return { retry: false, reason: 'retry_after_too_long' };
    return { retry: true, delayMs: asked ?? backoff };
  }
  return { retry: true, delayMs: backoff };
}
