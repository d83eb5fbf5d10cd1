/**
 * Dashboard sign-in: administrators (argon2id password hashes), their sessions (the cookie's random
 * id stored only as a SHA-256 hash, with the session's CSRF token) and failed sign-ins (for
 * throttling; kept in the database so that several server processes count together).
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE admin_users (
      id uuid PRIMARY KEY,
      -- Stored lower-cased: one account per address whatever the capitalisation typed.
      email text NOT NULL UNIQUE CHECK (email = lower(email)),
      password_hash text NOT NULL,
      created_at timestamptz NOT NULL,
      password_changed_at timestamptz NOT NULL,
      last_sign_in_at timestamptz
    );

    CREATE TABLE admin_sessions (
      id_hash text PRIMARY KEY,
      admin_user_id uuid NOT NULL REFERENCES admin_users(id) ON DELETE CASCADE,
      csrf_token text NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      user_agent text
    );
    CREATE INDEX admin_sessions_user_idx ON admin_sessions (admin_user_id);
    CREATE INDEX admin_sessions_expires_idx ON admin_sessions (expires_at);

    CREATE TABLE admin_sign_in_failures (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      email text NOT NULL,
      client_ip text NOT NULL,
      failed_at timestamptz NOT NULL
    );
    CREATE INDEX admin_sign_in_failures_email_ip_idx ON admin_sign_in_failures (email, client_ip, failed_at);
    CREATE INDEX admin_sign_in_failures_ip_idx ON admin_sign_in_failures (client_ip, failed_at);
  `,
  );
}
