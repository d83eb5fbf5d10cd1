/**
 * Passkeys of administrators (decision 0063), through the dashboard's routes (inject) on every back
 * end, answered by a software authenticator (test/helpers/soft-authenticator.ts: real ES256
 * signatures, 'none' attestation): adding one (fresh proof), the list with names and last use,
 * renaming, removing (fresh proof), a usernameless sign-in, the second-factor step of a password
 * sign-in, and the owner's "require a second factor" counting a passkey. Every bad answer — replayed,
 * forged, of another origin, without user verification, a counter gone back, a challenge of another
 * browser or session, an expired one, an unknown passkey, another account's — is refused 4xx
 * problem+json naming why, grants nothing (no session cookie, no passkey stored) and is audited.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { SoftAuthenticator } from '../helpers/soft-authenticator.ts';

const PASSWORD = 'correct horse battery';
const ORIGIN = 'http://localhost:3999';
const START = 1_800_000_000_000;
const REAUTH_WINDOW = 300_000;
const CHALLENGE_TTL = 60_000;

function cookieOf(res: LightMyRequestResponse, name: string): string | undefined {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith(`${name}=`) && !c.startsWith(`${name}=;`));
  return line?.split(';')[0];
}
const sessionCookie = (res: LightMyRequestResponse) => cookieOf(res, 'store_admin_session');
const ceremonyCookie = (res: LightMyRequestResponse) => cookieOf(res, 'store_admin_passkey');

describe.each(backends)('passkeys (%s)', (backend) => {
  let t: TestApp;
  let now = START;
  let ip = 0;
  const nextIp = () => `10.7.0.${++ip}`;
  type Session = { cookie: string; csrf: string };
  const as = (s: Session, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object, ceremony?: string) =>
    t.app.inject({
      method,
      url: `/admin/api/v1${url}`,
      headers: { cookie: [s.cookie, ceremony].filter(Boolean).join('; '), 'x-csrf-token': s.csrf },
      payload,
      remoteAddress: '192.0.2.7',
    });
  const anonymous = (url: string, payload: object, cookie?: string) =>
    t.app.inject({ method: 'POST', url: `/admin${url}`, payload, headers: cookie ? { cookie } : {}, remoteAddress: nextIp() });
  async function signIn(email: string): Promise<Session> {
    const res = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email, password: PASSWORD }, remoteAddress: nextIp() });
    expect(res.statusCode, res.body).toBe(200);
    return { cookie: sessionCookie(res)!, csrf: res.json().data.csrf_token };
  }
  const audit = async (action: string) =>
    (await t.database.db.selectFrom('admin_audit_log').select(['action', 'details', 'target_id']).where('action', '=', action).orderBy('at').execute()).map(
      (r) => r.details as Record<string, unknown>,
    );
  const passkeyRows = async () => (await t.database.db.selectFrom('admin_passkeys').select(['id', 'admin_user_id', 'counter']).execute()).length;

  const OWNER = 'owner@example.com';
  const ADMIN = 'admin@example.com';
  let ownerId = '';
  let owner: Session;
  const ownerKey = new SoftAuthenticator('localhost', ORIGIN);
  const adminKey = new SoftAuthenticator('localhost', ORIGIN);

  /** Adds a passkey of `key` to the account of `s`: options, the authenticator's answer, the add. */
  async function addPasskey(s: Session, key: SoftAuthenticator, name: string) {
    const options = await as(s, 'POST', '/account/passkeys/options');
    expect(options.statusCode, options.body).toBe(200);
    const { response } = key.register(options.json().data);
    const added = await as(s, 'POST', '/account/passkeys', { name, credential: response }, ceremonyCookie(options));
    expect(added.statusCode, added.body).toBe(201);
    return added.json().data as { id: string; name: string; last_used_at: string | null };
  }
  /** Options of a passkey sign-in (or second-factor step): the options and the browser's ceremony cookie. */
  async function authOptions(purpose: 'sign_in' | 'second_factor') {
    const res = await anonymous('/session/passkey/options', { purpose });
    expect(res.statusCode, res.body).toBe(200);
    return { options: res.json().data as { challenge: string; userVerification: string }, cookie: ceremonyCookie(res)! };
  }

  /** A passkey sign-in with `credential` of `key`: the session. */
  async function passkeySignIn(key: SoftAuthenticator, credential = key.credentials[0]): Promise<Session> {
    const { options, cookie } = await authOptions('sign_in');
    const res = await anonymous('/session/passkey', { credential: key.assert(options, credential) }, cookie);
    expect(res.statusCode, res.body).toBe(200);
    return { cookie: sessionCookie(res)!, csrf: res.json().data.csrf_token };
  }

  beforeAll(async () => {
    t = await buildTestApp(
      backend,
      {
        PUBLIC_URL: ORIGIN,
        ADMIN_SIGN_IN_MAX_FAILURES: '3',
        ADMIN_REAUTH_WINDOW_MS: String(REAUTH_WINDOW),
        ADMIN_PASSKEY_CHALLENGE_TTL_MS: String(CHALLENGE_TTL),
      },
      { now: () => now },
    );
    ownerId = (await createAdminUser(t.database.db, { email: OWNER, password: PASSWORD })).id;
    await createAdminUser(t.database.db, { email: ADMIN, password: PASSWORD, role: 'admin' });
    owner = await signIn(OWNER);
  });
  afterAll(async () => t?.close());

  it('adds a passkey (options bound to this browser and session, user verification required) and lists it by name', async () => {
    const options = await as(owner, 'POST', '/account/passkeys/options');
    expect(options.statusCode, options.body).toBe(200);
    const data = options.json().data;
    expect(data.rp).toEqual({ id: 'localhost', name: 'Store Integration API' });
    expect(data.authenticatorSelection).toMatchObject({ residentKey: 'required', userVerification: 'required' });
    expect(data.attestation).toBe('none');
    expect(Buffer.from(data.user.id, 'base64url').toString()).toBe(ownerId);
    const set = ([options.headers['set-cookie']].flat() as string[]).find((c) => c.startsWith('store_admin_passkey='))!;
    expect(set).toMatch(/HttpOnly/i);
    expect(set).toMatch(/Path=\/admin/);

    const { response } = ownerKey.register(data);
    const added = await as(owner, 'POST', '/account/passkeys', { name: 'Laptop', credential: response }, ceremonyCookie(options));
    expect(added.statusCode, added.body).toBe(201);
    expect(added.json().data).toMatchObject({ name: 'Laptop', last_used_at: null, backed_up: false, transports: ['internal'] });

    // The same answer again: its ceremony is spent.
    const replayed = await as(owner, 'POST', '/account/passkeys', { name: 'Laptop again', credential: response }, ceremonyCookie(options));
    expect(replayed.statusCode).toBe(400);
    expect(replayed.headers['content-type']).toContain('application/problem+json');
    expect(replayed.json()).toMatchObject({ code: 'invalid_parameter', errors: [{ param: 'credential', message: 'no ceremony' }] });

    const list = await as(owner, 'GET', '/account/passkeys');
    expect(list.json().data.map((p: { name: string }) => p.name)).toEqual(['Laptop']);
    expect((await as(owner, 'GET', '/admins')).json().data.find((a: { email: string }) => a.email === OWNER).second_factor).toBe(true);
    expect(await audit('admin.passkey_added')).toHaveLength(1);
    expect((await audit('admin.passkey_refused')).map((d) => d.reason)).toEqual(['no_ceremony']);
  });

  it('refuses a forged attestation, one of another origin or without user verification, and a ceremony of another session', async () => {
    const bends = [
      [{ origin: 'http://evil.example' }, 'not verified'],
      [{ userVerified: false }, 'not verified'],
      [{ rpId: 'evil.example' }, 'not verified'],
      [{ challenge: Buffer.from('another challenge').toString('base64url') }, 'not verified'],
    ] as const;
    const before = await passkeyRows();
    for (const [bend, reason] of bends) {
      const options = await as(owner, 'POST', '/account/passkeys/options');
      const { response } = ownerKey.register(options.json().data, bend);
      const refused = await as(owner, 'POST', '/account/passkeys', { name: 'Bent', credential: response }, ceremonyCookie(options));
      expect(refused.statusCode, JSON.stringify(bend)).toBe(400);
      expect(refused.json().errors).toEqual([{ param: 'credential', message: reason }]);
    }
    // Options asked by one session, answered through another session of the same account.
    const other = await passkeySignIn(ownerKey, ownerKey.credentials[0]);
    const options = await as(owner, 'POST', '/account/passkeys/options');
    const { response } = ownerKey.register(options.json().data);
    const crossed = await as(other, 'POST', '/account/passkeys', { name: 'Crossed', credential: response }, ceremonyCookie(options));
    expect(crossed.json()).toMatchObject({ status: 400, errors: [{ param: 'credential', message: 'no ceremony' }] });
    expect(await passkeyRows()).toBe(before);
    ownerKey.credentials.splice(1);
  });

  it('asks for a fresh proof before adding or removing a passkey, with the window of every guarded action', async () => {
    now += REAUTH_WINDOW + 1_000;
    const options = await as(owner, 'POST', '/account/passkeys/options');
    expect(options.statusCode).toBe(403);
    expect(options.json().code).toBe('reauthentication_required');
    const [mine] = (await as(owner, 'GET', '/account/passkeys')).json().data;
    const remove = await as(owner, 'DELETE', `/account/passkeys/${mine.id}`);
    expect(remove.json().code).toBe('reauthentication_required');
    // Renaming grants nothing: no proof needed.
    const renamed = await as(owner, 'PATCH', `/account/passkeys/${mine.id}`, { name: 'Work laptop' });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json().data.name).toBe('Work laptop');
    expect((await as(owner, 'PATCH', `/account/passkeys/${mine.id}`, { name: '   ' })).statusCode).toBe(400);
    const proof = await as(owner, 'POST', '/account/reauthenticate', { password: PASSWORD });
    expect(proof.statusCode, proof.body).toBe(200);
    expect((await as(owner, 'POST', '/account/passkeys/options')).statusCode).toBe(200);
  });

  it('signs in with a passkey alone (usernameless), records its last use; the answer replayed grants nothing', async () => {
    const { options, cookie } = await authOptions('sign_in');
    expect(options.userVerification).toBe('required');
    const answer = ownerKey.assert(options, ownerKey.credentials[0]);
    const signedIn = await anonymous('/session/passkey', { credential: answer }, cookie);
    expect(signedIn.statusCode, signedIn.body).toBe(200);
    expect(signedIn.json().data).toMatchObject({ email: OWNER, role: 'owner', second_factor: { enabled: true } });
    const session = { cookie: sessionCookie(signedIn)!, csrf: signedIn.json().data.csrf_token };
    // A passkey sign-in is a fresh proof, as a password sign-in is.
    expect((await as(session, 'POST', '/account/passkeys/options')).statusCode).toBe(200);
    const [listed] = (await as(session, 'GET', '/account/passkeys')).json().data;
    expect(listed.last_used_at).toBe(new Date(now).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z'));
    expect((await audit('session.signed_in')).at(-1)).toMatchObject({ method: 'passkey', passkey: { name: 'Work laptop' } });

    const replayed = await anonymous('/session/passkey', { credential: answer }, cookie);
    expect(replayed.statusCode).toBe(401);
    expect(replayed.headers['content-type']).toContain('application/problem+json');
    expect(replayed.json()).toMatchObject({ code: 'unauthorized', errors: [{ param: 'credential', message: 'no ceremony' }] });
    expect(sessionCookie(replayed)).toBeUndefined();
    // Without any ceremony cookie at all.
    expect((await anonymous('/session/passkey', { credential: answer })).json().errors).toEqual([{ param: 'credential', message: 'no ceremony' }]);
  });

  it('refuses forged, mismatched, expired, cloned and unknown assertions, audited, with no session', async () => {
    const refusedWith = async (reason: string, make: (o: { challenge: string }) => object, cookieOf?: (c: string) => string) => {
      const { options, cookie } = await authOptions('sign_in');
      const res = await anonymous('/session/passkey', { credential: make(options) }, cookieOf ? cookieOf(cookie) : cookie);
      expect(res.statusCode, reason).toBe(401);
      expect(res.json().errors, reason).toEqual([{ param: 'credential', message: reason }]);
      expect(sessionCookie(res), reason).toBeUndefined();
    };
    const key = ownerKey.credentials[0]!;
    await refusedWith('not verified', (o) => ownerKey.assert(o, key, { forgeSignature: true }));
    await refusedWith('not verified', (o) => ownerKey.assert(o, key, { origin: 'https://evil.example' }));
    await refusedWith('not verified', (o) => ownerKey.assert(o, key, { userVerified: false }));
    await refusedWith('counter regressed', (o) => ownerKey.assert(o, key, { counter: 1 }));
    await refusedWith('other account', (o) => ownerKey.assert(o, key, { userHandle: Buffer.from('someone else').toString('base64url') }));
    // The challenge another browser was given, answered with this browser's ceremony.
    const elsewhere = await authOptions('sign_in');
    await refusedWith('not verified', () => ownerKey.assert(elsewhere.options, key));
    // A ceremony for the second-factor step is no sign-in ceremony.
    const stepOnly = await authOptions('second_factor');
    await refusedWith(
      'no ceremony',
      () => ownerKey.assert(stepOnly.options, key),
      () => stepOnly.cookie,
    );
    const stranger = new SoftAuthenticator('localhost', ORIGIN);
    stranger.register({ challenge: 'x', user: { id: Buffer.from(ownerId).toString('base64url') } });
    await refusedWith('unknown credential', (o) => stranger.assert(o));
    // An expired ceremony (the clock moved past ADMIN_PASSKEY_CHALLENGE_TTL_MS).
    const late = await authOptions('sign_in');
    now += CHALLENGE_TTL + 1;
    const expired = await anonymous('/session/passkey', { credential: ownerKey.assert(late.options, key) }, late.cookie);
    expect(expired.json()).toMatchObject({ status: 401, errors: [{ param: 'credential', message: 'expired' }] });

    const reasons = (await audit('admin.passkey_refused')).filter((d) => d.during === 'sign_in').map((d) => d.reason);
    expect(reasons).toEqual(expect.arrayContaining(['no_ceremony', 'not_verified', 'counter_regressed', 'other_account', 'unknown_credential', 'expired']));
    // No answer's bytes in the audit log.
    const details = JSON.stringify(await audit('admin.passkey_refused'));
    expect(details).not.toContain('clientDataJSON');
    expect(details).not.toContain('signature');
  });

  it('throttles refused passkey sign-ins per address, not for everyone', async () => {
    const from = '198.51.100.9';
    const attempt = async (remoteAddress: string, bend = { forgeSignature: true }) => {
      const options = await t.app.inject({ method: 'POST', url: '/admin/session/passkey/options', payload: { purpose: 'sign_in' }, remoteAddress });
      const answer = ownerKey.assert(options.json().data, ownerKey.credentials[0], bend);
      return t.app.inject({
        method: 'POST',
        url: '/admin/session/passkey',
        payload: { credential: answer },
        headers: { cookie: ceremonyCookie(options)! },
        remoteAddress,
      });
    };
    for (let i = 0; i < 3; i++) expect((await attempt(from)).statusCode).toBe(401);
    const throttled = await attempt(from, { forgeSignature: false });
    expect(throttled.statusCode).toBe(429);
    expect(throttled.headers['retry-after']).toBeDefined();
    expect(sessionCookie(throttled)).toBeUndefined();
    // Another address signs in with the passkey as before.
    const elsewhere = await attempt('198.51.100.10', { forgeSignature: false });
    expect(elsewhere.statusCode, elsewhere.body).toBe(200);
  });

  it('answers the second-factor step of a password sign-in; another account passkey is refused there', async () => {
    // The owner has a passkey and no TOTP: the password alone is not enough.
    const missing = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: OWNER, password: PASSWORD }, remoteAddress: nextIp() });
    expect(missing.statusCode).toBe(401);
    expect(missing.json()).toMatchObject({ code: 'second_factor_required', errors: [{ param: 'passkey', message: 'is required' }] });
    expect(sessionCookie(missing)).toBeUndefined();

    const admin = await signIn(ADMIN);
    await addPasskey(admin, adminKey, 'Phone');
    const signInWith = async (key: SoftAuthenticator) => {
      const { options, cookie } = await authOptions('second_factor');
      return t.app.inject({
        method: 'POST',
        url: '/admin/session',
        payload: { email: OWNER, password: PASSWORD, passkey: key.assert(options) },
        headers: { cookie },
        remoteAddress: nextIp(),
      });
    };
    const foreign = await signInWith(adminKey);
    expect(foreign.statusCode).toBe(401);
    expect(foreign.json()).toMatchObject({ code: 'invalid_second_factor', errors: [{ param: 'passkey', message: 'other account' }] });
    expect(sessionCookie(foreign)).toBeUndefined();
    const passed = await signInWith(ownerKey);
    expect(passed.statusCode, passed.body).toBe(200);
    expect((await audit('session.signed_in')).at(-1)).toMatchObject({ second_factor: 'passkey' });
    expect((await audit('admin.passkey_refused')).some((d) => d.reason === 'other_account' && d.during === 'sign_in')).toBe(true);
    owner = { cookie: sessionCookie(passed)!, csrf: passed.json().data.csrf_token };
  });

  it("counts a passkey for the owner's required second factor", async () => {
    expect((await as(owner, 'PATCH', '/settings/security', { require_second_factor: true })).statusCode).toBe(200);
    // The admin has a passkey and no TOTP: she may act.
    const admin = await signIn(ADMIN).catch(() => undefined);
    expect(admin).toBeUndefined();
    const { options, cookie } = await authOptions('sign_in');
    const viaPasskey = await anonymous('/session/passkey', { credential: adminKey.assert(options) }, cookie);
    expect(viaPasskey.json().data.second_factor).toEqual({ enabled: true, required: true });
    const session = { cookie: sessionCookie(viaPasskey)!, csrf: viaPasskey.json().data.csrf_token };
    expect((await as(session, 'GET', '/tokens')).statusCode).toBe(200);
    expect((await as(owner, 'PATCH', '/settings/security', { require_second_factor: false })).statusCode).toBe(200);
  });

  it("a reset link of an account whose second factor is a passkey asks for the passkey, not a code; another account's passkey is refused", async () => {
    const adminId = (await t.database.db.selectFrom('admin_users').select('id').where('email', '=', ADMIN).executeTakeFirstOrThrow()).id;
    const issued = await as(owner, 'POST', `/admins/${adminId}/password-reset`);
    expect(issued.statusCode, issued.body).toBe(201);
    const code = new URL(issued.json().data.url).hash.split('code=')[1]!;
    const check = await anonymous('/links/check', { code });
    expect(check.json().data).toMatchObject({ purpose: 'password_reset', email: ADMIN, second_factor: true, authenticator_app: false, passkey: true });
    const use = (extra: object = {}, cookie?: string) => anonymous('/links/use', { code, password: PASSWORD, ...extra }, cookie);
    // The link and the new password alone do not sign in past the passkey, nor does a code.
    for (const extra of [{}, { second_factor_code: '123456' }]) {
      const refused = await use(extra);
      expect(refused.statusCode, refused.body).toBe(401);
      expect(refused.json()).toMatchObject({ code: 'second_factor_required', errors: [{ param: 'passkey', message: 'is required' }] });
      expect(sessionCookie(refused)).toBeUndefined();
    }
    let ceremony = await authOptions('second_factor');
    const foreign = await use({ passkey: ownerKey.assert(ceremony.options) }, ceremony.cookie);
    expect(foreign.statusCode).toBe(401);
    expect(foreign.json()).toMatchObject({ code: 'invalid_second_factor', errors: [{ param: 'passkey', message: 'other account' }] });
    expect(sessionCookie(foreign)).toBeUndefined();
    // Nothing was spent: the link is still valid, and the account's own passkey passes.
    expect((await anonymous('/links/check', { code })).statusCode).toBe(200);
    ceremony = await authOptions('second_factor');
    const passed = await use({ passkey: adminKey.assert(ceremony.options) }, ceremony.cookie);
    expect(passed.statusCode, passed.body).toBe(200);
    expect(sessionCookie(passed)).toBeDefined();
    expect((await anonymous('/links/check', { code })).statusCode).toBe(409);
  });

  it('where single sign-on is required, a passkey opens no session in that store: refused 403, audited, the break-glass owner still signs in', async () => {
    // The settings as an owner saves them (the provider is not asked at sign-in): the test app's
    // store, its only one, requires SSO, its owner is the break-glass account.
    const store = await t.database.db.selectFrom('stores').select('id').executeTakeFirstOrThrow();
    await t.database.db
      .insertInto('store_sso_settings')
      .values({
        store_id: store.id,
        issuer: 'https://idp.example.com',
        client_id: 'store-api',
        client_secret_sealed: 'sealed',
        allowed_domains: JSON.stringify(['example.com']),
        role_claim: 'groups',
        role_map: JSON.stringify({}),
        default_role: null,
        require_sso: true,
        break_glass: JSON.stringify([ownerId]),
      } as never)
      .execute();
    try {
      const { options, cookie } = await authOptions('sign_in');
      const refused = await anonymous('/session/passkey', { credential: adminKey.assert(options, adminKey.credentials[0]) }, cookie);
      expect(refused.statusCode, refused.body).toBe(403);
      expect(refused.headers['content-type']).toContain('application/problem+json');
      expect(refused.json().detail).toMatch(/requires single sign-on/);
      expect(sessionCookie(refused)).toBeUndefined();
      expect((await audit('session.sign_in_failed')).at(-1)).toMatchObject({ email: ADMIN, reason: 'sso_required', method: 'passkey' });
      // The break-glass owner's passkey still opens a session.
      expect((await passkeySignIn(ownerKey)).cookie).toBeTruthy();
    } finally {
      await t.database.db.deleteFrom('store_sso_settings').execute();
    }
  });

  it('removes a passkey with a fresh proof; it signs in no more; another account cannot remove it', async () => {
    const [mine] = (await as(owner, 'GET', '/account/passkeys')).json().data;
    const admin = await passkeySignIn(adminKey);
    expect((await as(admin, 'DELETE', `/account/passkeys/${mine.id}`)).statusCode).toBe(404);
    const removed = await as(owner, 'DELETE', `/account/passkeys/${mine.id}`);
    expect(removed.statusCode, removed.body).toBe(200);
    expect((await as(owner, 'GET', '/account/passkeys')).json().data).toEqual([]);
    expect((await audit('admin.passkey_removed')).at(-1)).toMatchObject({ name: 'Work laptop' });
    const { options, cookie } = await authOptions('sign_in');
    const gone = await anonymous('/session/passkey', { credential: ownerKey.assert(options, ownerKey.credentials[0]) }, cookie);
    expect(gone.json()).toMatchObject({ status: 401, errors: [{ param: 'credential', message: 'unknown credential' }] });
    // No passkey and no TOTP: the password alone signs in again.
    owner = await signIn(OWNER);
  });

  it("an owner turning off an administrator's second factor removes her passkeys too", async () => {
    const adminId = (await t.database.db.selectFrom('admin_users').select('id').where('email', '=', ADMIN).executeTakeFirstOrThrow()).id;
    const before = await t.database.db.selectFrom('admin_passkeys').select('id').where('admin_user_id', '=', adminId).execute();
    expect(before).toHaveLength(1);
    const res = await as(owner, 'DELETE', `/admins/${adminId}/second-factor`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data.second_factor).toBe(false);
    expect(await t.database.db.selectFrom('admin_passkeys').select('id').where('admin_user_id', '=', adminId).execute()).toEqual([]);
    expect((await audit('admin.second_factor_removed')).at(-1)).toMatchObject({ email: ADMIN, passkeys: 1 });
  });
});
