/**
 * The circuit breaker of one endpoint, as data plus pure transitions. The breaker's state is kept
 * on the endpoint row (consecutive_failures, paused_until); the worker applies these functions
 * inside the settle transaction (delivery-queue.ts) with the row locked, so concurrent settles of
 * one endpoint count correctly.
 *
 * States:
 *   CLOSED     consecutive_failures < threshold. Deliveries go out normally; every failed attempt
 *              adds one, every success resets to 0.
 *   OPEN       consecutive_failures ≥ threshold and paused_until > now. No delivery of the endpoint
 *              is claimed; due deliveries wait (their status does not change).
 *   HALF_OPEN  consecutive_failures ≥ threshold and paused_until ≤ now. Exactly one delivery, the
 *              probe, may be claimed; claiming it re-arms paused_until = now + pause
 *              (probeClaimed), so no second worker sends a probe and a probe lost with a killed
 *              worker is simply tried again after another pause.
 * Transitions:
 *   CLOSED  --failure, count reaches threshold-->  OPEN (paused_until = now + pause)
 *   OPEN    --time passes paused_until-->          HALF_OPEN
 *   HALF_OPEN --probe claimed-->                   OPEN until the probe settles
 *   any     --success-->                           CLOSED (count 0, paused_until null)
 *   probe   --failure-->                           OPEN (paused_until = now + pause)
 *   admin re-enables the endpoint -->              CLOSED
 */

export interface BreakerPolicy {
  /** Consecutive failed attempts that open the breaker (default 10). */
  readonly threshold: number;
  /** How long an open breaker pauses the endpoint, ms (default 30 min). */
  readonly pauseMs: number;
}

export interface BreakerState {
  readonly consecutiveFailures: number;
  /** Epoch ms, or null when never paused / reset. */
  readonly pausedUntil: number | null;
}

export type BreakerPhase = 'closed' | 'open' | 'half_open';

/** The phase of `state` at `now`. */
export function breakerPhase(policy: BreakerPolicy, state: BreakerState, now: number): BreakerPhase {
  if (state.consecutiveFailures < policy.threshold) return 'closed';
  return state.pausedUntil !== null && state.pausedUntil > now ? 'open' : 'half_open';
}

/** After a successful attempt: closed, count reset. */
export function afterSuccess(): BreakerState {
  return { consecutiveFailures: 0, pausedUntil: null };
}

/** After a failed attempt finished at `now`: one more failure; at or over the threshold, (re-)paused. */
export function afterFailure(policy: BreakerPolicy, state: BreakerState, now: number): BreakerState {
  const consecutiveFailures = state.consecutiveFailures + 1;
  if (consecutiveFailures < policy.threshold) return { consecutiveFailures, pausedUntil: state.pausedUntil };
  return { consecutiveFailures, pausedUntil: now + policy.pauseMs };
}

/** When the probe of a half-open endpoint is claimed at `now`: paused again until it settles. */
export function probeClaimed(policy: BreakerPolicy, state: BreakerState, now: number): BreakerState {
  return { consecutiveFailures: state.consecutiveFailures, pausedUntil: now + policy.pauseMs };
}
