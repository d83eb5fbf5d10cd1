/**
 * The mirror's schema, created on open. Numbered, forward-only steps recorded in
 * store_mirror.schema_version and applied under an advisory lock, so two tools starting at once on
 * one PostgreSQL do not race. Resource tables come from SYNC_RESOURCES: `record` (the API's JSON,
 * every field), `last_modified` (the ordering key) and typed columns generated from `record`.
 */
import { sql, type Kysely } from 'kysely';
import { SYNC_RESOURCES, type SyncResource } from '../sync-resources.ts';

const MIGRATION_LOCK = 0x53594e43; // 'SYNC'

function resourceTable(resource: SyncResource): string {
  // Casts from jsonb text to text/numeric/integer/boolean are immutable, so they can be generated
  // columns; timestamps stay text here because a cast to timestamptz depends on the session zone.
  const generated = Object.entries(resource.columns).map(([name, type]) =>
    type === 'jsonb'
      ? `"${name}" jsonb GENERATED ALWAYS AS (record->'${name}') STORED`
      : `"${name}" ${type} GENERATED ALWAYS AS ((record->>'${name}')::${type}) STORED`,
  );
  return `CREATE TABLE IF NOT EXISTS store_mirror.${resource.name} (
    ${resource.key} text PRIMARY KEY,
    last_modified timestamptz NOT NULL,
    record jsonb NOT NULL,
    ${generated.join(',\n    ')},
    mirrored_at timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX IF NOT EXISTS ${resource.name}_last_modified ON store_mirror.${resource.name} (last_modified, ${resource.key});`;
}

const MIGRATIONS: readonly string[] = [
  `CREATE SCHEMA IF NOT EXISTS store_mirror;
   ${SYNC_RESOURCES.map(resourceTable).join('\n')}
   CREATE TABLE store_mirror.sync_state (
     resource text PRIMARY KEY,
     -- Position of the initial sync in the export (resumes there after a crash).
     export_cursor text,
     initial_done boolean NOT NULL DEFAULT false,
     initial_records bigint NOT NULL DEFAULT 0,
     -- next_cursor of the last list page pulled by reconcile (after the initial sync: its end).
     cursor text,
     last_reconcile_at timestamptz,
     last_reconcile_pulled bigint,
     last_reconcile_applied bigint,
     updated_at timestamptz NOT NULL DEFAULT now()
   );
   CREATE TABLE store_mirror.received_events (
     event_id text PRIMARY KEY,
     type text NOT NULL,
     created_at text NOT NULL,
     received_at timestamptz NOT NULL DEFAULT now(),
     -- false: the mirror already held this record at the same or a newer version.
     applied boolean NOT NULL,
     deliveries integer NOT NULL DEFAULT 1
   );
   CREATE INDEX received_events_received_at ON store_mirror.received_events (received_at);`,
  // The daemon's view of the service (`store-api-sync run`): an outage in progress, for `status`.
  `CREATE TABLE store_mirror.daemon_state (
     id integer PRIMARY KEY CHECK (id = 1),
     outage_since timestamptz,
     outage_attempts integer NOT NULL DEFAULT 0,
     last_error text,
     last_success_at timestamptz,
     updated_at timestamptz NOT NULL DEFAULT now()
   )`,
  // The spec's external mapping as tables an ERP joins (GET /api/v1/attributes, decision 0033): views
  // over the mirrored products, so they are never behind the products themselves. A product's
  // record holds its active variants only; attributes and attribute_values count active products,
  // as the API's list does by default, variant_attributes has every mirrored product's pairs.
  `CREATE VIEW store_mirror.variant_attributes AS
     SELECT p.id AS product_id, v->>'id' AS variant_id, a.key, a.value, (p.record->>'is_active')::boolean AS product_is_active
     FROM store_mirror.products p
     CROSS JOIN LATERAL jsonb_array_elements(p.record->'variants') AS v
     CROSS JOIN LATERAL jsonb_each_text(v->'attributes') AS a(key, value);
   CREATE VIEW store_mirror.attribute_values AS
     SELECT key, value, count(*)::integer AS variant_count
     FROM store_mirror.variant_attributes WHERE product_is_active GROUP BY key, value;
   CREATE VIEW store_mirror.attributes AS
     SELECT key, sum(variant_count)::integer AS variant_count, count(*)::integer AS value_count
     FROM store_mirror.attribute_values GROUP BY key`,
  // Resources the token may not read (403, a missing scope): `run` and `init` mirror the others and
  // note these, `status` shows them (unreadable-resources.ts).
  `ALTER TABLE store_mirror.sync_state ADD COLUMN skipped_scope text;
   ALTER TABLE store_mirror.sync_state ADD COLUMN skipped_since timestamptz`,
];

/**
 * Applies the pending migrations of the mirror schema, then creates the table of every resource in
 * `resources` the mirror lacks: a resource the service declared after this mirror was made is
 * mirrored from the next start on (its initial sync walks it, sync_state having no row for it).
 */
export async function migrateMirror(db: Kysely<unknown>, resources: readonly SyncResource[] = SYNC_RESOURCES): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`.execute(trx);
    await sql`CREATE SCHEMA IF NOT EXISTS store_mirror`.execute(trx);
    await sql`CREATE TABLE IF NOT EXISTS store_mirror.schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`.execute(trx);
    const { rows } = await sql<{ v: number | null }>`SELECT max(version) AS v FROM store_mirror.schema_version`.execute(trx);
    const current = rows[0]?.v ?? 0;
    for (let i = current; i < MIGRATIONS.length; i++) {
      // One statement per query: PGlite's extended protocol takes no multi-statement strings.
      for (const statement of MIGRATIONS[i]!.split(/;\s*\n/)
        .map((s) => s.trim().replace(/;$/, ''))
        .filter(Boolean)) {
        await sql.raw(statement).execute(trx);
      }
      await sql`INSERT INTO store_mirror.schema_version (version) VALUES (${i + 1})`.execute(trx);
    }
    for (const resource of resources) {
      for (const statement of resourceTable(resource).split(/;\s*\n/)) await sql.raw(statement.trim().replace(/;$/, '')).execute(trx);
    }
  });
}
