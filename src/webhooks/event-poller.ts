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
import './webhook.tables.ts';

export interface PollResult {
  /** False when another worker held the position (nothing done). */
  readonly polled: boolean;
  readonly events: number;
  readonly deliveries: number;
  /** True when a full batch was read: call again without waiting. */
  readonly more: boolean;
}

/** Reads up to `batchSize` events after the position and queues their deliveries, in one transaction. */
export async function pollEvents(db: Kysely<Database>, now: number, batchSize = 500): Promise<PollResult> {
  const nowIso = isoFromMillis(now);
  // Most polls find nothing: answer those with one cheap query instead of a transaction (on the
  // embedded database every statement runs on the thread that also serves HTTP).
  const { rows: pending } = await sql<{ any: boolean }>`
    SELECT EXISTS (
      SELECT 1 FROM events ev, webhook_poller_state p
      WHERE p.id = 1 AND (ev.created_at, ev.seq) > (p.position_created_at, p.position_seq)
    ) AS any
  `.execute(db);
  if (!pending[0]!.any) return { polled: true, events: 0, deliveries: 0, more: false };
  return db.transaction().execute(async (trx) => {
    const { rows: state } = await sql<{ position_created_at: string; position_seq: number }>`
      SELECT position_created_at, position_seq FROM webhook_poller_state WHERE id = 1 FOR UPDATE SKIP LOCKED
    `.execute(trx);
    if (state.length === 0) return { polled: false, events: 0, deliveries: 0, more: false };
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
      return { polled: true, events: 0, deliveries: 0, more: false };
    }

    const { rows: events } = await sql<{ id: string; created_at: string; seq: number }>`
      SELECT id, created_at, seq FROM events
      WHERE (created_at, seq) > (${position.position_created_at}::timestamptz, ${position.position_seq}::bigint)
        AND created_at < ${horizon}::timestamptz
      ORDER BY created_at, seq
      LIMIT ${batchSize}
    `.execute(trx);
    if (events.length === 0) return { polled: true, events: 0, deliveries: 0, more: false };

    const inserted = await sql`
      INSERT INTO webhook_deliveries (id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at)
      SELECT gen_random_uuid(), ev.id, ev.type, e.id, 'pending', ${nowIso}::timestamptz, ${nowIso}::timestamptz, ${nowIso}::timestamptz
      FROM events ev
      JOIN webhook_endpoints e ON e.enabled AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types))
        -- An endpoint receives the changes made after it was registered; older ones by replay.
        AND ev.created_at >= e.created_at
      WHERE ev.id = ANY(${events.map((e) => e.id)}::uuid[]) AND ev.type <> 'ping' AND NOT ev.test
      ORDER BY ev.created_at, ev.seq, e.id
    `.execute(trx);
    const last = events[events.length - 1]!;
    await advance(trx, last.created_at, last.seq, nowIso);
    return { polled: true, events: events.length, deliveries: Number(inserted.numAffectedRows ?? 0), more: events.length === batchSize };
  });
}

async function advance(trx: Kysely<Database>, createdAt: string, seq: number, nowIso: string): Promise<void> {
  await sql`
    UPDATE webhook_poller_state SET position_created_at = ${createdAt}::timestamptz, position_seq = ${seq}::bigint, updated_at = ${nowIso}::timestamptz
    WHERE id = 1
  `.execute(trx);
}
