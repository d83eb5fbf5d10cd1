/**
 * A second factor for administrators (decision 0028): TOTP (RFC 6238, the `otpauth` library: SHA-1,
 * 6 digits, 30 s steps, what every authenticator app reads) and single-use recovery codes.
 *
 *   not enrolled ──start──▶ pending (secret shown once, QR + text) ──first right code──▶ enrolled
 *   enrolled ──remove (password or code)──▶ not enrolled
 *
 * A code is accepted for the current time step ±1 (ACCEPT_WINDOW) and only for a step later than
 * the last one accepted (admin_users.totp_last_step, moved forward in one guarded UPDATE, so two
 * requests with the same code at once accept it once). A code of a step a little further away is
 * recognised (RECOGNISE_WINDOW) only to say it expired or is early, instead of "wrong". Recovery
 * codes are 80 random bits each, stored as SHA-256, marked used in one guarded UPDATE. The decision
 * on a TOTP code is the pure `checkTotpCode`; time comes from the caller (an injected clock).
 */
import { createHash } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { renderSVG } from 'uqr';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type {} from './admin-user.table.ts';
import { ApiError } from '../../shared/problem.ts';
import { tokensChanged } from '../../db/read-cache-signals.ts';
import { ownStore, accountStoreIs } from '../../db/store-scope.ts';

export const TOTP_PERIOD_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** Steps either side of now whose code is accepted (clock drift, a code typed as it turns). */
export const ACCEPT_WINDOW = 1;
/** Steps either side in which a right code is named expired or early rather than wrong. */
export const RECOGNISE_WINDOW = 10;
/** Recovery codes issued at enrolment (and when regenerated). */
export const RECOVERY_CODE_COUNT = 10;

export type CodeRejection = 'wrong' | 'reused' | 'expired' | 'early' | 'recovery_code_used' | 'not_enrolled';
export type CodeVerdict = { ok: true; step: number } | { ok: false; reason: Exclude<CodeRejection, 'recovery_code_used' | 'not_enrolled'> };

/** What each refusal says (never the code itself). */
export const CODE_MESSAGES: Record<CodeRejection, string> = {
  wrong: 'The code is wrong. Type the 6-digit code your authenticator app shows now, or one of your recovery codes.',
  reused: 'This code was already used. Wait for the next code (a new one appears every 30 seconds).',
  expired: 'This code has expired. Type the code your authenticator app shows now; if it keeps failing, check the device clock.',
  early: "This code is not valid yet. Check your device's clock, then type the code it shows now.",
  recovery_code_used: 'This recovery code was already used. Each recovery code works once; use another one.',
  not_enrolled: 'This administrator has no second factor set up.',
};

function totpOf(secretBase32: string, label = 'admin', issuer = ''): TOTP {
  return new TOTP({ issuer, label, algorithm: 'SHA1', digits: TOTP_DIGITS, period: TOTP_PERIOD_SECONDS, secret: Secret.fromBase32(secretBase32) });
}

/** Whether `code` (digits only) is the code of a step near `nowMs` and later than `lastStep`. */
export function checkTotpCode(secretBase32: string, code: string, nowMs: number, lastStep: number | null): CodeVerdict {
  const totp = totpOf(secretBase32);
  const current = totp.counter({ timestamp: nowMs });
  const delta = totp.validate({ token: code, timestamp: nowMs, window: RECOGNISE_WINDOW });
  if (delta === null) return { ok: false, reason: 'wrong' };
  if (delta < -ACCEPT_WINDOW) return { ok: false, reason: 'expired' };
  if (delta > ACCEPT_WINDOW) return { ok: false, reason: 'early' };
  const step = current + delta;
  if (lastStep !== null && step <= lastStep) return { ok: false, reason: 'reused' };
  return { ok: true, step };
}

/** A code as typed: spaces and dashes dropped, lower-cased. */
export function normalizeCode(code: string): string {
  return code.replace(/[\s-]/g, '').toLowerCase();
}

/** Six digits: a TOTP code; anything else is tried as a recovery code. */
function isTotpShape(normalized: string): boolean {
  return /^\d{6}$/.test(normalized);
}

function hashRecoveryCode(normalized: string): string {
  return createHash('sha256').update(normalized).digest('hex');
}

/** A recovery code: 16 base32 characters (80 bits) shown as four groups, `abcd-efgh-ijkl-mnop`. */
function newRecoveryCode(): string {
  const text = new Secret({ size: 10 }).base32.toLowerCase();
  return text.match(/.{4}/g)!.join('-');
}

/** The refusal of a presented code, as problem+json (401 invalid_second_factor, `code` named). */
export function codeRejected(reason: CodeRejection): ApiError {
  return new ApiError('invalid_second_factor', CODE_MESSAGES[reason], [{ param: 'code', message: reason.replace(/_/g, ' ') }]);
}

export interface SecondFactorStatus {
  enabled: boolean;
  enabled_at: string | null;
  recovery_codes_left: number;
  /** The owner's setting: every administrator must have a second factor. */
  required: boolean;
}

/** Whether an administrator has a second factor, and the store's setting. */
export async function secondFactorStatus(db: Kysely<Database>, adminUserId: string): Promise<SecondFactorStatus> {
  const row = await db
    .selectFrom('admin_users as u')
    // The setting of the statement's store (the session's): a store without a row requires none.
    .leftJoin('store_admin_settings as s', (join) => join.on(accountStoreIs('s.store_id')))
    .select([
      sql<string | null>`iso_utc(u.totp_enabled_at)`.as('enabled_at'),
      sql<boolean>`coalesce(s.require_second_factor, false)`.as('require_second_factor'),
      (eb) =>
        eb
          .selectFrom('admin_recovery_codes as r')
          .select((inner) => inner.fn.countAll<number>().as('n'))
          .whereRef('r.admin_user_id', '=', 'u.id')
          .where('r.used_at', 'is', null)
          .as('left'),
    ])
    .where('u.id', '=', adminUserId)
    .executeTakeFirst();
  if (!row) throw new ApiError('not_found', 'This administrator no longer exists.');
  return { enabled: row.enabled_at !== null, enabled_at: row.enabled_at, recovery_codes_left: Number(row.left ?? 0), required: row.require_second_factor };
}

/**
 * Starts an enrolment: a new secret, kept pending until a first code confirms it (a newer start
 * replaces it). 409 when a second factor is already set up. The secret is in the answer, once.
 */
export async function startEnrolment(
  db: Kysely<Database>,
  input: { adminUserId: string; email: string; issuer: string },
): Promise<{ secret: string; otpauth_uri: string; qr_code: string }> {
  const secret = new Secret({ size: 20 }).base32;
  const updated = await db
    .updateTable('admin_users')
    .set({ totp_pending_secret: secret, totp_pending_at: sql<string>`now()` })
    .where('id', '=', input.adminUserId)
    .where('totp_secret', 'is', null)
    .returning('id')
    .executeTakeFirst();
  if (!updated) throw new ApiError('conflict', 'A second factor is already set up. Remove it first to set up another device.');
  const uri = totpOf(secret, input.email, input.issuer).toString();
  const svg = renderSVG(uri, { border: 2, pixelSize: 6, ecc: 'M' });
  return { secret, otpauth_uri: uri, qr_code: `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}` };
}

/**
 * Confirms the pending enrolment with a first code: the secret becomes the administrator's second
 * factor (that code's step counts as used) and a fresh set of recovery codes is returned, once.
 * 409 when no enrolment was started; 401 invalid_second_factor for a wrong code (nothing changes).
 */
export async function confirmEnrolment(
  db: Kysely<Database>,
  input: { adminUserId: string; code: string; nowMs: number },
): Promise<{ recoveryCodes: string[] }> {
  const row = await db.selectFrom('admin_users').select(['totp_pending_secret', 'totp_secret']).where('id', '=', input.adminUserId).executeTakeFirst();
  if (!row) throw new ApiError('not_found', 'This administrator no longer exists.');
  if (row.totp_secret) throw new ApiError('conflict', 'A second factor is already set up.');
  if (!row.totp_pending_secret) throw new ApiError('conflict', 'No set-up was started: start one first (POST /account/second-factor).');
  const verdict = checkTotpCode(row.totp_pending_secret, normalizeCode(input.code), input.nowMs, null);
  if (!verdict.ok) throw codeRejected(verdict.reason);
  const pending = row.totp_pending_secret;
  return db.transaction().execute(async (trx) => {
    const done = await trx
      .updateTable('admin_users')
      .set({
        totp_secret: pending,
        totp_enabled_at: sql<string>`now()`,
        totp_last_step: verdict.step,
        totp_pending_secret: null,
        totp_pending_at: null,
      })
      .where('id', '=', input.adminUserId)
      .where('totp_pending_secret', '=', pending)
      .where('totp_secret', 'is', null)
      .returning('id')
      .executeTakeFirst();
    if (!done) throw new ApiError('conflict', 'This set-up was replaced or finished meanwhile. Start again.');
    // Her keys may act with her role again where a second factor is required (token look-up).
    tokensChanged(db);
    return { recoveryCodes: await replaceRecoveryCodes(trx, input.adminUserId) };
  });
}

async function replaceRecoveryCodes(db: Kysely<Database>, adminUserId: string): Promise<string[]> {
  const codes = Array.from({ length: RECOVERY_CODE_COUNT }, newRecoveryCode);
  await db.deleteFrom('admin_recovery_codes').where('admin_user_id', '=', adminUserId).execute();
  await db
    .insertInto('admin_recovery_codes')
    .values(codes.map((code) => ({ admin_user_id: adminUserId, code_hash: hashRecoveryCode(normalizeCode(code)), created_at: sql<string>`now()` })))
    .execute();
  return codes;
}

/** New recovery codes (the old ones stop working); 409 without a second factor. */
export async function regenerateRecoveryCodes(db: Kysely<Database>, adminUserId: string): Promise<string[]> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('admin_users').select('totp_secret').where('id', '=', adminUserId).forUpdate().executeTakeFirst();
    if (!row?.totp_secret) throw new ApiError('conflict', CODE_MESSAGES.not_enrolled);
    return replaceRecoveryCodes(trx, adminUserId);
  });
}

/** Removes an administrator's second factor and recovery codes; false when there was none. */
export async function removeSecondFactor(db: Kysely<Database>, adminUserId: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const removed = await trx
      .updateTable('admin_users')
      .set({ totp_secret: null, totp_enabled_at: null, totp_last_step: null, totp_pending_secret: null, totp_pending_at: null })
      .where('id', '=', adminUserId)
      .where('totp_secret', 'is not', null)
      .returning('id')
      .executeTakeFirst();
    await trx.deleteFrom('admin_recovery_codes').where('admin_user_id', '=', adminUserId).execute();
    // Where a second factor is required, her keys act as a viewer from the next request.
    tokensChanged(db);
    return removed !== undefined;
  });
}

/**
 * Checks a presented code of an enrolled administrator and spends it: a TOTP code moves the last
 * accepted step forward, a recovery code is marked used. Throws 401 invalid_second_factor naming
 * what was wrong (nothing is spent then).
 */
export async function verifySecondFactor(
  db: Kysely<Database>,
  input: { adminUserId: string; code: string; nowMs: number },
): Promise<{ method: 'totp' | 'recovery_code'; recoveryCodesLeft?: number }> {
  const row = await db.selectFrom('admin_users').select(['totp_secret', 'totp_last_step']).where('id', '=', input.adminUserId).executeTakeFirst();
  if (!row?.totp_secret) throw codeRejected('not_enrolled');
  const code = normalizeCode(input.code);
  if (isTotpShape(code)) {
    const verdict = checkTotpCode(row.totp_secret, code, input.nowMs, row.totp_last_step === null ? null : Number(row.totp_last_step));
    if (!verdict.ok) throw codeRejected(verdict.reason);
    // Guarded: of two requests carrying the same code at once, one moves the step and one finds it moved.
    const spent = await db
      .updateTable('admin_users')
      .set({ totp_last_step: verdict.step })
      .where('id', '=', input.adminUserId)
      .where('totp_secret', '=', row.totp_secret)
      .where(sql<boolean>`(totp_last_step IS NULL OR totp_last_step < ${verdict.step})`)
      .returning('id')
      .executeTakeFirst();
    if (!spent) throw codeRejected('reused');
    return { method: 'totp' };
  }
  const hash = hashRecoveryCode(code);
  const used = await db
    .updateTable('admin_recovery_codes')
    .set({ used_at: sql<string>`now()` })
    .where('admin_user_id', '=', input.adminUserId)
    .where('code_hash', '=', hash)
    .where('used_at', 'is', null)
    .returning('code_hash')
    .executeTakeFirst();
  if (!used) {
    const known = await db
      .selectFrom('admin_recovery_codes')
      .select('used_at')
      .where('admin_user_id', '=', input.adminUserId)
      .where('code_hash', '=', hash)
      .executeTakeFirst();
    throw codeRejected(known ? 'recovery_code_used' : 'wrong');
  }
  const left = await db
    .selectFrom('admin_recovery_codes')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('admin_user_id', '=', input.adminUserId)
    .where('used_at', 'is', null)
    .executeTakeFirstOrThrow();
  return { method: 'recovery_code', recoveryCodesLeft: Number(left.n) };
}

/** Whether an administrator has a confirmed second factor. */
export async function hasSecondFactor(db: Kysely<Database>, adminUserId: string): Promise<boolean> {
  const row = await db.selectFrom('admin_users').select('totp_secret').where('id', '=', adminUserId).executeTakeFirst();
  return Boolean(row?.totp_secret);
}

/** The owner's setting of the statement's store (migration 0033): whether every administrator must have a second factor. */
export async function secondFactorRequired(db: Kysely<Database>): Promise<boolean> {
  const row = await db.selectFrom('store_admin_settings').select('require_second_factor').where(accountStoreIs('store_id')).executeTakeFirst();
  return row?.require_second_factor ?? false;
}

/** Changes the owner's setting of the statement's store; returns the value before. */
export async function setSecondFactorRequired(db: Kysely<Database>, input: { required: boolean; by: string }): Promise<boolean> {
  const before = await secondFactorRequired(db);
  await db
    .insertInto('store_admin_settings')
    .values({ store_id: ownStore(), require_second_factor: input.required, updated_at: sql<string>`now()`, updated_by: input.by })
    .onConflict((oc) => oc.column('store_id').doUpdateSet({ require_second_factor: input.required, updated_at: sql<string>`now()`, updated_by: input.by }))
    .execute();
  // The keys of the store's makers without a second factor change power (token look-up).
  tokensChanged(db);
  return before;
}
