/**
 * The event poller: reads new events from the event log and fans each out as one delivery per
 * subscribed, enabled endpoint, advancing its position in the same transaction, so a crash neither
 * drops nor double-queues an event.
 *
 * Reading order and position follow the write-clock protocol (db/write-clock.ts): events are read
 * in (created_at, seq) order and only below readHorizon(), below which no in-flight write can still
 * commit; the position is the (created_at, seq) of the last event crossed. Reading by seq alone
 * would miss a transaction that took its seq early and committed late. Only the events some enabled
 * endpoint wants are read; the others below the horizon are crossed in the same transaction, so
 * a run of events nobody subscribed to (an import's stock movements) costs one poll (decision 0022).
 *
 * Several workers may poll one database: the position row is taken `FOR UPDATE SKIP LOCKED`, so one
 * of them fans out a batch and the others skip that round. Ping events are never fanned out (they
 * are sent to one endpoint on demand), and an endpoint gets only events written after it was
 * registered (a replay sends older ones).
 *
 * Across stores (decision 0051): the position is the deployment's, one walk of every store's events
 * in (created_at, seq) order (per-store positions are docs/scaling.md's plan for Citus). Each
 * event read carries its store, and every statement after the walk names it: a store's events go
 * to that store's endpoints only (joined on store_id), deliveries are inserted with the event's
 * store and read back by (store_id, id). A store being deleted gets no new deliveries.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { readHorizon } from '../db/write-clock.ts';
import { isoFromMillis } from '../shared/time.ts';
import {
  ASYNC_COMMIT,
  STORE_ACTIVE,
  claimedColumns,
  claimedDelivery,
  eventOfDelivery,
  type ClaimedDelivery,
  type ClaimedRow,
  type ClaimOptions,
} from './delivery-queue.ts';
import './webhook.tables.ts';

export interface PollResult {
  /** False when another worker held the position (nothing done). */
  readonly polled: boolean;
  readonly events: number;
  readonly deliveries: number;
  /** True when a full batch was read: call again without waiting. */
  readonly more: boolean;
  /** Deliveries queued already leased to the polling worker (`handover`), ready to send. */
  readonly handedOver: readonly ClaimedDelivery[];
}

/**
 * The polling worker's room for the deliveries it queues (as a claim's, delivery-queue.ts): they are
 * inserted already leased to it, up to `limit` and each endpoint's free slots, in rounds across
 * stores and then endpoints, and come back ready to send, so a fresh delivery costs no claim statement. Only
 * endpoints a claim would take from now (enabled, breaker closed) and with no free due first attempt
 * older than these (oldest first holds within an endpoint: a backlog is claimed, not overtaken).
 */
export type Handover = Pick<ClaimOptions, 'workerId' | 'leaseMs' | 'limit' | 'freeSlots' | 'endpointCapacity' | 'held' | 'heldByStore' | 'breaker'>;

const NOTHING: readonly ClaimedDelivery[] = [];

/**
 * No bitmap scans in the poll's transaction: its reads walk the events index in (created_at, seq)
 * order and stop at the batch. Right after an import filled the log, the planner has no statistics
 * on it and estimates a stamp to hold a few rows; a bitmap scan then reads all the rest of that
 * stamp for every batch of it (an import's 300,000 events share one stamp).
 */
const INDEX_ORDER = sql<boolean>`(SELECT set_config('enable_bitmapscan', 'off', true)) IS NOT NULL`;

/**
 * Reads up to `batchSize` events after the position and queues their deliveries, in one transaction;
 * with `handover`, the first of them leased to that worker (see Handover). `handover` is asked only
 * once there are events to fan out (an idle poll costs the worker no room).
 */
export async function pollEvents(
  db: Kysely<Database>,
  now: number,
  batchSize = 500,
  handoverOf: () => Handover | undefined = () => undefined,
): Promise<PollResult> {
  const nowIso = isoFromMillis(now);
  // Most polls find nothing: answer those with one cheap query instead of a transaction (on the
  // embedded database every statement runs on the thread that also serves HTTP). Two index probes
  // (the rest of the position's stamp, the next stamp), each the first event's store, whichever
  // it is: a join on (created_at, seq) > position was planned as a scan of every event already
  // crossed, on every poll.
  const { rows: pending } = await sql<{ next_store: string | null }>`
    SELECT coalesce(
      (SELECT ev.store_id FROM events ev WHERE ev.created_at = p.position_created_at AND ev.seq > p.position_seq ORDER BY ev.seq LIMIT 1),
      (SELECT ev.store_id FROM events ev WHERE ev.created_at > p.position_created_at ORDER BY ev.created_at, ev.seq LIMIT 1)
    ) AS next_store
    FROM webhook_poller_state p WHERE p.id = 1
  `.execute(db);
  if (pending[0]!.next_store === null) return { polled: true, events: 0, deliveries: 0, more: false, handedOver: NOTHING };
  return db.transaction().execute(async (trx) => {
    const { rows: state } = await sql<{ position_created_at: string; position_seq: number }>`
      SELECT position_created_at, position_seq FROM webhook_poller_state WHERE id = 1 AND ${ASYNC_COMMIT} AND ${INDEX_ORDER} FOR UPDATE SKIP LOCKED
    `.execute(trx);
    if (state.length === 0) return { polled: false, events: 0, deliveries: 0, more: false, handedOver: NOTHING };
    const position = state[0]!;
    const horizon = await readHorizon(trx);

    // One statement reads the next batch of the events some enabled endpoint wants and the last
    // final event of any type (the tail). Events nobody wants are never read: a batch holds only
    // wanted ones, the position moves to the batch's last when it is full and to the tail when it is
    // not (everything below the horizon was looked at), so a run of events nobody subscribed to is
    // crossed in one poll instead of one transaction per 500. An endpoint created meanwhile is
    // stamped by the write clock at or above the horizon, so it wants none of the events crossed;
    // with no endpoint enabled nothing is wanted and the poll only moves to the tail.
    const after = sql`(${position.position_created_at}::timestamptz, ${position.position_seq}::bigint)`;
    // As fanOut below: not ping or test events, and only those written since an endpoint that wants
    // them was registered (the fan-out itself still checks each endpoint).
    const wantedBy = (w: string) =>
      sql`ev.type <> 'ping' AND NOT ev.test
        AND (ev.created_at >= ${sql.ref(`${w}.everything_since`)} OR ev.created_at >= (${sql.ref(`${w}.since_by_type`)} ->> ev.type)::timestamptz)`;
    const { rows } = await sql<{ id: string | null; store_id: string | null; created_at: string; seq: number; tail: boolean }>`
      WITH wanted AS (
        -- What the enabled endpoints of every store not being deleted want (a store's events still
        -- go to its own endpoints only: the fan-out joins them by store).
        SELECT
          (SELECT min(e.created_at) FROM stores st JOIN webhook_endpoints e ON e.store_id = st.id
            WHERE st.status <> 'deleting' AND e.enabled AND cardinality(e.event_types) = 0) AS everything_since,
          (SELECT coalesce(jsonb_object_agg(type, since), '{}'::jsonb) FROM (
            SELECT t AS type, min(e.created_at) AS since
            FROM stores st JOIN webhook_endpoints e ON e.store_id = st.id CROSS JOIN LATERAL unnest(e.event_types) AS t
            WHERE st.status <> 'deleting' AND e.enabled GROUP BY t) s) AS since_by_type
      ), batch AS (
        -- In two parts, the rest of the position's stamp by seq, then the later stamps: one
        -- import's events share one stamp, and a seek written as (created_at, seq) > position let
        -- the planner, without statistics on a freshly filled log, scan that whole stamp by the
        -- (created_at, id) index for every batch.
        (SELECT ev.id, ev.store_id, ev.created_at, ev.seq FROM events ev, wanted w1
          WHERE ev.created_at = ${position.position_created_at}::timestamptz AND ev.seq > ${position.position_seq}::bigint
            AND ev.created_at < ${horizon}::timestamptz AND ${wantedBy('w1')}
          ORDER BY ev.seq LIMIT ${batchSize})
        UNION ALL
        (SELECT ev.id, ev.store_id, ev.created_at, ev.seq FROM events ev, wanted w2
          WHERE ev.created_at > ${position.position_created_at}::timestamptz AND ev.created_at < ${horizon}::timestamptz AND ${wantedBy('w2')}
          ORDER BY ev.created_at, ev.seq LIMIT ${batchSize})
        ORDER BY created_at, seq LIMIT ${batchSize}
      ), tail AS (
        -- The last final event as the greatest stamp below the horizon and its greatest seq: two
        -- index probes whatever the planner knows (an ORDER BY … DESC LIMIT 1 could sort a stamp).
        SELECT t.created_at, (SELECT max(seq) FROM events WHERE created_at = t.created_at) AS seq
        FROM (SELECT max(created_at) AS created_at FROM events WHERE created_at < ${horizon}::timestamptz) t
      )
      SELECT id, store_id, created_at, seq, false AS tail FROM batch
      UNION ALL SELECT NULL, NULL, created_at, seq, true FROM tail WHERE (created_at, seq) > ${after}
      ORDER BY tail, created_at, seq
    `.execute(trx);
    const events = rows.filter((r) => !r.tail) as { id: string; store_id: string; created_at: string; seq: number }[];
    const tail = rows.find((r) => r.tail);
    const more = events.length === batchSize;
    // Where the position moves: past the whole batch, and past everything final when the batch
    // was not full (no wanted event is left below the horizon).
    const last = more ? events[events.length - 1]! : tail;
    if (events.length === 0) {
      if (last) await advance(trx, last.created_at, last.seq, nowIso);
      return { polled: true, events: 0, deliveries: 0, more: false, handedOver: NOTHING };
    }
    if (!last) throw new Error('event poller: a batch was read but no final event found');

    const batch = { storeIds: events.map((e) => e.store_id), eventIds: events.map((e) => e.id) };
    const handover = handoverOf();
    if (!handover || handover.limit <= 0) {
      const inserted = await sql`
        INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at)
        SELECT gen_random_uuid(), ev.store_id, ev.id, ev.type, e.id, 'pending', ${nowIso}::timestamptz, ${nowIso}::timestamptz, ${nowIso}::timestamptz
        ${fanOut(batch)}
        ORDER BY ev.created_at, ev.seq, e.id
      `.execute(trx);
      await advance(trx, last.created_at, last.seq, nowIso);
      return { polled: true, events: events.length, deliveries: Number(inserted.numAffectedRows ?? 0), more, handedOver: NOTHING };
    }

    const slots = JSON.stringify(Object.fromEntries(handover.freeSlots));
    const held = JSON.stringify(Object.fromEntries(handover.held ?? []));
    const heldByStore = JSON.stringify(Object.fromEntries(handover.heldByStore ?? []));
    const { rows: fanned } = await sql<ClaimedRow & { total: number; handed: boolean }>`
      WITH fresh AS (
        SELECT ev.id AS event_id, ev.store_id, ev.type AS event_type, e.id AS endpoint_id, ev.created_at, ev.seq,
          -- As a claim ranks: the endpoint's k-th row after those it has in flight here.
          coalesce((${held}::jsonb ->> e.id::text)::int, 0) + row_number() OVER (PARTITION BY e.id ORDER BY ev.created_at, ev.seq) AS rank,
          row_number() OVER (PARTITION BY e.id ORDER BY ev.created_at, ev.seq) <= coalesce((${slots}::jsonb ->> e.id::text)::int, ${handover.endpointCapacity})
            AND e.consecutive_failures < ${handover.breaker.threshold}
            AND (e.paused_until IS NULL OR e.paused_until <= ${nowIso}::timestamptz)
            AND ${STORE_ACTIVE}
            AND NOT EXISTS (
              SELECT 1 FROM webhook_deliveries d
              WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= ${nowIso}::timestamptz
                AND (d.locked_until IS NULL OR d.locked_until <= ${nowIso}::timestamptz)) AS eligible
        ${fanOut(batch)}
      ), handed AS (
        -- As a claim takes them: in rounds across stores (the store's k-th after those it has in
        -- flight here), then across endpoints, oldest first.
        SELECT h.event_id, h.endpoint_id FROM (
          SELECT f.event_id, f.endpoint_id, f.rank, f.created_at, f.seq,
            coalesce((${heldByStore}::jsonb ->> f.store_id::text)::int, 0)
              + row_number() OVER (PARTITION BY f.store_id ORDER BY f.rank, f.created_at, f.seq, f.endpoint_id) AS store_rank
          FROM fresh f WHERE f.eligible
        ) h
        ORDER BY h.store_rank, h.rank, h.created_at, h.seq, h.endpoint_id
        LIMIT ${handover.limit}
      ), inserted AS (
        INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at, locked_by, locked_at, locked_until)
        SELECT gen_random_uuid(), f.store_id, f.event_id, f.event_type, f.endpoint_id, 'pending', ${nowIso}::timestamptz, ${nowIso}::timestamptz, ${nowIso}::timestamptz,
          CASE WHEN h.event_id IS NOT NULL THEN ${handover.workerId} END,
          CASE WHEN h.event_id IS NOT NULL THEN ${nowIso}::timestamptz END,
          CASE WHEN h.event_id IS NOT NULL THEN ${isoFromMillis(now + handover.leaseMs)}::timestamptz END
        FROM fresh f LEFT JOIN handed h ON h.event_id = f.event_id AND h.endpoint_id = f.endpoint_id
        ORDER BY f.created_at, f.seq, f.endpoint_id
        RETURNING id, store_id, event_id, endpoint_id, attempt_count, locked_by, test
      ), total AS (
        SELECT count(*)::int AS total FROM inserted
      )
      SELECT t.total, h.* FROM total t LEFT JOIN (
        SELECT ${claimedColumns(nowIso)}, ev.created_at AS sort_created_at, ev.seq AS sort_seq
        FROM inserted c
        JOIN webhook_endpoints e ON e.store_id = c.store_id AND e.id = c.endpoint_id
        ${eventOfDelivery('c')}
        WHERE c.locked_by IS NOT NULL
      ) h ON true
      ORDER BY h.sort_created_at, h.sort_seq, h.endpoint_id
    `.execute(trx);
    await advance(trx, last.created_at, last.seq, nowIso);
    const handedOver = fanned.filter((r) => r.id !== null).map(claimedDelivery);
    return { polled: true, events: events.length, deliveries: fanned[0]?.total ?? 0, more, handedOver };
  });
}

/**
 * The FROM and WHERE of a fan-out: one row per event of the batch (`ev`: each event's store and id,
 * `storeIds[i]` and `eventIds[i]`) × endpoint of its store subscribed to it (`e`), none for a store
 * being deleted.
 */
function fanOut(batch: { readonly storeIds: readonly string[]; readonly eventIds: readonly string[] }) {
  // Each event by its primary key (eventOfDelivery says why not by a join or `store_id = ANY`).
  return sql`
    FROM unnest(${[...batch.storeIds]}::uuid[], ${[...batch.eventIds]}::uuid[]) AS b(store_id, event_id)
    ${eventOfDelivery('b')}
    -- A store's events go to that store's endpoints only.
    JOIN webhook_endpoints e ON e.store_id = ev.store_id AND e.enabled AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types))
      -- An endpoint receives the changes made after it was registered; older ones by replay.
      AND ev.created_at >= e.created_at
    WHERE ev.type <> 'ping' AND NOT ev.test
      AND EXISTS (SELECT 1 FROM stores st WHERE st.id = ev.store_id AND st.status <> 'deleting')`;
}

async function advance(trx: Kysely<Database>, createdAt: string, seq: number, nowIso: string): Promise<void> {
  await sql`
    UPDATE webhook_poller_state SET position_created_at = ${createdAt}::timestamptz, position_seq = ${seq}::bigint, updated_at = ${nowIso}::timestamptz
    WHERE id = 1
  `.execute(trx);
}
