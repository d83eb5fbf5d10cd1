/**
 * Two changes that keep newest-wins consumers and the delivery queue honest.
 *
 * 1. A record's last_modified moves forward on EQUAL stamps too (migration 0006 moved only lower
 *    ones). On the embedded default the clock has millisecond resolution, so two transactions
 *    writing one record within a millisecond stamp it alike: two versions with one last_modified,
 *    which no newest-wins consumer can order. The trigger now fires when an UPDATE sets last_modified
 *    to a value lower than OR EQUAL to the version it replaces, and moves it one microsecond past
 *    that version, unless the version it replaces is this transaction's own (a transaction writing
 *    a row twice keeps its stamp). `UPDATE OF last_modified`: an update that leaves the column out
 *    (stock levels recomputed before the stamp is set) never fires it. The read horizon still holds
 *    (docs/decisions/0001-cursor-horizon.md): the new value is above the replaced one, which is at
 *    least this transaction's stamp, which is at least its xact_start.
 *
 * 2. The delivery queue serves an endpoint's first attempts before its retries
 *    (docs/decisions/0010-delivery-fairness-after-a-pause.md): the claim walks pending rows, then
 *    failed ones, each in due order, so the index leads with the status.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

const TABLES = ['products', 'orders', 'customers', 'stock_movements'];

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE OR REPLACE FUNCTION last_modified_forward() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE own boolean; BEGIN
        IF NEW.last_modified = OLD.last_modified THEN EXECUTE format('SELECT xmin = pg_current_xact_id()::xid FROM %I.%I WHERE id = $1', TG_TABLE_SCHEMA, TG_TABLE_NAME) INTO own USING OLD.id; IF own THEN RETURN NEW; END IF; END IF; NEW.last_modified := OLD.last_modified + interval '1 microsecond'; RETURN NEW; END
    $$;
    ${TABLES.map(
      (table) => `
    DROP TRIGGER ${table}_last_modified_forward ON ${table};
    CREATE TRIGGER ${table}_last_modified_forward BEFORE UPDATE OF last_modified ON ${table}
      FOR EACH ROW WHEN (NEW.last_modified <= OLD.last_modified) EXECUTE FUNCTION last_modified_forward();`,
    ).join('')}

    DROP INDEX webhook_deliveries_endpoint_due_idx;
    CREATE INDEX webhook_deliveries_endpoint_due_idx ON webhook_deliveries (endpoint_id, status, next_attempt_at, id)
      WHERE status IN ('pending','failed');
  `,
  );
}
