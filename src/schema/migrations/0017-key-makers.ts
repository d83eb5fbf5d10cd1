/**
 * Every API key records who made it (decision 0026), so that what it may do is bounded on every
 * request by its maker's role at that moment.
 *
 *  - api_tokens.made_by_admin_id / made_by_email: the administrator who made the key (by a dashboard
 *    session, or by a key of theirs: a key made by a key has the same maker). Both NULL: the
 *    machine's operator (`store-api tokens create`, the demo seed). No foreign key: a removed
 *    administrator's keys keep naming her, and her id no longer in admin_users is what marks her
 *    removed.
 *  - Keys made before this migration: the audit log's `key.created` entries name their maker (a
 *    session, or a key whose own maker is followed); a key the log does not name is the operator's.
 *  - NOTIFY `api_tokens_changed` (migration 0016) also when a key changes maker, and when an
 *    administrator's role changes or she is removed: every process's token cache drops what it
 *    knew of her keys' powers at once.
 * (Bodies on one line: execute-script.ts splits statements at a ';' that ends a line.)
 */
import { sql, type Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

const UUID = `'^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'`;

/**
 * Gives each key without a maker the one the audit log names (a session; a key made by a key, that
 * key's maker, followed up to 32 steps). Keys the log does not name stay the operator's.
 */
export async function attributeKeysFromAuditLog<DB>(db: Kysely<DB>): Promise<void> {
  await sql
    .raw(
      `
  WITH RECURSIVE made AS (
    SELECT target_id::uuid AS key_id, actor_kind, actor_id, actor
    FROM admin_audit_log
    WHERE action = 'key.created' AND target_type = 'key' AND target_id ~ ${UUID} AND actor_id ~ ${UUID}
  ), chain (key_id, admin_id, email, depth) AS (
    SELECT key_id, actor_id::uuid, actor, 0 FROM made WHERE actor_kind = 'session'
    UNION ALL
    SELECT m.key_id, c.admin_id, c.email, c.depth + 1 FROM made m JOIN chain c ON m.actor_kind = 'token' AND m.actor_id::uuid = c.key_id WHERE c.depth < 32
  )
  UPDATE api_tokens t SET made_by_admin_id = c.admin_id, made_by_email = c.email FROM chain c WHERE t.id = c.key_id AND t.made_by_admin_id IS NULL
    `,
    )
    .execute(db);
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE api_tokens ADD COLUMN made_by_admin_id uuid;
    ALTER TABLE api_tokens ADD COLUMN made_by_email text;
    ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_maker_check CHECK ((made_by_admin_id IS NULL) = (made_by_email IS NULL));
    CREATE INDEX api_tokens_made_by_idx ON api_tokens (made_by_admin_id) WHERE made_by_admin_id IS NOT NULL;

    CREATE TRIGGER api_tokens_notify_maker AFTER UPDATE OF made_by_admin_id ON api_tokens FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();
    CREATE TRIGGER admin_users_notify_tokens AFTER UPDATE OF role OR DELETE OR TRUNCATE ON admin_users FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();
  `,
  );
  await attributeKeysFromAuditLog(db);
}
