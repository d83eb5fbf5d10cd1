/**
 * The owner's "require a second factor" reaches the administrators' keys (decision 0028
 * amended): the token look-up reads the store's requirement and whether the key's maker has a second
 * factor, so every process's token cache must hear when either changes. A statement that sets or
 * clears a second factor, or writes a store's requirement, NOTIFYs `api_tokens_changed`, as a role
 * change does (migrations 0017, 0033).
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TRIGGER admin_users_second_factor_notify AFTER UPDATE OF totp_enabled_at ON admin_users
      FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();
    CREATE TRIGGER store_admin_settings_notify AFTER INSERT OR UPDATE OR DELETE ON store_admin_settings
      FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();
  `,
  );
}
