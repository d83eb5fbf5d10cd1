/**
 * Dashboard sign-in at the HTTP level (inject): credentials, cookie flags, the CSRF rule of
 * cookie-authenticated admin API calls, throttling, expiry and sign-out, on every back end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';

const EMAIL = 'owner@example.com';
const PASSWORD = 'correct horse battery';

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='));
  if (!line) throw new Error(`no session cookie in ${JSON.stringify(header)}`);
  return line.split(';')[0]!;
}

describe.each(backends)('dashboard sign-in (%s)', (backend) => {
  let t: TestApp;
  let ip = 0;
  /** A client address of its own, so throttling in one test does not leak into another. */
  const nextIp = () => `10.0.0.${++ip}`;

  async function signIn(email = EMAIL, password = PASSWORD, remoteAddress = nextIp()) {
    return t.app.inject({ method: 'POST', url: '/admin/session', payload: { email, password }, remoteAddress });
  }

  async function session(): Promise<{ cookie: string; csrf: string }> {
    const res = await signIn();
    expect(res.statusCode).toBe(200);
    return { cookie: cookieOf(res), csrf: res.json().data.csrf_token };
  }

  beforeAll(async () => {
    t = await buildTestApp(backend, { ADMIN_SESSION_TTL_MS: '3600000' });
  });
  afterAll(async () => t?.close());

  it('reports setup_required until the first administrator exists', async () => {
    const before = await t.app.inject({ url: '/admin/session' });
    expect(before.statusCode).toBe(200);
    expect(before.json()).toEqual({ data: null, setup_required: true });
    await createAdminUser(t.database.db, { email: 'Owner@Example.com', password: PASSWORD });
    const after = await t.app.inject({ url: '/admin/session' });
    expect(after.json()).toEqual({ data: null, setup_required: false });
  });

  it('stores the password as an argon2id hash, never in clear', async () => {
    const row = await t.database.db.selectFrom('admin_users').selectAll().where('email', '=', EMAIL).executeTakeFirstOrThrow();
    expect(row.password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(row.password_hash).not.toContain(PASSWORD);
  });

  it('signs in with the right password (email case-insensitive) and sets a HttpOnly, SameSite=Lax cookie', async () => {
    const res = await signIn('OWNER@example.com');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.data.email).toBe(EMAIL);
    expect(body.data.csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(body.data.expires_at) - Date.now()).toBeGreaterThan(3_500_000);
    const setCookie = String(res.headers['set-cookie']);
    expect(setCookie).toMatch(/^store_admin_session=[A-Za-z0-9_-]{43}; /);
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Lax');
    expect(setCookie).toContain('Path=/admin');
    expect(setCookie).toContain('Max-Age=3600');
    expect(setCookie).not.toContain('Secure');
    expect(res.headers['cache-control']).toBe('no-store');

    const who = await t.app.inject({ url: '/admin/session', headers: { cookie: cookieOf(res) } });
    expect(who.json().data).toEqual(body.data);
  });

  it('stores only a hash of the session id', async () => {
    const { cookie } = await session();
    const id = cookie.split('=')[1]!;
    const rows = await t.database.db.selectFrom('admin_sessions').select('id_hash').execute();
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.map((r) => r.id_hash)).not.toContain(id);
  });

  it('answers a wrong password and an unknown email alike with 401 problem+json', async () => {
    const wrong = await signIn(EMAIL, 'not the password');
    const unknown = await signIn('nobody@example.com', PASSWORD);
    for (const res of [wrong, unknown]) {
      expect(res.statusCode).toBe(401);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.headers['set-cookie']).toBeUndefined();
      expect(res.json()).toMatchObject({ status: 401, code: 'unauthorized', detail: 'Wrong email or password.' });
    }
  });

  it('accepts sign-in only as JSON, so another site cannot post a form to sign a browser in', async () => {
    const form = await t.app.inject({
      method: 'POST',
      url: '/admin/session',
      remoteAddress: nextIp(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `email=${encodeURIComponent(EMAIL)}&password=${encodeURIComponent(PASSWORD)}`,
    });
    expect(form.statusCode).toBe(415);
    expect(form.headers['set-cookie']).toBeUndefined();
  });

  it('rejects a body with unknown properties', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: EMAIL, password: PASSWORD, admin: true } });
    expect(res.statusCode).toBe(400);
  });

  it('throttles after 5 failures per email and address: 429 with Retry-After, even for the right password', async () => {
    const address = nextIp();
    for (let i = 0; i < 5; i++) expect((await signIn(EMAIL, `wrong-${i}-password`, address)).statusCode).toBe(401);
    const blocked = await signIn(EMAIL, PASSWORD, address);
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json()).toMatchObject({ code: 'rate_limited', status: 429 });
    const retryAfter = Number(blocked.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(800);
    expect(retryAfter).toBeLessThanOrEqual(900);
    // Another address still signs in: one client cannot lock the account for everyone.
    expect((await signIn(EMAIL, PASSWORD, nextIp())).statusCode).toBe(200);
  });

  it('clears the failures of an email and address when it signs in', async () => {
    const address = nextIp();
    for (let i = 0; i < 4; i++) expect((await signIn(EMAIL, 'wrong-password', address)).statusCode).toBe(401);
    expect((await signIn(EMAIL, PASSWORD, address)).statusCode).toBe(200);
    for (let i = 0; i < 4; i++) expect((await signIn(EMAIL, 'wrong-password', address)).statusCode).toBe(401);
    expect((await signIn(EMAIL, PASSWORD, address)).statusCode).toBe(200);
  });

  it('lets a session read the admin API without a CSRF token', async () => {
    const { cookie } = await session();
    const res = await t.app.inject({ url: '/admin/api/v1/tokens', headers: { cookie } });
    expect(res.statusCode).toBe(200);
    expect(Array.isArray(res.json().data)).toBe(true);
  });

  it("refuses a session's state change without the CSRF token, or with another session's", async () => {
    const mine = await session();
    const other = await session();
    const payload = { name: 'from-dashboard' };
    const missing = await t.app.inject({ method: 'POST', url: '/admin/api/v1/tokens', headers: { cookie: mine.cookie }, payload });
    expect(missing.statusCode).toBe(403);
    expect(missing.json()).toMatchObject({ code: 'forbidden' });
    expect(missing.json().detail).toContain('CSRF');
    const foreign = await t.app.inject({ method: 'POST', url: '/admin/api/v1/tokens', headers: { cookie: mine.cookie, 'x-csrf-token': other.csrf }, payload });
    expect(foreign.statusCode).toBe(403);
    const ok = await t.app.inject({ method: 'POST', url: '/admin/api/v1/tokens', headers: { cookie: mine.cookie, 'x-csrf-token': mine.csrf }, payload });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().data.token).toMatch(/^sia_/);
    const count = await t.database.db
      .selectFrom('api_tokens')
      .select(sql<number>`count(*)`.as('n'))
      .where('name', '=', 'from-dashboard')
      .executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(1);
  });

  it('needs no CSRF token for a bearer token, and a bearer header wins over a cookie', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/admin/api/v1/tokens', headers: await t.auth(['admin']), payload: { name: 'scripted' } });
    expect(res.statusCode).toBe(201);
    const { cookie, csrf } = await session();
    const readOnly = await t.app.inject({ url: '/admin/api/v1/tokens', headers: { ...(await t.auth()), cookie, 'x-csrf-token': csrf } });
    expect(readOnly.statusCode).toBe(403);
  });

  it('answers 401 without a token or session, and for an unknown session cookie', async () => {
    expect((await t.app.inject({ url: '/admin/api/v1/tokens' })).statusCode).toBe(401);
    const bogus = await t.app.inject({ url: '/admin/api/v1/tokens', headers: { cookie: `store_admin_session=${'x'.repeat(43)}` } });
    expect(bogus.statusCode).toBe(401);
    expect(bogus.json().detail).toContain('Sign in again');
  });

  it('ends a session at its expiry', async () => {
    const { cookie } = await session();
    expect((await t.app.inject({ url: '/admin/api/v1/overview', headers: { cookie } })).statusCode).toBe(200);
    const id = cookie.split('=')[1]!;
    const { createHash } = await import('node:crypto');
    await t.database.db
      .updateTable('admin_sessions')
      .set({ expires_at: sql<string>`now() - interval '1 second'` })
      .where('id_hash', '=', createHash('sha256').update(id).digest('hex'))
      .execute();
    expect((await t.app.inject({ url: '/admin/api/v1/overview', headers: { cookie } })).statusCode).toBe(401);
    expect((await t.app.inject({ url: '/admin/session', headers: { cookie } })).json().data).toBeNull();
  });

  it('signs out: needs the CSRF token, clears the cookie, and the session no longer works', async () => {
    const { cookie, csrf } = await session();
    const forged = await t.app.inject({ method: 'DELETE', url: '/admin/session', headers: { cookie } });
    expect(forged.statusCode).toBe(403);
    expect((await t.app.inject({ url: '/admin/api/v1/tokens', headers: { cookie } })).statusCode).toBe(200);

    const out = await t.app.inject({ method: 'DELETE', url: '/admin/session', headers: { cookie, 'x-csrf-token': csrf } });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/^store_admin_session=; .*(Max-Age=0|Expires=Thu, 01 Jan 1970)/);
    expect((await t.app.inject({ url: '/admin/api/v1/tokens', headers: { cookie } })).statusCode).toBe(401);
  });

  it('counts products, orders and customers on the overview', async () => {
    const { cookie, csrf } = await session();
    const created = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/customers',
      headers: { cookie, 'x-csrf-token': csrf },
      payload: { name: 'Ada Lovelace', email: 'ada@example.com' },
    });
    expect(created.statusCode).toBe(201);
    const res = await t.app.inject({ url: '/admin/api/v1/overview', headers: { cookie } });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({
      products: { total: 0, active: 0 },
      orders: { total: 0, last_24h: 0 },
      customers: { total: 1, active: 1 },
    });
    expect(res.json().data.api_tokens.active).toBeGreaterThan(0);
  });
});

describe.each(backends)('dashboard cookie over HTTPS (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, { COOKIE_SECURE: 'true' });
    await createAdminUser(t.database.db, { email: EMAIL, password: PASSWORD });
  });
  afterAll(async () => t?.close());

  it('marks the cookie Secure when COOKIE_SECURE is set', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: EMAIL, password: PASSWORD } });
    expect(res.statusCode).toBe(200);
    expect(String(res.headers['set-cookie'])).toContain('Secure');
  });
});
