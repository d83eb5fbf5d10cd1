/**
 * Single sign-on with OpenID Connect (decision 0062) at the HTTP level, against a real provider
 * (`oidc-provider` in-process on loopback, test/helpers/oidc-provider-kit.ts), on every back end:
 * the owner's configuration (fresh proof, sealed secret, https issuers), the first sign-in making
 * the account with the role of the claim, later sign-ins updating it, require-SSO refusing
 * passwords but the break-glass owner's, a removed member refused at the next sign-in, and every
 * forged, replayed or mismatched answer refused with a page (or problem+json), nothing granted,
 * an audit entry written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { startOidcProvider, type OidcProviderKit } from '../helpers/oidc-provider-kit.ts';
import { addMembership, createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { createStore } from '../../src/stores/store.service.ts';
import { inStore } from '../../src/db/store-scope.ts';
import { saveSsoSettings, roleFromClaim, issuerUrlProblem, domainAllowed } from '../../src/admin/sessions/sso.service.ts';

const APP_URL = 'http://app.test';
const CLIENT = { client_id: 'store-dashboard', client_secret: 'dashboard-client-secret-0123456789', redirect_uris: [`${APP_URL}/admin/sso/callback`] };
const OTHER_CLIENT = { client_id: 'other-app', client_secret: 'other-client-secret-0123456789', redirect_uris: ['http://other.test/cb'] };
const OWNER = 'owner@corp.example';
const PASSWORD = 'correct horse battery';
const KEY = Buffer.alloc(32, 7).toString('base64');

function cookieNamed(res: LightMyRequestResponse, name: string): string | undefined {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith(`${name}=`) && !c.startsWith(`${name}=;`));
  return line?.split(';')[0];
}

describe('single sign-on decisions', () => {
  it('maps a claim to the highest role of its values, else the default or none', () => {
    const map = { 'erp-owners': 'owner', 'erp-admins': 'admin', staff: 'viewer' } as const;
    expect(roleFromClaim(['staff', 'erp-admins'], map, null)).toBe('admin');
    expect(roleFromClaim('erp-owners', map, null)).toBe('owner');
    expect(roleFromClaim(['other'], map, null)).toBeNull();
    expect(roleFromClaim(undefined, map, 'viewer')).toBe('viewer');
    expect(roleFromClaim(['__proto__', 'constructor'], map, null)).toBeNull();
  });
  it('allows exact domains only, and plain http only for loopback issuers when private URLs are allowed', () => {
    expect(domainAllowed('a@corp.example', ['corp.example'])).toBe(true);
    expect(domainAllowed('a@evil.corp.example', ['corp.example'])).toBe(false);
    expect(domainAllowed('a@corp.example.evil', ['corp.example'])).toBe(false);
    expect(issuerUrlProblem('https://login.example.com/tenant', false)).toBeUndefined();
    expect(issuerUrlProblem('http://127.0.0.1:8080', true)).toBeUndefined();
    expect(issuerUrlProblem('http://127.0.0.1:8080', false)).toMatch(/https/);
    expect(issuerUrlProblem('http://login.example.com', true)).toMatch(/https/);
    expect(issuerUrlProblem('https://login.example.com/?x=1', false)).toMatch(/query/);
  });
});

describe.each(backends)('single sign-on with OpenID Connect (%s)', (backend) => {
  let t: TestApp;
  let kit: OidcProviderKit;
  let clock = Date.now();
  let ip = 0;
  let owner: { cookie: string; csrf: string; id: string };

  async function passwordSignIn(email: string, password = PASSWORD) {
    return t.app.inject({ method: 'POST', url: '/admin/session', payload: { email, password }, remoteAddress: `10.9.0.${++ip}` });
  }

  async function api(method: 'GET' | 'PUT' | 'DELETE', url: string, payload?: unknown) {
    return t.app.inject({ method, url: `/admin/api/v1${url}`, payload: payload as object, headers: { cookie: owner.cookie, 'x-csrf-token': owner.csrf } });
  }

  function settings(overrides: Record<string, unknown> = {}) {
    return {
      issuer: kit.issuer,
      client_id: CLIENT.client_id,
      client_secret: CLIENT.client_secret,
      allowed_domains: ['corp.example'],
      role_claim: 'groups',
      role_map: { 'erp-owners': 'owner', 'erp-admins': 'admin', 'erp-viewers': 'viewer' },
      default_role: null,
      require_sso: false,
      break_glass: [],
      ...overrides,
    };
  }

  /** Starts a sign-in as `subject` for `email`, through the provider, to the callback URL and the attempt cookie. */
  async function toCallback(email: string, subject: string): Promise<{ url: URL; cookie: string }> {
    kit.signInAs(subject);
    const start = await t.app.inject({ url: `/admin/sso/start?email=${encodeURIComponent(email)}` });
    expect(start.statusCode, start.body).toBe(303);
    const cookie = cookieNamed(start, 'store_admin_sso');
    expect(String(start.headers['set-cookie'])).toMatch(/store_admin_sso=[A-Za-z0-9_-]{43}; Max-Age=600; Path=\/admin\/sso; HttpOnly; SameSite=Lax/);
    const url = await kit.followToCallback(String(start.headers.location));
    expect(url.origin + url.pathname).toBe(`${APP_URL}/admin/sso/callback`);
    return { url, cookie: cookie! };
  }

  async function callback(to: { url: URL; cookie?: string }, headers: Record<string, string> = {}) {
    return t.app.inject({ url: to.url.pathname + to.url.search, headers: { ...(to.cookie ? { cookie: to.cookie } : {}), ...headers } });
  }

  async function ssoSignIn(email: string, subject = email) {
    return callback(await toCallback(email, subject));
  }

  async function lastAudit(action: string) {
    return t.database.db
      .selectFrom('admin_audit_log')
      .selectAll()
      .where('action', '=', action)
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  async function expectRefused(res: LightMyRequestResponse, status: number, reason: string, text: RegExp) {
    expect(res.statusCode, res.body).toBe(status);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toContain('Single sign-on refused');
    expect(res.body).toMatch(text);
    expect(cookieNamed(res, 'store_admin_session')).toBeUndefined();
    const entry = await lastAudit('session.sso_refused');
    expect(entry?.details, JSON.stringify(entry?.details)).toMatchObject({ reason });
  }

  beforeAll(async () => {
    kit = await startOidcProvider({ clients: [CLIENT, OTHER_CLIENT] });
    for (const [sub, groups] of [
      ['ada@corp.example', ['erp-admins']],
      ['vic@corp.example', ['erp-viewers']],
      ['nobody@corp.example', ['marketing']],
      ['out@elsewhere.example', ['erp-admins']],
      ['gone@corp.example', ['erp-admins']],
      ['pat@corp.example', ['erp-admins']],
    ] as const) {
      kit.people.set(sub, { email: sub, email_verified: true, groups });
    }
    kit.people.set('unverified@corp.example', { email: 'unverified@corp.example', email_verified: false, groups: ['erp-admins'] });
    t = await buildTestApp(
      backend,
      { WEBHOOK_CREDENTIALS_KEY: KEY, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', PUBLIC_URL: APP_URL, ADMIN_SESSION_TTL_MS: '3600000' },
      { now: () => clock },
    );
    const user = await createAdminUser(t.database.db, { email: OWNER, password: PASSWORD });
    const res = await passwordSignIn(OWNER);
    expect(res.statusCode).toBe(200);
    owner = { cookie: cookieNamed(res, 'store_admin_session')!, csrf: res.json().data.csrf_token, id: user.id };
  });
  afterAll(async () => {
    await t?.close();
    await kit?.close();
  });

  it('refuses a sign-in where no store uses SSO', async () => {
    const res = await t.app.inject({ url: '/admin/sso/start?email=ada@corp.example' });
    await expectRefused(res, 404, 'sso_not_configured', /No store uses single sign-on for &#39;ada@corp.example&#39;/);
  });

  it('needs a fresh proof, an https (or test loopback) issuer and the sealing key to configure SSO', async () => {
    clock += t.ctx.config.ADMIN_REAUTH_WINDOW_MS + 1000;
    const stale = await api('PUT', '/settings/sso', settings());
    expect(stale.statusCode).toBe(403);
    expect(stale.json().code).toBe('reauthentication_required');
    const proof = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/account/reauthenticate',
      payload: { password: PASSWORD },
      headers: { cookie: owner.cookie, 'x-csrf-token': owner.csrf },
    });
    expect(proof.statusCode).toBe(200);
    const http = await api('PUT', '/settings/sso', settings({ issuer: 'http://login.corp.example' }));
    expect(http.statusCode).toBe(400);
    expect(http.json().errors[0].param).toBe('issuer');
    await expect(
      saveSsoSettings(t.database.db, {
        ...settings(),
        role_map: {},
        storeId: '00000000-0000-0000-0000-000000000000',
        by: OWNER,
        keys: undefined,
        allowLoopbackHttp: true,
      }),
    ).rejects.toMatchObject({ code: 'conflict' });
    expect((await api('GET', '/settings/sso')).json()).toEqual({ data: null });
  });

  it('saves the configuration with the client secret sealed, never shown', async () => {
    const res = await api('PUT', '/settings/sso', settings());
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ issuer: kit.issuer, client_id: CLIENT.client_id, client_secret: 'set', require_sso: false });
    expect(res.body).not.toContain(CLIENT.client_secret);
    const row = await t.database.db.selectFrom('store_sso_settings').select('client_secret_sealed').executeTakeFirstOrThrow();
    expect(row.client_secret_sealed).toMatch(/^v1:[0-9a-f]{8}:/);
    expect(row.client_secret_sealed).not.toContain(CLIENT.client_secret);
    const entry = await lastAudit('settings.sso_changed');
    expect(JSON.stringify(entry?.details)).not.toContain(CLIENT.client_secret);
  });

  it('makes the account just in time on a first sign-in, with the role of the claim, and opens a session', async () => {
    const res = await ssoSignIn('ada@corp.example');
    expect(res.statusCode, res.body).toBe(303);
    expect(res.headers.location).toBe('/admin');
    const session = cookieNamed(res, 'store_admin_session');
    expect(session).toBeDefined();
    const current = await t.app.inject({ url: '/admin/session', headers: { cookie: session! } });
    expect(current.json().data).toMatchObject({ email: 'ada@corp.example', role: 'admin' });
    expect((await lastAudit('admin.joined'))?.details).toMatchObject({ via: 'sso', role: 'admin' });
    expect((await lastAudit('session.signed_in'))?.details).toMatchObject({ method: 'sso' });
  });

  it('changes the role at a later sign-in when the claim changed', async () => {
    kit.people.set('ada@corp.example', { email: 'ada@corp.example', email_verified: true, groups: ['erp-viewers'] });
    const res = await ssoSignIn('ada@corp.example');
    expect(res.statusCode, res.body).toBe(303);
    const current = await t.app.inject({ url: '/admin/session', headers: { cookie: cookieNamed(res, 'store_admin_session')! } });
    expect(current.json().data.role).toBe('viewer');
    expect((await lastAudit('admin.role_changed'))?.details).toMatchObject({ via: 'sso', from: 'admin', to: 'viewer' });
  });

  it('refuses a claim no role maps to, an email outside the domains and an unverified email: no account made', async () => {
    await expectRefused(await ssoSignIn('nobody@corp.example'), 403, 'no_role', /No role of this store/);
    await expectRefused(await ssoSignIn('ada@corp.example', 'out@elsewhere.example'), 403, 'domain_not_allowed', /not in a domain this store allows/);
    await expectRefused(await ssoSignIn('unverified@corp.example'), 403, 'email_not_verified', /verified/);
    const accounts = await t.database.db
      .selectFrom('admin_users')
      .select('email')
      .where('email', 'in', ['nobody@corp.example', 'out@elsewhere.example', 'unverified@corp.example'])
      .execute();
    expect(accounts).toEqual([]);
  });

  it('refuses a member an owner removed at the next sign-in (removal sticks)', async () => {
    const first = await ssoSignIn('gone@corp.example');
    expect(first.statusCode).toBe(303);
    const member = await t.database.db.selectFrom('admin_users').select('id').where('email', '=', 'gone@corp.example').executeTakeFirstOrThrow();
    const removed = await t.app.inject({
      method: 'DELETE',
      url: `/admin/api/v1/admins/${member.id}`,
      headers: { cookie: owner.cookie, 'x-csrf-token': owner.csrf },
    });
    expect(removed.statusCode, removed.body).toBeLessThan(300);
    await expectRefused(await ssoSignIn('gone@corp.example'), 403, 'removed', /removed from this store by an owner/);
    expect(await t.database.db.selectFrom('admin_users').select('id').where('email', '=', 'gone@corp.example').executeTakeFirst()).toBeUndefined();
  });

  it('refuses a callback without the browser cookie, without its state, with another state, or used twice', async () => {
    const noCookie = await toCallback('pat@corp.example', 'pat@corp.example');
    await expectRefused(await callback({ url: noCookie.url }), 400, 'no_attempt', /not started in this browser/);

    const noState = await toCallback('pat@corp.example', 'pat@corp.example');
    noState.url.searchParams.delete('state');
    await expectRefused(await callback(noState), 400, 'missing_state', /no state/);

    const otherState = await toCallback('pat@corp.example', 'pat@corp.example');
    otherState.url.searchParams.set('state', 'forged-state-value');
    await expectRefused(await callback(otherState), 401, 'wrong_state', /refused/);

    const replayed = await toCallback('pat@corp.example', 'pat@corp.example');
    expect((await callback(replayed)).statusCode).toBe(303);
    await expectRefused(await callback(replayed), 400, 'unknown_attempt', /already used/);
  });

  it.each([
    ['another client', 'wrong_audience', (p: Record<string, unknown>) => ({ ...p, aud: OTHER_CLIENT.client_id }), null],
    ['another issuer', 'wrong_issuer', (p: Record<string, unknown>) => ({ ...p, iss: 'http://127.0.0.1:1' }), null],
    [
      'an expired token',
      'expired',
      (p: Record<string, unknown>) => ({ ...p, iat: Math.floor(Date.now() / 1000) - 7200, exp: Math.floor(Date.now() / 1000) - 3600 }),
      null,
    ],
    ['an unsigned token', 'bad_signature', (p: Record<string, unknown>) => p, 'unsigned'],
    ['a token signed by another key', 'bad_signature', (p: Record<string, unknown>) => p, 'foreignKey'],
  ] as const)('refuses an ID token of %s', async (_what, reason, payload, forgery) => {
    kit.tamper = ({ header, payload: p }) => ({ header, payload: payload(p), unsigned: forgery === 'unsigned', foreignKey: forgery === 'foreignKey' });
    try {
      await expectRefused(await ssoSignIn('pat@corp.example'), 401, reason, /answer was refused/);
    } finally {
      kit.tamper = undefined;
    }
  });

  it('answers problem+json to a client that asks for JSON', async () => {
    const to = await toCallback('pat@corp.example', 'pat@corp.example');
    const res = await callback({ url: to.url }, { accept: 'application/json' });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json().detail).toMatch(/not started in this browser/);
  });

  it('with SSO required, refuses passwords (and reset links) but the break-glass owner’s', async () => {
    await createAdminUser(t.database.db, { email: 'pw@corp.example', password: PASSWORD, role: 'admin' });
    expect((await api('PUT', '/settings/sso', settings({ require_sso: true, break_glass: [] }))).statusCode).toBe(400);
    const on = await api('PUT', '/settings/sso', settings({ require_sso: true, break_glass: [owner.id], client_secret: undefined }));
    expect(on.statusCode, on.body).toBe(200);
    const refused = await passwordSignIn('pw@corp.example');
    expect(refused.statusCode).toBe(403);
    expect(refused.json().detail).toMatch(/requires single sign-on/);
    expect(cookieNamed(refused, 'store_admin_session')).toBeUndefined();
    expect((await lastAudit('session.sign_in_failed'))?.details).toMatchObject({ reason: 'sso_required' });
    expect((await passwordSignIn(OWNER)).statusCode).toBe(200);
    // The same person signs in with SSO instead.
    kit.people.set('pw@corp.example', { email: 'pw@corp.example', email_verified: true, groups: ['erp-admins'] });
    expect((await ssoSignIn('pw@corp.example')).statusCode).toBe(303);
  });
  it('with SSO required, a session begun with a password in another store cannot switch into it; the break-glass owner can', async () => {
    // Still required (the test before): the store of the test app requires SSO, break-glass the owner.
    const ssoStore = (await api('GET', '/account/stores')).json().data.find((s: { selected: boolean }) => s.selected).id as string;
    const other = (await createStore(t.database.db, { name: `No SSO ${backend}` })).id;
    const pat = await createAdminUser(t.database.db, { email: 'two@corp.example', password: PASSWORD, role: 'admin' });
    await inStore(other, () => addMembership(t.database.db, { adminUserId: pat.id, role: 'admin', storeId: other }));
    await inStore(other, () => addMembership(t.database.db, { adminUserId: owner.id, role: 'owner', storeId: other }));
    // A password opens a session in the other store only.
    const signedIn = await passwordSignIn('two@corp.example');
    expect(signedIn.statusCode, signedIn.body).toBe(200);
    expect(signedIn.json().data.store.id).toBe(other);
    const session = { cookie: cookieNamed(signedIn, 'store_admin_session')!, 'x-csrf-token': signedIn.json().data.csrf_token };
    const switched = await t.app.inject({ method: 'POST', url: '/admin/api/v1/session/store', payload: { store_id: ssoStore }, headers: session });
    expect(switched.statusCode, switched.body).toBe(403);
    expect(switched.json().detail).toMatch(/requires single sign-on/);
    const still = await t.app.inject({ url: '/admin/session', headers: { cookie: session.cookie } });
    expect(still.json().data.store.id).toBe(other);
    // The break-glass owner may move between them.
    const there = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/session/store',
      payload: { store_id: other },
      headers: { cookie: owner.cookie, 'x-csrf-token': owner.csrf },
    });
    expect(there.statusCode, there.body).toBe(200);
    const back = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/session/store',
      payload: { store_id: ssoStore },
      headers: { cookie: owner.cookie, 'x-csrf-token': owner.csrf },
    });
    expect(back.statusCode, back.body).toBe(200);
  });
});
