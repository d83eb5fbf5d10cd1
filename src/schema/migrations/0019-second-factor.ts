/**
 * A second factor for administrators (decision 0028):
 *
 *  - admin_users.totp_secret / totp_enabled_at: the TOTP (RFC 6238) secret, base32, once enrolment
 *    was confirmed by a first code; totp_last_step: the last time step a code was accepted for, so
 *    a code is never accepted twice (nor an older one);
 *  - admin_users.totp_pending_secret / totp_pending_at: an enrolment started and not yet confirmed
 *    (a new start replaces it; it never signs anyone in);
 *  - admin_recovery_codes: single-use recovery codes, only their SHA-256 stored;
 *  - admin_settings: one row of store-wide settings an owner changes; require_second_factor sends
 *    every administrator without a second factor to enrol before anything else;
 *  - admin_sessions.proven_at: when the session last proved its administrator (sign-in, password or
 *    code), for the fresh proof asked before the most sensitive actions.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE admin_users ADD COLUMN totp_secret text;
    ALTER TABLE admin_users ADD COLUMN totp_enabled_at timestamptz;
    ALTER TABLE admin_users ADD COLUMN totp_last_step bigint;
    ALTER TABLE admin_users ADD COLUMN totp_pending_secret text;
    ALTER TABLE admin_users ADD COLUMN totp_pending_at timestamptz;
    ALTER TABLE admin_users ADD CONSTRAINT admin_users_totp_enabled_check CHECK ((totp_secret IS NULL) = (totp_enabled_at IS NULL));

    CREATE TABLE admin_recovery_codes (
      admin_user_id uuid NOT NULL REFERENCES admin_users(id) ON DELETE CASCADE,
      code_hash text NOT NULL,
      created_at timestamptz NOT NULL,
      used_at timestamptz,
      PRIMARY KEY (admin_user_id, code_hash)
    );

    CREATE TABLE admin_settings (
      id boolean PRIMARY KEY DEFAULT true CHECK (id),
      require_second_factor boolean NOT NULL DEFAULT false,
      updated_at timestamptz,
      updated_by text
    );
    INSERT INTO admin_settings (id) VALUES (true);

    ALTER TABLE admin_sessions ADD COLUMN proven_at timestamptz;
  `,
  );
}
