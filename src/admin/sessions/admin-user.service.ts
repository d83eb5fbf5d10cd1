/**
 * Administrators of the dashboard: created from the CLI (`store-api admin create`), signed in with
 * email and password. Passwords are hashed with argon2id (memory-hard) at the OWASP baseline cost;
 * the parameters travel inside each hash, so raising them later still verifies old hashes.
 */
import { randomUUID } from 'node:crypto';
import { hash, verify, type Algorithm } from '@node-rs/argon2';
import { sql, type Kysely } from 'kysely';
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

const USER_COLUMNS = [
  'id',
  'email',
  sql<AdminRole>`role`.as('role'),
  sql<string>`iso_utc(created_at)`.as('created_at'),
  sql<string | null>`iso_utc(last_sign_in_at)`.as('last_sign_in_at'),
  sql<boolean>`totp_secret IS NOT NULL`.as('second_factor'),
] as const;

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export interface AdminUser {
  id: string;
  email: string;
  role: AdminRole;
  created_at: string;
  last_sign_in_at: string | null;
  /** Whether a second factor (TOTP) is set up (migration 0019). */
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

/** Creates an administrator (an owner unless `role` says otherwise); 409 when the email is taken. */
export async function createAdminUser(db: Kysely<Database>, input: { email: string; password: string; role?: AdminRole }): Promise<AdminUser> {
  validateCredentials(input.email, input.password);
  const email = normalizeEmail(input.email);
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
  return (await findAdminUser(db, email))!;
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

export async function findAdminUser(db: Kysely<Database>, email: string): Promise<AdminUser | undefined> {
  return db.selectFrom('admin_users').select(USER_COLUMNS).where('email', '=', normalizeEmail(email)).executeTakeFirst();
}

export async function listAdminUsers(db: Kysely<Database>): Promise<AdminUser[]> {
  return db.selectFrom('admin_users').select(USER_COLUMNS).orderBy('email').execute();
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

export async function findAdminUserById(db: Kysely<Database>, id: string): Promise<AdminUser | undefined> {
  return db.selectFrom('admin_users').select(USER_COLUMNS).where('id', '=', id).executeTakeFirst();
}

/** Serialises changes that could leave the store without an owner (two owners demoting each other at once). */
const OWNERS_LOCK_KEY = 0x53494f57; // 'SIOW'

async function otherOwners(db: Kysely<Database>, exceptId: string): Promise<number> {
  const row = await db
    .selectFrom('admin_users')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('role', '=', 'owner')
    .where('id', '!=', exceptId)
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
    const before = await findAdminUserById(trx, id);
    if (!before) throw new ApiError('not_found', `No administrator with id '${id}'.`);
    if (before.role === 'owner' && role !== 'owner' && (await otherOwners(trx, id)) === 0) {
      throw conflict(`'${before.email}' is the only owner; make another administrator an owner first.`);
    }
    if (before.role !== role) {
      await trx.updateTable('admin_users').set({ role }).where('id', '=', id).execute();
      await trx.deleteFrom('admin_sessions').where('admin_user_id', '=', id).execute();
    }
    return { before, after: (await findAdminUserById(trx, id))! };
  });
  // Her keys act with her role (decision 0026): no cached key of hers outlives the change here;
  // other processes hear of it by NOTIFY (migration 0017).
  tokensChanged(db);
  return changed;
}

/** Removes an administrator; their sessions end with them (cascade). 409 for the last owner. */
export async function removeAdminUser(db: Kysely<Database>, id: string): Promise<AdminUser> {
  const removed = await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${OWNERS_LOCK_KEY}::bigint)`.execute(trx);
    const user = await findAdminUserById(trx, id);
    if (!user) throw new ApiError('not_found', `No administrator with id '${id}'.`);
    if (user.role === 'owner' && (await otherOwners(trx, id)) === 0) {
      throw conflict(`'${user.email}' is the only owner and cannot be removed.`);
    }
    await trx.deleteFrom('admin_sessions').where('admin_user_id', '=', id).execute();
    await trx.deleteFrom('admin_users').where('id', '=', id).execute();
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
