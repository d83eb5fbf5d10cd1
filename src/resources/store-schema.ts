/**
 * The database objects derived from the resource declarations (decision 0034): every resource's
 * stored document (its column's statement triggers, db/documents.ts) and the cache-notify trigger on
 * every table a document reads (decision 0016). A resource's migration creates its table
 * (`createStoreTable`) and then calls `installStoreTriggers`, which (re)installs these objects for
 * every declared resource whose tables exist, so nothing is listed by hand in a migration.
 */
import { sql, type Kysely } from 'kysely';
import {
  checkDocuments,
  documentSources,
  installDocumentTriggers,
  installStoreNotifyTriggers,
  rebuildDocuments,
  type DocumentDifference,
  type DocumentKind,
  type RebuildProgress,
} from '../db/documents.ts';
import { RESOURCES } from './registry.ts';
import { documentKindsOf } from '../records/resource.ts';

/**
 * Every stored document of every declared resource, in resource order. `stores` false: as a database
 * before migration 0031 has them (no store_id: the expressions name no store, `buildBeforeStores`).
 */
export function documentKinds({ stores = true, versions = stores }: { stores?: boolean; versions?: boolean } = {}): DocumentKind[] {
  return documentKindsOf(RESOURCES, { stores, versions });
}

/** The tables whose writes can change a list page: each resource's table and the tables its document reads. */
export function storeTables(): string[] {
  return documentSources(documentKinds()).map((s) => s.table);
}

/**
 * The document kinds whose owner and child tables all exist in `db` (a migration installs what its
 * day has), as its day has them: naming their store once the owner has a store_id (migration 0031),
 * carrying the version once it has a `version` (migration 0039).
 */
async function installableKinds<DB>(db: Kysely<DB>): Promise<DocumentKind[]> {
  const { rows } = await sql<{ name: string; stores: boolean; versions: boolean }>`
    SELECT t.table_name AS name,
      EXISTS (SELECT 1 FROM information_schema.columns c
        WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.column_name = 'store_id') AS stores,
      EXISTS (SELECT 1 FROM information_schema.columns c
        WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.column_name = 'version') AS versions
    FROM information_schema.tables t WHERE t.table_schema = current_schema()`.execute(db);
  const existing = new Set(rows.map((r) => r.name));
  const withStores = new Set(rows.filter((r) => r.stores).map((r) => r.name));
  const withVersions = new Set(rows.filter((r) => r.versions).map((r) => r.name));
  const installable = (k: DocumentKind) => existing.has(k.table) && (k.children ?? []).every((c) => existing.has(c.table));
  const before = documentKinds({ stores: false });
  const beforeVersions = documentKinds({ versions: false });
  return documentKinds()
    .map((k, i) => (withVersions.has(k.table) ? k : withStores.has(k.table) ? beforeVersions[i]! : before[i]!))
    .filter(installable);
}

/**
 * (Re)installs the document triggers and the cache-notify triggers of every declared resource whose
 * tables exist: idempotent, so each migration adding or changing a resource calls it (after its own
 * DDL). It rebuilds no document: a new resource's table is empty; a changed expression needs
 * `rebuildStoreDocuments` too.
 */
export async function installStoreTriggers<DB>(db: Kysely<DB>): Promise<void> {
  const kinds = await installableKinds(db);
  await installDocumentTriggers(db, kinds);
  // The notify function comes with migration 0016; the documents' migration (0009) runs before it.
  const { rows } = await sql<{ present: boolean }>`SELECT to_regproc('notify_store_changed') IS NOT NULL AS present`.execute(db);
  if (rows[0]?.present) await installStoreNotifyTriggers(db, kinds);
}

/** rebuildDocuments over every declared resource whose tables exist. */
export async function rebuildStoreDocuments<DB>(
  db: Kysely<DB>,
  options: { onlyMissing?: boolean; batch?: number; onProgress?: (p: RebuildProgress) => void } = {},
): Promise<number> {
  return rebuildDocuments(db, await installableKinds(db), options);
}

/** checkDocuments over every declared resource's documents. */
export async function checkStoreDocuments<DB>(db: Kysely<DB>, options: { limit?: number } = {}): Promise<DocumentDifference[]> {
  return checkDocuments(db, documentKinds(), options);
}
