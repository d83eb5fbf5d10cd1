/**
 * API tokens: random, recognisable prefix `sia_`, shown once at creation, stored only as a SHA-256
 * hash (a 256-bit random secret needs no slow KDF). Scopes per docs/contract/decisions.md; optional expiry;
 * revocation takes effect on the next request: every write here moves the token cache's generation
 * (db/read-cache-signals.ts), other processes learn it by NOTIFY (migration 0016, decision 0016).
 */
import { asPlatform, ownStore, ownStoreIs } from '../db/store-scope.ts';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { isOutOfSpace } from '../db/storage-health.ts';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { ApiError, conflict, notFound } from '../shared/problem.ts';
import { tokensChanged } from '../db/read-cache-signals.ts';

import { READ_SCOPES, type ReadScope } from '../resources/registry.ts';
import type { AdminRole } from '../admin/sessions/admin-roles.ts';

/** Every scope: each resource's read scope (resources/registry.ts), and `admin`. */
export type Scope = ReadScope | 'admin';
export const SCOPES: readonly Scope[] = [...READ_SCOPES, 'admin'];

export const TOKEN_PREFIX = 'sia_';
const TOKEN_PATTERN = /^sia_[A-Za-z0-9_-]{43}$/;

/**
 * Who made a key (decision 0026): an administrator (made in her dashboard session, or by a key of
 * hers), or the machine's operator (`store-api tokens create`; keys from before makers were
 * recorded that the audit log does not attribute). `role` is the administrator's role now, null
 * once she has been removed (`removed`); the operator has no role.
 */
export interface TokenMaker {
  kind: 'administrator' | 'operator';
  /** The administrator's id (null for the operator). */
  id: string | null;
  /** The administrator's email when the key was made or transferred to her (null for the operator). */
  email: string | null;
  role: AdminRole | null;
  removed: boolean;
  /**
   * Set by the token look-up only: the key's store requires a second factor and this administrator
   * has none, so the key acts as no more than a viewer (decision 0028, amended).
   */
  secondFactorMissing?: boolean;
}

/** Who makes a key being created: an administrator, or (undefined) the machine's operator. */
export interface TokenMakerRef {
  adminId: string;
  email: string;
}

/** A token as listed to administrators (never the secret). */
export interface TokenSummary {
  id: string;
  name: string;
  prefix: string;
  scopes: Scope[];
  rate_limit_standard: number | null;
  rate_limit_export: number | null;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  /** After a roll: until when the replaced secret still works (null when none does). */
  previous_secret_expires_at: string | null;
  status: 'active' | 'revoked' | 'expired';
  made_by: TokenMaker;
}

/** The identity of an authenticated request. */
export interface AuthenticatedToken {
  id: string;
  /** The store the token belongs to: the request acts in it alone (decision 0051). */
  storeId: string;
  /** That store's status as of this look-up: only an active store's keys are served. */
  storeStatus: 'active' | 'suspended' | 'deleting';
  name: string;
  scopes: Scope[];
  /** Who made it, with the maker's role as of this look-up (the token cache drops it when that changes). */
  maker: TokenMaker;
  rateLimitStandard: number | null;
  rateLimitExport: number | null;
}

export interface CreateTokenInput {
  name: string;
  scopes?: Scope[];
  expiresAt?: string | null;
  rateLimitStandard?: number | null;
  rateLimitExport?: number | null;
  /** The administrator making it; omitted: the machine's operator (CLI, demo seed). */
  madeBy?: TokenMakerRef;
  /** Most keys the store may hold (STORE_MAX_API_KEYS, decision 0051); omitted: no limit. */
  maxKeysOfStore?: number;
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** True when `value` has the shape of one of our tokens (cheap check before any lookup). */
export function looksLikeToken(value: string): boolean {
  return TOKEN_PATTERN.test(value);
}

type TokenRow = Awaited<ReturnType<ReturnType<typeof tokenQuery>['execute']>>[number];

/** The one select of a token's listed columns. */
function tokenQuery(db: Kysely<Database>) {
  return db
    .selectFrom('api_tokens as t')
    .select([
      't.id',
      't.name',
      't.prefix',
      't.scopes',
      't.rate_limit_standard',
      't.rate_limit_export',
      sql<string>`iso_utc(t.created_at)`.as('created_at'),
      sql<string | null>`iso_utc(t.expires_at)`.as('expires_at'),
      sql<string | null>`iso_utc(t.revoked_at)`.as('revoked_at'),
      sql<string | null>`iso_utc(t.last_used_at)`.as('last_used_at'),
      sql<string | null>`CASE WHEN t.previous_token_expires_at > now() THEN iso_utc(t.previous_token_expires_at) END`.as('previous_secret_expires_at'),
      sql<boolean>`t.expires_at IS NOT NULL AND t.expires_at <= now()`.as('expired'),
      ...makerColumns,
    ])
    .where(ownStoreIs('t.store_id'));
}

/**
 * The maker's columns of a query over `api_tokens as t`: her role now in the key's store (migration
 * 0033: a role per store; NULL once removed from that store, or from every store).
 */
const makerColumns = [
  't.made_by_admin_id',
  't.made_by_email',
  sql<AdminRole | null>`(SELECT m.role FROM admin_memberships m WHERE m.admin_user_id = t.made_by_admin_id AND m.store_id = t.store_id)`.as('maker_role'),
] as const;

/** One mapping of the maker's columns. */
function makerOf(row: { made_by_admin_id: string | null; made_by_email: string | null; maker_role: AdminRole | null }): TokenMaker {
  if (row.made_by_admin_id === null) return { kind: 'operator', id: null, email: null, role: null, removed: false };
  return { kind: 'administrator', id: row.made_by_admin_id, email: row.made_by_email, role: row.maker_role, removed: row.maker_role === null };
}

/** How much a maker lets a key do: the operator most, a removed administrator nothing. */
function makerPower(maker: TokenMaker): number {
  if (maker.kind === 'operator') return 4;
  if (maker.role !== null && maker.secondFactorMissing) return 1;
  return maker.role === 'owner' ? 3 : maker.role === 'admin' ? 2 : maker.role === 'viewer' ? 1 : 0;
}

/** An administrator maker marked when her store requires a second factor she has not set up (the operator is no person: never). */
function withSecondFactor(maker: TokenMaker, required: boolean, has: boolean): TokenMaker {
  return maker.kind === 'administrator' && maker.role !== null && required && !has ? { ...maker, secondFactorMissing: true } : maker;
}

/**
 * The maker a secret acts for (decision 0026, amended): the weaker of the key's maker now and the
 * administrator who saw that secret (undefined: the maker herself, or the operator), so a rolled-out
 * secret never gains the roller's power and a removed maker's secret gains nothing by a roll or a
 * transfer.
 */
function weakerMaker(maker: TokenMaker, viewer: TokenMaker | undefined): TokenMaker {
  return viewer !== undefined && makerPower(viewer) < makerPower(maker) ? viewer : maker;
}

function tokenRowToSummary(row: TokenRow): TokenSummary {
  const { expired, made_by_admin_id: _id, made_by_email: _email, maker_role: _role, ...rest } = row;
  return {
    ...rest,
    scopes: row.scopes as Scope[],
    status: row.revoked_at ? 'revoked' : expired ? 'expired' : 'active',
    made_by: makerOf(row),
  };
}

/** Creates a token; returns the secret (shown once) and its summary. */
export async function createToken(db: Kysely<Database>, input: CreateTokenInput): Promise<{ token: string; summary: TokenSummary }> {
  if (input.maxKeysOfStore !== undefined) {
    // The store's keys only: revoked and expired ones no longer count.
    const { held } = await db
      .selectFrom('api_tokens')
      .select((eb) => eb.fn.countAll<number>().as('held'))
      .where(ownStoreIs('store_id'))
      .where('revoked_at', 'is', null)
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<string>`now()`)]))
      .executeTakeFirstOrThrow();
    if (Number(held) >= input.maxKeysOfStore) {
      throw new ApiError(
        'store_limit_reached',
        `This store holds ${held} API keys, its limit (STORE_MAX_API_KEYS = ${input.maxKeysOfStore}): revoke one it no longer needs before creating another.`,
      );
    }
  }
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const id = randomUUID();
  const scopes = [...new Set(input.scopes && input.scopes.length > 0 ? input.scopes : READ_SCOPES)];
  await db
    .insertInto('api_tokens')
    .values({
      store_id: ownStore(),
      id,
      name: input.name,
      prefix: token.slice(0, 12),
      token_hash: hashToken(token),
      scopes,
      rate_limit_standard: input.rateLimitStandard ?? null,
      rate_limit_export: input.rateLimitExport ?? null,
      created_at: sql<string>`now()`,
      expires_at: input.expiresAt ?? null,
      made_by_admin_id: input.madeBy?.adminId ?? null,
      made_by_email: input.madeBy?.email ?? null,
    })
    .execute();
  tokensChanged(db);
  return { token, summary: await getToken(db, id) };
}

/** Lists every token, newest first. */
export async function listTokens(db: Kysely<Database>): Promise<TokenSummary[]> {
  const rows = await tokenQuery(db).execute();
  return rows.map(tokenRowToSummary).sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
}

export async function getToken(db: Kysely<Database>, id: string): Promise<TokenSummary> {
  const row = await tokenQuery(db).where('t.id', '=', id).executeTakeFirst();
  if (!row) throw notFound('token', id);
  return tokenRowToSummary(row);
}

/** Revokes a token by id or by its full prefix. Revoking twice is a 409. */
export async function revokeToken(db: Kysely<Database>, idOrPrefix: string): Promise<TokenSummary> {
  const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(idOrPrefix);
  const found = await db
    .selectFrom('api_tokens')
    .select(['id', 'revoked_at'])
    .where(ownStoreIs('store_id'))
    .where(isUuid ? 'id' : 'prefix', '=', idOrPrefix)
    .execute();
  if (found.length === 0) throw notFound('token', idOrPrefix);
  if (found.length > 1) throw conflict(`More than one token has the prefix '${idOrPrefix}'; revoke by id.`);
  if (found[0]!.revoked_at) throw conflict(`Token '${idOrPrefix}' is already revoked.`);
  await db.updateTable('api_tokens').set({ revoked_at: sql<string>`now()` }).where(ownStoreIs('store_id')).where('id', '=', found[0]!.id).execute();
  // No cached identity of this process outlives the revocation (others learn it by NOTIFY).
  tokensChanged(db);
  return getToken(db, found[0]!.id);
}

export type AuthenticationFailure = 'unknown' | 'revoked' | 'expired';

/** A token found valid, and for how long at most it stays so (its expiry; 0 for a rolled-out secret). */
export interface TokenLookup {
  readonly token: AuthenticatedToken;
  /** Milliseconds until the presented secret stops working by itself (0: a rolled-out secret, never cached); null: no end. */
  readonly validForMs: number | null;
}

/**
 * Looks a presented token up, with how long the answer holds (what the token cache may keep it for).
 * Records `last_used_at` at most once a minute per token, so reads do not turn into a write per request.
 */
export function lookupToken(db: Kysely<Database>, token: string): Promise<TokenLookup | AuthenticationFailure> {
  // Across stores: the secret says which store (its hash is unique in the deployment).
  return asPlatform(() => lookupTokenOfAnyStore(db, token));
}

async function lookupTokenOfAnyStore(db: Kysely<Database>, token: string): Promise<TokenLookup | AuthenticationFailure> {
  const hash = hashToken(token);
  const row = await db
    .selectFrom('api_tokens as t')
    .innerJoin('stores as s', 's.id', 't.store_id')
    .select([
      't.id',
      't.store_id',
      's.status as store_status',
      't.name',
      't.scopes',
      't.rate_limit_standard',
      't.rate_limit_export',
      't.revoked_at',
      sql<boolean>`t.expires_at IS NOT NULL AND t.expires_at <= now()`.as('expired'),
      sql<boolean>`t.last_used_at IS NULL OR t.last_used_at < now() - interval '60 seconds'`.as('stale_use'),
      // How long this answer holds: until the expiry; 0 for a rolled-out secret in its overlap (a
      // transitional state, looked up on every request so its end is exact).
      sql<number | null>`CASE WHEN t.token_hash = ${hash} THEN extract(epoch FROM t.expires_at - now()) * 1000 ELSE 0 END`.as('valid_ms'),
      // The maker's role now: a cached answer is dropped when it changes (migration 0017's NOTIFY).
      ...makerColumns,
      // Who saw the secret presented (NULL: its maker, or the operator), with her role now.
      sql<string | null>`CASE WHEN t.token_hash = ${hash} THEN t.shown_to_admin_id ELSE t.previous_shown_to_admin_id END`.as('viewer_id'),
      sql<string | null>`CASE WHEN t.token_hash = ${hash} THEN t.shown_to_email ELSE t.previous_shown_to_email END`.as('viewer_email'),
      // The store's owner requires a second factor (store_admin_settings), and which maker has none (TOTP or a passkey, decision 0063).
      sql<boolean>`coalesce((SELECT sas.require_second_factor FROM store_admin_settings sas WHERE sas.store_id = t.store_id), false)`.as(
        'second_factor_required',
      ),
      sql<boolean>`EXISTS (SELECT 1 FROM admin_users u WHERE u.id = t.made_by_admin_id AND (u.totp_enabled_at IS NOT NULL OR EXISTS (SELECT 1 FROM admin_passkeys pk WHERE pk.admin_user_id = u.id)))`.as(
        'maker_has_second_factor',
      ),
      sql<AdminRole | null>`(SELECT m.role FROM admin_memberships m WHERE m.admin_user_id = CASE WHEN t.token_hash = ${hash} THEN t.shown_to_admin_id ELSE t.previous_shown_to_admin_id END AND m.store_id = t.store_id)`.as(
        'viewer_role',
      ),
      sql<boolean>`EXISTS (SELECT 1 FROM admin_users u WHERE u.id = CASE WHEN t.token_hash = ${hash} THEN t.shown_to_admin_id ELSE t.previous_shown_to_admin_id END AND (u.totp_enabled_at IS NOT NULL OR EXISTS (SELECT 1 FROM admin_passkeys pk WHERE pk.admin_user_id = u.id)))`.as(
        'viewer_has_second_factor',
      ),
    ])
    .where((eb) =>
      eb.or([
        eb('t.token_hash', '=', hash),
        // A rolled-out secret keeps working until its overlap ends.
        eb.and([eb('t.previous_token_hash', '=', hash), eb('t.previous_token_expires_at', '>', sql<string>`now()`)]),
      ]),
    )
    .executeTakeFirst();
  if (!row) return 'unknown';
  if (row.revoked_at) return 'revoked';
  if (row.expired) return 'expired';
  if (row.stale_use) {
    // Bookkeeping, not the request's purpose: on a disk out of space the read goes on without it.
    // Across stores still: the row's own store names it.
    await db
      .updateTable('api_tokens')
      .set({ last_used_at: sql<string>`now()` })
      .where('store_id', '=', row.store_id)
      .where('id', '=', row.id)
      .execute()
      .catch((error: unknown) => {
        if (!isOutOfSpace(error)) throw error;
      });
  }
  return {
    token: {
      id: row.id,
      storeId: row.store_id,
      storeStatus: row.store_status,
      name: row.name,
      scopes: row.scopes as Scope[],
      rateLimitStandard: row.rate_limit_standard,
      rateLimitExport: row.rate_limit_export,
      // The weaker of the key's maker and whoever saw this secret, both now (decision 0026, amended).
      maker: weakerMaker(
        withSecondFactor(makerOf(row), row.second_factor_required, row.maker_has_second_factor),
        row.viewer_id === null
          ? undefined
          : withSecondFactor(
              makerOf({ made_by_admin_id: row.viewer_id, made_by_email: row.viewer_email, maker_role: row.viewer_role }),
              row.second_factor_required,
              row.viewer_has_second_factor,
            ),
      ),
    },
    validForMs: row.valid_ms === null ? null : Number(row.valid_ms),
  };
}

/**
 * Rolls a token: a new secret from now on; the old one keeps working for `overlapMs` (0: ends now),
 * so a client can be switched without downtime. Revoked or expired tokens cannot be rolled (409).
 * Whoever is shown the new secret becomes the key's maker (`madeBy`, undefined: the operator), as
 * when creating one: else an administrator rolling a colleague's key would keep its powers after
 * her own removal (decision 0026).
 */
export async function rollToken(
  db: Kysely<Database>,
  id: string,
  overlapMs: number,
  madeBy: TokenMakerRef | undefined,
): Promise<{ token: string; summary: TokenSummary }> {
  const current = await getToken(db, id);
  if (current.status !== 'active') throw conflict(`Token '${id}' is ${current.status}; only an active token can be rolled. Create a new one instead.`);
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  await db
    .updateTable('api_tokens')
    .set({
      previous_token_hash: sql<string>`token_hash`,
      previous_token_expires_at: sql<string>`now() + make_interval(secs => ${overlapMs / 1000})`,
      // The rolled-out secret keeps acting for whoever saw it (its maker, unless a transfer came
      // between): it never acts with the roller's power. The new secret is the roller's.
      previous_shown_to_admin_id: sql<string | null>`coalesce(shown_to_admin_id, made_by_admin_id)`,
      previous_shown_to_email: sql<string | null>`CASE WHEN shown_to_admin_id IS NULL THEN made_by_email ELSE shown_to_email END`,
      shown_to_admin_id: null,
      shown_to_email: null,
      token_hash: hashToken(token),
      prefix: token.slice(0, 12),
      made_by_admin_id: madeBy?.adminId ?? null,
      made_by_email: madeBy?.email ?? null,
    })
    .where(ownStoreIs('store_id'))
    .where('id', '=', id)
    .execute();
  tokensChanged(db);
  return { token, summary: await getToken(db, id) };
}

/** Renames a token or changes its rate limits (null: the server's defaults). */
export async function updateToken(
  db: Kysely<Database>,
  id: string,
  patch: { name?: string; rateLimitStandard?: number | null; rateLimitExport?: number | null },
): Promise<{ before: TokenSummary; after: TokenSummary }> {
  const before = await getToken(db, id);
  const set: Record<string, unknown> = {};
  if (patch.name !== undefined) set.name = patch.name;
  if (patch.rateLimitStandard !== undefined) set.rate_limit_standard = patch.rateLimitStandard;
  if (patch.rateLimitExport !== undefined) set.rate_limit_export = patch.rateLimitExport;
  if (Object.keys(set).length > 0) {
    await db.updateTable('api_tokens').set(set).where(ownStoreIs('store_id')).where('id', '=', id).execute();
    tokensChanged(db);
  }
  return { before, after: await getToken(db, id) };
}

/** A maker as named by the admin API: an administrator's id (present or removed), or `operator`. */
export type MakerSelector = string | 'operator';

/** Restricts a query over `api_tokens` to the keys `maker` made. */
function madeBy(maker: MakerSelector) {
  return maker === 'operator' ? sql<boolean>`made_by_admin_id IS NULL` : sql<boolean>`made_by_admin_id = ${maker}::uuid`;
}

/**
 * Gives every key of `from` that is not revoked to the administrator `to` in one statement (decision
 * 0026): from the next request they act with her role. Returns the keys moved (none: 404, so an
 * owner learns of a mistyped maker rather than of nothing).
 */
export async function transferTokens(db: Kysely<Database>, from: MakerSelector, to: TokenMakerRef): Promise<TokenSummary[]> {
  if (from === to.adminId) throw conflict('The keys already belong to that administrator.');
  const moved = await db
    .updateTable('api_tokens')
    // The secrets stay bounded by whoever saw them (a removed maker's unrotated secret must not act
    // for the new maker): roll a transferred key to give it a secret of its new maker's.
    .set({
      made_by_admin_id: to.adminId,
      made_by_email: to.email,
      shown_to_admin_id: sql<string | null>`coalesce(shown_to_admin_id, made_by_admin_id)`,
      shown_to_email: sql<string | null>`CASE WHEN shown_to_admin_id IS NULL THEN made_by_email ELSE shown_to_email END`,
    })
    .where(ownStoreIs('store_id'))
    .where(madeBy(from))
    .where('revoked_at', 'is', null)
    .returning('id')
    .execute();
  tokensChanged(db);
  if (moved.length === 0) throw new ApiError('not_found', `No unrevoked API key was made by '${from}'.`);
  return Promise.all(moved.map((row) => getToken(db, row.id)));
}

/** Revokes every key of `from` not yet revoked, in one statement; 404 when there is none. */
export async function revokeTokensMadeBy(db: Kysely<Database>, from: MakerSelector): Promise<TokenSummary[]> {
  const revoked = await db
    .updateTable('api_tokens')
    .set({ revoked_at: sql<string>`now()` })
    .where(ownStoreIs('store_id'))
    .where(madeBy(from))
    .where('revoked_at', 'is', null)
    .returning('id')
    .execute();
  tokensChanged(db);
  if (revoked.length === 0) throw new ApiError('not_found', `No unrevoked API key was made by '${from}'.`);
  return Promise.all(revoked.map((row) => getToken(db, row.id)));
}
