/**
 * Administrators of the dashboard: created from the CLI (`store-api admin create`), signed in with
 * email and password. Passwords are hashed with argon2id (memory-hard) at the OWASP baseline cost;
 * the parameters travel inside each hash, so raising them later still verifies old hashes.
 */
import { randomUUID } from 'node:crypto';
import { hash, verify, type Algorithm } from '@node-rs/argon2';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { asPlatform, currentStoreId, ownStore, accountStoreIs } from '../../db/store-scope.ts';
import { homeStore } from '../../stores/store.service.ts';
import type { Database } from '../../db/schema.ts';
import type {} from './admin-user.table.ts';
import { ApiError, conflict, invalidParameter } from '../../shared/problem.ts';
import type { AdminRole } from './admin-roles.ts';
import { deleteSessionsOf } from './admin-session.service.ts';
import { tokensChanged } from '../../db/read-cache-signals.ts';

/** argon2id, 19 MiB, 2 passes, 1 lane: the OWASP Password Storage Cheat Sheet minimum. */
const ARGON2_OPTIONS = {
  // `Algorithm` is a const enum in the typings (not importable under isolated modules); 2 = Argon2id.
  algorithm: 2 as Algorithm,
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
};

/** Shortest password accepted (NIST SP 800-63B asks for at least 8; we ask a little more). */
export const MIN_PASSWORD_LENGTH = 10;
/** Longest password accepted; bounds the work one sign-in request can cause. */
export const MAX_PASSWORD_LENGTH = 256;

/**
 * The store a statement about administrators concerns: `storeId` when given, else the statement's
 * store (`ownStore`: the request's or command's). The admin tables are outside row-level security
 * (an account spans stores), so every statement about one store names it.
 */
function storeSql(storeId?: string): RawBuilder<string> {
  return storeId === undefined ? ownStore() : sql<string>`${storeId}::uuid`;
}

/** An account's columns, with its role in `store` (migration 0033; null: no member of it). */
function userColumns(store: RawBuilder<string>) {
  return [
    'id',
    'email',
    sql<AdminRole>`(SELECT m.role FROM admin_memberships m WHERE m.admin_user_id = admin_users.id AND m.store_id = ${store})`.as('role'),
    sql<string>`iso_utc(created_at)`.as('created_at'),
    sql<string | null>`iso_utc(last_sign_in_at)`.as('last_sign_in_at'),
    // TOTP or a passkey (decision 0063).
    sql<boolean>`(totp_secret IS NOT NULL OR EXISTS (SELECT 1 FROM admin_passkeys pk WHERE pk.admin_user_id = admin_users.id))`.as('second_factor'),
  ] as const;
}

/** Whether the account `admin_users.id` is a member of `store`. */
function memberOf(store: RawBuilder<string>) {
  return sql<boolean>`EXISTS (SELECT 1 FROM admin_memberships m WHERE m.admin_user_id = admin_users.id AND m.store_id = ${store})`;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export interface AdminUser {
  id: string;
  email: string;
  /** The role in the store asked about (migration 0033: a role per store); an account found by email alone may be no member (null). */
  role: AdminRole;
  created_at: string;
  last_sign_in_at: string | null;
  /** Whether a second factor is set up: TOTP (migration 0019) or a passkey (migration 0046). */
  second_factor: boolean;
}

/** The one normal form of an email address: trimmed, lower case. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** Throws invalid_parameter when `email` is not an address or `password` is too short or long. */
export function validateCredentials(email: string, password: string): void {
  if (!EMAIL.test(normalizeEmail(email)) || email.length > 254) throw invalidParameter('email', 'must be an email address');
  if (password.length < MIN_PASSWORD_LENGTH) throw invalidParameter('password', `must be at least ${MIN_PASSWORD_LENGTH} characters`);
  if (password.length > MAX_PASSWORD_LENGTH) throw invalidParameter('password', `must be at most ${MAX_PASSWORD_LENGTH} characters`);
}

export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2_OPTIONS);
}

/**
 * Creates an administrator (an owner unless `role` says otherwise), a member of `storeId` (default:
 * the statement's store) with that role; 409 when the email is taken. `admin_users.role` is written
 * for the record and no longer read (the membership decides, migration 0033).
 */
export async function createAdminUser(
  db: Kysely<Database>,
  input: { email: string; password: string; role?: AdminRole; storeId?: string },
): Promise<AdminUser> {
  validateCredentials(input.email, input.password);
  const email = normalizeEmail(input.email);
  // Outside any store's scope (a script, a test), the home store.
  const storeId = input.storeId ?? currentStoreId() ?? (await homeStore(db))?.id;
  const passwordHash = await hashPassword(input.password);
  const id = randomUUID();
  const inserted = await db
    .insertInto('admin_users')
    .values({
      id,
      email,
      password_hash: passwordHash,
      role: input.role ?? 'owner',
      created_at: sql<string>`now()`,
      password_changed_at: sql<string>`now()`,
    })
    .onConflict((oc) => oc.column('email').doNothing())
    .returning('id')
    .executeTakeFirst();
  if (!inserted) throw conflict(`An administrator with the email '${email}' already exists.`);
  await addMembership(db, { adminUserId: id, role: input.role ?? 'owner', storeId });
  return (await findAdminUser(db, email, storeId))!;
}

/** Makes the account a member of `storeId` (default: the statement's store) with `role`; an existing membership is left as it is. */
export async function addMembership(db: Kysely<Database>, input: { adminUserId: string; role: AdminRole; storeId?: string }): Promise<boolean> {
  const added = await db
    .insertInto('admin_memberships')
    .values({ admin_user_id: input.adminUserId, store_id: storeSql(input.storeId), role: input.role, created_at: sql<string>`now()` })
    .onConflict((oc) => oc.columns(['admin_user_id', 'store_id']).doNothing())
    .returning('admin_user_id')
    .executeTakeFirst();
  // An owner adding the account again lifts an earlier removal's hold on single sign-on.
  await db
    .deleteFrom('sso_removed_members')
    .where('store_id', '=', storeSql(input.storeId))
    .where('email', '=', db.selectFrom('admin_users').select('email').where('id', '=', input.adminUserId))
    .execute();
  tokensChanged(db);
  return added !== undefined;
}

/** A store an account administers, with its role there. */
export interface AccountStore {
  id: string;
  name: string;
  status: 'active' | 'suspended' | 'deleting';
  role: AdminRole;
}

/** The stores the account administers (not those being deleted), the home store (oldest) first. */
export async function accountStores(db: Kysely<Database>, adminUserId: string): Promise<AccountStore[]> {
  // Across stores: a store's scope sees its own row of `stores` only.
  return asPlatform(() =>
    db
      .selectFrom('admin_memberships as m')
      .innerJoin('stores as st', 'st.id', 'm.store_id')
      .select(['st.id', 'st.name', 'st.status', sql<AdminRole>`m.role`.as('role')])
      .where('m.admin_user_id', '=', adminUserId)
      .where('st.status', '<>', 'deleting')
      .orderBy('st.created_at')
      .orderBy('st.id')
      .execute(),
  );
}

/** Sets a new password and signs the administrator out everywhere (their sessions are deleted). */
export async function setAdminPassword(db: Kysely<Database>, input: { email: string; password: string }): Promise<AdminUser> {
  validateCredentials(input.email, input.password);
  const email = normalizeEmail(input.email);
  const passwordHash = await hashPassword(input.password);
  return db.transaction().execute(async (trx) => {
    const updated = await trx
      .updateTable('admin_users')
      .set({ password_hash: passwordHash, password_changed_at: sql<string>`now()` })
      .where('email', '=', email)
      .returning('id')
      .executeTakeFirst();
    if (!updated) throw new ApiError('not_found', `No administrator with the email '${email}'.`);
    await trx.deleteFrom('admin_sessions').where('admin_user_id', '=', updated.id).execute();
    return (await findAdminUser(trx, email))!;
  });
}

/** The account with this email, with its role in `storeId` (default: the statement's store; null when no member). */
export async function findAdminUser(db: Kysely<Database>, email: string, storeId?: string): Promise<AdminUser | undefined> {
  return db
    .selectFrom('admin_users')
    .select(userColumns(storeSql(storeId)))
    .where('email', '=', normalizeEmail(email))
    .executeTakeFirst();
}

/** The members of the statement's store, with their role there. */
export async function listAdminUsers(db: Kysely<Database>): Promise<AdminUser[]> {
  return db.selectFrom('admin_users').select(userColumns(ownStore())).where(memberOf(ownStore())).orderBy('email').execute();
}

export async function countAdminUsers(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('admin_users')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * A hash of a password nobody knows, verified when the email is unknown so that a wrong email and
 * a wrong password take the same time (no account enumeration by timing).
 */
let decoyHash: Promise<string> | undefined;

/**
 * The administrator whose email and password these are, or undefined. `touch: false` leaves
 * last_sign_in_at alone (a second factor still has to be checked: `touchSignIn` once it is).
 */
export async function verifyAdminCredentials(
  db: Kysely<Database>,
  email: string,
  password: string,
  { touch = true }: { touch?: boolean } = {},
): Promise<AdminUser | undefined> {
  if (password.length > MAX_PASSWORD_LENGTH) return undefined;
  const row = await db.selectFrom('admin_users').select(['id', 'email', 'password_hash']).where('email', '=', normalizeEmail(email)).executeTakeFirst();
  if (!row) {
    decoyHash ??= hashPassword(randomUUID());
    await verify(await decoyHash, password);
    return undefined;
  }
  if (!(await verify(row.password_hash, password))) return undefined;
  if (touch) await touchSignIn(db, row.id);
  return findAdminUser(db, row.email);
}

/** Records a completed sign-in (the administrators list shows it). */
export async function touchSignIn(db: Kysely<Database>, adminUserId: string): Promise<void> {
  await db.updateTable('admin_users').set({ last_sign_in_at: sql<string>`now()` }).where('id', '=', adminUserId).execute();
}

/** Whether `password` is the administrator's (a fresh proof); false for unknown ids. */
export async function passwordMatches(db: Kysely<Database>, adminUserId: string, password: string): Promise<boolean> {
  if (password.length > MAX_PASSWORD_LENGTH) return false;
  const row = await db.selectFrom('admin_users').select('password_hash').where('id', '=', adminUserId).executeTakeFirst();
  return row ? verify(row.password_hash, password) : false;
}

/** The account `id`, with its role in the statement's store (null when no member). */
export async function findAdminUserById(db: Kysely<Database>, id: string): Promise<AdminUser | undefined> {
  return db.selectFrom('admin_users').select(userColumns(ownStore())).where('id', '=', id).executeTakeFirst();
}

/** The member `id` of the statement's store; undefined when no such account is a member of it. */
export async function findMember(db: Kysely<Database>, id: string): Promise<AdminUser | undefined> {
  return db.selectFrom('admin_users').select(userColumns(ownStore())).where('id', '=', id).where(memberOf(ownStore())).executeTakeFirst();
}

/**
 * 409 when the member `user` also administers another store: an owner of one store may not take
 * over an account that other stores trust (its password, its second factor). The account's
 * holder changes them signed in, or the operator (`store-api admin set-password`,
 * `admin remove-second-factor`).
 */
export async function refuseWhenInOtherStores(db: Kysely<Database>, user: AdminUser, what: string): Promise<void> {
  const row = await db
    .selectFrom('admin_memberships')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('admin_user_id', '=', user.id)
    .where(sql<boolean>`store_id <> ${ownStore()}`)
    .executeTakeFirstOrThrow();
  if (Number(row.n) > 0) {
    throw conflict(
      `'${user.email}' also administers ${Number(row.n) === 1 ? 'another store' : `${row.n} other stores`}: an owner of one store cannot ${what} of an account others trust. They can do it themselves signed in, or the operator can (store-api admin …).`,
    );
  }
}

/** Serialises changes that could leave a store without an owner (two owners demoting each other at once). */
const OWNERS_LOCK_KEY = 0x53494f57; // 'SIOW'

/** The owners of the statement's store other than `exceptId` (the "last owner" rule is per store). */
async function otherOwners(db: Kysely<Database>, exceptId: string): Promise<number> {
  const row = await db
    .selectFrom('admin_memberships')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where(accountStoreIs('store_id'))
    .where('role', '=', 'owner')
    .where('admin_user_id', '!=', exceptId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Changes an administrator's role; 404 when unknown, 409 when it would leave no owner. Their
 * sessions end (they sign in again with the new rights). Returns the administrator before and after.
 */
export async function changeAdminRole(db: Kysely<Database>, id: string, role: AdminRole): Promise<{ before: AdminUser; after: AdminUser }> {
  const changed = await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${OWNERS_LOCK_KEY}::bigint)`.execute(trx);
    const before = await findMember(trx, id);
    if (!before) throw new ApiError('not_found', `No administrator with id '${id}' in this store.`);
    if (before.role === 'owner' && role !== 'owner' && (await otherOwners(trx, id)) === 0) {
      throw conflict(`'${before.email}' is the only owner of this store; make another administrator an owner first.`);
    }
    if (before.role !== role) {
      await trx.updateTable('admin_memberships').set({ role }).where(accountStoreIs('store_id')).where('admin_user_id', '=', id).execute();
      // Their sessions in this store end (they sign in again with the new rights); elsewhere their role is unchanged.
      await trx.deleteFrom('admin_sessions').where(accountStoreIs('store_id')).where('admin_user_id', '=', id).execute();
    }
    return { before, after: (await findMember(trx, id))! };
  });
  // Her keys act with her role (decision 0026): no cached key of hers outlives the change here;
  // other processes hear of it by NOTIFY (migration 0017).
  tokensChanged(db);
  return changed;
}

/**
 * Removes an administrator from the statement's store: their membership and their sessions in it
 * end; an account left with no store at all is deleted (nobody could sign in to it). 404 when no
 * member of this store, 409 for its last owner.
 */
export async function removeAdminUser(db: Kysely<Database>, id: string): Promise<AdminUser> {
  const removed = await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${OWNERS_LOCK_KEY}::bigint)`.execute(trx);
    const user = await findMember(trx, id);
    if (!user) throw new ApiError('not_found', `No administrator with id '${id}' in this store.`);
    if (user.role === 'owner' && (await otherOwners(trx, id)) === 0) {
      throw conflict(`'${user.email}' is the only owner of this store and cannot be removed.`);
    }
    await trx.deleteFrom('admin_sessions').where(accountStoreIs('store_id')).where('admin_user_id', '=', id).execute();
    await trx.deleteFrom('admin_memberships').where(accountStoreIs('store_id')).where('admin_user_id', '=', id).execute();
    // Removal sticks: a later single sign-on does not make the email a member again (decision 0062);
    // an owner's invitation (addMembership) lifts it.
    await trx
      .insertInto('sso_removed_members')
      .values({ store_id: ownStore(), email: user.email, removed_at: sql<string>`now()` })
      .onConflict((oc) => oc.columns(['store_id', 'email']).doUpdateSet({ removed_at: sql<string>`now()` }))
      .execute();
    await trx
      .deleteFrom('admin_users')
      .where('id', '=', id)
      .where(sql<boolean>`NOT EXISTS (SELECT 1 FROM admin_memberships m WHERE m.admin_user_id = ${id}::uuid)`)
      .execute();
    return user;
  });
  // Her keys lose their write and admin powers at once (decision 0026), here and, by NOTIFY, elsewhere.
  tokensChanged(db);
  return removed;
}

/**
 * An administrator changes their own password: the current one must be right (401 otherwise, so a
 * session left open on a shared screen cannot take the account). Every other session of theirs ends.
 */
export async function changeOwnPassword(
  db: Kysely<Database>,
  input: { adminUserId: string; currentPassword: string; newPassword: string; keepSessionId?: string },
): Promise<AdminUser> {
  const row = await db.selectFrom('admin_users').select(['email', 'password_hash']).where('id', '=', input.adminUserId).executeTakeFirst();
  if (!row) throw new ApiError('not_found', 'This administrator no longer exists.');
  if (input.currentPassword.length > MAX_PASSWORD_LENGTH || !(await verify(row.password_hash, input.currentPassword))) {
    throw new ApiError('invalid_parameter', 'The current password is wrong.', [{ param: 'current_password', message: 'is wrong' }]);
  }
  if (input.newPassword.length < MIN_PASSWORD_LENGTH) throw invalidParameter('new_password', `must be at least ${MIN_PASSWORD_LENGTH} characters`);
  if (input.newPassword.length > MAX_PASSWORD_LENGTH) throw invalidParameter('new_password', `must be at most ${MAX_PASSWORD_LENGTH} characters`);
  const passwordHash = await hashPassword(input.newPassword);
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('admin_users')
      .set({ password_hash: passwordHash, password_changed_at: sql<string>`now()` })
      .where('id', '=', input.adminUserId)
      .execute();
    await deleteSessionsOf(trx, input.adminUserId, input.keepSessionId);
  });
  return (await findAdminUserById(db, input.adminUserId))!;
}
