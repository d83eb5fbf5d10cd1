/**
 * FIFO endpoints (decision 0059): an endpoint's `delivery_order` says whether its deliveries go out
 * in any order as slots allow (`unordered`, as before) or strictly in the order their events were
 * written, one batch at a time (`fifo`), and `batch_size` how many events a FIFO endpoint's batch
 * holds at most. Columns with constant defaults: adding them rewrites no row.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `ALTER TABLE webhook_endpoints
      ADD COLUMN delivery_order text NOT NULL DEFAULT 'unordered' CONSTRAINT webhook_endpoints_delivery_order_check CHECK (delivery_order IN ('unordered', 'fifo')),
      ADD COLUMN batch_size integer NOT NULL DEFAULT 50 CONSTRAINT webhook_endpoints_batch_size_check CHECK (batch_size BETWEEN 1 AND 500);`,
  );
}
