/**
 * Retention: the watermarks (for each pruned table, the instant from which on its records are
 * complete; readers such as the events feed, replays and the dashboard ask here how far back data
 * goes) and the batched deletes of the pruner (retention-pruner.ts).
 *
 * Every delete is bounded (`… WHERE id IN (SELECT … LIMIT n)`) and runs in its own short
 * transaction; rows are taken `FOR UPDATE SKIP LOCKED`, so a delivery a worker or an admin holds is
 * skipped, never waited for, and the pruner never holds a lock a delivery waits on for long.
 *
 * The pruner works across stores (decision 0051): each batch is found by age in every store, and
 * the statements after it name each row's store, `(store_id, id)`; a delivery's attempts and an
 * event's deliveries are matched on their store as well as their id.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { ownStoreIs } from '../db/store-scope.ts';

/** Tables with a watermark. */
export type RetainedTable = 'events' | 'webhook_deliveries';

declare module '../db/schema.ts' {
  interface Database {
    retention_watermarks: { table_name: string; oldest_available: string; updated_at: string };
  }
}

/** The instant (ISO text, UTC, microseconds) from which on `table` is complete; undefined while nothing was ever pruned. */
export async function oldestAvailable(db: Kysely<Database>, table: RetainedTable): Promise<string | undefined> {
  const { rows } = await sql<{ at: string }>`
    SELECT iso_utc(oldest_available) AS at FROM retention_watermarks WHERE table_name = ${table}
  `.execute(db);
  return rows[0]?.at;
}

/** Moves the watermark of `table` forward to `at` (never back). */
export async function publishWatermark(db: Kysely<Database>, table: RetainedTable, at: string, nowIso: string): Promise<void> {
  await sql`
    INSERT INTO retention_watermarks (table_name, oldest_available, updated_at)
    VALUES (${table}, ${at}::timestamptz, ${nowIso}::timestamptz)
    ON CONFLICT (table_name) DO UPDATE
      SET oldest_available = greatest(retention_watermarks.oldest_available, excluded.oldest_available),
          updated_at = excluded.updated_at
  `.execute(db);
}

export interface DeletedDeliveries {
  deliveries: number;
  attempts: number;
}

/**
 * Deletes up to `limit` finished deliveries past their retention, with their attempts: succeeded
 * ones that succeeded before `cutoff` (kind 'succeeded') or dead letters dead-lettered before it
 * (kind 'dead'). Pending and failed deliveries (waiting or in flight) and leased rows are never
 * touched; rows locked by someone else are skipped.
 */
export async function deleteFinishedDeliveries(db: Kysely<Database>, kind: 'succeeded' | 'dead', cutoff: string, limit: number): Promise<DeletedDeliveries> {
  const finishedBefore =
    kind === 'succeeded'
      ? // A delivery succeeds after it was created: created_at bounds the walk (its index; succeeded_at has none, decision 0044).
        sql`status = 'succeeded' AND succeeded_at < ${cutoff}::timestamptz AND created_at < ${cutoff}::timestamptz`
      : sql`status = 'dead' AND dead_at < ${cutoff}::timestamptz`;
  return db.transaction().execute(async (trx) => {
    const { rows } = await sql<{ id: string; store_id: string }>`
      SELECT id, store_id FROM webhook_deliveries
      WHERE ${finishedBefore} AND locked_until IS NULL
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    `.execute(trx);
    if (rows.length === 0) return { deliveries: 0, attempts: 0 };
    // Ids are unique across stores: the batch's stores and its ids name exactly its rows.
    const stores = sql`${[...new Set(rows.map((r) => r.store_id))]}::uuid[]`;
    const ids = sql`${rows.map((r) => r.id)}::uuid[]`;
    const attempts = await sql`DELETE FROM webhook_attempts WHERE store_id = ANY(${stores}) AND delivery_id = ANY(${ids})`.execute(trx);
    // The status is checked again: a row changes only under its lock, which is ours now.
    const deliveries = await sql`DELETE FROM webhook_deliveries WHERE store_id = ANY(${stores}) AND id = ANY(${ids}) AND ${finishedBefore}`.execute(trx);
    return { deliveries: Number(deliveries.numAffectedRows ?? 0), attempts: Number(attempts.numAffectedRows ?? 0) };
  });
}

/**
 * Deletes up to `limit` events created before `before` that nothing needs any more: the poller has
 * scanned and fanned them out and no delivery (pending, failed, dead or succeeded but kept) refers to them.
 */
export async function deleteUnneededEvents(db: Kysely<Database>, before: string, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM events WHERE (store_id, id) IN (
      SELECT e.store_id, e.id FROM events e, webhook_poller_state p
      WHERE p.id = 1 AND e.created_at < ${before}::timestamptz
        AND (e.created_at, e.seq) <= (p.position_created_at, p.position_seq)
        -- Scanned, and fanned out by its store (event-poller.ts: a store behind has not yet).
        AND NOT EXISTS (SELECT 1 FROM webhook_store_positions sp
          WHERE sp.store_id = e.store_id AND (e.created_at, e.seq) > (sp.position_created_at, sp.position_seq))
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.store_id = e.store_id AND d.event_id = e.id)
      LIMIT ${limit}
      FOR UPDATE OF e SKIP LOCKED
    )
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** When the oldest delivery the running store still keeps was created (ISO), or undefined when there is none. */
export async function oldestDeliveryAt(db: Kysely<Database>): Promise<string | undefined> {
  const { rows } = await sql<{ at: string | null }>`
    SELECT iso_utc(min(created_at)) AS at FROM webhook_deliveries WHERE ${ownStoreIs('store_id')}
  `.execute(db);
  return rows[0]?.at ?? undefined;
}

/** Deletes up to `limit` admin audit log entries older than `before`; returns how many. */
export async function deleteAuditBefore(db: Kysely<Database>, before: string, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM admin_audit_log WHERE (store_id, id) IN (
      SELECT store_id, id FROM admin_audit_log WHERE at < ${before}::timestamptz LIMIT ${limit} FOR UPDATE SKIP LOCKED
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** Deletes up to `limit` import jobs that ended (succeeded or failed) before `before`; returns how many. */
export async function deleteFinishedImportJobs(db: Kysely<Database>, before: string, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM import_jobs WHERE (store_id, id) IN (
      SELECT store_id, id FROM import_jobs
      WHERE status IN ('succeeded', 'failed') AND finished_at < ${before}::timestamptz LIMIT ${limit} FOR UPDATE SKIP LOCKED
    )`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** Deletes up to `limit` admin API idempotency keys created before `cutoff` (ISO); returns how many. */
export async function deleteExpiredIdempotencyKeys(db: Kysely<Database>, cutoff: string, limit: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    WITH gone AS (
      DELETE FROM idempotency_keys WHERE (store_id, key_hash) IN (
        SELECT store_id, key_hash FROM idempotency_keys WHERE created_at < ${cutoff}::timestamptz LIMIT ${limit}
      ) RETURNING 1
    )
    SELECT count(*)::int AS n FROM gone
  `.execute(db);
  return rows[0]?.n ?? 0;
}
