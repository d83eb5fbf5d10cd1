/**
 * Claims follow the work due, not every enabled endpoint (docs/decisions/0065-claims-follow-due-work.md).
 *
 * 1. The due index is led by the store: (store_id, endpoint_id, status, next_attempt_at, id) over
 *    the unfinished deliveries. A claim walks the stores that have unfinished deliveries through it
 *    (one index descent per store), and every statement that looks at one endpoint's due rows names
 *    its store and endpoint, so they keep one probe each. It replaces the endpoint-led index (the
 *    same rows, so a fan-out's insert still maintains one due index).
 * 2. webhook_endpoints gets an index on its store: a claim reads the endpoints of the stores it
 *    walks, not every endpoint of the deployment.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE INDEX webhook_deliveries_store_due_idx ON webhook_deliveries (store_id, endpoint_id, status, next_attempt_at, id)
      WHERE status IN ('pending','failed');
    DROP INDEX webhook_deliveries_endpoint_due_idx;
    CREATE INDEX webhook_endpoints_store_idx ON webhook_endpoints (store_id, id);
  `,
  );
}
