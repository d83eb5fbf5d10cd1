/**
 * API tokens: random, recognisable prefix `sia_`, shown once at creation, stored only as a SHA-256
 * hash (a 256-bit random secret needs no slow KDF). Scopes per DECISIONS.md; optional expiry;
 * revocation takes effect on the next request: every write here moves the token cache's generation
 * (db/read-cache-signals.ts), other processes learn it by NOTIFY (migration 0016, decision 0016).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { isOutOfSpace } from '../db/storage-health.ts';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { conflict, notFound } from '../shared/problem.ts';
import { tokensChanged } from '../db/read-cache-signals.ts';

import { READ_SCOPES, type ReadScope } from '../resources/registry.ts';

/** Every scope: each resource's read scope (resources/registry.ts), and `admin`. */
export type Scope = ReadScope | 'admin';
export const SCOPES: readonly Scope[] = [...READ_SCOPES, 'admin'];

export const TOKEN_PREFIX = 'sia_';
const TOKEN_PATTERN = /^sia_[A-Za-z0-9_-]{43}$/;

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
}

/** The identity of an authenticated request. */
export interface AuthenticatedToken {
  id: string;
  name: string;
  scopes: Scope[];
  rateLimitStandard: number | null;
  rateLimitExport: number | null;
}

export interface CreateTokenInput {
  name: string;
  scopes?: Scope[];
  expiresAt?: string | null;
  rateLimitStandard?: number | null;
  rateLimitExport?: number | null;
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
    .selectFrom('api_tokens')
    .select([
      'id',
      'name',
      'prefix',
      'scopes',
      'rate_limit_standard',
      'rate_limit_export',
      sql<string>`iso_utc(created_at)`.as('created_at'),
      sql<string | null>`iso_utc(expires_at)`.as('expires_at'),
      sql<string | null>`iso_utc(revoked_at)`.as('revoked_at'),
      sql<string | null>`iso_utc(last_used_at)`.as('last_used_at'),
      sql<string | null>`CASE WHEN previous_token_expires_at > now() THEN iso_utc(previous_token_expires_at) END`.as('previous_secret_expires_at'),
      sql<boolean>`expires_at IS NOT NULL AND expires_at <= now()`.as('expired'),
    ]);
}

function tokenRowToSummary(row: TokenRow): TokenSummary {
  const { expired, ...rest } = row;
  return {
    ...rest,
    scopes: row.scopes as Scope[],
    status: row.revoked_at ? 'revoked' : expired ? 'expired' : 'active',
  };
}

/** Creates a token; returns the secret (shown once) and its summary. */
export async function createToken(db: Kysely<Database>, input: CreateTokenInput): Promise<{ token: string; summary: TokenSummary }> {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const id = randomUUID();
  const scopes = [...new Set(input.scopes && input.scopes.length > 0 ? input.scopes : READ_SCOPES)];
  await db
    .insertInto('api_tokens')
    .values({
      id,
      name: input.name,
      prefix: token.slice(0, 12),
      token_hash: hashToken(token),
      scopes,
      rate_limit_standard: input.rateLimitStandard ?? null,
      rate_limit_export: input.rateLimitExport ?? null,
      created_at: sql<string>`now()`,
      expires_at: input.expiresAt ?? null,
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
  const row = await tokenQuery(db).where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound('token', id);
  return tokenRowToSummary(row);
}

/** Revokes a token by id or by its full prefix. Revoking twice is a 409. */
export async function revokeToken(db: Kysely<Database>, idOrPrefix: string): Promise<TokenSummary> {
  const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(idOrPrefix);
  const found = await db
    .selectFrom('api_tokens')
    .select(['id', 'revoked_at'])
    .where(isUuid ? 'id' : 'prefix', '=', idOrPrefix)
    .execute();
  if (found.length === 0) throw notFound('token', idOrPrefix);
  if (found.length > 1) throw conflict(`More than one token has the prefix '${idOrPrefix}'; revoke by id.`);
  if (found[0]!.revoked_at) throw conflict(`Token '${idOrPrefix}' is already revoked.`);
  await db.updateTable('api_tokens').set({ revoked_at: sql<string>`now()` }).where('id', '=', found[0]!.id).execute();
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
export async function lookupToken(db: Kysely<Database>, token: string): Promise<TokenLookup | AuthenticationFailure> {
  const hash = hashToken(token);
  const row = await db
    .selectFrom('api_tokens')
    .select([
      'id',
      'name',
      'scopes',
      'rate_limit_standard',
      'rate_limit_export',
      'revoked_at',
      sql<boolean>`expires_at IS NOT NULL AND expires_at <= now()`.as('expired'),
      sql<boolean>`last_used_at IS NULL OR last_used_at < now() - interval '60 seconds'`.as('stale_use'),
      // How long this answer holds: until the expiry; 0 for a rolled-out secret in its overlap (a
      // transitional state, looked up on every request so its end is exact).
      sql<number | null>`CASE WHEN token_hash = ${hash} THEN extract(epoch FROM expires_at - now()) * 1000 ELSE 0 END`.as('valid_ms'),
    ])
    .where((eb) =>
      eb.or([
        eb('token_hash', '=', hash),
        // A rolled-out secret keeps working until its overlap ends.
        eb.and([eb('previous_token_hash', '=', hash), eb('previous_token_expires_at', '>', sql<string>`now()`)]),
      ]),
    )
    .executeTakeFirst();
  if (!row) return 'unknown';
  if (row.revoked_at) return 'revoked';
  if (row.expired) return 'expired';
  if (row.stale_use) {
    // Bookkeeping, not the request's purpose: on a disk out of space the read goes on without it.
    await db
      .updateTable('api_tokens')
      .set({ last_used_at: sql<string>`now()` })
      .where('id', '=', row.id)
      .execute()
      .catch((error: unknown) => {
        if (!isOutOfSpace(error)) throw error;
      });
  }
  return {
    token: {
      id: row.id,
      name: row.name,
      scopes: row.scopes as Scope[],
      rateLimitStandard: row.rate_limit_standard,
      rateLimitExport: row.rate_limit_export,
    },
    validForMs: row.valid_ms === null ? null : Number(row.valid_ms),
  };
}

/**
 * Rolls a token: a new secret from now on; the old one keeps working for `overlapMs` (0: ends now),
 * so a client can be switched without downtime. Revoked or expired tokens cannot be rolled (409).
 */
export async function rollToken(db: Kysely<Database>, id: string, overlapMs: number): Promise<{ token: string; summary: TokenSummary }> {
  const current = await getToken(db, id);
  if (current.status !== 'active') throw conflict(`Token '${id}' is ${current.status}; only an active token can be rolled. Create a new one instead.`);
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  await db
    .updateTable('api_tokens')
    .set({
      previous_token_hash: sql<string>`token_hash`,
      previous_token_expires_at: sql<string>`now() + make_interval(secs => ${overlapMs / 1000})`,
      token_hash: hashToken(token),
      prefix: token.slice(0, 12),
    })
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
    await db.updateTable('api_tokens').set(set).where('id', '=', id).execute();
    tokensChanged(db);
  }
  return { before, after: await getToken(db, id) };
}
