/**
 * When a failed delivery is tried again: the schedule is data (WEBHOOK_RETRY_SCHEDULE_MS, default
 * 1 min, 5 min, 30 min, 2 h, 12 h), the decision a pure function of it. A delivery gets one first
 * attempt plus one retry per schedule entry (6 attempts by default); when the last retry fails it
 * becomes a dead letter. A receiver's `Retry-After` longer than the scheduled delay is honoured, up
 * to MAX_RETRY_AFTER_MS so that no receiver can park a delivery indefinitely.
 */

/** Longest `Retry-After` honoured (24 h); longer values are cut to it. */
export const MAX_RETRY_AFTER_MS = 86_400_000;

export interface RetryPolicy {
  /** Delay before retry n (index n − 1), in milliseconds. */
  readonly scheduleMs: readonly number[];
}

export type RetryDecision = { readonly kind: 'retry'; readonly delayMs: number; readonly nextAttemptAt: number } | { readonly kind: 'dead' };

/**
 * What follows the failure of attempt `attemptNumber` (1 = the first attempt) finished at `now`
 * (epoch ms). `retryAfterMs` is the receiver's Retry-After, if it sent one.
 */
export function decideAfterFailure(policy: RetryPolicy, attemptNumber: number, now: number, retryAfterMs?: number | null): RetryDecision {
  const retryIndex = attemptNumber - 1; // the retry that would follow this attempt
  if (attemptNumber < 1 || retryIndex >= policy.scheduleMs.length) return { kind: 'dead' };
  const scheduled = policy.scheduleMs[retryIndex]!;
  const requested = retryAfterMs != null && retryAfterMs > 0 ? Math.min(retryAfterMs, MAX_RETRY_AFTER_MS) : 0;
  const delayMs = Math.max(scheduled, requested);
  return { kind: 'retry', delayMs, nextAttemptAt: now + delayMs };
}

/** Total attempts a delivery gets: the first plus one per schedule entry. */
export function maxAttempts(policy: RetryPolicy): number {
  return policy.scheduleMs.length + 1;
}

/**
 * Parses a `Retry-After` header (delay in seconds, or an HTTP date) into milliseconds from `now`;
 * undefined when absent or unreadable, 0 when the date is past.
 */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}
