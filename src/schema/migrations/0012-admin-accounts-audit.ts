/**
 * Several administrators with roles, one-time links, the audit log, and rolling API keys.
 *
 *  - admin_users.role: owner (everything, including administrators), admin (everything but
 *    administrators), viewer (reads only). Administrators that existed before are owners: until now
 *    every administrator had every right. New rows name their role (no default).
 *  - admin_users.alerts_seen_at: when the administrator last looked at the alerts (overview), so
 *    the navigation can say what is new since.
 *  - admin_links: one-time links an owner hands out, an invitation (email + role) or a password
 *    reset (an existing administrator). Only the code's SHA-256 is stored, like setup codes.
 *  - admin_audit_log: who did what, when, from where; `details` never holds a secret. Time-ordered
 *    ids (UUIDv7) give the cursor's tie-breaker.
 *  - api_tokens.previous_token_hash/previous_token_expires_at: after a roll, the old secret keeps
 *    working until the overlap the administrator picked ends.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE admin_users ADD COLUMN role text NOT NULL DEFAULT 'owner' CHECK (role IN ('owner', 'admin', 'viewer'));
    ALTER TABLE admin_users ALTER COLUMN role DROP DEFAULT;
    ALTER TABLE admin_users ADD COLUMN alerts_seen_at timestamptz;

    CREATE TABLE admin_links (
      id uuid PRIMARY KEY,
      code_hash text NOT NULL UNIQUE,
      purpose text NOT NULL CHECK (purpose IN ('invitation', 'password_reset')),
      email text NOT NULL CHECK (email = lower(email)),
      role text CHECK (role IN ('owner', 'admin', 'viewer')),
      admin_user_id uuid REFERENCES admin_users(id) ON DELETE CASCADE,
      created_by text NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      used_at timestamptz,
      CHECK ((purpose = 'invitation') = (role IS NOT NULL)),
      CHECK ((purpose = 'password_reset') = (admin_user_id IS NOT NULL))
    );
    CREATE INDEX admin_links_email_idx ON admin_links (email);

    CREATE TABLE admin_audit_log (
      id uuid PRIMARY KEY,
      at timestamptz NOT NULL,
      actor_kind text NOT NULL CHECK (actor_kind IN ('session', 'token', 'anonymous')),
      actor_id text,
      actor text NOT NULL,
      action text NOT NULL,
      target_type text,
      target_id text,
      client_ip text,
      details jsonb NOT NULL DEFAULT '{}'::jsonb
    );
    CREATE INDEX admin_audit_log_at_idx ON admin_audit_log (at, id);
    CREATE INDEX admin_audit_log_action_idx ON admin_audit_log (action, at);
    CREATE INDEX admin_audit_log_actor_idx ON admin_audit_log (actor, at);

    ALTER TABLE api_tokens ADD COLUMN previous_token_hash text;
    ALTER TABLE api_tokens ADD COLUMN previous_token_expires_at timestamptz;
    CREATE UNIQUE INDEX api_tokens_previous_hash_idx ON api_tokens (previous_token_hash) WHERE previous_token_hash IS NOT NULL;
  `,
  );
}
