/** Kysely types of the dashboard sign-in tables (migrations 0003-admin-users, 0005-admin-setup-codes), merged into Database. */
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<string, string | undefined, string>;
type NullableTimestamp = ColumnType<string | null, string | null | undefined, string | null>;

export interface AdminUserTable {
  id: string;
  email: string;
  password_hash: string;
  created_at: Timestamp;
  password_changed_at: Timestamp;
  last_sign_in_at: NullableTimestamp;
  /** Migration 0012: owner, admin or viewer (admin-roles.ts). */
  role: string;
  /** Migration 0012: when this administrator last looked at the alerts. */
  alerts_seen_at: NullableTimestamp;
  /** Migration 0019: the confirmed TOTP secret (base32) and when it was confirmed (second-factor.service.ts). */
  totp_secret: ColumnType<string | null, string | null | undefined, string | null>;
  totp_enabled_at: NullableTimestamp;
  /** Migration 0019: the last TOTP time step accepted (a code is never accepted twice). */
  totp_last_step: ColumnType<string | null, number | null | undefined, number | null>;
  /** Migration 0019: an enrolment started and not yet confirmed by a first code. */
  totp_pending_secret: ColumnType<string | null, string | null | undefined, string | null>;
  totp_pending_at: NullableTimestamp;
}

export interface AdminSessionTable {
  /** SHA-256 (hex) of the cookie's session id; the id itself is never stored. */
  id_hash: string;
  admin_user_id: string;
  csrf_token: string;
  created_at: Timestamp;
  expires_at: Timestamp;
  user_agent: string | null;
  /** Migration 0019: when this session last proved its administrator (sign-in, password or code). */
  proven_at: NullableTimestamp;
  /** Migration 0033: the store the session acts in (the switcher changes it). */
  store_id: string | null;
  /** Migration 0043: the public id the admin API names the session by (never the cookie or its hash). */
  id: Generated<string>;
  /** Migration 0043: the address of the request that last touched the session. */
  client_ip: string | null;
  /** Migration 0043: when the session was last used (written at most once a minute). */
  last_seen_at: Timestamp;
}

/** Migration 0033: an account's role in one store. */
export interface AdminMembershipTable {
  admin_user_id: string;
  store_id: string;
  role: string;
  created_at: Timestamp;
}

/** Migration 0033: a store's administrator settings (the second-factor requirement). */
export interface StoreAdminSettingsTable {
  store_id: string;
  require_second_factor: boolean;
  updated_at: NullableTimestamp;
  updated_by: string | null;
}

export interface AdminSignInFailureTable {
  id: Generated<number>;
  email: string;
  client_ip: string;
  failed_at: Timestamp;
}

/** Migration 0005-admin-setup-codes: one-time codes for creating the first administrator. */
export interface AdminSetupCodeTable {
  /** SHA-256 (hex) of the code; the code itself is only printed. */
  code_hash: string;
  created_at: Timestamp;
  expires_at: Timestamp;
  used_at: NullableTimestamp;
  /** Migration 0033: the store whose first owner the code makes; null: the deployment's first administrator. */
  store_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Migration 0012: one-time invitation and password-reset links (admin-links.service.ts). */
export interface AdminLinkTable {
  id: string;
  code_hash: string;
  purpose: 'invitation' | 'password_reset';
  email: string;
  role: string | null;
  admin_user_id: string | null;
  created_by: string;
  created_at: Timestamp;
  expires_at: Timestamp;
  used_at: NullableTimestamp;
  /** Migration 0033: the store an invitation invites into (a reset: the store its owner acted in). */
  store_id: string | null;
}

/** Migration 0012: the audit log (admin/audit/audit-log.ts). */
export interface AdminAuditLogTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  at: Timestamp;
  actor_kind: 'session' | 'token' | 'anonymous';
  actor_id: string | null;
  actor: string;
  action: string;
  target_type: string | null;
  target_id: string | null;
  client_ip: string | null;
  details: ColumnType<Record<string, unknown>, string, string>;
}

/** Migration 0019: single-use recovery codes (SHA-256 only). */
export interface AdminRecoveryCodeTable {
  admin_user_id: string;
  code_hash: string;
  created_at: Timestamp;
  used_at: NullableTimestamp;
}

/** Migration 0019: the one row of store-wide administrator settings. */
export interface AdminSettingsTable {
  id: ColumnType<boolean, boolean | undefined, never>;
  require_second_factor: boolean;
  updated_at: NullableTimestamp;
  updated_by: string | null;
}

/** Migration 0045: a store's single sign-on (sso.service.ts). */
export interface StoreSsoSettingsTable {
  store_id: string;
  issuer: string;
  client_id: string;
  client_secret_sealed: string;
  allowed_domains: ColumnType<string[], string, string>;
  role_claim: string;
  role_map: ColumnType<Record<string, string>, string, string>;
  default_role: string | null;
  require_sso: boolean;
  break_glass: ColumnType<string[], string | undefined, string>;
  updated_at: Timestamp;
  updated_by: string | null;
}

/** Migration 0045: an SSO sign-in started in a browser, used once by its callback. */
export interface SsoSignInAttemptTable {
  id_hash: string;
  store_id: string;
  state: string;
  nonce: string;
  code_verifier: string;
  created_at: Timestamp;
  expires_at: Timestamp;
}

/** Migration 0045: an email an owner removed from a store; SSO does not make it a member again. */
export interface SsoRemovedMemberTable {
  store_id: string;
  email: string;
  removed_at: Timestamp;
  removed_by: string | null;
}

/** Migration 0046: an account's passkeys (passkey.service.ts). */
export interface AdminPasskeyTable {
  id: Generated<string>;
  admin_user_id: string;
  /** base64url, as the browser names it. */
  credential_id: string;
  /** The COSE public key, base64url. */
  public_key: string;
  counter: ColumnType<string, number | undefined, number>;
  transports: ColumnType<string[], string | undefined, string>;
  name: string;
  device_type: 'singleDevice' | 'multiDevice';
  backed_up: boolean;
  created_at: Timestamp;
  last_used_at: NullableTimestamp;
}

/** Migration 0046: the challenge of a passkey ceremony under way (one per browser, one use). */
export interface AdminPasskeyChallengeTable {
  /** SHA-256 (hex) of the ceremony cookie's value. */
  id_hash: string;
  purpose: 'register' | 'sign_in' | 'second_factor';
  challenge: string;
  admin_user_id: string | null;
  session_id: string | null;
  created_at: Timestamp;
  expires_at: string;
}

declare module '../../db/schema.ts' {
  interface Database {
    admin_users: AdminUserTable;
    admin_sessions: AdminSessionTable;
    admin_sign_in_failures: AdminSignInFailureTable;
    admin_setup_codes: AdminSetupCodeTable;
    admin_links: AdminLinkTable;
    admin_audit_log: AdminAuditLogTable;
    admin_recovery_codes: AdminRecoveryCodeTable;
    admin_settings: AdminSettingsTable;
    admin_memberships: AdminMembershipTable;
    store_admin_settings: StoreAdminSettingsTable;
    store_sso_settings: StoreSsoSettingsTable;
    sso_sign_in_attempts: SsoSignInAttemptTable;
    sso_removed_members: SsoRemovedMemberTable;
    admin_passkeys: AdminPasskeyTable;
    admin_passkey_challenges: AdminPasskeyChallengeTable;
  }
}
