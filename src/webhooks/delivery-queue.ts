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
 * `abandoned` and tries again at once (delivery is at-least-once). attempt_count counts the
 * attempts whose answer (or failure to answer) was recorded: an abandoned claim does not use up a
 * retry, however often workers crash.
 * Transitions (each ONE statement, guarded by `locked_by = <claimant>`):
 *   pending|failed --claim-->                   same status, leased (attempt number = attempt_count + 1)
 *   leased --2xx-->                             succeeded, attempt_count + 1
 *   leased --failure, retries left-->           failed, attempt_count + 1, next_attempt_at = decided by the policy
 *   leased --failure, no retry left-->          dead, attempt_count + 1
 *   leased --released unsent-->                 same status, lease cleared
 *                                               (the worker stops, or the lease left would not cover an attempt)
 *   dead|failed --admin retry-->                pending, due now (webhook-delivery.repository.ts)
 * Order: within an endpoint, first attempts (pending) before retries (failed), each oldest first.
 * A FIFO endpoint's deliveries (decision 0059) are never claimed so: claimFifoBatches takes its
 * line's head batch, in its events' write order, only while no delivery of the line is leased, and
 * settleDeliveries settles the whole batch with its head's settlement (`decided`).
 * Breaker: endpoints whose breaker is open are not claimed (their due rows wait unchanged); a
 * half-open endpoint gives one probe (circuit-breaker.ts): the due delivery with the fewest failed
 * attempts, newest first. The endpoint's breaker state moves in
 * the same transaction as the settle, with its row locked. After a recovery, the backlog's first
 * attempts the receiver refuses do not pause it again (circuit-breaker.ts, decision 0029).
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { readingByIndex } from '../db/index-reads.ts';
import { isoFromMillis } from '../shared/time.ts';
import { eventEnvelope, testEventEnvelope } from '../events/event-envelope.ts';
import {
  afterFailure,
  afterSuccess,
  countsTowardBreaker,
  probeClaimed,
  recovers,
  refusalShowsUp,
  type BreakerPolicy,
  type BreakerState,
} from './circuit-breaker.ts';
import { decideAfterFailure, type RetryPolicy } from './retry-policy.ts';
import type { AttemptOutcome, HttpAttemptResult } from './webhook-http-client.ts';
import './webhook.tables.ts';

/**
 * A condition, true, that makes the statement's transaction commit without waiting for its WAL to
 * reach the disk (`synchronous_commit = off` for this transaction only; an uncorrelated subquery
 * in WHERE is evaluated once, before any row). For the queue's own bookkeeping — fan-out, claims,
 * settles, releases — whose loss in a database crash (the last few hundred ms of commits) only
 * ever means a delivery is sent again: a lost fan-out goes with its position (queued again), a lost
 * claim or release leaves the row as it was (claimable, or leased until its lease expires), a lost
 * settle leaves it leased (sent again after the lease, as after a killed worker). Delivery stays
 * at-least-once; the cost is the attempt records of those last commits. Never used for the
 * store's own writes. See docs/decisions/0015-webhook-delivery-speed.md.
 */
/**
 * The endpoint `e`'s store is active: a suspended store's deliveries wait, claimed again once it is
 * resumed (decision 0051).
 */
export const STORE_ACTIVE = sql<boolean>`EXISTS (SELECT 1 FROM stores st WHERE st.id = e.store_id AND st.status = 'active')`;

export const ASYNC_COMMIT = sql<boolean>`(SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL`;

/**
 * `CROSS JOIN LATERAL` the event of the delivery `delivery` (an alias with `store_id` and
 * `event_id`) as `ev`: its id, store, type, created_at, seq, data, previous, test mark and trace context, found by its
 * store and id. Looked up by the primary key, one probe per delivery: a plain join on
 * `ev.store_id = …` lets a planner without statistics (PGlite is never analysed) walk the store's
 * whole (store_id, created_at, id) index instead, or hash the whole table (measured: 300 ms for a
 * claim of 64 over a store of 10,000 events). `OFFSET 0` keeps the subquery a parameterised scan
 * of one table, where the primary key always wins.
 */
export function eventOfDelivery(delivery: string) {
  return sql`CROSS JOIN LATERAL (
    SELECT ev.id, ev.store_id, ev.type, ev.created_at, ev.seq, ev.data, ev.previous, ev.test, ev.trace_parent, ev.trace_state FROM events ev
    WHERE ev.store_id = ${sql.ref(`${delivery}.store_id`)} AND ev.id = ${sql.ref(`${delivery}.event_id`)} OFFSET 0
  ) ev`;
}

/**
 * `above` and `below`, recursive CTEs (the statement's WITH must be RECURSIVE): the stores that have
 * unfinished (pending or failed) deliveries, found through the store-led due index one descent per
 * store (a loose index scan, migration 0048), `above` those after `start` and `below` the rest, each
 * in store order. Evaluated only as far as the statement reads them: a claim stops at its limit.
 */
function storesWithWork(start: string) {
  return sql`above(store_id) AS (
      SELECT (SELECT d.store_id FROM webhook_deliveries d WHERE d.status IN ('pending','failed') AND d.store_id > ${start}::uuid ORDER BY d.store_id LIMIT 1)
      UNION ALL
      SELECT (SELECT d.store_id FROM webhook_deliveries d WHERE d.status IN ('pending','failed') AND d.store_id > w.store_id ORDER BY d.store_id LIMIT 1)
      FROM above w WHERE w.store_id IS NOT NULL
    ), below(store_id) AS (
      SELECT (SELECT d.store_id FROM webhook_deliveries d WHERE d.status IN ('pending','failed') AND d.store_id <= ${start}::uuid ORDER BY d.store_id LIMIT 1)
      UNION ALL
      SELECT (SELECT d.store_id FROM webhook_deliveries d WHERE d.status IN ('pending','failed') AND d.store_id > w.store_id AND d.store_id <= ${start}::uuid ORDER BY d.store_id LIMIT 1)
      FROM below w WHERE w.store_id IS NOT NULL
    )`;
}

const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/** The stores `above`, then `below` (storesWithWork), as `store_id`: from the start round to it. */
const STORES_ROUND = sql`(SELECT store_id FROM above WHERE store_id IS NOT NULL UNION ALL SELECT store_id FROM below WHERE store_id IS NOT NULL)`;

/**
 * The store `w.store_id` is active and has a due, unleased delivery of status `status` for an
 * endpoint a claim may take from: enabled, unordered, not paused (a half-open one included), not
 * in `fullEndpoints`.
 */
function storeServes(w: string, status: ReturnType<typeof sql>, now: string, fullEndpoints: readonly string[]) {
  const store = sql.ref(`${w}.store_id`);
  // Scalar subqueries, not EXISTS: a planner may turn an EXISTS into a join that reads every
  // endpoint; a subquery stays a probe by the walked store.
  return sql<boolean>`((SELECT st.status FROM stores st WHERE st.id = ${store}) = 'active'
    AND (
      SELECT true FROM webhook_endpoints e
      WHERE e.store_id = ${store} AND e.enabled AND e.delivery_order = 'unordered'
        AND (e.paused_until IS NULL OR e.paused_until <= ${now}::timestamptz)
        AND NOT (e.id = ANY(${fullEndpoints}::uuid[]))
        AND EXISTS (
          SELECT 1 FROM webhook_deliveries d
          WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = ${status} AND d.next_attempt_at <= ${now}::timestamptz
            AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz))
      LIMIT 1) IS NOT NULL)`;
}

/** A delivery this worker holds, with everything needed to send it. */
export interface ClaimedDelivery {
  readonly id: string;
  /** Its store: every later statement about it (settle, release) names it (decision 0051). */
  readonly storeId: string;
  readonly attemptNumber: number;
  readonly endpointId: string;
  readonly url: string;
  /** Signing secrets: the current one, then the rotated-out one while it still signs. */
  readonly secrets: readonly string[];
  /** The endpoint's credentials, sealed (decision 0058); null: none. The transport opens them. */
  readonly sealedCredentials: string | null;
  readonly event: { readonly id: string; readonly type: string; readonly created_at: string };
  /**
   * The request body: the event's envelope `{"id","type","created_at","data"}`, as the events feed
   * lists it (events/event-envelope.ts), built by the database.
   */
  readonly body: string;
  /** Epoch ms of the event, for the end-to-end latency metric. */
  readonly eventCreatedAtMs: number;
  /**
   * A test delivery (decision 0020): its envelope carries `"test": true` (signed with the rest), it
   * goes out with the header `webhook-test: true`, and its failures do not move the breaker.
   */
  readonly test: boolean;
  /** The writer's trace context kept with the event (decision 0052): the attempt continues that trace. */
  readonly traceParent: string | null;
  readonly traceState: string | null;
}

export interface ClaimOptions {
  readonly workerId: string;
  readonly now: number;
  readonly leaseMs: number;
  /** Most rows to claim. */
  readonly limit: number;
  /** Most rows to claim for endpoints with deliveries held here; others get endpointCapacity. */
  readonly freeSlots: ReadonlyMap<string, number>;
  readonly endpointCapacity: number;
  /**
   * Deliveries each endpoint already has in this worker (sent or waiting to be): the rows are
   * taken in rounds, an endpoint's k-th row after its held ones ranking with every other endpoint's
   * k-th, so a fast endpoint with a backlog cannot crowd out an endpoint that has just one due.
   */
  readonly held?: ReadonlyMap<string, number>;
  /**
   * Deliveries each store already has in this worker (the sum of its endpoints' `held`): the rows
   * are taken in rounds across stores as across endpoints, a store's k-th row after its held ones
   * ranking with every other store's k-th (see claimDueDeliveries).
   */
  readonly heldByStore?: ReadonlyMap<string, number>;
  readonly breaker: BreakerPolicy;
  /**
   * Where the walk over the stores with due work starts (a store id; the stores after it come
   * first, then from the lowest round to it). Default: a random point, so that when more stores
   * than `limit` have due work, each claim serves another window of them.
   */
  readonly startAfter?: string;
}

/**
 * Claims up to `limit` due deliveries in ONE statement (atomic on its own, no network I/O inside,
 * one commit however many rows; its transaction's first statement only sets it to read by index,
 * db/index-reads.ts): first the probe rights of half-open endpoints
 * (re-arming their pause, so only one worker probes), then the rows themselves, `FOR UPDATE SKIP
 * LOCKED`, at most the free slots per endpoint and one per probed endpoint; the lease is stamped and
 * each row comes back with its endpoint and event. Rows whose previous lease expired get an
 * `abandoned` attempt recorded (it does not count toward the retries).
 *
 * Fair across stores, then across endpoints: the rows are taken in rounds across
 * stores, a store's k-th row (after those it has in this worker, `heldByStore`) ranking with every
 * other store's k-th, so a store with one due delivery is in the next claim whatever another
 * store's backlog, or number of endpoints, as long as fewer stores than `limit` have due work.
 * Within a store's round first attempts go before retries (a failing endpoint's retries in one
 * store never delay another store's first attempts), then the endpoints' rounds (see `held`),
 * then the oldest. Within a store the rows keep the order they had before stores: its endpoints'
 * rounds, oldest first within a round. Every statement names each row's store: the walks, joins,
 * lock and lease go by `(store_id, id)` (decision 0051).
 *
 * The claim follows the work due (decision 0065): it walks the stores that have unfinished
 * deliveries through the store-led due index, from `startAfter` round to it, and serves at most
 * `limit` of them, those with a due first attempt before those with only due retries; only the
 * endpoints of the stores served are read. When fewer stores than `limit` have due work this is
 * every one of them (the order above holds whole); when more, each claim serves the window after
 * its starting point (random by default), and the rounds rank the rows of those stores.
 */
export async function claimDueDeliveries(db: Kysely<Database>, options: ClaimOptions): Promise<ClaimedDelivery[]> {
  if (options.limit <= 0) return [];
  const now = isoFromMillis(options.now);
  const leaseUntil = isoFromMillis(options.now + options.leaseMs);
  const fullEndpoints = [...options.freeSlots].filter(([, free]) => free <= 0).map(([id]) => id);
  const slots = JSON.stringify(Object.fromEntries(options.freeSlots));
  const held = JSON.stringify(Object.fromEntries(options.held ?? []));
  const heldByStore = JSON.stringify(Object.fromEntries(options.heldByStore ?? []));
  const probeUntil = isoFromMillis(
    probeClaimed(options.breaker, { consecutiveFailures: options.breaker.threshold, pausedUntil: null }, options.now).pausedUntil!,
  );

  // Every part reads the same snapshot: the candidates see the probed endpoints through `probes`
  // (not through the pause the probe re-arms), and the rows come back with the endpoint and event
  // as they were when the statement started.
  const start = options.startAfter ?? randomUUID();
  // Read by index only (db/index-reads.ts): the walks and probes stay walks and probes however one
  // store's backlog skews the statistics.
  const { rows } = await readingByIndex(db, (d) =>
    sql<ClaimedRow>`
    WITH RECURSIVE ${storesWithWork(start)}, walked AS (
      -- The stores to serve, walked from the start round: first those with a due first attempt
      -- (pending) for an endpoint that may be claimed, then, if the claim has room left, those with
      -- only due retries; at most one store per row the claim may take. A store walked without such
      -- a delivery costs its walk, not a row; no endpoint of a store without unfinished deliveries
      -- is read.
      SELECT x.store_id FROM (
        (SELECT w.store_id FROM ${STORES_ROUND} w
         WHERE ${storeServes('w', sql`'pending'`, now, fullEndpoints)}
         LIMIT ${options.limit})
        UNION ALL
        (SELECT w.store_id FROM ${STORES_ROUND} w
         WHERE NOT ${storeServes('w', sql`'pending'`, now, fullEndpoints)} AND ${storeServes('w', sql`'failed'`, now, fullEndpoints)}
         LIMIT ${options.limit})
      ) x
      LIMIT ${options.limit}
    ), probes AS (
      UPDATE webhook_endpoints e SET paused_until = ${probeUntil}::timestamptz
      FROM walked w
      WHERE e.store_id = w.store_id
        AND e.enabled AND e.delivery_order = 'unordered' AND e.consecutive_failures >= ${options.breaker.threshold}
        AND (e.paused_until IS NULL OR e.paused_until <= ${now}::timestamptz)
        AND NOT (e.id = ANY(${fullEndpoints}::uuid[]))
        -- A scalar subquery, not EXISTS (which a planner may turn into a read of every due delivery).
        AND (
          SELECT true FROM webhook_deliveries d
          WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status IN ('pending','failed') AND d.next_attempt_at <= ${now}::timestamptz
            AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz)
          LIMIT 1) IS NOT NULL
      RETURNING e.id, e.store_id
    ), probe_rows AS (
      -- A half-open endpoint's one probe: the due delivery most likely to show the endpoint is up,
      -- the one with the fewest failed attempts, newest first (not the oldest, which is usually one
      -- the receiver keeps rejecting: that would keep the endpoint paused however healthy it is).
      -- Newest by its event: one fan-out gives a whole backlog of deliveries the same created_at.
      -- Its right is taken already: it ranks as a first attempt.
      SELECT c.id, p.store_id, c.next_attempt_at, 0 AS tier, coalesce((${held}::jsonb ->> p.id::text)::int, 0) + 1 AS rank
      FROM probes p
      CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at
        FROM webhook_deliveries d
        JOIN events pe ON pe.store_id = d.store_id AND pe.id = d.event_id
        WHERE d.store_id = p.store_id AND d.endpoint_id = p.id AND d.status IN ('pending','failed') AND d.next_attempt_at <= ${now}::timestamptz
          AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz)
        ORDER BY d.attempt_count, pe.created_at DESC, pe.seq DESC, d.id DESC
        LIMIT 1
      ) c
    ), due AS (
      -- Each eligible endpoint of the walked stores: its due rows, first attempts (pending) before
      -- retries (failed), each oldest first (two index walks per endpoint: cost follows the walked
      -- stores' endpoints, not the backlog), at most its free slots, ranked in rounds across the endpoints (rank = held here +
      -- position in its own queue). Retries after first attempts: deliveries the receiver keeps
      -- rejecting cannot trip the breaker again ahead of the healthy ones
      -- (docs/decisions/0010-delivery-fairness-after-a-pause.md).
      SELECT c.id, e.store_id, c.next_attempt_at, c.tier,
        coalesce((${held}::jsonb ->> e.id::text)::int, 0) + row_number() OVER (PARTITION BY e.id ORDER BY c.tier, c.next_attempt_at, c.id) AS rank
      FROM walked w
      CROSS JOIN LATERAL (
        SELECT e.id, e.store_id FROM webhook_endpoints e
        WHERE e.store_id = w.store_id AND e.enabled AND e.delivery_order = 'unordered' AND e.consecutive_failures < ${options.breaker.threshold}
          AND (e.paused_until IS NULL OR e.paused_until <= ${now}::timestamptz)
          AND NOT (e.id = ANY(${fullEndpoints}::uuid[]))
        OFFSET 0
      ) e
      CROSS JOIN LATERAL (
        SELECT t.id, t.next_attempt_at, t.tier FROM (
          (SELECT d.id, d.next_attempt_at, 0 AS tier FROM webhook_deliveries d
           WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= ${now}::timestamptz
             AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz)
           ORDER BY d.next_attempt_at, d.id
           LIMIT greatest(0, coalesce((${slots}::jsonb ->> e.id::text)::int, ${options.endpointCapacity})))
          UNION ALL
          (SELECT d.id, d.next_attempt_at, 1 AS tier FROM webhook_deliveries d
           WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = 'failed' AND d.next_attempt_at <= ${now}::timestamptz
             AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz)
           ORDER BY d.next_attempt_at, d.id
           LIMIT greatest(0, coalesce((${slots}::jsonb ->> e.id::text)::int, ${options.endpointCapacity})))
        ) t
        ORDER BY t.tier, t.next_attempt_at, t.id
        LIMIT greatest(0, coalesce((${slots}::jsonb ->> e.id::text)::int, ${options.endpointCapacity}))
      ) c
      UNION ALL
      SELECT id, store_id, next_attempt_at, tier, rank FROM probe_rows
    ), candidates AS (
      -- In rounds across stores (store_rank = held here + position among the store's rows, in the
      -- endpoints' rounds), first attempts before retries within a round, then the endpoints'
      -- rounds, oldest first. With one store this is the order of the endpoints' rounds.
      SELECT q.id, q.store_id, q.store_rank, q.tier, q.rank, q.next_attempt_at FROM (
        SELECT u.id, u.store_id, u.next_attempt_at, u.tier, u.rank,
          coalesce((${heldByStore}::jsonb ->> u.store_id::text)::int, 0)
            + row_number() OVER (PARTITION BY u.store_id ORDER BY u.rank, u.next_attempt_at, u.id) AS store_rank
        FROM due u
      ) q
      ORDER BY q.store_rank, q.tier, q.rank, q.next_attempt_at, q.id
      LIMIT ${options.limit}
    ), picked AS (
      -- Lock what no other worker holds; the UPDATE re-checks the row under the lock.
      SELECT d.id, d.store_id, d.locked_by AS previous_locked_by, d.locked_at AS previous_locked_at, d.locked_until AS previous_locked_until
      FROM candidates k
      JOIN webhook_deliveries d ON d.store_id = k.store_id AND d.id = k.id
      FOR UPDATE OF d SKIP LOCKED
    ), claimed AS (
      UPDATE webhook_deliveries d
      SET locked_by = ${options.workerId}, locked_at = ${now}::timestamptz, locked_until = ${leaseUntil}::timestamptz
      FROM picked p
      WHERE d.store_id = p.store_id AND d.id = p.id AND d.status IN ('pending','failed') AND d.next_attempt_at <= ${now}::timestamptz
        AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz)
      RETURNING d.id, d.store_id, d.attempt_count, d.endpoint_id, d.event_id, d.next_attempt_at, d.test,
        p.previous_locked_by, p.previous_locked_at, p.previous_locked_until
    ), abandoned AS (${ABANDONED_ATTEMPTS})
    SELECT ${claimedColumns(now)}
    FROM claimed c
    JOIN webhook_endpoints e ON e.store_id = c.store_id AND e.id = c.endpoint_id
    ${eventOfDelivery('c')}
    JOIN candidates k ON k.store_id = c.store_id AND k.id = c.id
    WHERE ${ASYNC_COMMIT}
    ORDER BY k.store_rank, k.tier, k.rank, c.next_attempt_at, c.id
  `.execute(d),
  );
  return rows.map(claimedDelivery);
}

/** The head batch of a FIFO endpoint's line, claimed: its deliveries in their events' write order. */
export interface ClaimedBatch {
  readonly endpointId: string;
  readonly storeId: string;
  readonly deliveries: readonly ClaimedDelivery[];
}

export interface FifoClaimOptions {
  readonly workerId: string;
  readonly now: number;
  readonly leaseMs: number;
  /** Most lines (batches) to claim. */
  readonly limit: number;
  /** FIFO endpoints whose line this worker holds already (not asked for again). */
  readonly holding: readonly string[];
  readonly breaker: BreakerPolicy;
}

/**
 * The claims' `abandoned` step, over their `claimed` rows: a claimed delivery whose previous holder's
 * lease expired before it recorded its attempt gets that attempt recorded, under the number the
 * attempt sent now takes again (it does not count toward the retries).
 */
const ABANDONED_ATTEMPTS = sql`
  INSERT INTO webhook_attempts (id, store_id, delivery_id, attempt_number, started_at, duration_ms, status_code, response_body_excerpt, error, outcome)
  SELECT gen_random_uuid(), c.store_id, c.id, c.attempt_count + 1, coalesce(c.previous_locked_at, now()),
    coalesce((extract(epoch FROM (c.previous_locked_until - c.previous_locked_at)) * 1000)::int, 0),
    NULL, NULL, 'the worker stopped before recording this attempt (its lease expired); sent again', 'abandoned'
  FROM claimed c
  WHERE c.previous_locked_by IS NOT NULL`;

/**
 * Claims the head batch of up to `limit` FIFO endpoints' lines (decision 0059), in one transaction:
 *
 * 1. The lines: enabled FIFO endpoints of active stores, breaker not pausing them, with a due
 *    undelivered delivery, their rows locked `FOR UPDATE SKIP LOCKED` (another worker's claim of the
 *    same line, or a settle changing its breaker, makes this claim skip it). A half-open endpoint's
 *    head batch is its probe: only the line's holder sends, so no probe right is taken.
 * 2. In a second statement, so its snapshot sees every claim and settle committed before the locks
 *    were taken: each line's undelivered deliveries in their events' write order, (created_at, seq);
 *    a line any of whose deliveries is leased (a batch in flight, or a killed worker's lease not yet
 *    expired) is skipped, and so is one whose head is not due (a retry scheduled: nothing behind it
 *    may go first). The first `batch_size` are leased, whatever their own due time (the head is
 *    due, they follow it). A lease that had expired gets its `abandoned` attempt, as in
 *    claimDueDeliveries. The rows re-checked under their locks can only have been settled
 *    meanwhile by a worker whose lease expired, and a batch settles as a whole (its head's
 *    settlement), so what is leased stays the line's head.
 *
 * The line is read whole (its events joined by primary key): the cost follows the endpoint's backlog.
 */
export async function claimFifoBatches(db: Kysely<Database>, options: FifoClaimOptions): Promise<ClaimedBatch[]> {
  if (options.limit <= 0) return [];
  const now = isoFromMillis(options.now);
  const leaseUntil = isoFromMillis(options.now + options.leaseMs);
  const claim = async (trx: Kysely<Database>): Promise<ClaimedBatch[]> => {
    const { rows: lines } = await sql<{ id: string; store_id: string; batch_size: number }>`
      SELECT e.id, e.store_id, e.batch_size FROM webhook_endpoints e
      WHERE e.enabled AND e.delivery_order = 'fifo'
        AND (e.paused_until IS NULL OR e.paused_until <= ${now}::timestamptz)
        AND NOT (e.id = ANY(${options.holding}::uuid[]))
        AND ${STORE_ACTIVE}
        AND EXISTS (
          SELECT 1 FROM webhook_deliveries d
          WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status IN ('pending','failed') AND d.next_attempt_at <= ${now}::timestamptz)
      ORDER BY e.paused_until NULLS FIRST, e.id
      LIMIT ${options.limit}
      FOR UPDATE OF e SKIP LOCKED
    `.execute(trx);
    if (lines.length === 0) return [];
    const { rows } = await sql<ClaimedRow>`
      WITH lines AS (
        SELECT * FROM unnest(${lines.map((l) => l.store_id)}::uuid[], ${lines.map((l) => l.id)}::uuid[], ${lines.map((l) => l.batch_size)}::int[])
          AS l(store_id, endpoint_id, batch_size)
      ), line AS (
        SELECT l.store_id, l.endpoint_id, l.batch_size, x.id, x.next_attempt_at, x.locked_until,
          row_number() OVER (PARTITION BY l.endpoint_id ORDER BY x.created_at, x.seq, x.id) AS position
        FROM lines l
        CROSS JOIN LATERAL (
          SELECT d.id, d.next_attempt_at, d.locked_until, ev.created_at, ev.seq
          FROM webhook_deliveries d
          ${eventOfDelivery('d')}
          WHERE d.store_id = l.store_id AND d.endpoint_id = l.endpoint_id AND d.status IN ('pending','failed')
        ) x
      ), free AS (
        SELECT endpoint_id FROM line GROUP BY endpoint_id
        HAVING bool_and(locked_until IS NULL OR locked_until <= ${now}::timestamptz)
          AND bool_or(position = 1 AND next_attempt_at <= ${now}::timestamptz)
      ), picked AS (
        SELECT d.id, d.store_id, line.position, d.locked_by AS previous_locked_by, d.locked_at AS previous_locked_at, d.locked_until AS previous_locked_until
        FROM line JOIN free f ON f.endpoint_id = line.endpoint_id
        JOIN webhook_deliveries d ON d.store_id = line.store_id AND d.id = line.id
        WHERE line.position <= line.batch_size
        FOR UPDATE OF d
      ), claimed AS (
        UPDATE webhook_deliveries d
        SET locked_by = ${options.workerId}, locked_at = ${now}::timestamptz, locked_until = ${leaseUntil}::timestamptz
        FROM picked p
        WHERE d.store_id = p.store_id AND d.id = p.id AND d.status IN ('pending','failed')
          AND (d.locked_until IS NULL OR d.locked_until <= ${now}::timestamptz)
        RETURNING d.id, d.store_id, d.attempt_count, d.endpoint_id, d.event_id, d.test, p.position,
          p.previous_locked_by, p.previous_locked_at, p.previous_locked_until
      ), abandoned AS (${ABANDONED_ATTEMPTS})
      SELECT ${claimedColumns(now)}
      FROM claimed c
      JOIN webhook_endpoints e ON e.store_id = c.store_id AND e.id = c.endpoint_id
      ${eventOfDelivery('c')}
      WHERE ${ASYNC_COMMIT}
      ORDER BY c.endpoint_id, c.position
    `.execute(trx);
    const batches = new Map<string, ClaimedDelivery[]>();
    for (const row of rows) {
      const batch = batches.get(row.endpoint_id);
      if (batch) batch.push(claimedDelivery(row));
      else batches.set(row.endpoint_id, [claimedDelivery(row)]);
    }
    return [...batches].map(([endpointId, deliveries]) => ({ endpointId, storeId: deliveries[0]!.storeId, deliveries }));
  };
  // One transaction (the lines' locks hold to the second statement), reading by index only
  // (db/index-reads.ts), as the other claims.
  return readingByIndex(db, (d) => (d.isTransaction ? claim(d) : d.transaction().execute(claim)));
}

/**
 * Whether any store has an enabled FIFO endpoint: a worker asks this at most once a poll interval,
 * and claims lines (a transaction of its own) only while some exist, so a deployment without FIFO
 * endpoints pays one index-free look at the endpoints per interval, nothing per claim.
 */
export async function fifoEndpointsExist(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ exist: boolean }>`
    SELECT EXISTS (SELECT 1 FROM stores st JOIN webhook_endpoints e ON e.store_id = st.id WHERE e.enabled AND e.delivery_order = 'fifo') AS exist
  `.execute(db);
  return rows[0]?.exist ?? false;
}

/** A claimed row as the claim statements return it (`claimedColumns`). */
export interface ClaimedRow {
  id: string;
  store_id: string;
  attempt_count: number;
  endpoint_id: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  credentials_sealed: string | null;
  event_id: string;
  event_type: string;
  event_created_at: string;
  event_created_at_ms: number;
  test: boolean;
  body: string;
  trace_parent: string | null;
  trace_state: string | null;
}

/**
 * The columns of a claimed row, from the delivery `c` (id, store_id, attempt_count, endpoint_id), its
 * endpoint `e` and its event `ev`: the signing secrets in force at `nowIso` and the body built by the database.
 */
export function claimedColumns(nowIso: string) {
  return sql`c.id, c.store_id, c.attempt_count, c.endpoint_id, e.url, e.secret,
      CASE WHEN e.previous_secret_expires_at > ${nowIso}::timestamptz THEN e.previous_secret END AS previous_secret, e.credentials_sealed,
      ev.id AS event_id, ev.type AS event_type, iso_utc(ev.created_at) AS event_created_at,
      (extract(epoch FROM ev.created_at) * 1000)::float8 AS event_created_at_ms, c.test, ev.trace_parent, ev.trace_state,
      CASE WHEN c.test THEN ${testEventEnvelope('ev')}::text ELSE ${eventEnvelope('ev')}::text END AS body`;
}

export function claimedDelivery(r: ClaimedRow): ClaimedDelivery {
  return {
    id: r.id,
    storeId: r.store_id,
    attemptNumber: r.attempt_count + 1,
    endpointId: r.endpoint_id,
    url: r.url,
    secrets: r.previous_secret ? [r.secret, r.previous_secret] : [r.secret],
    sealedCredentials: r.credentials_sealed,
    event: { id: r.event_id, type: r.event_type, created_at: r.event_created_at },
    body: r.body,
    eventCreatedAtMs: r.event_created_at_ms,
    test: r.test,
    traceParent: r.trace_parent,
    traceState: r.trace_state,
  };
}

/** What happens to a delivery after an attempt: the transition chosen, pure. */
export type Settlement = { readonly status: 'succeeded' } | { readonly status: 'failed'; readonly nextAttemptAt: number } | { readonly status: 'dead' };

/** The delivery's next state after attempt `attemptNumber` ended with `result` at `now`. */
export function decideSettlement(
  policy: RetryPolicy,
  attemptNumber: number,
  result: Pick<HttpAttemptResult, 'outcome' | 'retryAfterMs'>,
  now: number,
): Settlement {
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

/** Settles one finished attempt (settleDeliveries with one attempt). */
export async function settleDelivery(
  db: Kysely<Database>,
  delivery: ClaimedDelivery,
  result: HttpAttemptResult,
  options: SettleOptions,
): Promise<SettleResult> {
  return (await settleDeliveries(db, [{ delivery, result, options }]))[0]!;
}

/** One finished attempt waiting to be settled. */
export interface Finished {
  readonly delivery: ClaimedDelivery;
  readonly result: HttpAttemptResult;
  readonly options: SettleOptions;
  /** The settlement, decided by the caller (a FIFO batch's, by its head); default decideSettlement. */
  readonly decided?: Settlement;
  /**
   * A FIFO batch's member behind its head: it settles like the head, but the batch is one request,
   * and one verdict for the breaker (the head's).
   */
  readonly followsHead?: boolean;
}

/**
 * Settles finished attempts with a fixed number of statements, however many there are: one
 * statement moves every delivery (each row guarded by its claimant: a lost lease changes nothing)
 * and inserts the attempt record of each delivery it moved. When every attempt succeeded that same
 * statement also closes the breaker of their endpoints where it was not closed (afterSuccess, in
 * whatever order: the state after successes is the same) and nothing else is needed: one round
 * trip, one commit. Otherwise, in one transaction, the endpoints of the moved deliveries are locked
 * in id order (so two workers' batches cannot deadlock), the breaker's pure transitions applied per
 * endpoint in input order, and only endpoints whose breaker moved (or that answered 410 Gone) are
 * written. Results in input order.
 */
function headersJson(headers: Readonly<Record<string, string>> | null | undefined): string | null {
  return headers ? JSON.stringify(headers) : null;
}

export async function settleDeliveries(db: Kysely<Database>, finished: readonly Finished[]): Promise<SettleResult[]> {
  if (finished.length === 0) return [];
  const rows = finished.map((f) => {
    const settlement = f.decided ?? decideSettlement(f.options.retry, f.delivery.attemptNumber, f.result, f.options.now);
    return { f, settlement };
  });
  const column = <T>(pick: (r: (typeof rows)[number]) => T): T[] => rows.map(pick);
  const allSucceeded = finished.every((f) => f.result.outcome === 'success');
  // When a success closes an open or half-open breaker (a recovery, decision 0029).
  const recoveredAt = isoFromMillis(Math.max(...finished.map((f) => f.options.now)));
  const threshold = finished[0]!.options.breaker.threshold;
  if (allSucceeded) {
    const moved = await settleStatement(db, true);
    const settledIds = new Set(moved);
    return rows.map((r) =>
      settledIds.has(r.f.delivery.id)
        ? { settled: true, settlement: r.settlement, endpointDisabled: false, breaker: afterSuccess() }
        : { settled: false, settlement: r.settlement, endpointDisabled: false, breaker: null },
    );
  }
  return db.transaction().execute(async (trx) => {
    const moved = await settleStatement(trx, false);
    return afterSettle(trx, moved);
  });

  async function settleStatement(executor: Kysely<Database>, closeBreakers: boolean): Promise<string[]> {
    const { rows: moved } = await sql<{ delivery_id: string }>`
      WITH input AS (
        SELECT * FROM unnest(
          ${column((r) => r.f.delivery.storeId)}::uuid[], ${column((r) => r.f.delivery.id)}::uuid[], ${column((r) => r.f.options.workerId)}::text[],
          ${column((r) => r.settlement.status)}::text[],
          ${column((r) => (r.settlement.status === 'failed' ? isoFromMillis(r.settlement.nextAttemptAt) : null))}::timestamptz[],
          ${column((r) => r.f.result.statusCode)}::int[], ${column((r) => r.f.result.error)}::text[],
          ${column((r) => isoFromMillis(r.f.options.now))}::timestamptz[], ${column(() => randomUUID())}::uuid[],
          ${column((r) => r.f.delivery.attemptNumber)}::int[], ${column((r) => isoFromMillis(r.f.options.startedAt))}::timestamptz[],
          ${column((r) => r.f.result.durationMs)}::int[], ${column((r) => r.f.result.responseExcerpt)}::text[],
          ${column((r) => r.f.result.outcome as AttemptOutcome)}::text[], ${column((r) => headersJson(r.f.result.requestHeaders))}::text[],
          ${column((r) => headersJson(r.f.result.responseHeaders))}::text[]
        ) AS i(store_id, id, worker_id, status, next_attempt_at, status_code, error, now, attempt_id, attempt_number, started_at, duration_ms, excerpt, outcome,
          request_headers, response_headers)
      ), settled AS (
        UPDATE webhook_deliveries d SET
          status = i.status, next_attempt_at = i.next_attempt_at, attempt_count = d.attempt_count + 1,
          locked_by = NULL, locked_at = NULL, locked_until = NULL,
          last_status_code = i.status_code, last_error = i.error, updated_at = i.now,
          succeeded_at = CASE WHEN i.status = 'succeeded' THEN i.now ELSE d.succeeded_at END,
          dead_at = CASE WHEN i.status = 'dead' THEN i.now ELSE d.dead_at END
        FROM input i
        WHERE d.store_id = i.store_id AND d.id = i.id AND d.locked_by = i.worker_id
        RETURNING d.id, d.endpoint_id, d.store_id
      ), closed AS (
        UPDATE webhook_endpoints e SET consecutive_failures = 0, paused_until = NULL,
          recovered_at = CASE WHEN e.consecutive_failures >= ${threshold} THEN ${recoveredAt}::timestamptz ELSE e.recovered_at END
        WHERE ${closeBreakers} AND (e.store_id, e.id) IN (SELECT store_id, endpoint_id FROM settled)
          AND (e.consecutive_failures <> 0 OR e.paused_until IS NOT NULL)
      )
      INSERT INTO webhook_attempts (id, store_id, delivery_id, attempt_number, started_at, duration_ms, status_code, response_body_excerpt, error, outcome,
        request_headers, response_headers)
      SELECT i.attempt_id, s.store_id, i.id, i.attempt_number, i.started_at, i.duration_ms, i.status_code, i.excerpt, i.error, i.outcome,
        i.request_headers::json, i.response_headers::json
      FROM input i JOIN settled s ON s.id = i.id
      WHERE ${ASYNC_COMMIT}
      RETURNING delivery_id
    `.execute(executor);
    return moved.map((m) => m.delivery_id);
  }

  async function afterSettle(trx: Kysely<Database>, moved: string[]): Promise<SettleResult[]> {
    const settledIds = new Set(moved);
    const results: SettleResult[] = rows.map((r) => ({ settled: false, settlement: r.settlement, endpointDisabled: false, breaker: null }));
    const settledDeliveries = rows.filter((r) => settledIds.has(r.f.delivery.id)).map((r) => r.f.delivery);
    const endpointIds = [...new Set(settledDeliveries.map((d) => d.endpointId))].sort();
    if (endpointIds.length === 0) return results;
    const storeIds = [...new Set(settledDeliveries.map((d) => d.storeId))];

    // Ids are unique across stores: the stores of the endpoints and their ids name exactly them.
    const { rows: endpoints } = await sql<{
      id: string;
      store_id: string;
      consecutive_failures: number;
      paused_until_ms: number | null;
      recovered_at_ms: number | null;
    }>`
      SELECT id, store_id, consecutive_failures, (extract(epoch FROM paused_until) * 1000)::float8 AS paused_until_ms,
        (extract(epoch FROM recovered_at) * 1000)::float8 AS recovered_at_ms
      FROM webhook_endpoints WHERE store_id = ANY(${storeIds}::uuid[]) AND id = ANY(${endpointIds}::uuid[]) ORDER BY id FOR UPDATE
    `.execute(trx);
    for (const endpoint of endpoints) {
      const before: BreakerState = { consecutiveFailures: endpoint.consecutive_failures, pausedUntil: endpoint.paused_until_ms };
      let state = before;
      let recoveredAt = endpoint.recovered_at_ms;
      let disable = false;
      let disabledAt = 0;
      rows.forEach((r, i) => {
        if (r.f.delivery.endpointId !== endpoint.id || !settledIds.has(r.f.delivery.id)) return;
        if (r.f.followsHead) {
          results[i] = { settled: true, settlement: r.settlement, endpointDisabled: disable, breaker: state };
          return;
        }
        // A test delivery's failure says nothing about the store's real traffic (decision 0020): it
        // never pauses the endpoint; its success, like any, proves the receiver answers.
        // A refused first attempt of the backlog of a pause the endpoint has recovered from does
        // not count either (decision 0029).
        if (r.f.result.outcome === 'success' || (!r.f.delivery.test && refusalShowsUp(r.f.options.breaker, state, r.f.result))) {
          // A success, or a probe the receiver answered by refusing its payload: it is up.
          if (recovers(r.f.options.breaker, state)) recoveredAt = r.f.options.now;
          state = afterSuccess();
        } else if (
          !r.f.delivery.test &&
          countsTowardBreaker(
            {
              attemptNumber: r.f.delivery.attemptNumber,
              eventCreatedAt: r.f.delivery.eventCreatedAtMs,
              outcome: r.f.result.outcome,
              statusCode: r.f.result.statusCode,
            },
            recoveredAt,
          )
        ) {
          state = afterFailure(r.f.options.breaker, state, r.f.options.now);
        }
        const gone = disablesEndpoint(r.f.result);
        if (gone) {
          disable = true;
          disabledAt = r.f.options.now;
        }
        results[i] = { settled: true, settlement: r.settlement, endpointDisabled: gone, breaker: state };
      });
      const changed =
        state.consecutiveFailures !== before.consecutiveFailures || state.pausedUntil !== before.pausedUntil || recoveredAt !== endpoint.recovered_at_ms;
      if (changed || disable) {
        await sql`
          UPDATE webhook_endpoints SET
            consecutive_failures = ${state.consecutiveFailures},
            paused_until = ${state.pausedUntil === null ? null : isoFromMillis(state.pausedUntil)}::timestamptz,
            recovered_at = ${recoveredAt === null ? null : isoFromMillis(recoveredAt)}::timestamptz,
            enabled = CASE WHEN ${disable} THEN false ELSE enabled END,
            disabled_reason = CASE WHEN ${disable} THEN ${'the receiver answered 410 Gone'} ELSE disabled_reason END,
            updated_at = CASE WHEN ${disable} THEN ${isoFromMillis(disabledAt)}::timestamptz ELSE updated_at END
          WHERE store_id = ${endpoint.store_id}::uuid AND id = ${endpoint.id}::uuid
        `.execute(trx);
      }
    }
    return results;
  }
}

/**
 * Gives back deliveries this worker claimed but never sent (it is stopping, or one waited in its
 * buffer so long that its lease could run out during the attempt): the lease is cleared, no
 * attempt is recorded (a claim alone does not count as one) and any worker may claim them at
 * once. Guarded by the claimant. Returns how many were released.
 */
export async function releaseDeliveries(
  db: Kysely<Database>,
  workerId: string,
  deliveries: readonly Pick<ClaimedDelivery, 'id' | 'storeId'>[],
): Promise<number> {
  if (deliveries.length === 0) return 0;
  const storeIds = [...new Set(deliveries.map((d) => d.storeId))];
  const result = await sql`
    UPDATE webhook_deliveries SET locked_by = NULL, locked_at = NULL, locked_until = NULL
    WHERE store_id = ANY(${storeIds}::uuid[]) AND id = ANY(${deliveries.map((d) => d.id)}::uuid[]) AND locked_by = ${workerId} AND ${ASYNC_COMMIT}
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** Deliveries waiting (pending or failed) in every store, for the queue-depth gauge. */
export async function queueDepth(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM stores st JOIN webhook_deliveries d ON d.store_id = st.id WHERE d.status IN ('pending','failed')
  `.execute(db);
  return rows[0]!.n;
}

/**
 * When the next delivery could be claimed (epoch ms), or null when none waits: the earliest of each
 * enabled endpoint's oldest free row (not before the endpoint's pause ends; a store that is not
 * active has none: claims skip it, and its resumption is seen within a poll interval) and, when none is due
 * yet, of the leases in force (a dead worker's rows come free when its lease expires). Only the
 * stores with unfinished deliveries are read (walked through the store-led due index, decision
 * 0065), then one index probe per endpoint of theirs: an enabled endpoint with nothing to
 * deliver costs nothing. `locked_until` has no index (a claim must stay a HOT update, migration
 * 0015): a row is claimed only once due, so the leases in force are on rows due by now, and when no
 * free row is due those rows are all leased ones (held by the workers, a bounded number); the lease
 * part is evaluated only then (an uncorrelated subquery in an untaken CASE branch never runs).
 */
export async function nextDueAt(db: Kysely<Database>, now: number): Promise<number | null> {
  const nowIso = isoFromMillis(now);
  // Read by index only (db/index-reads.ts), as the claims.
  const { rows } = await readingByIndex(db, (d) =>
    sql<{ t: number | null }>`
    WITH RECURSIVE ${storesWithWork(NIL_UUID)}, busy AS (
      -- The active stores with unfinished deliveries: only their endpoints are read.
      SELECT w.store_id FROM ${STORES_ROUND} w
      WHERE EXISTS (SELECT 1 FROM stores st WHERE st.id = w.store_id AND st.status = 'active')
    ), free AS (
      SELECT min(greatest(c.next_attempt_at, coalesce(e.paused_until, c.next_attempt_at))) AS t
      FROM busy b
      CROSS JOIN LATERAL (
        SELECT e.id, e.store_id, e.paused_until FROM webhook_endpoints e
        WHERE e.store_id = b.store_id AND e.enabled AND e.delivery_order = 'unordered'
        OFFSET 0
      ) e
      CROSS JOIN LATERAL (
        (SELECT d.next_attempt_at FROM webhook_deliveries d
         WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = 'pending'
           AND (d.locked_until IS NULL OR d.locked_until <= ${nowIso}::timestamptz)
         ORDER BY d.next_attempt_at, d.id LIMIT 1)
        UNION ALL
        (SELECT d.next_attempt_at FROM webhook_deliveries d
         WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = 'failed'
           AND (d.locked_until IS NULL OR d.locked_until <= ${nowIso}::timestamptz)
         ORDER BY d.next_attempt_at, d.id LIMIT 1)
      ) c
      UNION ALL
      -- A FIFO endpoint's line (decision 0059): its head's due time (not before its pause ends), or
      -- while a batch of it is leased, when that lease ends.
      SELECT min(CASE WHEN h.leased_until IS NOT NULL THEN h.leased_until
        ELSE greatest(h.next_attempt_at, coalesce(e.paused_until, h.next_attempt_at)) END) AS t
      FROM busy b
      CROSS JOIN LATERAL (
        SELECT e.id, e.store_id, e.paused_until FROM webhook_endpoints e
        WHERE e.store_id = b.store_id AND e.enabled AND e.delivery_order = 'fifo'
        OFFSET 0
      ) e
      CROSS JOIN LATERAL (
        SELECT
          (SELECT max(d.locked_until) FROM webhook_deliveries d
           WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status IN ('pending','failed') AND d.locked_until > ${nowIso}::timestamptz) AS leased_until,
          (SELECT d.next_attempt_at FROM webhook_deliveries d ${eventOfDelivery('d')}
           WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status IN ('pending','failed')
           ORDER BY ev.created_at, ev.seq, d.id LIMIT 1) AS next_attempt_at
      ) h
      WHERE h.next_attempt_at IS NOT NULL
    ), earliest AS (
      SELECT min(t) AS t FROM free
    )
    SELECT (extract(epoch FROM CASE
      WHEN (SELECT t FROM earliest) <= ${nowIso}::timestamptz THEN (SELECT t FROM earliest)
      ELSE least((SELECT t FROM earliest), (
        -- The endpoints first (fenced by OFFSET 0), then each one's due rows by the due index: as a
        -- join, PostgreSQL read every unfinished delivery (a parallel sequential scan, 50 ms at
        -- 230,000 rows) to find none, whenever an endpoint paused by its breaker had a backlog —
        -- after every claim that came back short while a busy store's fan-out kept waking the
        -- dispatcher.
        SELECT min(l.locked_until)
        FROM busy b
        CROSS JOIN LATERAL (
          SELECT e.id, e.store_id FROM webhook_endpoints e
          WHERE e.store_id = b.store_id AND e.enabled AND e.delivery_order = 'unordered'
            AND (e.paused_until IS NULL OR e.paused_until <= ${nowIso}::timestamptz)
          OFFSET 0
        ) e
        CROSS JOIN LATERAL (
          SELECT min(d.locked_until) AS locked_until FROM webhook_deliveries d
          WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status IN ('pending','failed')
            AND d.next_attempt_at <= ${nowIso}::timestamptz AND d.locked_until > ${nowIso}::timestamptz
        ) l))
    END) * 1000)::float8 AS t
  `.execute(d),
  );
  return rows[0]?.t ?? null;
}
