/**
 * Store tables: the tables whose rows are records of a resource (resources/registry.ts). Each has a
 * `last_modified` column stamped by every write (db/write-clock.ts), the keyset index every list and
 * export walks, and the trigger that keeps last_modified moving forward (migrations 0006, 0007); and,
 * since migration 0031, the `store_id` of the store each row belongs to with the row-level security
 * that holds it to its store (decision 0051). A migration creates a store table with
 * `createStoreTable`, which always adds all of them; test/db/store-tables.test.ts checks every table
 * of every declared resource has them.
 */
import type { Kysely } from 'kysely';
import { executeScript } from './execute-script.ts';

/** The keyset index of a store table: (store_id, last_modified, id), the order of every page within its store. */
function keysetIndexSql(table: string): string {
  return `CREATE INDEX ${table}_last_modified_idx ON ${table} (store_id, last_modified, id);`;
}

/**
 * Row-level security as migration 0031 gives every store-owned table: enabled and forced, a statement
 * sees and writes the rows of its scope's store only.
 */
function storeIsolationSql(table: string): string {
  return `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${table} FORCE ROW LEVEL SECURITY;
    CREATE POLICY store_isolation ON ${table}
      USING (store_id = store_api_current_store()) WITH CHECK (store_id = store_api_current_store());`;
}

/**
 * The trigger moving a row's last_modified past the version it replaces, as migration 0007 left it
 * on the first store tables (function of migrations 0006/0007); test/db/store-tables.test.ts checks
 * that a new table's trigger is theirs.
 */
function forwardTriggerSql(table: string): string {
  return `CREATE TRIGGER ${table}_last_modified_forward BEFORE UPDATE OF last_modified ON ${table}
      FOR EACH ROW WHEN (NEW.last_modified <= OLD.last_modified) EXECUTE FUNCTION last_modified_forward();`;
}

/**
 * Creates a store table from its own column definitions (an `id uuid PRIMARY KEY` among them), adding
 * `created_at`, `last_modified`, the stored document's column `doc`, the version columns (`version`,
 * `version_xact`, `doc_previous`, decision 0057), the row's `store_id` (last, its
 * default the statement's store: migration 0031's `store_api_insert_store()`, so for a migration
 * after 0031 only), the keyset index led by the store, the forward trigger and the row-level
 * security. The document's and the cache-notify triggers come from the declaration: the migration
 * then calls `installStoreTriggers` (resources/store-schema.ts).
 */
export async function createStoreTable<DB>(db: Kysely<DB>, table: string, columns: readonly string[]): Promise<void> {
  if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`not a plain table name: ${table}`);
  await executeScript(
    db,
    `
    CREATE TABLE ${table} (
      ${[
        ...columns,
        'created_at timestamptz NOT NULL',
        'last_modified timestamptz NOT NULL',
        'doc json',
        // Decision 0057 (migration 0039): the record's version, the transaction that last bumped it, what its last write changed.
        'version integer NOT NULL DEFAULT 1',
        'version_xact xid8 DEFAULT pg_current_xact_id()',
        'doc_previous json',
        'store_id uuid NOT NULL DEFAULT store_api_insert_store()',
      ].join(',\n      ')}
    );
    ${keysetIndexSql(table)}
    ${forwardTriggerSql(table)}
    ${storeIsolationSql(table)}
  `,
  );
}
