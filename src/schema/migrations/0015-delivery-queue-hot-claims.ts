/**
 * The delivery queue's per-delivery cost in PostgreSQL (docs/decisions/0015-webhook-delivery-speed.md).
 *
 * 1. A claim only stamps the lease (locked_by, locked_at, locked_until). While `locked_until` was
 *    indexed (webhook_deliveries_leased_idx) that update could never be HOT, so every claim wrote a
 *    new entry into each of the table's indexes. The index only served "when does the next lease
 *    expire" (nextDueAt), which now reads the endpoint's due rows instead (only when nothing is due
 *    already, and then the rows it walks are the leased ones): the claim becomes a HOT update.
 * 2. A lower fillfactor leaves room on each page for the claimed version of its rows (HOT needs the
 *    new version on the same page).
 * 3. Lists by status read (status, created_at, id); succeeded deliveries, nearly all of them, are
 *    listed fast enough through webhook_deliveries_created_idx with a filter, so the index keeps only
 *    unfinished and dead ones and a successful settle no longer writes an entry into it.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    DROP INDEX webhook_deliveries_leased_idx;
    DROP INDEX webhook_deliveries_status_created_idx;
    CREATE INDEX webhook_deliveries_status_created_idx ON webhook_deliveries (status, created_at DESC, id DESC)
      WHERE status <> 'succeeded';
    ALTER TABLE webhook_deliveries SET (fillfactor = 70);
  `,
  );
}
