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
 *   probe   --refused (4xx not 408/429, or a broker refusing the message)-->  CLOSED, as a success (refusalShowsUp)
 *   admin re-enables the endpoint -->              CLOSED
 * Recovery (decision 0029): a success that closes an open or half-open breaker (`recovers`) is
 * remembered as the endpoint's recovered_at. Until the next recovery, a failed FIRST attempt of a
 * delivery whose event was written before that moment (the backlog that piled up during the
 * pause) does not add to consecutive_failures when the receiver answered it with a refusal, a
 * broker's refusal of the message included (`countsTowardBreaker`): the success just showed the endpoint is up, so a burst of payloads it
 * rejects gets one attempt each, then the retry schedule, and cannot pause it again ahead of its
 * healthy events. Retries, probes, events written after the recovery and answers that say the
 * receiver is unavailable (no answer, 408, 429, 502, 503, 504) count as always.
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

/** After a success: whether it closes an open or half-open breaker (a recovery, decision 0029). */
export function recovers(policy: BreakerPolicy, state: BreakerState): boolean {
  return state.consecutiveFailures >= policy.threshold;
}

/** What a failed attempt got back, as far as the breaker asks. */
export interface AttemptAnswer {
  /** The attempt's outcome (webhook-http-client.ts AttemptOutcome). */
  readonly outcome: string;
  /** The receiver's status, or null when it did not answer, or when the destination is a broker. */
  readonly statusCode: number | null;
}

/**
 * Whether the receiver answered by refusing this payload: an HTTP client error (4xx but 408 and
 * 429), or a broker refusing the message itself (`broker_rejected`: an AMQP nack or basic.return
 * of an unroutable message, a missing exchange, a JetStream publish error or "no responders", an
 * MQTT PUBACK with a failure reason code or "no matching subscribers"). A broker that cannot be
 * reached, drops the connection or does not confirm in time says nothing of the payload: the
 * receiver is down, as an HTTP request with no answer.
 */
export function refusesPayload(answer: AttemptAnswer): boolean {
  if (answer.outcome === BROKER_REFUSAL) return true;
  const status = answer.statusCode;
  return status !== null && status >= 400 && status < 500 && !UNAVAILABLE_STATUSES.has(status);
}

/** The outcome of a publish the broker answered by refusing the message (delivery-transport.ts). */
const BROKER_REFUSAL = 'broker_rejected';

/**
 * Whether a failed attempt of an open or half-open endpoint (its probe) still shows the receiver is
 * up: it refused this payload (`refusesPayload`: a 4xx but 408 and 429, or a broker refusing the
 * message). The breaker then
 * closes as after a success (a recovery: the backlog's refused first attempts no longer count), and
 * the payload goes to its retry schedule, so a rejected payload never costs the healthy events
 * behind it a pause (with healthy events written first and rejected ones after, the probe
 * was the newest, a rejected one, and each pause ended in another). A server error (5xx) or no
 * answer keeps the endpoint paused.
 */
export function refusalShowsUp(policy: BreakerPolicy, state: BreakerState, answer: AttemptAnswer): boolean {
  return state.consecutiveFailures >= policy.threshold && refusesPayload(answer);
}

/** Statuses that say "not now" or "not reachable" rather than "not this payload". */
const UNAVAILABLE_STATUSES: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);

/** A failed attempt, as far as the breaker asks. */
export interface FailedAttempt extends AttemptAnswer {
  /** 1 for a first attempt. */
  readonly attemptNumber: number;
  /** Epoch ms of the delivery's event. */
  readonly eventCreatedAt: number;
}

/**
 * Whether a failed attempt adds to the endpoint's consecutive failures, given when its breaker last
 * recovered (epoch ms, or null): every failure does, except a first attempt of an event written
 * before the recovery that the receiver answered with a refusal (see the header).
 */
export function countsTowardBreaker(attempt: FailedAttempt, recoveredAt: number | null): boolean {
  if (recoveredAt === null || attempt.attemptNumber !== 1 || attempt.eventCreatedAt >= recoveredAt) return true;
  if (attempt.outcome === BROKER_REFUSAL) return false;
  return attempt.statusCode === null || UNAVAILABLE_STATUSES.has(attempt.statusCode);
}
