/**
 * The delivery queue: a purpose-built table (docs/decisions/0002-webhook-delivery-queue.md) that
 * workers claim from with `FOR UPDATE SKIP LOCKED` under a lease and settle in one statement
 * guarded by the claimant. This file holds the delivery's state machine and every statement that
 * moves it.
 *
 * States of a delivery (column `status`; a claimed row keeps its status and gains a lease):
 *   pending    Queued and never tried, or made due again by hand (retry, replay, ping). Due when
 *              next_attempt_at ≤ now.
 *   failed     Its last attempt failed and a retry is scheduled at next_attempt_at (the retry
 *              policy, retry-policy.ts). Waits like pending.
 *   succeeded  A 2xx answer was received. Final.
 *   dead       The last retry failed (attempt 6 by default): a dead letter. Final until an admin
 *              retries it, which makes it pending again for one more attempt.
 * The lease (locked_by, locked_at, locked_until) is orthogonal: a worker claims a due pending or
 * failed row whose lease is free or expired, and only that worker can settle it. A worker killed
 * mid-attempt leaves its lease to expire; the next claimant records the lost attempt as
 * `abandoned` and tries again at once (delivery is at-least-once).
 * Transitions (each ONE statement, guarded by `locked_by = <claimant>`):
 *   pending|failed --claim-->                   same status, leased, attempt_count + 1
 *   leased --2xx-->                             succeeded
 *   leased --failure, retries left-->           failed, next_attempt_at = decided by the policy
 *   leased --failure, no retry left-->          dead
 *   dead|failed --admin retry-->                pending, due now (webhook-delivery.repository.ts)
 * Breaker: endpoints whose breaker is open are not claimed (their due rows wait unchanged); a
 * half-open endpoint gives one probe (circuit-breaker.ts). The endpoint's breaker state moves in
 * the same transaction as the settle, with its row locked.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import { isoFromMillis } from '../shared/time.ts';
import { afterFailure, afterSuccess, probeClaimed, type BreakerPolicy, type BreakerState } from './circuit-breaker.ts';
import { decideAfterFailure, type RetryPolicy } from './retry-policy.ts';
import type { AttemptOutcome, HttpAttemptResult } from './webhook-http-client.ts';
import './webhook.tables.ts';

/** A delivery this worker holds, with everything needed to send it. */
export interface ClaimedDelivery {
  readonly id: string;
  readonly attemptNumber: number;
  readonly endpointId: string;
  readonly url: string;
  /** Signing secrets: the current one, then the rotated-out one while it still signs. */
  readonly secrets: readonly string[];
  readonly event: { readonly id: string; readonly type: string; readonly created_at: string; readonly data: unknown };
  /** Epoch ms of the event, for the end-to-end latency metric. */
  readonly eventCreatedAtMs: number;
}

export interface ClaimOptions {
  readonly workerId: string;
  readonly now: number;
  readonly leaseMs: number;
  /** Most rows to claim. */
  readonly limit: number;
  /** Free delivery slots of endpoints with deliveries in flight here; others get endpointCapacity. */
  readonly freeSlots: ReadonlyMap<string, number>;
  readonly endpointCapacity: number;
  readonly breaker: BreakerPolicy;
}

/**
 * Claims up to `limit` due deliveries in one short transaction (no network I/O inside): first the
 * probe rights of half-open endpoints (re-arming their pause, so only one worker probes), then the
 * rows themselves, `FOR UPDATE SKIP LOCKED`, at most the free slots per endpoint and one per probed
 * endpoint. Rows whose previous lease expired get an `abandoned` attempt recorded.
 */
export async function claimDueDeliveries(db: Kysely<Database>, options: ClaimOptions): Promise<ClaimedDelivery[]> {
  if (options.limit <= 0) return [];
  const now = isoFromMillis(options.now);
  const leaseUntil = isoFromMillis(options.now + options.leaseMs);
  const fullEndpoints = [...options.freeSlots].filter(([, free]) => free <= 0).map(([id]) => id);
  const slots = JSON.stringify(Object.fromEntries(options.freeSlots));
  const probeUntil = isoFromMillis(probeClaimed(options.breaker, { consecutiveFailures: options.breaker.threshold, pausedUntil: null }, options.now).pausedUntil!);

  return db.transaction().execute(async (trx) => {
    const { rows: probes } = await sql<{ id: string }>`
      UPDATE webhook_endpoints e SET paused_until = ${probeUntil}::timestamptz
      WHERE e.enabled AND e.consecutive_failures >= ${options.breaker.threshold}
        AND (e.paused_until IS NULL OR e.paused_until <= ${now}::timestamptz)
        AND NOT (e.id = ANY(${fullEndpoints}::uuid[]))
        AND EXISTS (
          SELECT 1 FROM webhook_deliveries d
          WHERE d.endpoint_id = e.id AND d.status IN ('pending','failed') AND d.next_attempt_at <= ${now}::timestamptz
            AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz))
      RETURNING e.id
    `.execute(trx);
    const probeIds = probes.map((p) => p.id);

    // Each eligible endpoint's oldest due rows (index walk per endpoint: cost follows the number of
    // endpoints, not the backlog), at most its free slots (one for a probe), oldest first overall;
    // then lock what no other worker holds and stamp the lease, re-checking the row under the lock.
    const { rows: claimed } = await sql<{ id: string; attempt_count: number; previous_locked_by: string | null; previous_locked_at: string | null; previous_locked_until: string | null }>`
      WITH candidates AS (
        SELECT c.id, c.next_attempt_at
        FROM webhook_endpoints e
        CROSS JOIN LATERAL (
          SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
          WHERE d.endpoint_id = e.id AND d.status IN ('pending','failed') AND d.next_attempt_at <= ${now}::timestamptz
            AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz)
          ORDER BY d.next_attempt_at, d.id
          LIMIT CASE WHEN e.id = ANY(${probeIds}::uuid[]) THEN 1
            ELSE greatest(0, coalesce((${slots}::jsonb ->> e.id::text)::int, ${options.endpointCapacity})) END
        ) c
        WHERE e.enabled
          AND (e.id = ANY(${probeIds}::uuid[])
            OR (e.consecutive_failures < ${options.breaker.threshold}
              AND (e.paused_until IS NULL OR e.paused_until <= ${now}::timestamptz)
              AND NOT (e.id = ANY(${fullEndpoints}::uuid[]))))
        ORDER BY c.next_attempt_at, c.id
        LIMIT ${options.limit}
      ), picked AS (
        SELECT d.id, d.locked_by AS previous_locked_by, d.locked_at AS previous_locked_at, d.locked_until AS previous_locked_until
        FROM webhook_deliveries d
        WHERE d.id IN (SELECT id FROM candidates)
        FOR UPDATE SKIP LOCKED
      )
      UPDATE webhook_deliveries d
      SET locked_by = ${options.workerId}, locked_at = ${now}::timestamptz, locked_until = ${leaseUntil}::timestamptz,
          attempt_count = d.attempt_count + 1
      FROM picked p
      WHERE d.id = p.id AND d.status IN ('pending','failed') AND d.next_attempt_at <= ${now}::timestamptz
        AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz)
      RETURNING d.id, d.attempt_count, p.previous_locked_by, p.previous_locked_at::text, p.previous_locked_until::text
    `.execute(trx);
    if (claimed.length === 0) return [];

    const abandoned = claimed.filter((c) => c.previous_locked_by !== null);
    for (const row of abandoned) await recordAbandonedAttempt(trx, row.id, row.attempt_count - 1, row.previous_locked_at, row.previous_locked_until);

    const { rows } = await sql<{
      id: string; attempt_count: number; endpoint_id: string; url: string; secret: string; previous_secret: string | null;
      event_id: string; event_type: string; event_created_at: string; event_created_at_ms: number; data: unknown;
    }>`
      SELECT d.id, d.attempt_count, d.endpoint_id, e.url, e.secret,
        CASE WHEN e.previous_secret_expires_at > ${now}::timestamptz THEN e.previous_secret END AS previous_secret,
        ev.id AS event_id, ev.type AS event_type, iso_utc(ev.created_at) AS event_created_at,
        (extract(epoch FROM ev.created_at) * 1000)::float8 AS event_created_at_ms, ev.data
      FROM webhook_deliveries d
      JOIN webhook_endpoints e ON e.id = d.endpoint_id
      JOIN events ev ON ev.id = d.event_id
      WHERE d.id = ANY(${claimed.map((c) => c.id)}::uuid[]) AND d.locked_by = ${options.workerId}
      ORDER BY d.next_attempt_at, d.id
    `.execute(trx);
    return rows.map((r) => ({
      id: r.id,
      attemptNumber: r.attempt_count,
      endpointId: r.endpoint_id,
      url: r.url,
      secrets: r.previous_secret ? [r.secret, r.previous_secret] : [r.secret],
      event: { id: r.event_id, type: r.event_type, created_at: r.event_created_at, data: r.data },
      eventCreatedAtMs: r.event_created_at_ms,
    }));
  });
}

async function recordAbandonedAttempt(trx: Transaction<Database>, deliveryId: string, attemptNumber: number, lockedAt: string | null, lockedUntil: string | null): Promise<void> {
  if (attemptNumber < 1) return;
  await sql`
    INSERT INTO webhook_attempts (id, delivery_id, attempt_number, started_at, duration_ms, status_code, response_body_excerpt, error, outcome)
    VALUES (${randomUUID()}, ${deliveryId}, ${attemptNumber}, coalesce(${lockedAt}::timestamptz, now()),
      coalesce((extract(epoch FROM (${lockedUntil}::timestamptz - ${lockedAt}::timestamptz)) * 1000)::int, 0),
      NULL, NULL, 'the worker stopped before recording this attempt (its lease expired); sent again', 'abandoned')
  `.execute(trx);
}

/** What happens to a delivery after an attempt: the transition chosen, pure. */
export type Settlement =
  | { readonly status: 'succeeded' }
  | { readonly status: 'failed'; readonly nextAttemptAt: number }
  | { readonly status: 'dead' };

/** The delivery's next state after attempt `attemptNumber` ended with `result` at `now`. */
export function decideSettlement(policy: RetryPolicy, attemptNumber: number, result: Pick<HttpAttemptResult, 'outcome' | 'retryAfterMs'>, now: number): Settlement {
  if (result.outcome === 'success') return { status: 'succeeded' };
  const decision = decideAfterFailure(policy, attemptNumber, now, result.retryAfterMs);
  return decision.kind === 'dead' ? { status: 'dead' } : { status: 'failed', nextAttemptAt: decision.nextAttemptAt };
}

/** A 410 Gone says the receiver is gone for good: the endpoint is disabled until an admin re-enables it. */
export function disablesEndpoint(result: Pick<HttpAttemptResult, 'statusCode'>): boolean {
  return result.statusCode === 410;
}

export interface SettleOptions {
  readonly workerId: string;
  /** When the attempt started and ended (epoch ms). */
  readonly startedAt: number;
  readonly now: number;
  readonly retry: RetryPolicy;
  readonly breaker: BreakerPolicy;
}

export interface SettleResult {
  /** False when this worker no longer held the lease (nothing was changed). */
  readonly settled: boolean;
  readonly settlement: Settlement;
  readonly endpointDisabled: boolean;
  readonly breaker: BreakerState | null;
}

/**
 * Records the attempt and moves the delivery in ONE statement guarded by the claimant, then (same
 * transaction, endpoint row locked) moves the endpoint's breaker and, on 410, disables it.
 */
export async function settleDelivery(db: Kysely<Database>, delivery: ClaimedDelivery, result: HttpAttemptResult, options: SettleOptions): Promise<SettleResult> {
  return db.transaction().execute((trx) => settleIn(trx, delivery, result, options));
}

/** One finished attempt waiting to be settled. */
export interface Finished {
  readonly delivery: ClaimedDelivery;
  readonly result: HttpAttemptResult;
  readonly options: SettleOptions;
}

/**
 * Settles several finished attempts in ONE transaction (one commit instead of one per attempt: the
 * commit's WAL flush was what capped a worker at a few hundred deliveries/s). Each attempt gets the
 * same statements and its own attempt record as with settleDelivery; endpoint rows are locked in
 * endpoint-id order so two workers' batches cannot deadlock each other. Results in input order.
 */
export async function settleDeliveries(db: Kysely<Database>, finished: readonly Finished[]): Promise<SettleResult[]> {
  const order = finished.map((f, i) => i).sort((a, b) => {
    const ea = finished[a]!.delivery.endpointId;
    const eb = finished[b]!.delivery.endpointId;
    return ea < eb ? -1 : ea > eb ? 1 : a - b;
  });
  return db.transaction().execute(async (trx) => {
    const results: SettleResult[] = new Array(finished.length);
    for (const i of order) {
      const f = finished[i]!;
      results[i] = await settleIn(trx, f.delivery, f.result, f.options);
    }
    return results;
  });
}

async function settleIn(trx: Transaction<Database>, delivery: ClaimedDelivery, result: HttpAttemptResult, options: SettleOptions): Promise<SettleResult> {
  const settlement = decideSettlement(options.retry, delivery.attemptNumber, result, options.now);
  const now = isoFromMillis(options.now);
  const next = settlement.status === 'failed' ? isoFromMillis(settlement.nextAttemptAt) : null;
  const outcome: AttemptOutcome = result.outcome;
  const disable = disablesEndpoint(result);
  const { rows } = await sql<{ delivery_id: string }>`
    WITH settled AS (
      UPDATE webhook_deliveries SET
        status = ${settlement.status}, next_attempt_at = ${next}::timestamptz,
        locked_by = NULL, locked_at = NULL, locked_until = NULL,
        last_status_code = ${result.statusCode}::int, last_error = ${result.error},
        updated_at = ${now}::timestamptz,
        succeeded_at = CASE WHEN ${settlement.status} = 'succeeded' THEN ${now}::timestamptz ELSE succeeded_at END,
        dead_at = CASE WHEN ${settlement.status} = 'dead' THEN ${now}::timestamptz ELSE dead_at END
      WHERE id = ${delivery.id}::uuid AND locked_by = ${options.workerId}
      RETURNING id
    )
    INSERT INTO webhook_attempts (id, delivery_id, attempt_number, started_at, duration_ms, status_code, response_body_excerpt, error, outcome)
    SELECT ${randomUUID()}::uuid, settled.id, ${delivery.attemptNumber}::int, ${isoFromMillis(options.startedAt)}::timestamptz,
      ${result.durationMs}::int, ${result.statusCode}::int, ${result.responseExcerpt}, ${result.error}, ${outcome}
    FROM settled
    RETURNING delivery_id
  `.execute(trx);
  if (rows.length === 0) return { settled: false, settlement, endpointDisabled: false, breaker: null };

  const { rows: endpoints } = await sql<{ consecutive_failures: number; paused_until_ms: number | null }>`
    SELECT consecutive_failures, (extract(epoch FROM paused_until) * 1000)::float8 AS paused_until_ms
    FROM webhook_endpoints WHERE id = ${delivery.endpointId}::uuid FOR UPDATE
  `.execute(trx);
  const current: BreakerState = { consecutiveFailures: endpoints[0]!.consecutive_failures, pausedUntil: endpoints[0]!.paused_until_ms };
  const breaker = result.outcome === 'success' ? afterSuccess() : afterFailure(options.breaker, current, options.now);
  const changed = breaker.consecutiveFailures !== current.consecutiveFailures || breaker.pausedUntil !== current.pausedUntil;
  if (changed || disable) {
    await sql`
      UPDATE webhook_endpoints SET
        consecutive_failures = ${breaker.consecutiveFailures},
        paused_until = ${breaker.pausedUntil === null ? null : isoFromMillis(breaker.pausedUntil)}::timestamptz,
        enabled = CASE WHEN ${disable} THEN false ELSE enabled END,
        disabled_reason = CASE WHEN ${disable} THEN ${'the receiver answered 410 Gone'} ELSE disabled_reason END,
        updated_at = CASE WHEN ${disable} THEN ${now}::timestamptz ELSE updated_at END
      WHERE id = ${delivery.endpointId}::uuid
    `.execute(trx);
  }
  return { settled: true, settlement, endpointDisabled: disable, breaker };
}

/** Deliveries waiting (pending or failed), for the queue-depth gauge. */
export async function queueDepth(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status IN ('pending','failed')`.execute(db);
  return rows[0]!.n;
}

/**
 * When the next delivery could be claimed (epoch ms), or null when none waits: the earliest of each
 * enabled endpoint's oldest free row (not before the endpoint's pause ends) and of the leases in
 * force (a dead worker's rows come free when its lease expires). Cheap: one index probe per endpoint.
 */
export async function nextDueAt(db: Kysely<Database>, now: number): Promise<number | null> {
  const nowIso = isoFromMillis(now);
  const { rows } = await sql<{ t: number | null }>`
    SELECT (extract(epoch FROM least(
      (SELECT min(greatest(c.next_attempt_at, coalesce(e.paused_until, c.next_attempt_at)))
       FROM webhook_endpoints e
       CROSS JOIN LATERAL (
         SELECT d.next_attempt_at FROM webhook_deliveries d
         WHERE d.endpoint_id = e.id AND d.status IN ('pending','failed')
           AND (d.locked_until IS NULL OR d.locked_until <= ${nowIso}::timestamptz)
         ORDER BY d.next_attempt_at, d.id LIMIT 1
       ) c
       WHERE e.enabled),
      (SELECT min(locked_until) FROM webhook_deliveries WHERE locked_until > ${nowIso}::timestamptz)
    )) * 1000)::float8 AS t
  `.execute(db);
  return rows[0]?.t ?? null;
}
