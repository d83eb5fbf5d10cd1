/**
 * Single sign-on with OpenID Connect, per store (decision 0062). An owner configures the store's
 * identity provider; an administrator then signs in there and comes back with an ID token that
 * `openid-client` checks (state, nonce, PKCE, issuer, audience, expiry, signature). Here: the
 * configuration (its checks, the client secret sealed with the webhooks' sealing under
 * WEBHOOK_CREDENTIALS_KEY and bound to the store), sign-in attempts bound to the browser that
 * started them (one use), the pure decisions (`emailDomainOf`, `domainAllowed`, `roleFromClaim`,
 * `issuerUrlProblem`), the talk with the provider (`beginSignIn`, `finishSignIn`), the accounts made
 * just in time, the members an owner removed (SSO does not bring them back), and who may still use
 * a password where SSO is required.
 */
import { createHash, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import * as oidc from 'openid-client';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type {} from './admin-user.table.ts';
import { ApiError, invalidParameter } from '../../shared/problem.ts';
import { asPlatform, accountStoreIs, ownStore } from '../../db/store-scope.ts';
import type { AdminRole } from './admin-roles.ts';
import { openValue, sealValue, type CredentialKeys } from '../../webhooks/endpoint-credentials.ts';

/** How long a started sign-in may take at the provider before its callback is refused (10 minutes). */
export const SSO_ATTEMPT_TTL_MS = 10 * 60_000;
/** Most allowed email domains, claim values mapped, and break-glass owners per store. */
export const MAX_SSO_DOMAINS = 20;
export const MAX_SSO_ROLE_VALUES = 50;
export const MAX_BREAK_GLASS = 5;

/** The store's SSO configuration as the admin API shows it (the client secret never). */
export interface SsoSettings {
  issuer: string;
  client_id: string;
  client_secret: 'set';
  allowed_domains: string[];
  role_claim: string;
  role_map: Record<string, AdminRole>;
  /** The role of a person whose claim maps to none; null: refused. */
  default_role: AdminRole | null;
  require_sso: boolean;
  /** Owners who may still sign in with a password while SSO is required (their account ids). */
  break_glass: string[];
  updated_at: string;
  updated_by: string | null;
}

/** An owner's input; `client_secret` may be left out to keep the stored one. */
export interface SsoSettingsInput {
  issuer: string;
  client_id: string;
  client_secret?: string;
  allowed_domains: string[];
  role_claim: string;
  role_map: Record<string, AdminRole>;
  default_role: AdminRole | null;
  require_sso: boolean;
  break_glass: string[];
}

/** What a store's sign-in needs (the secret opened). */
export interface SsoClientSettings {
  storeId: string;
  issuer: string;
  clientId: string;
  clientSecret: string;
  allowedDomains: string[];
  roleClaim: string;
  roleMap: Record<string, AdminRole>;
  defaultRole: AdminRole | null;
  requireSso: boolean;
  breakGlass: string[];
}

function sealContext(storeId: string): string {
  return `store sso client secret\n${storeId}`;
}

/** The domain of an email (lower case), or undefined when it has none. */
export function emailDomainOf(email: string): string | undefined {
  const at = email.lastIndexOf('@');
  if (at <= 0 || at === email.length - 1) return undefined;
  return email.slice(at + 1).toLowerCase();
}

/** Whether `email`'s domain is one of `domains` exactly (a subdomain is another domain). */
export function domainAllowed(email: string, domains: readonly string[]): boolean {
  const domain = emailDomainOf(email);
  return domain !== undefined && domains.includes(domain);
}

const ROLE_RANK: Record<AdminRole, number> = { viewer: 1, admin: 2, owner: 3 };

/**
 * The role a claim's value maps to: a string or a list of strings (groups); of several values that
 * map, the highest role; none: `defaultRole` (null: refused).
 */
export function roleFromClaim(value: unknown, roleMap: Readonly<Record<string, AdminRole>>, defaultRole: AdminRole | null): AdminRole | null {
  const values = (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === 'string');
  let best: AdminRole | null = null;
  for (const v of values) {
    const role = Object.hasOwn(roleMap, v) ? roleMap[v] : undefined;
    if (role && (best === null || ROLE_RANK[role] > ROLE_RANK[best])) best = role;
  }
  return best ?? defaultRole;
}

function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  if (bare === 'localhost' || bare.endsWith('.localhost')) return true;
  return isIP(bare) !== 0 && ipaddr.process(bare).range() === 'loopback';
}

/**
 * Why an issuer URL is refused, or undefined when it is fine: https, no credentials, query or
 * fragment; plain http only for a loopback host and only where private webhook URLs are allowed
 * (WEBHOOK_ALLOW_PRIVATE_URLS: tests and a developer's machine).
 */
export function issuerUrlProblem(issuer: string, allowLoopbackHttp: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    return 'must be an absolute https URL';
  }
  if (url.username || url.password) return 'must not carry credentials';
  if (url.search || url.hash) return 'must not have a query or fragment';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:') {
    return allowLoopbackHttp && isLoopbackHost(url.hostname)
      ? undefined
      : 'must use https (plain http is allowed only for a loopback issuer with WEBHOOK_ALLOW_PRIVATE_URLS, for tests)';
  }
  return 'must be an absolute https URL';
}

function insecureAllowed(issuer: string): boolean {
  return new URL(issuer).protocol === 'http:';
}

/** The SSO configuration of the statement's store, or undefined. */
export async function getSsoSettings(db: Kysely<Database>): Promise<SsoSettings | undefined> {
  const row = await db
    .selectFrom('store_sso_settings')
    .select([
      'issuer',
      'client_id',
      'allowed_domains',
      'role_claim',
      'role_map',
      'default_role',
      'require_sso',
      'break_glass',
      sql<string>`iso_utc(updated_at)`.as('updated_at'),
      'updated_by',
    ])
    .where(accountStoreIs('store_id'))
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    issuer: row.issuer,
    client_id: row.client_id,
    client_secret: 'set',
    allowed_domains: row.allowed_domains,
    role_claim: row.role_claim,
    role_map: row.role_map as Record<string, AdminRole>,
    default_role: row.default_role as AdminRole | null,
    require_sso: row.require_sso,
    break_glass: row.break_glass,
    updated_at: row.updated_at,
    updated_by: row.updated_by,
  };
}

/**
 * Saves the statement's store's SSO configuration (create or replace). 400 naming the field for an
 * issuer URL refused, a domain that is none, a break-glass account that is no owner of the store;
 * 409 without WEBHOOK_CREDENTIALS_KEY (the client secret is sealed at rest) or without a secret
 * on a first save.
 */
export async function saveSsoSettings(
  db: Kysely<Database>,
  input: SsoSettingsInput & { storeId: string; by: string; keys: CredentialKeys | undefined; allowLoopbackHttp: boolean },
): Promise<SsoSettings> {
  const issuerProblem = issuerUrlProblem(input.issuer, input.allowLoopbackHttp);
  if (issuerProblem) throw invalidParameter('issuer', issuerProblem);
  const domains = [...new Set(input.allowed_domains.map((d) => d.trim().toLowerCase()))];
  for (const domain of domains) {
    if (!/^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/.test(domain)) {
      throw invalidParameter('allowed_domains', `'${domain}' is not a domain name (like example.com)`);
    }
  }
  const breakGlass = [...new Set(input.break_glass)];
  if (breakGlass.length > 0) {
    const owners = await db
      .selectFrom('admin_memberships')
      .select('admin_user_id')
      .where(accountStoreIs('store_id'))
      .where('role', '=', 'owner')
      .where('admin_user_id', 'in', breakGlass)
      .execute();
    const found = new Set(owners.map((o) => o.admin_user_id));
    const missing = breakGlass.find((id) => !found.has(id));
    if (missing) throw invalidParameter('break_glass', `'${missing}' is not an owner of this store`);
  }
  if (input.require_sso && breakGlass.length === 0) {
    throw invalidParameter('break_glass', 'name at least one owner who may still sign in with a password while SSO is required (if the provider is down)');
  }
  if (!input.keys) {
    throw new ApiError('conflict', 'The client secret is sealed at rest with WEBHOOK_CREDENTIALS_KEY, which this server does not have: set it first.', [
      { param: 'client_secret', message: 'WEBHOOK_CREDENTIALS_KEY is not set' },
    ]);
  }
  let sealed: string;
  if (input.client_secret !== undefined) {
    sealed = sealValue(input.keys, sealContext(input.storeId), input.client_secret);
  } else {
    const current = await db.selectFrom('store_sso_settings').select('client_secret_sealed').where(accountStoreIs('store_id')).executeTakeFirst();
    if (!current) throw invalidParameter('client_secret', 'is required the first time SSO is configured');
    sealed = current.client_secret_sealed;
  }
  const values = {
    issuer: input.issuer.replace(/\/$/, ''),
    client_id: input.client_id,
    client_secret_sealed: sealed,
    allowed_domains: JSON.stringify(domains),
    role_claim: input.role_claim,
    role_map: JSON.stringify(input.role_map),
    default_role: input.default_role,
    require_sso: input.require_sso,
    break_glass: JSON.stringify(breakGlass),
    updated_at: sql<string>`now()`,
    updated_by: input.by,
  };
  await db
    .insertInto('store_sso_settings')
    .values({ store_id: ownStore(), ...values })
    .onConflict((oc) => oc.column('store_id').doUpdateSet(values))
    .execute();
  return (await getSsoSettings(db))!;
}

/** Removes the statement's store's SSO configuration (password sign-in again for all); false when there was none. */
export async function deleteSsoSettings(db: Kysely<Database>): Promise<boolean> {
  const rows = await db.deleteFrom('store_sso_settings').where(accountStoreIs('store_id')).returning('store_id').execute();
  await db.deleteFrom('sso_sign_in_attempts').where(accountStoreIs('store_id')).execute();
  return rows.length > 0;
}

/** A store's configuration with its secret opened, for a sign-in (across stores: the store is named). */
export async function ssoClientSettings(db: Kysely<Database>, storeId: string, keys: CredentialKeys | undefined): Promise<SsoClientSettings | undefined> {
  const row = await asPlatform(() =>
    db
      .selectFrom('store_sso_settings as s')
      .innerJoin('stores as st', 'st.id', 's.store_id')
      .selectAll('s')
      .where('s.store_id', '=', storeId)
      .where('st.status', '=', 'active')
      .executeTakeFirst(),
  );
  if (!row) return undefined;
  return {
    storeId,
    issuer: row.issuer,
    clientId: row.client_id,
    clientSecret: openValue<string>(keys, sealContext(storeId), row.client_secret_sealed, "the store's SSO client secret"),
    allowedDomains: row.allowed_domains,
    roleClaim: row.role_claim,
    roleMap: row.role_map as Record<string, AdminRole>,
    defaultRole: row.default_role as AdminRole | null,
    requireSso: row.require_sso,
    breakGlass: row.break_glass,
  };
}

/** The active stores whose SSO allows `email`'s domain, oldest first. */
export async function ssoStoresForEmail(db: Kysely<Database>, email: string): Promise<{ id: string; name: string }[]> {
  const domain = emailDomainOf(email);
  if (!domain) return [];
  return asPlatform(() =>
    db
      .selectFrom('store_sso_settings as s')
      .innerJoin('stores as st', 'st.id', 's.store_id')
      .select(['st.id', 'st.name'])
      .where(sql<boolean>`s.allowed_domains @> ${JSON.stringify([domain])}::jsonb`)
      .where('st.status', '=', 'active')
      .orderBy('st.created_at')
      .orderBy('st.id')
      .execute(),
  );
}

/**
 * The stores of an account where it may not sign in with a password: SSO is required there and
 * it is not one of the store's break-glass owners (who must still be an owner).
 */
export async function storesRequiringSso(db: Kysely<Database>, adminUserId: string): Promise<Set<string>> {
  const rows = await asPlatform(() =>
    db
      .selectFrom('admin_memberships as m')
      .innerJoin('store_sso_settings as s', 's.store_id', 'm.store_id')
      .select(['m.store_id', 'm.role', 's.break_glass'])
      .where('m.admin_user_id', '=', adminUserId)
      .where('s.require_sso', '=', true)
      .execute(),
  );
  return new Set(rows.filter((r) => !(r.role === 'owner' && r.break_glass.includes(adminUserId))).map((r) => r.store_id));
}

function hashReference(reference: string): string {
  return createHash('sha256').update(reference).digest('hex');
}

/** What a started sign-in keeps (and its callback checks). */
export interface SsoAttempt {
  storeId: string;
  state: string;
  nonce: string;
  codeVerifier: string;
}

/**
 * The provider's configuration (discovery), with plain http allowed for a loopback issuer that
 * passed `issuerUrlProblem`. The ID token's signature is checked against the issuer's keys
 * (`enableNonRepudiationChecks`): by default openid-client trusts an ID token from the token
 * endpoint on the strength of TLS alone (OpenID Connect Core 3.1.3.7), which would let a token
 * signed by any key through wherever that trust is weaker (a proxy, a test issuer over http).
 */
async function discover(settings: SsoClientSettings): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(settings.issuer), settings.clientId, settings.clientSecret, oidc.ClientSecretBasic(settings.clientSecret), {
    execute: insecureAllowed(settings.issuer) ? [oidc.allowInsecureRequests, oidc.enableNonRepudiationChecks] : [oidc.enableNonRepudiationChecks],
    timeout: 10,
  });
}

/**
 * Starts a sign-in at the store's provider: state, nonce and PKCE verifier kept under the SHA-256
 * of a random reference (the caller puts the reference in the browser's cookie); answers the
 * reference and the provider's authorization URL (`login_hint` the email typed).
 */
export async function beginSignIn(
  db: Kysely<Database>,
  input: { settings: SsoClientSettings; redirectUri: string; loginHint?: string },
): Promise<{ reference: string; url: string }> {
  const config = await discover(input.settings);
  const attempt = { state: oidc.randomState(), nonce: oidc.randomNonce(), codeVerifier: oidc.randomPKCECodeVerifier() };
  const reference = randomBytes(32).toString('base64url');
  await db.deleteFrom('sso_sign_in_attempts').where('expires_at', '<=', sql<string>`now()`).execute();
  await db
    .insertInto('sso_sign_in_attempts')
    .values({
      id_hash: hashReference(reference),
      store_id: input.settings.storeId,
      state: attempt.state,
      nonce: attempt.nonce,
      code_verifier: attempt.codeVerifier,
      created_at: sql<string>`now()`,
      expires_at: sql<string>`now() + make_interval(secs => ${SSO_ATTEMPT_TTL_MS / 1000})`,
    })
    .execute();
  const parameters: Record<string, string> = {
    redirect_uri: input.redirectUri,
    scope: 'openid email profile',
    response_type: 'code',
    state: attempt.state,
    nonce: attempt.nonce,
    code_challenge: await oidc.calculatePKCECodeChallenge(attempt.codeVerifier),
    code_challenge_method: 'S256',
  };
  if (input.loginHint) parameters.login_hint = input.loginHint;
  return { reference, url: oidc.buildAuthorizationUrl(config, parameters).href };
}

/** Takes (deletes) the live attempt of a cookie's reference: each is used once. */
export async function takeAttempt(db: Kysely<Database>, reference: string): Promise<SsoAttempt | undefined> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(reference)) return undefined;
  const row = await asPlatform(() =>
    db
      .deleteFrom('sso_sign_in_attempts')
      .where('id_hash', '=', hashReference(reference))
      .where('expires_at', '>', sql<string>`now()`)
      .returning(['store_id', 'state', 'nonce', 'code_verifier'])
      .executeTakeFirst(),
  );
  return row && { storeId: row.store_id, state: row.state, nonce: row.nonce, codeVerifier: row.code_verifier };
}

/** A refusal of the provider's answer, with a short reason for the audit log and a sentence for the person. */
export class SsoRefusal extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Finishes a sign-in: exchanges the code (PKCE verifier sent) and has openid-client check the
 * callback's state and the ID token (signature by the issuer's keys, issuer, audience, expiry,
 * nonce). Answers the token's claims. Throws SsoRefusal naming what was wrong.
 */
export async function finishSignIn(settings: SsoClientSettings, attempt: SsoAttempt, callbackUrl: URL): Promise<oidc.IDToken> {
  let config: oidc.Configuration;
  try {
    config = await discover(settings);
  } catch (error) {
    throw new SsoRefusal('provider_unreachable', `The identity provider could not be reached (${(error as Error).message}). Try again later.`);
  }
  try {
    const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: attempt.codeVerifier,
      expectedState: attempt.state,
      expectedNonce: attempt.nonce,
      idTokenExpected: true,
    });
    const claims = tokens.claims();
    if (!claims) throw new SsoRefusal('no_id_token', 'The identity provider sent no ID token.');
    return claims;
  } catch (error) {
    if (error instanceof SsoRefusal) throw error;
    // openid-client says what kind of failure; the error it wraps (oauth4webapi's) says which claim or parameter.
    const { code, cause } = error as { code?: string; cause?: unknown };
    const inner = cause instanceof Error ? (cause as Error & { cause?: { claim?: unknown } }) : undefined;
    const message = inner?.message ?? (error as Error).message;
    throw new SsoRefusal(refusalReason(code, message, inner?.cause?.claim), `The identity provider's answer was refused: ${message}.`);
  }
}

/** A short reason for the audit log, from openid-client's error (its code, the claim it names). */
function refusalReason(code: string | undefined, message: string, claim: unknown): string {
  if (code === 'OAUTH_JWT_CLAIM_COMPARISON_FAILED') {
    return claim === 'aud' || claim === 'azp' ? 'wrong_audience' : claim === 'iss' ? 'wrong_issuer' : claim === 'nonce' ? 'wrong_nonce' : 'claim_mismatch';
  }
  if (code === 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED') return 'expired';
  if (/"alg"|signature/i.test(message)) return 'bad_signature';
  if (/"state"/.test(message)) return 'wrong_state';
  if (code === 'OAUTH_RESPONSE_BODY_ERROR') return 'code_refused';
  return 'invalid_response';
}

/** Whether an owner removed `email` from `storeId` (SSO does not bring it back). */
export async function removedFromStore(db: Kysely<Database>, storeId: string, email: string): Promise<boolean> {
  const row = await asPlatform(() =>
    db.selectFrom('sso_removed_members').select('email').where('store_id', '=', storeId).where('email', '=', email).executeTakeFirst(),
  );
  return row !== undefined;
}

/**
 * Whether a password may not be used in `storeId` by `adminUserId` (null: someone not yet a
 * member, an invitee): SSO is required there and the account is not one of its break-glass owners.
 */
export async function passwordRefusedIn(db: Kysely<Database>, storeId: string, adminUserId: string | null): Promise<boolean> {
  const row = await asPlatform(() =>
    db
      .selectFrom('store_sso_settings as s')
      .leftJoin('admin_memberships as m', (join) =>
        join.onRef('m.store_id', '=', 's.store_id').on('m.admin_user_id', '=', adminUserId ?? sql<string>`NULL::uuid`),
      )
      .select(['s.require_sso', 's.break_glass', 'm.role'])
      .where('s.store_id', '=', storeId)
      .executeTakeFirst(),
  );
  if (!row?.require_sso) return false;
  return !(adminUserId !== null && row.role === 'owner' && row.break_glass.includes(adminUserId));
}

/** What a person refused a password by a store's SSO requirement reads. */
export const SSO_REQUIRED_MESSAGE =
  "This store requires single sign-on: use 'Sign in with SSO' with your work email. Only the store's break-glass owners may use a password.";
