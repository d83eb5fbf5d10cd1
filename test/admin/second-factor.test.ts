/**
 * The second factor of administrators (decision 0028), through the admin API (inject) on every back
 * end, with an injected clock moving across 30 s time steps (no sleeping): enrolment confirmed by a
 * first code; sign-in asking for the code; forged, replayed, expired and early codes and a recovery
 * code used twice each refused 401 problem+json naming what was wrong, spending nothing; the
 * sign-in throttle counting bad codes; the fresh proof before revealing a signing secret, minting a
 * write or admin key and changing roles; the owner's setting sending an administrator without a
 * second factor to enrol first; removal; and no code or secret in the audit log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import type { LightMyRequestResponse } from 'fastify';
import { Secret, TOTP } from 'otpauth';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { checkTotpCode } from '../../src/admin/sessions/second-factor.service.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { AUDIT_ACTIONS } from '../../src/admin/audit/audit-log.ts';

const PASSWORD = 'correct horse battery';
const STEP = 30_000;
/** Five seconds into a time step, so ±seconds never cross a step by accident. */
const START = 1_800_000_000_000 - (1_800_000_000_000 % STEP) + 5_000;

function cookieOf(res: LightMyRequestResponse): string | undefined {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='));
  return line?.split(';')[0];
}
const codeAt = (secret: string, at: number) =>
  new TOTP({ secret: Secret.fromBase32(secret), digits: 6, period: 30, algorithm: 'SHA1' }).generate({ timestamp: at });
/** Six digits that are no code of `secret` near `at` (a forgery). */
const forgedCode = (secret: string, at: number) =>
  ['000000', '123456', '654321', '999999'].find((c) => {
    const verdict = checkTotpCode(secret, c, at, null);
    return !verdict.ok && verdict.reason === 'wrong';
  })!;

describe('checkTotpCode (pure)', () => {
  const secret = new Secret({ size: 20 }).base32;
  it('accepts the current step and one either side, names the rest', () => {
    const step = Math.floor(START / STEP);
    expect(checkTotpCode(secret, codeAt(secret, START), START, null)).toEqual({ ok: true, step });
    expect(checkTotpCode(secret, codeAt(secret, START - STEP), START, null)).toEqual({ ok: true, step: step - 1 });
    expect(checkTotpCode(secret, codeAt(secret, START + STEP), START, null)).toEqual({ ok: true, step: step + 1 });
    expect(checkTotpCode(secret, codeAt(secret, START - 2 * STEP), START, null)).toEqual({ ok: false, reason: 'expired' });
    expect(checkTotpCode(secret, codeAt(secret, START + 2 * STEP), START, null)).toEqual({ ok: false, reason: 'early' });
    expect(checkTotpCode(secret, codeAt(secret, START), START, step)).toEqual({ ok: false, reason: 'reused' });
    expect(checkTotpCode(secret, codeAt(secret, START - STEP), START, step - 1)).toEqual({ ok: false, reason: 'reused' });
  });
});

describe('the audit log page', () => {
  it("names every action the audit log records, the second factor's included", () => {
    const page = readFileSync(new URL('../../src/admin/dashboard/public/assets/pages/audit-log.js', import.meta.url), 'utf8');
    const labelled = [...page.matchAll(/^ {2}'([a-z_.]+)': '/gm)].map((m) => m[1]);
    expect(labelled.sort()).toEqual([...AUDIT_ACTIONS].sort());
  });
});

describe.each(backends)('second factor (%s)', (backend) => {
  let t: TestApp;
  let now = START;
  let ip = 0;
  const nextIp = () => `10.2.0.${++ip}`;
  type Session = { cookie: string; csrf: string };
  const as = (s: Session, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { cookie: s.cookie, 'x-csrf-token': s.csrf }, payload, remoteAddress: '192.0.2.9' });
  const signInRaw = (email: string, extra: { code?: string; password?: string } = {}, remoteAddress = nextIp()) =>
    t.app.inject({
      method: 'POST',
      url: '/admin/session',
      payload: { email, password: extra.password ?? PASSWORD, ...(extra.code ? { code: extra.code } : {}) },
      remoteAddress,
    });
  async function signIn(email: string, code?: string): Promise<Session> {
    const res = await signInRaw(email, { code });
    expect(res.statusCode, res.body).toBe(200);
    return { cookie: cookieOf(res)!, csrf: res.json().data.csrf_token };
  }
  const lastStep = async (email: string) =>
    String((await t.database.db.selectFrom('admin_users').select('totp_last_step').where('email', '=', email).executeTakeFirstOrThrow()).totp_last_step);
  const failures = async (email: string) =>
    Number(
      (
        await t.database.db
          .selectFrom('admin_sign_in_failures')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('email', '=', email)
          .executeTakeFirstOrThrow()
      ).n,
    );
  const auditActions = async () => (await t.database.db.selectFrom('admin_audit_log').select(['action', 'details']).orderBy('id').execute()).map((r) => r);

  /** Enrols `s` (email) at the current clock: returns its secret and recovery codes. */
  async function enrol(s: Session): Promise<{ secret: string; recovery: string[] }> {
    const started = await as(s, 'POST', '/account/second-factor');
    expect(started.statusCode, started.body).toBe(201);
    const { secret } = started.json().data;
    const confirmed = await as(s, 'POST', '/account/second-factor/confirm', { code: codeAt(secret, now) });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    return { secret, recovery: confirmed.json().data.recovery_codes };
  }

  const OWNER = 'owner@example.com';
  const ADMIN = 'admin@example.com';
  const VIEWER = 'viewer@example.com';
  let owner: Session;
  let ownerSecret = '';
  let ownerRecovery: string[] = [];
  /** Every secret shown once; none may appear in the audit log. */
  const shown: string[] = [];

  beforeAll(async () => {
    t = await buildTestApp(backend, { ADMIN_SIGN_IN_MAX_FAILURES: '3', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }, { now: () => now });
    await createAdminUser(t.database.db, { email: OWNER, password: PASSWORD });
    await createAdminUser(t.database.db, { email: ADMIN, password: PASSWORD, role: 'admin' });
    await createAdminUser(t.database.db, { email: VIEWER, password: PASSWORD, role: 'viewer' });
    owner = await signIn(OWNER);
  });
  afterAll(async () => t?.close());

  it('enrols: a secret shown as text, an otpauth URI and a QR code, on only once a first right code confirms it', async () => {
    const started = await as(owner, 'POST', '/account/second-factor');
    expect(started.statusCode, started.body).toBe(201);
    expect(started.headers['cache-control']).toBe('no-store');
    const data = started.json().data;
    expect(data.secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(data.otpauth_uri).toMatch(/^otpauth:\/\/totp\/.*owner%40example\.com\?.*secret=[A-Z2-7]{32}/);
    expect(data.otpauth_uri).toContain('period=30');
    expect(data.qr_code).toMatch(/^data:image\/svg\+xml;base64,/);
    expect(Buffer.from(data.qr_code.split(',')[1], 'base64').toString()).toMatch(/^<svg/);
    ownerSecret = data.secret;
    shown.push(ownerSecret);

    const wrong = await as(owner, 'POST', '/account/second-factor/confirm', { code: forgedCode(ownerSecret, now) });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.headers['content-type']).toContain('application/problem+json');
    expect(wrong.json()).toMatchObject({ code: 'invalid_second_factor', errors: [{ param: 'code', message: 'wrong' }] });
    expect((await as(owner, 'GET', '/account/second-factor')).json().data).toMatchObject({ enabled: false, recovery_codes_left: 0 });
    // A refused code does not end the session (it is 401 for the code, not for the cookie).
    expect((await as(owner, 'GET', '/tokens')).statusCode).toBe(200);

    const confirmed = await as(owner, 'POST', '/account/second-factor/confirm', { code: codeAt(ownerSecret, now) });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    ownerRecovery = confirmed.json().data.recovery_codes;
    expect(ownerRecovery).toHaveLength(10);
    for (const c of ownerRecovery) expect(c).toMatch(/^[a-z2-7]{4}(-[a-z2-7]{4}){3}$/);
    shown.push(...ownerRecovery);
    expect(confirmed.json().data).toMatchObject({ enabled: true, recovery_codes_left: 10 });
    expect((await as(owner, 'GET', '/admins')).json().data.find((a: { email: string }) => a.email === OWNER).second_factor).toBe(true);
    expect((await as(owner, 'POST', '/account/second-factor')).statusCode).toBe(409);
    const actions = (await auditActions()).map((a) => a.action);
    expect(actions).toContain('admin.second_factor_enrolled');
    expect(actions).toContain('admin.second_factor_failed');
  });

  it('sign-in asks for the code after the password; a missing code counts no failure and writes no session', async () => {
    const before = await failures(OWNER);
    const missing = await signInRaw(OWNER);
    expect(missing.statusCode).toBe(401);
    expect(missing.json()).toMatchObject({ code: 'second_factor_required', errors: [{ param: 'code', message: 'is required' }] });
    expect(cookieOf(missing)).toBeUndefined();
    expect(await failures(OWNER)).toBe(before);
    // A wrong password with a code is still just a wrong password.
    expect((await signInRaw(OWNER, { password: 'not the password', code: codeAt(ownerSecret, now) })).json().code).toBe('unauthorized');
  });

  it('refuses a replayed, expired, early or forged code, naming it, spending nothing; the next step signs in once', async () => {
    const step = await lastStep(OWNER);
    // The code that confirmed the enrolment, replayed in the same step.
    const replayed = await signInRaw(OWNER, { code: codeAt(ownerSecret, now) });
    expect(replayed.statusCode).toBe(401);
    expect(replayed.json()).toMatchObject({ code: 'invalid_second_factor', errors: [{ param: 'code', message: 'reused' }] });
    expect(replayed.json().detail).toMatch(/already used/);
    expect(cookieOf(replayed)).toBeUndefined();

    now += 10 * STEP;
    const expired = await signInRaw(OWNER, { code: codeAt(ownerSecret, now - 3 * STEP) });
    expect(expired.json()).toMatchObject({ status: 401, code: 'invalid_second_factor', errors: [{ param: 'code', message: 'expired' }] });
    const early = await signInRaw(OWNER, { code: codeAt(ownerSecret, now + 3 * STEP) });
    expect(early.json()).toMatchObject({ status: 401, errors: [{ param: 'code', message: 'early' }] });
    const forged = await signInRaw(OWNER, { code: forgedCode(ownerSecret, now) });
    expect(forged.json()).toMatchObject({ status: 401, errors: [{ param: 'code', message: 'wrong' }] });
    expect(await lastStep(OWNER)).toBe(step);

    // One step back is still accepted (a code typed as it turned); then it cannot be used again, nor can older ones.
    const late = await signInRaw(OWNER, { code: codeAt(ownerSecret, now - STEP) });
    expect(late.statusCode, late.body).toBe(200);
    const again = await signInRaw(OWNER, { code: codeAt(ownerSecret, now - STEP) });
    expect(again.json().errors).toEqual([{ param: 'code', message: 'reused' }]);
    const current = await signInRaw(OWNER, { code: codeAt(ownerSecret, now) });
    expect(current.statusCode, current.body).toBe(200);
    owner = { cookie: cookieOf(current)!, csrf: current.json().data.csrf_token };
    expect(current.json().data.second_factor).toEqual({ enabled: true, required: false });
    const failed = (await auditActions()).filter((a) => a.action === 'admin.second_factor_failed').map((a) => (a.details as { reason: string }).reason);
    expect(failed).toEqual(expect.arrayContaining(['reused', 'expired', 'early', 'wrong']));
  });

  it('signs in with a recovery code once (any case, with or without dashes); the second use is refused', async () => {
    const code = ownerRecovery[0]!;
    const first = await signInRaw(OWNER, { code: code.toUpperCase().replace(/-/g, '') });
    expect(first.statusCode, first.body).toBe(200);
    const twice = await signInRaw(OWNER, { code });
    expect(twice.statusCode).toBe(401);
    expect(twice.json()).toMatchObject({ code: 'invalid_second_factor', errors: [{ param: 'code', message: 'recovery code used' }] });
    expect(cookieOf(twice)).toBeUndefined();
    const used = (await auditActions()).filter((a) => a.action === 'admin.recovery_code_used');
    expect(used.at(-1)?.details).toMatchObject({ during: 'sign_in', left: 9 });
    expect((await as(owner, 'GET', '/account/second-factor')).json().data.recovery_codes_left).toBe(9);
  });

  it('accepts a code sent by several sign-ins at once exactly once, and a recovery code too', async () => {
    const email = 'at-once@example.com';
    await createAdminUser(t.database.db, { email, password: PASSWORD, role: 'admin' });
    const { secret, recovery } = await enrol(await signIn(email));
    now += 2 * STEP;
    const code = codeAt(secret, now);
    const byCode = await Promise.all([1, 2, 3].map(() => signInRaw(email, { code })));
    expect(byCode.map((r) => r.statusCode).sort()).toEqual([200, 401, 401]);
    for (const refused of byCode.filter((r) => r.statusCode === 401)) {
      expect(refused.json().errors).toEqual([{ param: 'code', message: 'reused' }]);
      expect(cookieOf(refused)).toBeUndefined();
    }
    const byRecovery = await Promise.all([1, 2, 3].map(() => signInRaw(email, { code: recovery[0]! })));
    expect(byRecovery.map((r) => r.statusCode).sort()).toEqual([200, 401, 401]);
    for (const refused of byRecovery.filter((r) => r.statusCode === 401)) {
      expect(refused.json().errors).toEqual([{ param: 'code', message: 'recovery code used' }]);
    }
    const spent = (await auditActions()).filter((a) => a.action === 'admin.recovery_code_used' && (a.details as { left: number }).left === 9);
    expect(spent.length).toBeGreaterThanOrEqual(1);
  });

  it('counts bad codes like failed sign-ins: past the budget even the right code waits (429, Retry-After)', async () => {
    const email = 'throttled@example.com';
    await createAdminUser(t.database.db, { email, password: PASSWORD, role: 'admin' });
    const s = await signIn(email);
    const { secret } = await enrol(s);
    now += 2 * STEP;
    const from = '198.51.100.20';
    for (let i = 0; i < 3; i++) expect((await signInRaw(email, { code: forgedCode(secret, now) }, from)).statusCode).toBe(401);
    const throttled = await signInRaw(email, { code: codeAt(secret, now) }, from);
    expect(throttled.statusCode).toBe(429);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    expect(await lastStep(email)).toBe(String(Math.floor((now - 2 * STEP) / STEP)));
  });

  it("counts a password change's wrong current password like a failed sign-in: a session cannot guess it unthrottled", async () => {
    const email = 'guessed@example.com';
    await createAdminUser(t.database.db, { email, password: PASSWORD, role: 'admin' });
    const s = await signIn(email);
    const from = '198.51.100.21';
    const change = (current: string) =>
      t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/account/password',
        headers: { cookie: s.cookie, 'x-csrf-token': s.csrf },
        payload: { current_password: current, new_password: 'a brand new password' },
        remoteAddress: from,
      });
    for (let i = 0; i < 3; i++) {
      const wrong = await change(`guess number ${i}`);
      expect(wrong.statusCode).toBe(400);
      expect(wrong.json().errors).toEqual([{ param: 'current_password', message: 'is wrong' }]);
    }
    expect(await failures(email)).toBe(3);
    // Past the budget even the right password waits, as at the sign-in and the re-proof.
    const throttled = await change(PASSWORD);
    expect(throttled.statusCode, throttled.body).toBe(429);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    expect((await signInRaw(email)).statusCode).toBe(200);
  });

  it('a password-reset link does not sign in past a second factor: it asks for a code and is spent only with a right one', async () => {
    const email = 'reset@example.com';
    const user = await createAdminUser(t.database.db, { email, password: PASSWORD, role: 'admin' });
    const { secret } = await enrol(await signIn(email));
    now += 2 * STEP;
    const issued = await as(owner, 'POST', `/admins/${user.id}/password-reset`);
    expect(issued.statusCode, issued.body).toBe(201);
    const code = new URL(issued.json().data.url).hash.split('code=')[1]!;
    const check = () => t.app.inject({ method: 'POST', url: '/admin/links/check', payload: { code }, remoteAddress: '198.51.100.22' });
    const use = (extra: object = {}) =>
      t.app.inject({ method: 'POST', url: '/admin/links/use', payload: { code, password: 'a new password, reset', ...extra }, remoteAddress: '198.51.100.22' });
    expect((await check()).json().data).toMatchObject({ purpose: 'password_reset', email, second_factor: true });

    const missing = await use();
    expect(missing.statusCode, missing.body).toBe(401);
    expect(missing.json()).toMatchObject({ code: 'second_factor_required', errors: [{ param: 'second_factor_code', message: 'is required' }] });
    expect(cookieOf(missing)).toBeUndefined();
    // A password the reset refuses is said before any code is looked at (no code is spent or counted on it).
    const before = await failures(email);
    const short = await use({ password: 'short', second_factor_code: forgedCode(secret, now) });
    expect(short.statusCode).toBe(400);
    expect(short.json().errors[0].param).toBe('password');
    expect(await failures(email)).toBe(before);
    const wrong = await use({ second_factor_code: forgedCode(secret, now) });
    expect(wrong.json()).toMatchObject({ status: 401, code: 'invalid_second_factor' });
    expect(cookieOf(wrong)).toBeUndefined();
    expect(await failures(email)).toBe(before + 1);
    // Nothing was spent or changed: the link is still valid, the old password still signs in.
    expect((await check()).statusCode).toBe(200);
    expect((await signInRaw(email, { code: codeAt(secret, now) })).statusCode).toBe(200);

    now += STEP;
    const used = await use({ second_factor_code: codeAt(secret, now) });
    expect(used.statusCode, used.body).toBe(200);
    expect(cookieOf(used)).toBeDefined();
    expect((await check()).statusCode).toBe(409);
  });

  it('asks a fresh proof before revealing a signing secret, minting a write or admin key, changing roles; a password or a code gives it', async () => {
    const endpoint = await as(owner, 'POST', '/webhooks/endpoints', { url: 'http://127.0.0.1:9/hook', event_types: ['product.created'] });
    expect(endpoint.statusCode, endpoint.body).toBe(201);
    const endpointId = endpoint.json().data.id;
    shown.push(endpoint.json().data.secret);
    const admin = await t.database.db.selectFrom('admin_users').select('id').where('email', '=', ADMIN).executeTakeFirstOrThrow();
    // Signed in just now: the sign-in is the proof.
    expect((await as(owner, 'GET', `/webhooks/endpoints/${endpointId}/secret`)).statusCode).toBe(200);

    now += 5 * 60_000 + 1;
    const secret = await as(owner, 'GET', `/webhooks/endpoints/${endpointId}/secret`);
    expect(secret.statusCode).toBe(403);
    expect(secret.json()).toMatchObject({ code: 'reauthentication_required' });
    expect(secret.body).not.toContain('whsec_');
    expect((await as(owner, 'POST', `/webhooks/endpoints/${endpointId}/rotate-secret`)).json().code).toBe('reauthentication_required');
    const adminKey = await as(owner, 'POST', '/tokens', { name: 'ops', scopes: ['admin'] });
    expect(adminKey.json().code).toBe('reauthentication_required');
    expect((await as(owner, 'PATCH', `/admins/${admin.id}`, { role: 'viewer' })).json().code).toBe('reauthentication_required');
    // Keys made by the operator (no session, no proof needed) to be rolled below.
    const adminKeyId = (await createToken(t.database.db, { name: 'ops-made', scopes: ['admin'] })).summary.id;
    const readKeyId = (await createToken(t.database.db, { name: 'reader-made', scopes: ['products:read'] })).summary.id;
    const hashesBefore = (await t.database.db.selectFrom('api_tokens').select('token_hash').orderBy('id').execute()).map((r) => r.token_hash);
    // A stale cookie may not mint even a read key, make or unmake administrators, hand out
    // a password-reset link, move a maker's keys, or send store data to a new URL.
    const readKey = await as(owner, 'POST', '/tokens', { name: 'reader', scopes: ['products:read'] });
    expect(readKey.statusCode, readKey.body).toBe(403);
    expect(readKey.json()).toMatchObject({ code: 'reauthentication_required' });
    const linksBefore = (await t.database.db.selectFrom('admin_links').select('id').execute()).length;
    const stale = [
      await as(owner, 'POST', '/admins/invitations', { email: 'attacker@example.com', role: 'owner' }),
      await as(owner, 'POST', `/admins/${admin.id}/password-reset`),
      await as(owner, 'DELETE', `/admins/${admin.id}`),
      await as(owner, 'POST', `/tokens/made-by/operator/transfer`, { to_admin_id: admin.id }),
      await as(owner, 'POST', '/webhooks/endpoints', { url: 'http://127.0.0.1:9/elsewhere', event_types: ['product.created'] }),
      await as(owner, 'PATCH', `/webhooks/endpoints/${endpointId}`, { url: 'http://127.0.0.1:9/elsewhere' }),
      // Rolling shows a new secret: a write or admin key's (this suite once passed without this) and a read key's.
      await as(owner, 'POST', `/tokens/${adminKeyId}/roll`, { overlap_seconds: 0 }),
      await as(owner, 'POST', `/tokens/${readKeyId}/roll`, { overlap_seconds: 0 }),
    ];
    for (const res of stale) {
      expect(res.statusCode, res.body).toBe(403);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.json().code).toBe('reauthentication_required');
      expect(res.body).not.toContain('/admin#/');
    }
    // A change that sends nothing elsewhere needs no proof.
    expect((await as(owner, 'PATCH', `/webhooks/endpoints/${endpointId}`, { description: 'renamed' })).statusCode).toBe(200);
    // Nothing was written by the refusals.
    expect((await t.database.db.selectFrom('api_tokens').select('name').orderBy('name').execute()).map((r) => r.name)).toEqual(['ops-made', 'reader-made']);
    expect((await t.database.db.selectFrom('api_tokens').select('token_hash').orderBy('id').execute()).map((r) => r.token_hash)).toEqual(hashesBefore);
    expect((await t.database.db.selectFrom('admin_links').select('id').execute()).length).toBe(linksBefore);
    expect((await t.database.db.selectFrom('webhook_endpoints').select('url').execute()).map((r) => r.url)).toEqual(['http://127.0.0.1:9/hook']);
    expect((await t.database.db.selectFrom('admin_users').select('role').where('id', '=', admin.id).executeTakeFirstOrThrow()).role).toBe('admin');

    const wrongPassword = await as(owner, 'POST', '/account/reauthenticate', { password: 'not it at all' });
    expect(wrongPassword.statusCode).toBe(400);
    expect(wrongPassword.json().errors).toEqual([{ param: 'password', message: 'is wrong' }]);
    const both = await as(owner, 'POST', '/account/reauthenticate', { password: PASSWORD, code: '123456' });
    expect(both.statusCode).toBe(400);
    const byPassword = await as(owner, 'POST', '/account/reauthenticate', { password: PASSWORD });
    expect(byPassword.statusCode, byPassword.body).toBe(200);
    const revealed = await as(owner, 'GET', `/webhooks/endpoints/${endpointId}/secret`);
    expect(revealed.statusCode).toBe(200);
    expect(revealed.json().data.secret).toMatch(/^whsec_/);
    const minted = await as(owner, 'POST', '/tokens', { name: 'ops', scopes: ['admin'] });
    expect(minted.statusCode, minted.body).toBe(201);
    shown.push(minted.json().data.token);

    now += 5 * 60_000 + 1;
    expect((await as(owner, 'PATCH', `/admins/${admin.id}`, { role: 'viewer' })).json().code).toBe('reauthentication_required');
    const code = codeAt(ownerSecret, now);
    const byCode = await as(owner, 'POST', '/account/reauthenticate', { code });
    expect(byCode.statusCode, byCode.body).toBe(200);
    // The same code cannot prove twice.
    const replay = await as(owner, 'POST', '/account/reauthenticate', { code });
    expect(replay.json()).toMatchObject({ status: 401, code: 'invalid_second_factor', errors: [{ param: 'code', message: 'reused' }] });
    const changed = await as(owner, 'PATCH', `/admins/${admin.id}`, { role: 'viewer' });
    expect(changed.statusCode, changed.body).toBe(200);
    expect((await as(owner, 'PATCH', `/admins/${admin.id}`, { role: 'admin' })).statusCode).toBe(200);
    const actions = (await auditActions()).map((a) => a.action);
    expect(actions).toContain('admin.reauthenticated');
    expect(actions).toContain('admin.reauthentication_failed');
  });

  it('a viewer receives no signing secret from the API', async () => {
    const viewer = await signIn(VIEWER);
    const endpoints = await as(owner, 'GET', '/webhooks/endpoints');
    const id = endpoints.json().data[0].id;
    const res = await as(viewer, 'GET', `/webhooks/endpoints/${id}/secret`);
    expect(res.statusCode).toBe(403);
    expect(res.body).not.toContain('whsec_');
    expect(JSON.stringify((await as(viewer, 'GET', `/webhooks/endpoints/${id}`)).json())).not.toContain('whsec_');
  });

  it('the owner may require a second factor of everyone (signed in, owner only); an administrator without one must enrol first', async () => {
    const admin = await signIn(ADMIN);
    expect((await as(admin, 'PATCH', '/settings/security', { require_second_factor: true })).statusCode).toBe(403);
    // An admin key she made before the requirement.
    const made = await as(admin, 'POST', '/tokens', { name: 'her admin key', scopes: ['admin', 'products:read'] });
    expect(made.statusCode, made.body).toBe(201);
    const herKey = { authorization: `Bearer ${made.json().data.token as string}` };
    const herKeyId = made.json().data.id as string;
    shown.push(made.json().data.token);
    const customer = (n: number) => ({
      method: 'POST' as const,
      url: '/admin/api/v1/customers',
      headers: herKey,
      payload: { name: `C${n}`, email: `c${n}@example.com` },
    });
    expect((await t.app.inject(customer(1))).statusCode).toBe(201);
    const { token } = await createToken(t.database.db, { name: 'owner-ish', scopes: ['admin'] });
    const byKey = await t.app.inject({
      method: 'PATCH',
      url: '/admin/api/v1/settings/security',
      headers: { authorization: `Bearer ${token}` },
      payload: { require_second_factor: true },
    });
    expect(byKey.statusCode).toBe(403);
    expect(byKey.json().code).toBe('forbidden');
    expect((await as(owner, 'GET', '/settings/security')).json().data).toEqual({ require_second_factor: false });

    now += 5 * 60_000 + 1;
    expect((await as(owner, 'PATCH', '/settings/security', { require_second_factor: true })).json().code).toBe('reauthentication_required');
    owner = await signIn(OWNER, codeAt(ownerSecret, now));
    const set = await as(owner, 'PATCH', '/settings/security', { require_second_factor: true });
    expect(set.statusCode, set.body).toBe(200);
    const entry = (await auditActions()).filter((a) => a.action === 'settings.second_factor_requirement_changed').at(-1);
    expect(entry?.details).toEqual({ require_second_factor: { from: false, to: true } });

    // Her key acts as a viewer while she has no second factor: it reads, it writes nothing.
    const refused = await t.app.inject(customer(2));
    expect(refused.statusCode).toBe(403);
    expect(refused.headers['content-type']).toContain('application/problem+json');
    expect(refused.json().detail).toMatch(/admin@example\.com has no second factor, which an owner of this store requires/);
    expect(
      (await t.app.inject({ method: 'POST', url: '/admin/api/v1/tokens', headers: herKey, payload: { name: 'more', scopes: ['admin'] } })).statusCode,
    ).toBe(403);
    expect((await t.app.inject({ url: '/admin/api/v1/tokens', headers: herKey })).statusCode).toBe(200);
    // The owner's alerts list it.
    const alerts = (await as(owner, 'GET', '/alerts')).json().data;
    expect(alerts.keys_without_second_factor).toEqual([{ id: herKeyId, name: 'her admin key', prefix: expect.any(String), maker_email: ADMIN }]);
    expect(alerts.attention).toBe(true);

    // The admin's session is now held to enrolling first.
    const blocked = await as(admin, 'GET', '/tokens');
    expect(blocked.statusCode).toBe(403);
    expect(blocked.json().code).toBe('second_factor_enrolment_required');
    expect((await as(admin, 'POST', '/tokens', { name: 'x', scopes: ['products:read'] })).json().code).toBe('second_factor_enrolment_required');
    const who = await t.app.inject({ url: '/admin/session', headers: { cookie: admin.cookie } });
    expect(who.json().data.second_factor).toEqual({ enabled: false, required: true });
    // Its sign-in is older than the proof window: the password proves it again, then it enrols.
    expect((await as(admin, 'POST', '/account/second-factor')).json().code).toBe('reauthentication_required');
    expect((await as(admin, 'POST', '/account/reauthenticate', { password: PASSWORD })).statusCode).toBe(200);
    await enrol(admin);
    expect((await as(admin, 'GET', '/tokens')).statusCode).toBe(200);
    // Enrolled: her key writes again, and the alert is gone.
    expect((await t.app.inject(customer(3))).statusCode).toBe(201);
    expect((await as(owner, 'GET', '/alerts')).json().data.keys_without_second_factor).toEqual([]);
    // An API key has no second factor to set up: the setting does not lock keys out.
    expect((await t.app.inject({ url: '/admin/api/v1/tokens', headers: { authorization: `Bearer ${token}` } })).statusCode).toBe(200);
  });

  it('removes a second factor (fresh proof): one’s own, or an owner for someone who lost theirs', async () => {
    const viewer = await signIn(VIEWER);
    // The setting is on: the viewer must enrol first, then turns it off again.
    expect((await as(viewer, 'GET', '/admins')).json().code).toBe('second_factor_enrolment_required');
    const { secret } = await enrol(viewer);
    now += 5 * 60_000 + 1;
    expect((await as(viewer, 'DELETE', '/account/second-factor')).json().code).toBe('reauthentication_required');
    now += STEP;
    expect((await as(viewer, 'POST', '/account/reauthenticate', { code: codeAt(secret, now) })).statusCode).toBe(200);
    const removed = await as(viewer, 'DELETE', '/account/second-factor');
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json().data).toMatchObject({ enabled: false, recovery_codes_left: 0, required: true });
    expect((await as(viewer, 'GET', '/admins')).json().code).toBe('second_factor_enrolment_required');

    // The admin lost the device: an owner turns it off; the admin signs in with the password alone and must enrol again.
    const adminRow = await t.database.db.selectFrom('admin_users').select('id').where('email', '=', ADMIN).executeTakeFirstOrThrow();
    now += STEP;
    owner = await signIn(OWNER, codeAt(ownerSecret, now));
    expect((await as(owner, 'DELETE', `/admins/${adminRow.id}/second-factor`)).json().data).toMatchObject({ email: ADMIN, second_factor: false });
    const admin = await signIn(ADMIN);
    expect((await as(admin, 'GET', '/tokens')).json().code).toBe('second_factor_enrolment_required');
    const removals = (await auditActions()).filter((a) => a.action === 'admin.second_factor_removed');
    expect(removals).toHaveLength(2);
  });

  it('no code, secret or recovery code ever reaches the audit log', async () => {
    const log = JSON.stringify(await t.database.db.selectFrom('admin_audit_log').selectAll().execute());
    expect(shown.length).toBeGreaterThan(12);
    for (const secret of shown) expect(log).not.toContain(secret);
    expect(log).not.toContain(ownerSecret);
  });
});
