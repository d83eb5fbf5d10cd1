/**
 * The event poller: reads new events from the event log and fans each out as one delivery per
 * subscribed, enabled endpoint, advancing its position in the same transaction, so a crash neither
 * drops nor double-queues an event.
 *
 * Reading order and position follow the write-clock protocol (db/write-clock.ts): events are read
 * in (created_at, seq) order and only below readHorizon(), below which no in-flight write can still
 * commit; the position is the (created_at, seq) of the last event read. Reading by seq alone would
 * miss a transaction that took its seq early and committed late.
 *
 * Several workers may poll one database: the position row is taken `FOR UPDATE SKIP LOCKED`, so one
 * of them fans out a batch and the others skip that round. Ping events are never fanned out (they
 * are sent to one endpoint on demand), and an endpoint gets only events written after it was
 * registered (a replay sends older ones).
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { readHorizon } from '../db/write-clock.ts';
import { isoFromMillis } from '../shared/time.ts';
import { ASYNC_COMMIT, claimedColumns, claimedDelivery, type ClaimedDelivery, type ClaimedRow, type ClaimOptions } from './delivery-queue.ts';
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
 * endpoints, and come back ready to send, so a fresh delivery costs no claim statement. Only
 * endpoints a claim would take from now (enabled, breaker closed) and with no free due first attempt
 * older than these (oldest first holds within an endpoint: a backlog is claimed, not overtaken).
 */
export type Handover = Pick<ClaimOptions, 'workerId' | 'leaseMs' | 'limit' | 'freeSlots' | 'endpointCapacity' | 'held' | 'breaker'>;

const NOTHING: readonly ClaimedDelivery[] = [];

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
  // embedded database every statement runs on the thread that also serves HTTP).
  const { rows: pending } = await sql<{ any: boolean }>`
    SELECT EXISTS (
      SELECT 1 FROM events ev, webhook_poller_state p
      WHERE p.id = 1 AND (ev.created_at, ev.seq) > (p.position_created_at, p.position_seq)
    ) AS any
  `.execute(db);
  if (!pending[0]!.any) return { polled: true, events: 0, deliveries: 0, more: false, handedOver: NOTHING };
  return db.transaction().execute(async (trx) => {
    const { rows: state } = await sql<{ position_created_at: string; position_seq: number }>`
      SELECT position_created_at, position_seq FROM webhook_poller_state WHERE id = 1 AND ${ASYNC_COMMIT} FOR UPDATE SKIP LOCKED
    `.execute(trx);
    if (state.length === 0) return { polled: false, events: 0, deliveries: 0, more: false, handedOver: NOTHING };
    const position = state[0]!;
    const horizon = await readHorizon(trx);

    const { rows: enabled } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_endpoints WHERE enabled`.execute(trx);
    if (enabled[0]!.n === 0) {
      // Nobody to deliver to: skip straight to the last final event. An endpoint created meanwhile
      // is stamped by the write clock at or above the horizon, so it wanted none of these.
      const { rows: last } = await sql<{ created_at: string; seq: number }>`
        SELECT created_at, seq FROM events
        WHERE (created_at, seq) > (${position.position_created_at}::timestamptz, ${position.position_seq}::bigint)
          AND created_at < ${horizon}::timestamptz
        ORDER BY created_at DESC, seq DESC LIMIT 1
      `.execute(trx);
      if (last.length > 0) await advance(trx, last[0]!.created_at, last[0]!.seq, nowIso);
      return { polled: true, events: 0, deliveries: 0, more: false, handedOver: NOTHING };
    }

    const { rows: events } = await sql<{ id: string; created_at: string; seq: number }>`
      SELECT id, created_at, seq FROM events
      WHERE (created_at, seq) > (${position.position_created_at}::timestamptz, ${position.position_seq}::bigint)
        AND created_at < ${horizon}::timestamptz
      ORDER BY created_at, seq
      LIMIT ${batchSize}
    `.execute(trx);
    if (events.length === 0) return { polled: true, events: 0, deliveries: 0, more: false, handedOver: NOTHING };

    const eventIds = events.map((e) => e.id);
    const last = events[events.length - 1]!;
    const handover = handoverOf();
    if (!handover || handover.limit <= 0) {
      const inserted = await sql`
        INSERT INTO webhook_deliveries (id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at)
        SELECT gen_random_uuid(), ev.id, ev.type, e.id, 'pending', ${nowIso}::timestamptz, ${nowIso}::timestamptz, ${nowIso}::timestamptz
        ${fanOut(eventIds)}
        ORDER BY ev.created_at, ev.seq, e.id
      `.execute(trx);
      await advance(trx, last.created_at, last.seq, nowIso);
      return { polled: true, events: events.length, deliveries: Number(inserted.numAffectedRows ?? 0), more: events.length === batchSize, handedOver: NOTHING };
    }

    const slots = JSON.stringify(Object.fromEntries(handover.freeSlots));
    const held = JSON.stringify(Object.fromEntries(handover.held ?? []));
    const { rows } = await sql<ClaimedRow & { total: number; handed: boolean }>`
      WITH fresh AS (
        SELECT ev.id AS event_id, ev.type AS event_type, e.id AS endpoint_id, ev.created_at, ev.seq,
          -- As a claim ranks: the endpoint's k-th row after those it has in flight here.
          coalesce((${held}::jsonb ->> e.id::text)::int, 0) + row_number() OVER (PARTITION BY e.id ORDER BY ev.created_at, ev.seq) AS rank,
          row_number() OVER (PARTITION BY e.id ORDER BY ev.created_at, ev.seq) <= coalesce((${slots}::jsonb ->> e.id::text)::int, ${handover.endpointCapacity})
            AND e.consecutive_failures < ${handover.breaker.threshold}
            AND (e.paused_until IS NULL OR e.paused_until <= ${nowIso}::timestamptz)
            AND NOT EXISTS (
              SELECT 1 FROM webhook_deliveries d
              WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= ${nowIso}::timestamptz
                AND (d.locked_until IS NULL OR d.locked_until <= ${nowIso}::timestamptz)) AS eligible
        ${fanOut(eventIds)}
      ), handed AS (
        SELECT event_id, endpoint_id FROM fresh WHERE eligible
        ORDER BY rank, created_at, seq, endpoint_id
        LIMIT ${handover.limit}
      ), inserted AS (
        INSERT INTO webhook_deliveries (id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at, locked_by, locked_at, locked_until)
        SELECT gen_random_uuid(), f.event_id, f.event_type, f.endpoint_id, 'pending', ${nowIso}::timestamptz, ${nowIso}::timestamptz, ${nowIso}::timestamptz,
          CASE WHEN h.event_id IS NOT NULL THEN ${handover.workerId} END,
          CASE WHEN h.event_id IS NOT NULL THEN ${nowIso}::timestamptz END,
          CASE WHEN h.event_id IS NOT NULL THEN ${isoFromMillis(now + handover.leaseMs)}::timestamptz END
        FROM fresh f LEFT JOIN handed h ON h.event_id = f.event_id AND h.endpoint_id = f.endpoint_id
        ORDER BY f.created_at, f.seq, f.endpoint_id
        RETURNING id, event_id, endpoint_id, attempt_count, locked_by, test
      ), total AS (
        SELECT count(*)::int AS total FROM inserted
      )
      SELECT t.total, h.* FROM total t LEFT JOIN (
        SELECT ${claimedColumns(nowIso)}, ev.created_at AS sort_created_at, ev.seq AS sort_seq
        FROM inserted c
        JOIN webhook_endpoints e ON e.id = c.endpoint_id
        JOIN events ev ON ev.id = c.event_id
        WHERE c.locked_by IS NOT NULL
      ) h ON true
      ORDER BY h.sort_created_at, h.sort_seq, h.endpoint_id
    `.execute(trx);
    await advance(trx, last.created_at, last.seq, nowIso);
    const handedOver = rows.filter((r) => r.id !== null).map(claimedDelivery);
    return { polled: true, events: events.length, deliveries: rows[0]?.total ?? 0, more: events.length === batchSize, handedOver };
  });
}

/** The FROM and WHERE of a fan-out: one row per event of `eventIds` (`ev`) × endpoint subscribed to it (`e`). */
function fanOut(eventIds: readonly string[]) {
  return sql`
    FROM events ev
    JOIN webhook_endpoints e ON e.enabled AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types))
      -- An endpoint receives the changes made after it was registered; older ones by replay.
      AND ev.created_at >= e.created_at
    WHERE ev.id = ANY(${[...eventIds]}::uuid[]) AND ev.type <> 'ping' AND NOT ev.test`;
}

async function advance(trx: Kysely<Database>, createdAt: string, seq: number, nowIso: string): Promise<void> {
  await sql`
    UPDATE webhook_poller_state SET position_created_at = ${createdAt}::timestamptz, position_seq = ${seq}::bigint, updated_at = ${nowIso}::timestamptz
    WHERE id = 1
  `.execute(trx);
}
