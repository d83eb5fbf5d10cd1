/**
 * Sign-in throttling. Failed sign-ins are recorded in the database (so several server processes
 * count together) and three budgets are checked before a password is even looked at, each over the
 * last ADMIN_SIGN_IN_WINDOW_MS:
 *
 *   email + client address   ADMIN_SIGN_IN_MAX_FAILURES (default 5)   the ordinary case
 *   email, any address       4 × that                                  an attacker rotating addresses
 *                                                                      (behind a proxy: TRUST_PROXY)
 *   client address, any email 4 × that                                 one client guessing many accounts
 *
 * When a budget is spent the answer is 429 with Retry-After: the seconds until the failure that
 * spent it leaves the window. A successful sign-in clears the failures of its email + address.
 * The decision itself is the pure function `retryAfterMs`.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type {} from './admin-user.table.ts';

export interface ThrottlePolicy {
  /** Failures allowed per email + client address within the window. */
  maxFailures: number;
  windowMs: number;
}

/** Multiplier of maxFailures for the email-wide and address-wide budgets. */
export const WIDE_BUDGET_FACTOR = 4;

/**
 * Given the ages (ms, newest first) of the failures counted against one budget of `max`, how long
 * until another attempt is allowed: 0 when fewer than `max` failures are in the window, else the
 * time until the max-th newest one leaves it.
 */
export function retryAfterMs(agesNewestFirst: readonly number[], max: number, windowMs: number): number {
  const inWindow = agesNewestFirst.filter((age) => age < windowMs);
  if (inWindow.length < max) return 0;
  return Math.max(1, windowMs - inWindow[max - 1]!);
}

async function failureAges(db: Kysely<Database>, where: { email?: string; clientIp?: string }, limit: number, windowMs: number): Promise<number[]> {
  let query = db
    .selectFrom('admin_sign_in_failures')
    .select(sql<number>`extract(epoch from (now() - failed_at)) * 1000`.as('age_ms'))
    .where('failed_at', '>', sql<string>`now() - make_interval(secs => ${windowMs / 1000})`)
    .orderBy('failed_at', 'desc')
    .limit(limit);
  if (where.email !== undefined) query = query.where('email', '=', where.email);
  if (where.clientIp !== undefined) query = query.where('client_ip', '=', where.clientIp);
  return (await query.execute()).map((r) => Number(r.age_ms));
}

/** Milliseconds until `email` may try again from `clientIp` (0: now). */
export async function signInRetryAfterMs(db: Kysely<Database>, email: string, clientIp: string, policy: ThrottlePolicy): Promise<number> {
  const wide = policy.maxFailures * WIDE_BUDGET_FACTOR;
  const [pair, byEmail, byIp] = await Promise.all([
    failureAges(db, { email, clientIp }, policy.maxFailures, policy.windowMs),
    failureAges(db, { email }, wide, policy.windowMs),
    failureAges(db, { clientIp }, wide, policy.windowMs),
  ]);
  return Math.max(
    retryAfterMs(pair, policy.maxFailures, policy.windowMs),
    retryAfterMs(byEmail, wide, policy.windowMs),
    retryAfterMs(byIp, wide, policy.windowMs),
  );
}

/** Records a failed sign-in and forgets failures older than the window. */
export async function recordSignInFailure(db: Kysely<Database>, email: string, clientIp: string, policy: ThrottlePolicy): Promise<void> {
  await db.insertInto('admin_sign_in_failures').values({ email, client_ip: clientIp, failed_at: sql<string>`now()` }).execute();
  await db
    .deleteFrom('admin_sign_in_failures')
    .where('failed_at', '<=', sql<string>`now() - make_interval(secs => ${policy.windowMs / 1000})`)
    .execute();
}

/** Clears the failures of `email` from `clientIp` after it signed in. */
export async function clearSignInFailures(db: Kysely<Database>, email: string, clientIp: string): Promise<void> {
  await db.deleteFrom('admin_sign_in_failures').where('email', '=', email).where('client_ip', '=', clientIp).execute();
}
