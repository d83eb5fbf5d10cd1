/**
 * Passkeys (WebAuthn) for administrators (decision 0063):
 *
 *  - admin_passkeys: an account's passkeys (a sign-in method, and a second factor beside TOTP):
 *    the credential id (base64url, unique across accounts), its COSE public key (base64url), the
 *    signature counter last seen, the transports the browser named, the administrator's name for
 *    it, whether it is backed up (synced), when it was added and last used;
 *  - admin_passkey_challenges: the challenge of a ceremony under way, one per browser (keyed by the
 *    SHA-256 of a random value in an HttpOnly cookie), for one purpose, bound to the account and
 *    session that asked when there is one; deleted when used (one use) and refused after it expires.
 *
 * Adding or removing an account's passkey changes whether it has a second factor, which the token
 * look-up reads (migration 0037): the statement NOTIFYs `api_tokens_changed`, as a TOTP change does.
 * Account tables are global, like admin_users (migration 0031): no store column.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE admin_passkeys (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      admin_user_id uuid NOT NULL REFERENCES admin_users(id) ON DELETE CASCADE,
      credential_id text NOT NULL UNIQUE,
      public_key text NOT NULL,
      counter bigint NOT NULL DEFAULT 0,
      transports jsonb NOT NULL DEFAULT '[]'::jsonb,
      name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
      device_type text NOT NULL CHECK (device_type IN ('singleDevice', 'multiDevice')),
      backed_up boolean NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_used_at timestamptz
    );
    CREATE INDEX admin_passkeys_user_idx ON admin_passkeys (admin_user_id, created_at);

    CREATE TABLE admin_passkey_challenges (
      id_hash text PRIMARY KEY,
      purpose text NOT NULL CHECK (purpose IN ('register', 'sign_in', 'second_factor')),
      challenge text NOT NULL,
      admin_user_id uuid REFERENCES admin_users(id) ON DELETE CASCADE,
      session_id uuid,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL
    );
    CREATE INDEX admin_passkey_challenges_expires_idx ON admin_passkey_challenges (expires_at);

    CREATE TRIGGER admin_passkeys_notify AFTER INSERT OR DELETE ON admin_passkeys
      FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();
  `,
  );
}
