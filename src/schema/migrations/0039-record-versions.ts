/**
 * Record versions and what changed (decision 0057).
 *
 * Every record's table gets `version` (1 for every existing record: the column's constant default
 * adds it without rewriting a row), `version_xact` (the transaction that last bumped it, so a write
 * of several statements bumps it once; null for the existing rows, the default for new rows is the
 * inserting transaction, so a record's first version is 1) and, per stored document, `<column>_previous`:
 * the fields the last write changed, with their values before it. The event log gets `previous`, what
 * an `*.updated` event carries. `document_previous` computes it from the document before and after.
 * Then the document triggers are installed again (they now bump the version and keep `_previous`)
 * and every document is rebuilt, since each now ends with its version: like migration 0009's fill,
 * in batches of short transactions (`store-api documents backfill` can run it ahead).
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';
import { installStoreTriggers, rebuildStoreDocuments } from '../../resources/store-schema.ts';

/** The record tables of this migration's day and their document columns; later tables get theirs from createStoreTable. */
const DOCUMENTS: Readonly<Record<string, readonly string[]>> = {
  products: ['doc', 'inventory_doc'],
  customers: ['doc'],
  orders: ['doc'],
  stock_movements: ['doc'],
};

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ${Object.entries(DOCUMENTS)
      .map(
        ([table, columns]) => `
    ALTER TABLE ${table} ADD COLUMN version integer NOT NULL DEFAULT 1, ADD COLUMN version_xact xid8,
      ${columns.map((c) => `ADD COLUMN ${c}_previous json`).join(', ')};
    ALTER TABLE ${table} ALTER COLUMN version_xact SET DEFAULT pg_current_xact_id();`,
      )
      .join('')}
    ALTER TABLE events ADD COLUMN previous json;
    CREATE FUNCTION document_previous(previous json, before json, after json) RETURNS json LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE WHEN before IS NULL THEN NULL ELSE coalesce((
        SELECT json_object_agg(b.key, coalesce(previous -> b.key, b.value) ORDER BY b.n)
        FROM json_each(before) WITH ORDINALITY AS b(key, value, n)
        WHERE b.key NOT IN ('version', 'last_modified')
          AND coalesce(previous -> b.key, b.value)::jsonb IS DISTINCT FROM (after -> b.key)::jsonb), '{}'::json) END
    $$;
  `,
  );
  await installStoreTriggers(db);
  await rebuildStoreDocuments(db);
}
