/**
 * The event poller's position per store (decision 0051, "Fairness"): one store's backlog of events
 * to fan out no longer holds another store's.
 *
 *  - `webhook_poller_state` (one row) becomes the scan's position: every event at or before it has
 *    been seen and counted into its store's target.
 *  - `webhook_store_positions (store_id, position, target, served_at)`: how far each store's events
 *    are fanned out (`position`) and how far they are known to go (`target`, below the read horizon
 *    when it was scanned). A store is behind while position < target; the fan-out serves behind
 *    stores in rounds, least recently served first.
 * A store gets its row when its first event after this migration is scanned, with the scan's
 * position as its own: the single position meant every event before it was fanned out. The row
 * goes with its store (ON DELETE CASCADE). The deployment's, not a store's: no row-level security,
 * the tenant role may not read it.
 * `events_store_created_at_seq_idx` walks one store's events in the poller's (created_at, seq) order.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE webhook_store_positions (
      store_id uuid PRIMARY KEY REFERENCES stores(id) ON DELETE CASCADE,
      position_created_at timestamptz NOT NULL,
      position_seq bigint NOT NULL,
      target_created_at timestamptz NOT NULL,
      target_seq bigint NOT NULL,
      served_at timestamptz NOT NULL
    );
    CREATE INDEX webhook_store_positions_behind_idx ON webhook_store_positions (served_at, store_id)
      WHERE (position_created_at, position_seq) < (target_created_at, target_seq);
    REVOKE ALL ON webhook_store_positions FROM store_api_tenant;
    CREATE INDEX events_store_created_at_seq_idx ON events (store_id, created_at, seq);
  `,
  );
}
