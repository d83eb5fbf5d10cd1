/**
 * First start without the CLI: while no administrator exists, a starting server issues a one-time
 * setup code (random, 32 bytes) and prints a dashboard link carrying it in the URL fragment (never
 * sent to the server in a URL, so never in a log). The setup page trades the code, once, before it
 * expires and only while there is still no administrator, for the first administrator and a session.
 * Only the code's SHA-256 is stored, in the database, so every process of a deployment honours a
 * link any of them printed. Wrong, used and expired codes are counted like failed sign-ins
 * (sign-in-throttle.ts) under SETUP_THROTTLE_KEY. The decision is the pure `setupCodeState`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type {} from './admin-user.table.ts';
import { addMembership, countAdminUsers, createAdminUser, findAdminUser, passwordMatches, type AdminUser } from './admin-user.service.ts';
import { ApiError } from '../../shared/problem.ts';
import { homeStore } from '../../stores/store.service.ts';
import { publicUrl, type Config } from '../../config/config.ts';

/** Throttle key of setup-code failures (no email can be spelled like this: emails contain '@'). */
export const SETUP_THROTTLE_KEY = 'setup-code';

/** Serialises first-administrator creation across processes (two codes used at once make one admin). */
const SETUP_LOCK_KEY = 0x53494153; // 'SIAS'

export type SetupCodeState = 'valid' | 'unknown' | 'used' | 'expired' | 'administrator_exists';

/** What a presented code is worth, given its stored row (if any), the administrators and the time. */
export function setupCodeState(row: { expires_at: string; used_at: string | null } | undefined, administrators: number, now: Date): SetupCodeState {
  if (row?.used_at) return 'used';
  if (administrators > 0) return 'administrator_exists';
  if (!row) return 'unknown';
  if (new Date(row.expires_at).getTime() <= now.getTime()) return 'expired';
  return 'valid';
}

/** The page's explanation of every state but 'valid' (shown as is; no internals). */
export const SETUP_CODE_MESSAGES: Record<Exclude<SetupCodeState, 'valid'>, string> = {
  unknown: 'This setup link is not valid. Copy the whole link the server printed at start, or restart the server for a new one.',
  used: 'This setup link has already been used. Sign in with the administrator it created.',
  expired: 'This setup link has expired. Restart the server to print a new one, or create an administrator with `npx store-api admin create`.',
  administrator_exists: 'An administrator already exists, so setup links no longer work. Sign in instead.',
};

function hashCode(code: string): string {
  return createHash('sha256').update(code).digest('hex');
}

/** Issues a code valid for `ttlMs` while no administrator exists; undefined when one does. */
export async function issueSetupCode(db: Kysely<Database>, ttlMs: number): Promise<{ code: string; expiresAt: string } | undefined> {
  if ((await countAdminUsers(db)) > 0) return undefined;
  const code = randomBytes(32).toString('base64url');
  const row = await db
    .insertInto('admin_setup_codes')
    .values({
      code_hash: hashCode(code),
      created_at: sql<string>`now()`,
      expires_at: sql<string>`now() + make_interval(secs => ${ttlMs / 1000})`,
    })
    .returning('expires_at')
    .executeTakeFirstOrThrow();
  // Codes that can no longer be used only take space.
  await db.deleteFrom('admin_setup_codes').where('expires_at', '<', sql<string>`now() - interval '1 day'`).execute();
  return { code, expiresAt: row.expires_at };
}

/**
 * Issues a store's first-owner code (migration 0033; `stores create --json`'s `setup_url`): valid
 * for `ttlMs` while the store has no administrator. Whoever opens it becomes the store's owner: a
 * new account, or an existing one proven by its password.
 */
export async function issueStoreSetupCode(db: Kysely<Database>, storeId: string, ttlMs: number): Promise<{ code: string; expiresAt: string }> {
  const code = randomBytes(32).toString('base64url');
  const row = await db
    .insertInto('admin_setup_codes')
    .values({
      code_hash: hashCode(code),
      store_id: storeId,
      created_at: sql<string>`now()`,
      expires_at: sql<string>`now() + make_interval(secs => ${ttlMs / 1000})`,
    })
    .returning(sql<string>`iso_utc(expires_at)`.as('expires_at'))
    .executeTakeFirstOrThrow();
  return { code, expiresAt: row.expires_at };
}

/**
 * The one-time link that makes a new store's first owner (`stores create`, the platform API's
 * `POST /stores`): the dashboard's setup page (`/admin#/setup?code=…`, the shape the first
 * administrator's link has), valid for ADMIN_INVITATION_TTL_MS, on PUBLIC_URL else http://HOST:PORT.
 */
export async function storeSetupUrl(db: Kysely<Database>, config: Config, storeId: string): Promise<{ url: string; expiresAt: string }> {
  const { code, expiresAt } = await issueStoreSetupCode(db, storeId, config.ADMIN_INVITATION_TTL_MS);
  return { url: `${publicUrl(config)}/admin#/setup?code=${code}`, expiresAt };
}

/** The administrators a code's state depends on: the deployment's (a first-administrator code) or its store's. */
async function administratorsFor(db: Kysely<Database>, storeId: string | null): Promise<number> {
  if (storeId === null) return countAdminUsers(db);
  const row = await db
    .selectFrom('admin_memberships')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('store_id', '=', storeId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function stateOf(db: Kysely<Database>, code: string): Promise<{ state: SetupCodeState; storeId: string | null }> {
  const row = await db.selectFrom('admin_setup_codes').select(['expires_at', 'used_at', 'store_id']).where('code_hash', '=', hashCode(code)).executeTakeFirst();
  const { rows } = await sql<{ now: string }>`SELECT now() AS now`.execute(db);
  const storeId = row?.store_id ?? null;
  return { state: setupCodeState(row, await administratorsFor(db, storeId), new Date(rows[0]!.now)), storeId };
}

/** The state of a presented code (nothing changes). */
export async function checkSetupCode(db: Kysely<Database>, code: string): Promise<SetupCodeState> {
  return (await stateOf(db, code)).state;
}

/**
 * Creates the first administrator with a valid code and marks the code used, in one transaction
 * serialised across processes; returns the state instead when the code is not valid (nothing changes).
 * Email and password follow the rules of `admin create` (invalid_parameter naming the field).
 */
export async function completeSetup(
  db: Kysely<Database>,
  input: { code: string; email: string; password: string },
): Promise<{ state: 'valid'; user: AdminUser; storeId: string | undefined } | { state: Exclude<SetupCodeState, 'valid'> }> {
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${SETUP_LOCK_KEY}::bigint)`.execute(trx);
    const { state, storeId: codeStore } = await stateOf(trx, input.code);
    if (state !== 'valid') return { state };
    // A first-administrator code (no store of its own) makes the home store's owner.
    const storeId = codeStore ?? (await homeStore(trx))?.id;
    let user: AdminUser;
    const existing = codeStore === null ? undefined : await findAdminUser(trx, input.email, storeId);
    if (existing) {
      // A store's first owner who has an account already (of other stores): its own password
      // proves it; the link never replaces it.
      if (!(await passwordMatches(trx, existing.id, input.password))) {
        throw new ApiError('unauthorized', `'${existing.email}' already has an account: enter its current password to become this store's owner.`, [
          { param: 'password', message: 'is not the password of the existing account' },
        ]);
      }
      await addMembership(trx, { adminUserId: existing.id, role: 'owner', storeId });
      user = (await findAdminUser(trx, input.email, storeId))!;
    } else {
      user = await createAdminUser(trx, { email: input.email, password: input.password, storeId });
    }
    await trx.updateTable('admin_setup_codes').set({ used_at: sql<string>`now()` }).where('code_hash', '=', hashCode(input.code)).execute();
    return { state: 'valid' as const, user, storeId };
  });
}
