/**
 * Stored documents (src/db/documents.ts, docs/decisions/0012-stored-documents.md): a `doc` column on
 * products, customers, orders and stock movements and an `inventory_doc` on products, kept by
 * statement triggers built from the resources' JSON expressions, and filled for the existing rows in
 * batches. The event log's `data` becomes `json` so an event carries its record's bytes verbatim
 * (jsonb re-ordered the keys: the feed and the webhooks sent a different text than a GET).
 * On a store too big to fill at start, run `store-api documents backfill` first (it shows progress);
 * this migration then only fills what is still missing.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';
import { installStoreTriggers, rebuildStoreDocuments } from '../../resources/store-schema.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE products ADD COLUMN IF NOT EXISTS doc json, ADD COLUMN IF NOT EXISTS inventory_doc json;
    ALTER TABLE customers ADD COLUMN IF NOT EXISTS doc json;
    ALTER TABLE orders ADD COLUMN IF NOT EXISTS doc json;
    ALTER TABLE stock_movements ADD COLUMN IF NOT EXISTS doc json;
    ALTER TABLE events ALTER COLUMN data TYPE json USING data::json;
  `,
  );
  // The triggers of the declared resources whose tables exist by now (resources/store-schema.ts).
  await installStoreTriggers(db);
  await rebuildStoreDocuments(db, { onlyMissing: true });
}
