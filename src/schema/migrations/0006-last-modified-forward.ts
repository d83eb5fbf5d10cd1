/**
 * A record's last_modified only moves forward.
 *
 * A write transaction takes its stamp when it starts (db/write-clock.ts) and may then wait for a row
 * lock held by a later-stamped writer. Without this trigger it would commit the row with the earlier
 * stamp: the record's last_modified would go back in time, and every consumer that keeps the newest
 * version of a record (the sync tool's mirror, any ERP applying "ignore older payloads") would keep
 * the stale one. Caught by the PostgreSQL chaos test (a product and its stock level differing in the
 * mirror with no dead letter to explain it).
 *
 * The trigger moves such a row to one microsecond past the version it replaces. The read horizon
 * still holds: the value is above the transaction's stamp, which is above its xact_start. Updates
 * that keep last_modified as it is are left alone (the WHEN clause runs before any function call,
 * so bulk updates in stamp order pay nothing).
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

/** The store tables of this migration's day; tables created later get theirs from createStoreTable. */
const TABLES = ['products', 'orders', 'customers', 'stock_movements'];

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE FUNCTION last_modified_forward() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN NEW.last_modified := OLD.last_modified + interval '1 microsecond'; RETURN NEW; END
    $$;
    ${TABLES.map(
      (table) => `
    CREATE TRIGGER ${table}_last_modified_forward BEFORE UPDATE ON ${table}
      FOR EACH ROW WHEN (NEW.last_modified < OLD.last_modified) EXECUTE FUNCTION last_modified_forward();`,
    ).join('')}
  `,
  );
}
