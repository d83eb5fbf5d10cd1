/**
 * Administrators per store (decision 0051, "Administrators per store"): one account, a role in each
 * store it belongs to.
 *
 *  - `admin_memberships (admin_user_id, store_id, role)`: who administers which store, with what
 *    role. Every existing administrator becomes a member of the home store (the oldest store) with
 *    the role they had; `admin_users.role` is no longer read from here on.
 *  - `admin_sessions.store_id`: the store a dashboard session acts in (the switcher changes it);
 *    existing sessions act in the home store.
 *  - `admin_links.store_id`: the store an invitation invites into (a reset names the store its owner
 *    acted in); existing links, the home store's.
 *  - `admin_setup_codes.store_id`: a store's first-owner setup link (`stores create --json`'s
 *    `setup_url`); NULL for the deployment's first-administrator codes, as before.
 *  - `store_admin_settings`: the second-factor requirement per store, the home store's taken from
 *    the one row of admin_settings (no longer read).
 * These tables stay outside row-level security (an account spans stores); every statement about one
 * store names it (`store_id = …`). A membership's change or removal notifies `api_tokens_changed`:
 * a key acts with its maker's role in the key's store.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE admin_memberships (
      admin_user_id uuid NOT NULL REFERENCES admin_users(id) ON DELETE CASCADE,
      store_id uuid NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
      role text NOT NULL CHECK (role IN ('owner', 'admin', 'viewer')),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (admin_user_id, store_id)
    );
    CREATE INDEX admin_memberships_store_idx ON admin_memberships (store_id, role);
    INSERT INTO admin_memberships (admin_user_id, store_id, role, created_at)
      SELECT u.id, h.id, u.role, u.created_at FROM admin_users u
      CROSS JOIN (SELECT id FROM stores WHERE status <> 'deleting' ORDER BY created_at, id LIMIT 1) h;
    CREATE TRIGGER admin_memberships_notify_tokens AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON admin_memberships
      FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();

    ALTER TABLE admin_sessions ADD COLUMN store_id uuid REFERENCES stores(id) ON DELETE CASCADE;
    UPDATE admin_sessions SET store_id = (SELECT id FROM stores WHERE status <> 'deleting' ORDER BY created_at, id LIMIT 1);

    ALTER TABLE admin_links ADD COLUMN store_id uuid REFERENCES stores(id) ON DELETE CASCADE;
    UPDATE admin_links SET store_id = (SELECT id FROM stores WHERE status <> 'deleting' ORDER BY created_at, id LIMIT 1);
    CREATE INDEX admin_links_store_idx ON admin_links (store_id, purpose);

    ALTER TABLE admin_setup_codes ADD COLUMN store_id uuid REFERENCES stores(id) ON DELETE CASCADE;

    CREATE TABLE store_admin_settings (
      store_id uuid PRIMARY KEY REFERENCES stores(id) ON DELETE CASCADE,
      require_second_factor boolean NOT NULL DEFAULT false,
      updated_at timestamptz,
      updated_by text
    );
    INSERT INTO store_admin_settings (store_id, require_second_factor, updated_at, updated_by)
      SELECT h.id, s.require_second_factor, s.updated_at, s.updated_by FROM admin_settings s
      CROSS JOIN (SELECT id FROM stores WHERE status <> 'deleting' ORDER BY created_at, id LIMIT 1) h;
  `,
  );
}
