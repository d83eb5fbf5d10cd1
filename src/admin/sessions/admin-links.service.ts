/**
 * One-time links an owner hands out (migration 0012, table admin_links):
 *  - an invitation: an email and a role; whoever opens it chooses a password and becomes that
 *    administrator (ADMIN_INVITATION_TTL_MS, default 7 days);
 *  - a password reset: for an existing administrator; whoever opens it sets a new password and every
 *    session of that administrator ends (ADMIN_PASSWORD_RESET_TTL_MS, default 1 h).
 * A link works once. The code is 32 random bytes travelling in the URL fragment (never in a request
 * log); only its SHA-256 is stored. A newer link for the same email (invitation) or administrator
 * (reset) replaces older unused ones. The decision is the pure `linkState`.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type {} from './admin-user.table.ts';
import { passwordRefusedIn, SSO_REQUIRED_MESSAGE } from './sso.service.ts';
import { ApiError, type ErrorCode } from '../../shared/problem.ts';
import {
  addMembership,
  createAdminUser,
  findAdminUser,
  findMember,
  hashPassword,
  normalizeEmail,
  passwordMatches,
  refuseWhenInOtherStores,
  validateCredentials,
  type AdminUser,
} from './admin-user.service.ts';
import { ownStore, accountStoreIs } from '../../db/store-scope.ts';
import type { AdminRole } from './admin-roles.ts';

export type LinkPurpose = 'invitation' | 'password_reset';
export type LinkState = 'valid' | 'unknown' | 'used' | 'expired';

/** Throttle key of failed link uses (no email is spelled like this: emails contain '@'). */
export const LINK_THROTTLE_KEY = 'admin-link';

export interface AdminLink {
  id: string;
  purpose: LinkPurpose;
  email: string;
  role: AdminRole | null;
  created_by: string;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

/** What a presented code is worth, given its stored row (if any) and the time. */
export function linkState(row: { expires_at: string; used_at: string | null } | undefined, now: Date): LinkState {
  if (!row) return 'unknown';
  if (row.used_at) return 'used';
  if (new Date(row.expires_at).getTime() <= now.getTime()) return 'expired';
  return 'valid';
}

export const LINK_MESSAGES: Record<Exclude<LinkState, 'valid'>, string> = {
  unknown: 'This link is not valid. Copy the whole link you were given, or ask an owner for a new one.',
  used: 'This link has already been used. Sign in, or ask an owner for a new link.',
  expired: 'This link has expired. Ask an owner for a new one.',
};
export const LINK_STATUS: Record<Exclude<LinkState, 'valid'>, ErrorCode> = { unknown: 'not_found', expired: 'not_found', used: 'conflict' };

function hashCode(code: string): string {
  return createHash('sha256').update(code).digest('hex');
}

const LINK_COLUMNS = [
  'id',
  'purpose',
  'email',
  sql<AdminRole | null>`role`.as('role'),
  'created_by',
  sql<string>`iso_utc(created_at)`.as('created_at'),
  sql<string>`iso_utc(expires_at)`.as('expires_at'),
  sql<string | null>`iso_utc(used_at)`.as('used_at'),
] as const;

/**
 * Issues an invitation into the statement's store (migration 0033); 409 when that email is already
 * a member of it. An email with an account (a member of other stores) may be invited: accepting
 * adds the membership, proven with the account's own password (useLink). Returns the code once.
 */
export async function createInvitation(
  db: Kysely<Database>,
  input: { email: string; role: AdminRole; createdBy: string; ttlMs: number },
): Promise<{ code: string; link: AdminLink }> {
  const email = normalizeEmail(input.email);
  validateCredentials(email, 'x'.repeat(10));
  if ((await findAdminUser(db, email))?.role)
    throw new ApiError('conflict', `An administrator with the email '${email}' already exists in this store.`, [
      { param: 'email', message: 'is already an administrator' },
    ]);
  // An owner inviting the email again lifts an earlier removal's hold on single sign-on (decision 0062).
  await db.deleteFrom('sso_removed_members').where(accountStoreIs('store_id')).where('email', '=', email).execute();
  return issue(db, { purpose: 'invitation', email, role: input.role, adminUserId: null, createdBy: input.createdBy, ttlMs: input.ttlMs });
}

/** Issues a password-reset link for an administrator; 404 when unknown. */
export async function createPasswordReset(
  db: Kysely<Database>,
  input: { adminUserId: string; createdBy: string; ttlMs: number },
): Promise<{ code: string; link: AdminLink; user: AdminUser }> {
  const user = await findMember(db, input.adminUserId);
  if (!user) throw new ApiError('not_found', `No administrator with id '${input.adminUserId}' in this store.`);
  await refuseWhenInOtherStores(db, user, 'reset the password');
  const issued = await issue(db, {
    purpose: 'password_reset',
    email: user.email,
    role: null,
    adminUserId: user.id,
    createdBy: input.createdBy,
    ttlMs: input.ttlMs,
  });
  return { ...issued, user };
}

async function issue(
  db: Kysely<Database>,
  input: { purpose: LinkPurpose; email: string; role: AdminRole | null; adminUserId: string | null; createdBy: string; ttlMs: number },
): Promise<{ code: string; link: AdminLink }> {
  const code = randomBytes(32).toString('base64url');
  const id = randomUUID();
  await db.transaction().execute(async (trx) => {
    // One live link per person, purpose and store: the newer replaces the older.
    await trx
      .deleteFrom('admin_links')
      .where(accountStoreIs('store_id'))
      .where('purpose', '=', input.purpose)
      .where('email', '=', input.email)
      .where('used_at', 'is', null)
      .execute();
    await trx
      .insertInto('admin_links')
      .values({
        id,
        code_hash: hashCode(code),
        purpose: input.purpose,
        email: input.email,
        role: input.role,
        admin_user_id: input.adminUserId,
        store_id: ownStore(),
        created_by: input.createdBy,
        created_at: sql<string>`now()`,
        expires_at: sql<string>`now() + make_interval(secs => ${input.ttlMs / 1000})`,
      })
      .execute();
    // Links that can no longer be used only take space.
    await trx.deleteFrom('admin_links').where('expires_at', '<', sql<string>`now() - interval '30 days'`).execute();
  });
  const link = await db.selectFrom('admin_links').select(LINK_COLUMNS).where('id', '=', id).executeTakeFirstOrThrow();
  return { code, link };
}

/** Invitations into the statement's store not yet used (live or expired), newest first. */
export async function listInvitations(db: Kysely<Database>): Promise<AdminLink[]> {
  return db
    .selectFrom('admin_links')
    .select(LINK_COLUMNS)
    .where(accountStoreIs('store_id'))
    .where('purpose', '=', 'invitation')
    .where('used_at', 'is', null)
    .orderBy('created_at', 'desc')
    .execute();
}

/** Withdraws an unused invitation; 404 when there is none with that id. */
export async function revokeInvitation(db: Kysely<Database>, id: string): Promise<AdminLink> {
  const link = await db
    .selectFrom('admin_links')
    .select(LINK_COLUMNS)
    .where(accountStoreIs('store_id'))
    .where('id', '=', id)
    .where('purpose', '=', 'invitation')
    .where('used_at', 'is', null)
    .executeTakeFirst();
  if (!link) throw new ApiError('not_found', `No open invitation with id '${id}'.`);
  await db.deleteFrom('admin_links').where(accountStoreIs('store_id')).where('id', '=', id).execute();
  return link;
}

async function stateOf(db: Kysely<Database>, code: string) {
  const row = await db
    .selectFrom('admin_links')
    .select([...LINK_COLUMNS, 'admin_user_id', 'store_id'])
    .where('code_hash', '=', hashCode(code))
    .executeTakeFirst();
  const { rows } = await sql<{ now: string }>`SELECT now() AS now`.execute(db);
  return { row, state: linkState(row, new Date(rows[0]!.now)) };
}

/** The state of a presented code and, when valid, what it is for (nothing changes). */
export async function checkLink(db: Kysely<Database>, code: string): Promise<{ state: LinkState; link?: AdminLink }> {
  const { row, state } = await stateOf(db, code);
  if (state !== 'valid' || !row) return { state };
  const { admin_user_id: _ignored, store_id: _store, ...link } = row;
  return { state, link };
}

/**
 * Uses a link with a new password, once: an invitation creates its administrator, a reset sets the
 * password and ends every session of that administrator. Returns the state instead when the code is
 * not valid (nothing changes). Serialised on the link's row, so a link used twice at once works once.
 */
export async function useLink(
  db: Kysely<Database>,
  input: { code: string; password: string },
): Promise<{ state: 'valid'; purpose: LinkPurpose; user: AdminUser; storeId: string | null } | { state: Exclude<LinkState, 'valid'> }> {
  return db.transaction().execute(async (trx) => {
    const locked = await trx.selectFrom('admin_links').select('id').where('code_hash', '=', hashCode(input.code)).forUpdate().executeTakeFirst();
    const { row, state } = await stateOf(trx, input.code);
    if (state !== 'valid' || !row || !locked) return { state: state === 'valid' ? ('unknown' as const) : state };
    // Where single sign-on is required, no link sets a password (but a break-glass owner's reset).
    if (row.store_id && (await passwordRefusedIn(trx, row.store_id, row.purpose === 'password_reset' ? row.admin_user_id : null))) {
      throw new ApiError('forbidden', SSO_REQUIRED_MESSAGE);
    }
    let user: AdminUser;
    const storeId = row.store_id ?? undefined;
    if (row.purpose === 'invitation') {
      const existing = await findAdminUser(trx, row.email, storeId);
      if (existing) {
        // An account of other stores joins this one: proven by its own password (never replaced by
        // whoever holds the link), and its second factor (links.admin-routes.ts) when it has one.
        if (!(await passwordMatches(trx, existing.id, input.password))) {
          throw new ApiError('unauthorized', `'${row.email}' already has an account: enter its current password to add this store to it.`, [
            { param: 'password', message: 'is not the password of the existing account' },
          ]);
        }
        await addMembership(trx, { adminUserId: existing.id, role: row.role!, storeId });
        user = (await findAdminUser(trx, row.email, storeId))!;
      } else {
        user = await createAdminUser(trx, { email: row.email, password: input.password, role: row.role!, storeId });
      }
    } else {
      validateCredentials(row.email, input.password);
      const passwordHash = await hashPassword(input.password);
      await trx
        .updateTable('admin_users')
        .set({ password_hash: passwordHash, password_changed_at: sql<string>`now()` })
        .where('id', '=', row.admin_user_id!)
        .execute();
      await trx.deleteFrom('admin_sessions').where('admin_user_id', '=', row.admin_user_id!).execute();
      const found = await findAdminUser(trx, row.email, storeId);
      if (!found || found.id !== row.admin_user_id) return { state: 'unknown' as const };
      user = found;
    }
    await trx.updateTable('admin_links').set({ used_at: sql<string>`now()` }).where('id', '=', row.id).execute();
    return { state: 'valid' as const, purpose: row.purpose, user, storeId: row.store_id };
  });
}
