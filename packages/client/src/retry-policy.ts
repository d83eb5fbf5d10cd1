/**
 * The client's retry policy as data plus one pure decision, tested without I/O. Only GETs exist in
 * the read API, so every request is safe to repeat; what is worth repeating:
 *
 * | Outcome                                   | Retried? | Wait                                   |
 * |-------------------------------------------|----------|----------------------------------------|
 * | 429 Too Many Requests                     | yes      | Retry-After (backoff if absent); fails at once if longer than maxRetryAfterMs |
 * | 5xx                                       | yes      | jittered exponential backoff           |
 * | network: refused, reset, timeout, DNS try-again, no code | yes | jittered exponential backoff |
 * | network: host not found, TLS/certificate  | no       | (a wrong base URL does not heal)       |
 * | any other status (400, 401, 403, 404 …)   | no       |                                        |
 *
 * At most `maxRetries` retries per request.
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
}

/** Network error codes worth another try (the service restarting, a dropped connection, a DNS hiccup). */
export const TRANSIENT_NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH',
  'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CLOSED',
]);

/** What came back from one attempt. */
export type AttemptOutcome =
  | { kind: 'network'; code: string | undefined }
  | { kind: 'status'; status: number; retryAfter: string | null };

export type RetryDecision =
  | { retry: true; delayMs: number }
  | { retry: false; reason: 'not_retryable' | 'retries_exhausted' | 'retry_after_too_long' };

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
  { random = Math.random, now = Date.now() }: { random?: () => number; now?: number } = {},
): RetryDecision {
  const retryable = outcome.kind === 'network'
    ? isTransientNetworkCode(outcome.code)
    : outcome.status === 429 || outcome.status >= 500;
  if (!retryable) return { retry: false, reason: 'not_retryable' };
  if (attempt > settings.maxRetries) return { retry: false, reason: 'retries_exhausted' };
  const backoff = backoffDelay(attempt, settings.retryBaseDelayMs, settings.retryMaxDelayMs, random);
  if (outcome.kind === 'status' && outcome.status === 429) {
    const asked = retryAfterMs(outcome.retryAfter, now);
    if (asked !== undefined && asked > settings.maxRetryAfterMs) return { retry: false, reason: 'retry_after_too_long' };
    return { retry: true, delayMs: asked ?? backoff };
  }
  return { retry: true, delayMs: backoff };
}
