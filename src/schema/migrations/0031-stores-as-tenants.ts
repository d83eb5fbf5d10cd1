/**
 * A store is a tenant (docs/decisions/0051-stores-as-tenants.md).
 *
 * 1. `stores`, and the default store every existing row belongs to (one store per deployment until
 *    now): a database of the previous release upgrades in place, nothing rewritten — the column is
 *    added with the default store's id as a constant default (PostgreSQL keeps it in the catalog,
 *    no table rewrite), then its default becomes the store of the statement's scope.
 * 2. `store_id` on every store-owned table, enforced by row-level security, FORCED (the tables'
 *    owner obeys it too): a statement sees and writes the rows of the store named by
 *    `store_api.store_id` (set per connection by db/store-scope.ts), and nothing when none is set.
 * 3. Two roles the service switches to (db/store-scope.ts): `store_api_tenant`, which the policies
 *    hold to one store, and `store_api_platform` (BYPASSRLS), for work across stores (the webhook
 *    worker's claims, the event poller, retention, the platform's own commands). Roles belong to
 *    the cluster, not the database: made once, shared by every database of the cluster.
 * 4. Per-store uniqueness (a sku, a slug) and keyset indexes led by the store, which the policy's
 *    `store_id = store_api_current_store()` (a stable expression) fixes as the index's first key,
 *    so a page stays one keyset lookup inside its store.
 *
 * The administrators' account tables (admin_users, admin_sessions, admin_links, …, admin_settings)
 * stay global in this step: the dashboard acts in the deployment's first store until accounts get
 * per-store memberships (decision 0051). webhook_poller_state and retention_watermarks are the
 * platform's bookkeeping, across stores by design.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

/** Tables whose every row belongs to one store. Frozen here: a later migration adds its own. */
const STORE_OWNED = [
  'products',
  'variants',
  'images',
  'customers',
  'orders',
  'order_items',
  'stock_movements',
  'events',
  'api_tokens',
  'webhook_endpoints',
  'webhook_deliveries',
  'webhook_attempts',
  'idempotency_keys',
  'admin_audit_log',
] as const;

export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db);
  const schema = `"${rows[0]!.schema.replaceAll('"', '""')}"`;
  const defaultStore = randomUUID();
  // Roles are the cluster's: another database (or a concurrent migration) may have made them.
  for (const role of ['store_api_tenant NOLOGIN', 'store_api_platform NOLOGIN BYPASSRLS']) {
    await sql.raw(`DO $$ BEGIN CREATE ROLE ${role}; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`).execute(db);
  }
  // The migrating user switches to both roles. The read horizon (db/write-clock.ts) reads when
  // each writer's transaction began, which PostgreSQL shows another role's sessions only to members
  // of pg_read_all_stats: without it a page would not wait for a write still in progress and could
  // skip it for good. Each grant only when missing, so roles an operator made beforehand (a managed
  // server whose admin is no superuser, docs/operations.md) are taken as they are.
  for (const role of ['store_api_tenant', 'store_api_platform']) {
    await sql
      .raw(
        `DO $$ BEGIN
          IF NOT pg_has_role(current_user, '${role}', 'MEMBER') THEN GRANT ${role} TO CURRENT_USER; END IF;
          IF NOT pg_has_role('${role}', 'pg_read_all_stats', 'MEMBER') THEN GRANT pg_read_all_stats TO ${role}; END IF;
        END $$`,
      )
      .execute(db);
  }
  await executeScript(
    db,
    `

    CREATE TABLE stores (
      id uuid PRIMARY KEY,
      name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
      status text NOT NULL DEFAULT 'active' CHECK (status IN ('active','suspended','deleting')),
      created_at timestamptz NOT NULL DEFAULT now(),
      status_changed_at timestamptz
    );
    CREATE UNIQUE INDEX stores_name_key ON stores (lower(name));
    INSERT INTO stores (id, name) VALUES ('${defaultStore}', 'Default store');

    -- The store of the statement's scope, NULL when none is set (then the policies match nothing).
    -- One stable expression, inlined by the planner: an index condition, evaluated once a scan.
    CREATE FUNCTION store_api_current_store() RETURNS uuid LANGUAGE sql STABLE PARALLEL SAFE
      AS $$ SELECT nullif(current_setting('store_api.store_id', true), '')::uuid $$;

    -- The store a new row gets when its insert names none: the scope's, or the only store there
    -- is (an operator's psql session, a test's fixture); NULL otherwise, refused by NOT NULL.
    CREATE FUNCTION store_api_insert_store() RETURNS uuid LANGUAGE sql STABLE
      AS $$ SELECT coalesce(store_api_current_store(), (SELECT min(id::text)::uuid FROM stores HAVING count(*) = 1)) $$;

    -- A store suspended, resumed or deleted changes what its keys may do: cached keys are dropped.
    CREATE TRIGGER stores_notify_tokens AFTER UPDATE OF status OR DELETE ON stores
      FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();

    ALTER TABLE stores ENABLE ROW LEVEL SECURITY;
    ALTER TABLE stores FORCE ROW LEVEL SECURITY;
    CREATE POLICY store_isolation ON stores USING (id = store_api_current_store());
  `,
  );
  for (const table of STORE_OWNED) {
    await executeScript(
      db,
      `
      ALTER TABLE ${table} ADD COLUMN store_id uuid NOT NULL DEFAULT '${defaultStore}';
      ALTER TABLE ${table} ALTER COLUMN store_id SET DEFAULT store_api_insert_store();
      ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY;
      ALTER TABLE ${table} FORCE ROW LEVEL SECURITY;
      CREATE POLICY store_isolation ON ${table}
        USING (store_id = store_api_current_store())
        WITH CHECK (store_id = store_api_current_store());
    `,
    );
  }
  await executeScript(
    db,
    `
    -- An Idempotency-Key is the store's: two stores may send the same one.
    ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey, ADD PRIMARY KEY (store_id, key_hash);
    ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_store_fkey FOREIGN KEY (store_id) REFERENCES stores (id);
    ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_store_fkey FOREIGN KEY (store_id) REFERENCES stores (id);

    DROP INDEX products_sku_key;
    CREATE UNIQUE INDEX products_sku_key ON products (store_id, sku) WHERE sku IS NOT NULL;
    DROP INDEX products_slug_key;
    CREATE UNIQUE INDEX products_slug_key ON products (store_id, slug);
    DROP INDEX variants_sku_key;
    CREATE UNIQUE INDEX variants_sku_key ON variants (store_id, sku) WHERE sku IS NOT NULL;

    DROP INDEX products_last_modified_idx;
    CREATE INDEX products_last_modified_idx ON products (store_id, last_modified, id);
    DROP INDEX products_active_last_modified_idx;
    CREATE INDEX products_active_last_modified_idx ON products (store_id, last_modified, id) WHERE is_active;
    DROP INDEX products_stock_tracked_last_modified_idx;
    CREATE INDEX products_stock_tracked_last_modified_idx ON products (store_id, last_modified, id)
      WHERE product_type IN ('physical','food','digital_card');
    DROP INDEX customers_last_modified_idx;
    CREATE INDEX customers_last_modified_idx ON customers (store_id, last_modified, id);
    DROP INDEX orders_last_modified_idx;
    CREATE INDEX orders_last_modified_idx ON orders (store_id, last_modified, id);
    DROP INDEX orders_status_last_modified_idx;
    CREATE INDEX orders_status_last_modified_idx ON orders (store_id, status, last_modified, id);
    DROP INDEX orders_source_last_modified_idx;
    CREATE INDEX orders_source_last_modified_idx ON orders (store_id, source, last_modified, id);
    DROP INDEX stock_movements_last_modified_idx;
    CREATE INDEX stock_movements_last_modified_idx ON stock_movements (store_id, last_modified, id);
    DROP INDEX stock_movements_product_last_modified_idx;
    CREATE INDEX stock_movements_product_last_modified_idx ON stock_movements (store_id, product_id, last_modified, id);
    -- The feed is a store's; the poller's walk across stores keeps events_created_at_idx.
    DROP INDEX events_created_at_id_idx;
    CREATE INDEX events_created_at_id_idx ON events (store_id, created_at, id);

    GRANT USAGE ON SCHEMA ${schema} TO store_api_tenant, store_api_platform;
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO store_api_tenant, store_api_platform;
    GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ${schema} TO store_api_tenant, store_api_platform;
    REVOKE ALL ON kysely_migration, kysely_migration_lock FROM store_api_tenant, store_api_platform;
    REVOKE INSERT, UPDATE, DELETE ON stores FROM store_api_tenant;
    ALTER DEFAULT PRIVILEGES IN SCHEMA ${schema} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO store_api_tenant, store_api_platform;
    ALTER DEFAULT PRIVILEGES IN SCHEMA ${schema} GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO store_api_tenant, store_api_platform;
  `,
  );
}
