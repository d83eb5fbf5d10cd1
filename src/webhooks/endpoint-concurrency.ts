/**
 * How many deliveries one worker keeps in flight to one endpoint, as data plus a pure transition
 * (docs/decisions/0007-webhook-throughput-and-endpoint-concurrency.md). Each worker keeps a limit per endpoint,
 * in memory, starting at `initial` (WEBHOOK_ENDPOINT_CONCURRENCY):
 *   - a success answered faster than `slowMs` raises it by one, up to `max`
 *     (WEBHOOK_ENDPOINT_CONCURRENCY_MAX): a receiver that keeps up is given more;
 *   - a success slower than `slowMs` lowers it by one, down to `min`;
 *   - an overload sign — timeout, connection error, 429 or 5xx — halves it, down to `min`;
 *   - anything else (another 4xx, a body too large, a refused address) leaves it: the receiver
 *     answered, and said nothing about its load.
 * Additive increase and multiplicative decrease (as TCP's congestion window): a receiver that
 * slows down or fails loses its extra slots within a few attempts, so a slow receiver never holds
 * more than `initial` slots for long, and never more than `max`.
 *
 * A worker also claims ahead: deliveries it holds for an endpoint, sent or waiting to be, may reach
 * `claimAhead` — twice the limit, or CLAIM_AHEAD_ROUNDS times it while the endpoint's last answer
 * was a fast success — so the next delivery is at hand the moment a request finishes, and one
 * claim transaction serves many deliveries. Waiting deliveries are leased; a fast endpoint drains
 * them in a few rounds of answers, and one whose lease would no longer cover an attempt is released
 * unsent (webhook-worker.ts).
 */
import type { HttpAttemptResult } from './webhook-http-client.ts';

export interface ConcurrencyPolicy {
  /** The limit of an endpoint this worker has not sent to yet (default 4). */
  readonly initial: number;
  /** The floor (1). */
  readonly min: number;
  /** The hard cap (default 16). */
  readonly max: number;
  /** A success that took this long or longer counts as slow (default 1000 ms). */
  readonly slowMs: number;
}

/** The endpoint's limit after an attempt with `result` finished under `limit`. */
export function nextConcurrencyLimit(
  policy: ConcurrencyPolicy,
  limit: number,
  result: Pick<HttpAttemptResult, 'outcome' | 'statusCode' | 'durationMs'>,
): number {
  const clamp = (n: number) => Math.min(policy.max, Math.max(policy.min, n));
  if (result.outcome === 'success') return clamp(answeredFast(policy, result) ? limit + 1 : limit - 1);
  if (signalsOverload(result)) return clamp(Math.floor(limit / 2));
  return clamp(limit);
}

/** Rounds of the limit a worker claims ahead for an endpoint whose last answer was a fast success. */
export const CLAIM_AHEAD_ROUNDS = 64;

/** Most deliveries a worker holds (in flight and waiting) for an endpoint with `limit`. */
export function claimAhead(limit: number, lastAnswerFast: boolean): number {
  return limit * (lastAnswerFast ? CLAIM_AHEAD_ROUNDS : 2);
}

/** Whether `result` was a success faster than the policy's slow threshold. */
export function answeredFast(policy: ConcurrencyPolicy, result: Pick<HttpAttemptResult, 'outcome' | 'durationMs'>): boolean {
  return result.outcome === 'success' && result.durationMs < policy.slowMs;
}

function signalsOverload(result: Pick<HttpAttemptResult, 'outcome' | 'statusCode'>): boolean {
  if (result.outcome === 'timeout' || result.outcome === 'connection_error') return true;
  if (result.outcome !== 'http_error' || result.statusCode === null) return false;
  return result.statusCode === 429 || result.statusCode >= 500;
}
