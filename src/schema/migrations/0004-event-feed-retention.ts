/**
 * The events feed and retention: an index to page the event log by (created_at, id) like every
 * other list, and one row per pruned table saying from when on its records are complete (see
 * src/retention/).
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE INDEX events_created_at_id_idx ON events (created_at, id);

    -- oldest_available: records of this table created at or after it are all still there; older
    -- ones may have been pruned. Published one pruning run before anything below it is deleted.
    CREATE TABLE retention_watermarks (
      table_name text PRIMARY KEY,
      oldest_available timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
  `,
  );
}
