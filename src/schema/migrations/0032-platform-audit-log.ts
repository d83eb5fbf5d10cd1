/**
 * The platform audit log (decision 0051): what the platform's operator did to stores — created,
 * suspended, resumed, deleted, a first key made with a store — through the platform API or the
 * `store-api stores …` commands. The deployment's, not a store's: no row-level security, no
 * foreign key to `stores` (an entry outlives the store it names: its deletion is logged with it).
 * A store's own audit log (admin_audit_log) stays the store's.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE platform_audit_log (
      id uuid PRIMARY KEY,
      at timestamptz NOT NULL DEFAULT now(),
      actor text NOT NULL CHECK (actor IN ('platform_api', 'cli')),
      actor_detail text,
      action text NOT NULL,
      store_id uuid NOT NULL,
      store_name text NOT NULL,
      details jsonb NOT NULL DEFAULT '{}'::jsonb
    );
    CREATE INDEX platform_audit_log_at_idx ON platform_audit_log (at DESC, id DESC);
    CREATE INDEX platform_audit_log_store_idx ON platform_audit_log (store_id, at DESC, id DESC);
    -- The default privileges of migration 0031 gave both roles every table: a store's scope reads none of this.
    REVOKE ALL ON platform_audit_log FROM store_api_tenant;
  `,
  );
}
