/**
 * Passkeys (WebAuthn) of administrators (decision 0063), with `@simplewebauthn/server`: a sign-in
 * method (usernameless: a discoverable credential names its account) and a second factor beside
 * TOTP. User verification is required in every ceremony, so a passkey proves both factors at once
 * (something held, unlocked by something known or being).
 *
 * The relying party is PUBLIC_URL's: its host is the RP id, its origin the only origin accepted.
 * A ceremony's challenge is kept server-side (admin_passkey_challenges, migration 0046), keyed by
 * the SHA-256 of a random value the browser holds in an HttpOnly cookie, bound to the purpose and,
 * for registration, to the account and session that asked; it is deleted as it is taken (one use:
 * a replayed answer finds none) and refused after ADMIN_PASSKEY_CHALLENGE_TTL_MS.
 *
 *   options ──▶ challenge row + cookie ──▶ browser ──▶ verify (takes the row) ──▶ stored / signed in
 *
 * Every refusal is a `PasskeyRefusal` naming its reason; the routes answer it 4xx and audit it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type AuthenticatorTransportFuture,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { Database } from '../../db/schema.ts';
import type {} from './admin-user.table.ts';
import { publicUrl, type Config } from '../../config/config.ts';
import { tokensChanged } from '../../db/read-cache-signals.ts';

/** Why a ceremony's answer was refused (audited as `reason`, never the answer itself). */
export type PasskeyRefusalReason =
  | 'no_ceremony'
  | 'expired'
  | 'unknown_credential'
  | 'other_account'
  | 'not_verified'
  | 'counter_regressed'
  | 'already_registered';

export const PASSKEY_MESSAGES: Record<PasskeyRefusalReason, string> = {
  no_ceremony: 'No passkey request of this browser is waiting for this answer (it was used already, or started in another browser or session). Start again.',
  expired: 'The passkey request expired. Start again.',
  unknown_credential: 'This passkey is not known here. It may have been removed; sign in another way.',
  other_account: "This passkey belongs to another account than the one signing in. Use one of this account's passkeys.",
  not_verified: 'The passkey answer could not be verified (wrong signature, origin, site or challenge, or the device did not verify you).',
  counter_regressed: 'The passkey answered with a signature counter it had passed already: a cloned or replayed passkey is refused.',
  already_registered: 'This passkey is already added (to this account or another).',
};

export class PasskeyRefusal extends Error {
  constructor(readonly reason: PasskeyRefusalReason) {
    super(PASSKEY_MESSAGES[reason]);
  }
}

export type CeremonyPurpose = 'register' | 'sign_in' | 'second_factor';

/** The relying party of the deployment: PUBLIC_URL's host and origin (default http://HOST:PORT). */
export function relyingParty(config: Config): { id: string; origin: string; name: string } {
  const url = new URL(publicUrl(config));
  return { id: url.hostname, origin: url.origin, name: 'Store Integration API' };
}

function hashCeremonyId(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

const CEREMONY_ID = /^[A-Za-z0-9_-]{43}$/;

/**
 * Keeps the challenge of a new ceremony; answers the value for the browser's ceremony cookie. A
 * ceremony the same browser had under way (`previous`) is dropped; expired ones are swept.
 */
async function keepChallenge(
  db: Kysely<Database>,
  input: {
    purpose: CeremonyPurpose;
    challenge: string;
    nowMs: number;
    ttlMs: number;
    previous?: string;
    adminUserId?: string;
    sessionId?: string;
  },
): Promise<string> {
  const value = randomBytes(32).toString('base64url');
  if (input.previous && CEREMONY_ID.test(input.previous)) {
    await db.deleteFrom('admin_passkey_challenges').where('id_hash', '=', hashCeremonyId(input.previous)).execute();
  }
  await db.deleteFrom('admin_passkey_challenges').where('expires_at', '<=', new Date(input.nowMs).toISOString()).execute();
  await db
    .insertInto('admin_passkey_challenges')
    .values({
      id_hash: hashCeremonyId(value),
      purpose: input.purpose,
      challenge: input.challenge,
      admin_user_id: input.adminUserId ?? null,
      session_id: input.sessionId ?? null,
      created_at: new Date(input.nowMs).toISOString(),
      expires_at: new Date(input.nowMs + input.ttlMs).toISOString(),
    })
    .execute();
  return value;
}

/**
 * Takes (deletes) the challenge of the browser's ceremony for `purpose`: refused `no_ceremony` when
 * there is none (never started, used already, another purpose, or another session's), `expired`
 * when it is past its time.
 */
async function takeChallenge(
  db: Kysely<Database>,
  input: { cookie: string | undefined; purpose: CeremonyPurpose; nowMs: number; adminUserId?: string; sessionId?: string },
): Promise<{ challenge: string; adminUserId: string | null }> {
  if (!input.cookie || !CEREMONY_ID.test(input.cookie)) throw new PasskeyRefusal('no_ceremony');
  const row = await db
    .deleteFrom('admin_passkey_challenges')
    .where('id_hash', '=', hashCeremonyId(input.cookie))
    .where('purpose', '=', input.purpose)
    .returning(['challenge', 'admin_user_id', 'session_id', sql<string>`(extract(epoch from expires_at) * 1000)::float8`.as('expires_ms')])
    .executeTakeFirst();
  if (!row) throw new PasskeyRefusal('no_ceremony');
  if (input.sessionId !== undefined && (row.session_id !== input.sessionId || row.admin_user_id !== input.adminUserId)) {
    throw new PasskeyRefusal('no_ceremony');
  }
  if (Number(row.expires_ms) <= input.nowMs) throw new PasskeyRefusal('expired');
  return { challenge: row.challenge, adminUserId: row.admin_user_id };
}

/** A passkey as its administrator sees it in the list. */
export interface PasskeyListing {
  id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  backed_up: boolean;
  transports: string[];
}

const LISTING_COLUMNS = [
  'id',
  'name',
  sql<string>`iso_utc(created_at)`.as('created_at'),
  sql<string | null>`iso_utc(last_used_at)`.as('last_used_at'),
  'backed_up',
  'transports',
] as const;

/** An administrator's passkeys, oldest first. */
export async function listPasskeys(db: Kysely<Database>, adminUserId: string): Promise<PasskeyListing[]> {
  const rows = await db
    .selectFrom('admin_passkeys')
    .select(LISTING_COLUMNS)
    .where('admin_user_id', '=', adminUserId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((row) => ({ ...row, transports: [...row.transports] }));
}

/** How many passkeys an administrator has. */
export async function countPasskeys(db: Kysely<Database>, adminUserId: string): Promise<number> {
  const row = await db
    .selectFrom('admin_passkeys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('admin_user_id', '=', adminUserId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The options of `navigator.credentials.create()` for adding a passkey, and the ceremony cookie's value. */
export async function startRegistration(
  db: Kysely<Database>,
  config: Config,
  input: { adminUserId: string; email: string; sessionId: string; nowMs: number; previous?: string },
): Promise<{ options: PublicKeyCredentialCreationOptionsJSON; ceremony: string }> {
  const rp = relyingParty(config);
  const existing = await db.selectFrom('admin_passkeys').select(['credential_id', 'transports']).where('admin_user_id', '=', input.adminUserId).execute();
  const options = await generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userName: input.email,
    userDisplayName: input.email,
    // The account's id (a random UUID, nothing personal): a usernameless sign-in names it back.
    userID: new TextEncoder().encode(input.adminUserId),
    attestationType: 'none',
    timeout: config.ADMIN_PASSKEY_CHALLENGE_TTL_MS,
    excludeCredentials: existing.map((row) => ({ id: row.credential_id, transports: row.transports as AuthenticatorTransportFuture[] })),
    authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
  });
  const ceremony = await keepChallenge(db, {
    purpose: 'register',
    challenge: options.challenge,
    nowMs: input.nowMs,
    ttlMs: config.ADMIN_PASSKEY_CHALLENGE_TTL_MS,
    previous: input.previous,
    adminUserId: input.adminUserId,
    sessionId: input.sessionId,
  });
  return { options, ceremony };
}

/** Verifies the browser's answer to a registration and stores the passkey under `name`. */
export async function finishRegistration(
  db: Kysely<Database>,
  config: Config,
  input: { adminUserId: string; sessionId: string; cookie: string | undefined; response: RegistrationResponseJSON; name: string; nowMs: number },
): Promise<PasskeyListing> {
  const { challenge } = await takeChallenge(db, {
    cookie: input.cookie,
    purpose: 'register',
    nowMs: input.nowMs,
    adminUserId: input.adminUserId,
    sessionId: input.sessionId,
  });
  const rp = relyingParty(config);
  let verified: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
  try {
    verified = await verifyRegistrationResponse({
      response: input.response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      requireUserVerification: true,
    });
  } catch {
    throw new PasskeyRefusal('not_verified');
  }
  if (!verified.verified) throw new PasskeyRefusal('not_verified');
  const info = verified.registrationInfo;
  const row = await db
    .insertInto('admin_passkeys')
    .values({
      admin_user_id: input.adminUserId,
      credential_id: info.credential.id,
      public_key: Buffer.from(info.credential.publicKey).toString('base64url'),
      counter: info.credential.counter,
      transports: JSON.stringify(input.response.response.transports ?? []),
      name: input.name,
      device_type: info.credentialDeviceType,
      backed_up: info.credentialBackedUp,
      created_at: new Date(input.nowMs).toISOString(),
    })
    .onConflict((oc) => oc.column('credential_id').doNothing())
    .returning(LISTING_COLUMNS)
    .executeTakeFirst();
  if (!row) throw new PasskeyRefusal('already_registered');
  // Where a second factor is required, her keys may act with her role again (token look-up).
  tokensChanged(db);
  return { ...row, transports: [...row.transports] };
}

/**
 * The options of `navigator.credentials.get()`: for a sign-in any discoverable passkey of this
 * site (the browser offers them); at the second-factor step the account's own.
 */
export async function startAuthentication(
  db: Kysely<Database>,
  config: Config,
  input: { purpose: 'sign_in' | 'second_factor'; adminUserId?: string; nowMs: number; previous?: string },
): Promise<{ options: PublicKeyCredentialRequestOptionsJSON; ceremony: string }> {
  const rp = relyingParty(config);
  const allow =
    input.adminUserId === undefined
      ? []
      : await db.selectFrom('admin_passkeys').select(['credential_id', 'transports']).where('admin_user_id', '=', input.adminUserId).execute();
  const options = await generateAuthenticationOptions({
    rpID: rp.id,
    userVerification: 'required',
    timeout: config.ADMIN_PASSKEY_CHALLENGE_TTL_MS,
    allowCredentials: allow.map((row) => ({ id: row.credential_id, transports: row.transports as AuthenticatorTransportFuture[] })),
  });
  const ceremony = await keepChallenge(db, {
    purpose: input.purpose,
    challenge: options.challenge,
    nowMs: input.nowMs,
    ttlMs: config.ADMIN_PASSKEY_CHALLENGE_TTL_MS,
    previous: input.previous,
    adminUserId: input.adminUserId,
  });
  return { options, ceremony };
}

/**
 * Verifies an assertion and spends it: the challenge is taken (one use), the signature checked
 * against the stored key, the counter moved forward in one guarded UPDATE (a counter that does not
 * move forward, when the authenticator keeps one, is refused), last use recorded. For the second
 * factor, `adminUserId` is the account signing in: another account's passkey is refused. Answers
 * the account and passkey that passed.
 */
export async function finishAuthentication(
  db: Kysely<Database>,
  config: Config,
  input: { purpose: 'sign_in' | 'second_factor'; cookie: string | undefined; response: AuthenticationResponseJSON; nowMs: number; adminUserId?: string },
): Promise<{ adminUserId: string; passkeyId: string; name: string }> {
  const taken = await takeChallenge(db, { cookie: input.cookie, purpose: input.purpose, nowMs: input.nowMs });
  const passkey = await db
    .selectFrom('admin_passkeys')
    .select(['id', 'admin_user_id', 'credential_id', 'public_key', 'counter', 'transports', 'name'])
    .where('credential_id', '=', String(input.response.id))
    .executeTakeFirst();
  if (!passkey) throw new PasskeyRefusal('unknown_credential');
  const expectedAccount = input.adminUserId ?? taken.adminUserId ?? undefined;
  if (expectedAccount !== undefined && passkey.admin_user_id !== expectedAccount) throw new PasskeyRefusal('other_account');
  // A discoverable credential names its account: it must be the passkey's.
  const handle = input.response.response.userHandle;
  if (handle && Buffer.from(handle, 'base64url').toString() !== passkey.admin_user_id) throw new PasskeyRefusal('other_account');
  const rp = relyingParty(config);
  const stored = Number(passkey.counter);
  let verified: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
  try {
    verified = await verifyAuthenticationResponse({
      response: input.response,
      expectedChallenge: taken.challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      requireUserVerification: true,
      credential: {
        id: passkey.credential_id,
        publicKey: Buffer.from(passkey.public_key, 'base64url'),
        counter: stored,
        transports: passkey.transports as AuthenticatorTransportFuture[],
      },
    });
  } catch (error) {
    if (error instanceof Error && /counter/i.test(error.message)) throw new PasskeyRefusal('counter_regressed');
    throw new PasskeyRefusal('not_verified');
  }
  if (!verified.verified) throw new PasskeyRefusal('not_verified');
  const { newCounter, credentialBackedUp } = verified.authenticationInfo;
  // Guarded: of two answers verified at once against the same stored counter, one moves it.
  const spent = await db
    .updateTable('admin_passkeys')
    .set({ counter: newCounter, backed_up: credentialBackedUp, last_used_at: new Date(input.nowMs).toISOString() })
    .where('id', '=', passkey.id)
    .where('counter', '=', String(stored))
    .returning('id')
    .executeTakeFirst();
  if (!spent) throw new PasskeyRefusal('counter_regressed');
  return { adminUserId: passkey.admin_user_id, passkeyId: passkey.id, name: passkey.name };
}

/** Renames one of an administrator's passkeys; undefined when she has no such passkey. */
export async function renamePasskey(db: Kysely<Database>, adminUserId: string, id: string, name: string): Promise<PasskeyListing | undefined> {
  const row = await db
    .updateTable('admin_passkeys')
    .set({ name })
    .where('admin_user_id', '=', adminUserId)
    .where('id', '=', id)
    .returning(LISTING_COLUMNS)
    .executeTakeFirst();
  return row && { ...row, transports: [...row.transports] };
}

/** Removes one of an administrator's passkeys; the removed one, or undefined when she has no such passkey. */
export async function removePasskey(db: Kysely<Database>, adminUserId: string, id: string): Promise<PasskeyListing | undefined> {
  const row = await db.deleteFrom('admin_passkeys').where('admin_user_id', '=', adminUserId).where('id', '=', id).returning(LISTING_COLUMNS).executeTakeFirst();
  if (row) tokensChanged(db);
  return row && { ...row, transports: [...row.transports] };
}

/** Removes every passkey of an administrator (an owner turning off a lost device's second factor); how many. */
export async function removeAllPasskeys(db: Kysely<Database>, adminUserId: string): Promise<number> {
  const rows = await db.deleteFrom('admin_passkeys').where('admin_user_id', '=', adminUserId).returning('id').execute();
  if (rows.length > 0) tokensChanged(db);
  return rows.length;
}
