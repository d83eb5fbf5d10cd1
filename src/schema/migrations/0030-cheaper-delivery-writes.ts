/**
 * Cheaper writes per webhook delivery (docs/decisions/0044-cheaper-webhook-deliveries.md).
 * A delivery is inserted pending (one entry in each index whose predicate it meets) and settled
 * succeeded by a non-HOT update (its status moves: again one entry in each index the new version
 * meets); nearly every delivery goes that way, so each index entry either write adds is paid per
 * delivery.
 *
 * 1. webhook_deliveries_succeeded_at_idx is dropped: a successful settle no longer writes an entry
 *    into it. Its readers find the rows otherwise: the retention of succeeded deliveries walks
 *    webhook_deliveries_created_idx (a delivery succeeds after it was created, so `created_at <
 *    cutoff` bounds the rows `succeeded_at < cutoff` picks), the hourly activity reaches succeeded
 *    deliveries through their success attempt (webhook_attempts_started_idx; the success attempt
 *    starts before its delivery's settle stamps succeeded_at).
 * 2. webhook_deliveries_status_created_idx keeps failed and dead deliveries only: a fresh delivery
 *    no longer writes an entry into it. A list of pending deliveries reads the pending rows through
 *    webhook_deliveries_endpoint_due_idx, which holds exactly the unfinished ones (or walks
 *    webhook_deliveries_created_idx newest first, where fresh pending rows are).
 * 3. webhook_attempts loses its foreign key to webhook_deliveries: its check, a query and a row
 *    lock on the delivery per attempt inserted (and a lookup per delivery deleted), was a tenth of
 *    PostgreSQL's time per delivery. An attempt is only ever inserted by the statement that updates
 *    its delivery under that row's lock (the settle, the claim's abandoned record), and every delete
 *    of deliveries locks them before deleting their attempts (retention, the endpoint's deletion),
 *    so no attempt outlives its delivery without it.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    DROP INDEX webhook_deliveries_succeeded_at_idx;
    DROP INDEX webhook_deliveries_status_created_idx;
    CREATE INDEX webhook_deliveries_status_created_idx ON webhook_deliveries (status, created_at DESC, id DESC)
      WHERE status IN ('failed','dead');
    ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;
  `,
  );
}
