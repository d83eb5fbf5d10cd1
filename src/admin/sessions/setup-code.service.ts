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
import { countAdminUsers, createAdminUser, type AdminUser } from './admin-user.service.ts';

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

async function stateOf(db: Kysely<Database>, code: string): Promise<SetupCodeState> {
  const row = await db.selectFrom('admin_setup_codes').select(['expires_at', 'used_at']).where('code_hash', '=', hashCode(code)).executeTakeFirst();
  const { rows } = await sql<{ now: string }>`SELECT now() AS now`.execute(db);
  return setupCodeState(row, await countAdminUsers(db), new Date(rows[0]!.now));
}

/** The state of a presented code (nothing changes). */
export function checkSetupCode(db: Kysely<Database>, code: string): Promise<SetupCodeState> {
  return stateOf(db, code);
}

/**
 * Creates the first administrator with a valid code and marks the code used, in one transaction
 * serialised across processes; returns the state instead when the code is not valid (nothing changes).
 * Email and password follow the rules of `admin create` (invalid_parameter naming the field).
 */
export async function completeSetup(
  db: Kysely<Database>,
  input: { code: string; email: string; password: string },
): Promise<{ state: 'valid'; user: AdminUser } | { state: Exclude<SetupCodeState, 'valid'> }> {
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${SETUP_LOCK_KEY}::bigint)`.execute(trx);
    const state = await stateOf(trx, input.code);
    if (state !== 'valid') return { state };
    const user = await createAdminUser(trx, { email: input.email, password: input.password });
    await trx.updateTable('admin_setup_codes').set({ used_at: sql<string>`now()` }).where('code_hash', '=', hashCode(input.code)).execute();
    return { state: 'valid' as const, user };
  });
}
