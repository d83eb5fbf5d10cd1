/**
 * What the delivery queue's gauges read at scrape time (webhook-metrics.ts): how many deliveries
 * wait (`queueDepth`, delivery-queue.ts) and how long the most overdue of them has been due.
 *
 * The age is lateness, not age since creation: a delivery failing towards its dead letter waits
 * hours between retries by design (retry-policy.ts), and an endpoint paused by its breaker, a
 * disabled one or a suspended store's wait on purpose too (the endpoints gauge shows those). What
 * is left — due rows that a worker could claim now, and has not finished — grows only when the
 * workers are behind, stopped, or cannot reach the database: what an alert on the queue wants. An
 * attempt in flight counts (its row stays due until settled), so a slow receiver shows as lateness
 * up to WEBHOOK_TIMEOUT_MS per attempt. Cheap: one index probe per endpoint per status, like
 * `nextDueAt`; the time is the database's, as for the rows' own stamps.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { queueDepth, STORE_ACTIVE } from './delivery-queue.ts';
import type { QueueGaugeSource } from './webhook-metrics.ts';

/** Seconds the most overdue claimable delivery of any store has been due; 0 when none is due. */
export async function queueAgeSeconds(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ age: number | null }>`
    SELECT greatest(0, extract(epoch FROM now() - min(greatest(c.next_attempt_at, coalesce(e.paused_until, c.next_attempt_at)))))::float8 AS age
    FROM webhook_endpoints e
    CROSS JOIN LATERAL (
      (SELECT d.next_attempt_at FROM webhook_deliveries d
       WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = 'pending'
       ORDER BY d.next_attempt_at, d.id LIMIT 1)
      UNION ALL
      (SELECT d.next_attempt_at FROM webhook_deliveries d
       WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = 'failed'
       ORDER BY d.next_attempt_at, d.id LIMIT 1)
    ) c
    WHERE e.enabled AND ${STORE_ACTIVE}
  `.execute(db);
  return rows[0]?.age ?? 0;
}

/** The queue gauges' source on `db`. */
export function queueGaugeSource(db: Kysely<Database>): QueueGaugeSource {
  return { depth: () => queueDepth(db), ageSeconds: () => queueAgeSeconds(db) };
}
