/**
 * Single sign-on with OpenID Connect (decision 0062), per store:
 *  - `store_sso_settings`: the owner's configuration of the store's identity provider (issuer,
 *    client id, the client secret sealed under WEBHOOK_CREDENTIALS_KEY and bound to the store,
 *    allowed email domains, the claim read for the role and its mapping, the role when nothing
 *    maps or null to refuse, whether SSO is required and who may still use a password then);
 *  - `sso_sign_in_attempts`: a sign-in started and not yet finished: state, nonce and PKCE
 *    verifier, found by the SHA-256 of a random reference held in a short-lived cookie of the
 *    browser that started it, deleted when the callback uses it (once) or when it expires;
 *  - `sso_removed_members`: an email an owner removed from the store, so that a later SSO sign-in
 *    does not silently make it a member again (an owner's invitation lifts it).
 * Outside row-level security like the other administrators' tables (migration 0033): every
 * statement names its store.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE store_sso_settings (
      store_id uuid PRIMARY KEY REFERENCES stores(id) ON DELETE CASCADE,
      issuer text NOT NULL,
      client_id text NOT NULL,
      client_secret_sealed text NOT NULL,
      allowed_domains jsonb NOT NULL,
      role_claim text NOT NULL,
      role_map jsonb NOT NULL,
      default_role text CHECK (default_role IN ('owner', 'admin', 'viewer')),
      require_sso boolean NOT NULL DEFAULT false,
      break_glass jsonb NOT NULL DEFAULT '[]',
      updated_at timestamptz NOT NULL DEFAULT now(),
      updated_by text
    );
    CREATE TABLE sso_sign_in_attempts (
      id_hash text PRIMARY KEY,
      store_id uuid NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
      state text NOT NULL,
      nonce text NOT NULL,
      code_verifier text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL
    );
    CREATE INDEX sso_sign_in_attempts_expires_idx ON sso_sign_in_attempts (expires_at);
    CREATE TABLE sso_removed_members (
      store_id uuid NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
      email text NOT NULL,
      removed_at timestamptz NOT NULL DEFAULT now(),
      removed_by text,
      PRIMARY KEY (store_id, email)
    );
  `,
  );
}
