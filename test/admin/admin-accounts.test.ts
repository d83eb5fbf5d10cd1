/**
 * Several administrators with roles, through the admin API (inject), on every back end: what each
 * role may do (403 problem+json otherwise), invitations and password resets by one-time link,
 * changing one's own password, removing an administrator (their sessions end), the last owner kept,
 * and an operator's API token with the `admin` scope acting as an admin, never as an owner
 * (decision 0026; key-makers.test.ts has the rest).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';

const OWNER = 'owner@example.com';
const PASSWORD = 'correct horse battery';

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='));
  if (!line) throw new Error(`no session cookie in ${JSON.stringify(header)} (${res.statusCode} ${res.body})`);
  return line.split(';')[0]!;
}
const codeOf = (url: string) => new URL(url).hash.split('code=')[1]!;

describe.each(backends)('administrators and roles (%s)', (backend) => {
  let t: TestApp;
  let ip = 0;
  const nextIp = () => `10.1.0.${++ip}`;
  type Session = { cookie: string; csrf: string };

  async function signIn(email: string, password = PASSWORD): Promise<Session> {
    const res = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email, password }, remoteAddress: nextIp() });
    expect(res.statusCode, res.body).toBe(200);
    return { cookie: cookieOf(res), csrf: res.json().data.csrf_token };
  }
  const as = (s: Session, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { cookie: s.cookie, 'x-csrf-token': s.csrf }, payload, remoteAddress: '192.0.2.7' });

  async function invite(owner: Session, email: string, role: string): Promise<string> {
    const res = await as(owner, 'POST', '/admins/invitations', { email, role });
    expect(res.statusCode, res.body).toBe(201);
    return codeOf(res.json().data.url);
  }
  async function join(code: string, password = PASSWORD): Promise<LightMyRequestResponse> {
    return t.app.inject({ method: 'POST', url: '/admin/links/use', payload: { code, password }, remoteAddress: nextIp() });
  }

  let owner: Session;
  let viewer: Session;
  let admin: Session;

  beforeAll(async () => {
    t = await buildTestApp(backend, { ADMIN_SIGN_IN_MAX_FAILURES: '1000' });
    await createAdminUser(t.database.db, { email: OWNER, password: PASSWORD });
    owner = await signIn(OWNER);
  });
  afterAll(async () => t?.close());

  it('an administrator created before roles (CLI, setup link) is an owner, and the session says so', async () => {
    const who = await t.app.inject({ url: '/admin/session', headers: { cookie: owner.cookie } });
    expect(who.json().data).toMatchObject({ email: OWNER, role: 'owner' });
  });

  it('invites an administrator and a viewer by one-time link; the link shows what it is for and works once', async () => {
    const code = await invite(owner, 'Viewer@Example.com', 'viewer');
    const check = await t.app.inject({ method: 'POST', url: '/admin/links/check', payload: { code } });
    expect(check.json().data).toMatchObject({ purpose: 'invitation', email: 'viewer@example.com', role: 'viewer' });
    const joined = await join(code);
    expect(joined.statusCode, joined.body).toBe(200);
    expect(joined.json().data).toMatchObject({ email: 'viewer@example.com', role: 'viewer' });
    viewer = { cookie: cookieOf(joined), csrf: joined.json().data.csrf_token };
    const again = await join(code);
    expect(again.statusCode).toBe(409);
    expect(again.headers['content-type']).toContain('application/problem+json');
    expect(again.json().errors).toEqual([{ param: 'code', message: 'used' }]);
    admin = { cookie: cookieOf(await join(await invite(owner, 'admin@example.com', 'admin'))), csrf: '' };
    admin = await signIn('admin@example.com');
    const list = await as(owner, 'GET', '/admins');
    expect(
      list
        .json()
        .data.map((a: { email: string; role: string }) => `${a.email}:${a.role}`)
        .sort(),
    ).toEqual(['admin@example.com:admin', 'owner@example.com:owner', 'viewer@example.com:viewer']);
  });

  it('refuses an expired invitation, an invitation for an existing administrator, a bad email and a short password, changing nothing', async () => {
    const code = await invite(owner, 'late@example.com', 'admin');
    await t.database.db
      .updateTable('admin_links')
      .set({ expires_at: sql<string>`now() - interval '1 second'` })
      .where('email', '=', 'late@example.com')
      .execute();
    const late = await join(code);
    expect(late.statusCode).toBe(404);
    expect(late.json().detail).toMatch(/expired/);
    const dup = await as(owner, 'POST', '/admins/invitations', { email: 'viewer@example.com', role: 'admin' });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().errors[0].param).toBe('email');
    const bad = await as(owner, 'POST', '/admins/invitations', { email: 'not-an-email', role: 'admin' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().errors[0].param).toBe('email');
    const shortPassword = await join(await invite(owner, 'short@example.com', 'viewer'), 'short');
    expect(shortPassword.statusCode).toBe(400);
    expect(shortPassword.json().errors[0].param).toBe('password');
    const emails = (await as(owner, 'GET', '/admins')).json().data.map((a: { email: string }) => a.email);
    expect(emails).not.toContain('late@example.com');
    expect(emails).not.toContain('short@example.com');
  });

  it('a viewer reads everything and every write is a 403 problem+json; nothing changes', async () => {
    for (const url of ['/tokens', '/webhooks/endpoints', '/overview', '/admins', '/audit-log']) {
      expect((await as(viewer, 'GET', url)).statusCode, url).toBe(200);
    }
    const before = (await as(owner, 'GET', '/tokens')).json().data.length;
    const write = await as(viewer, 'POST', '/tokens', { name: 'sneaky' });
    expect(write.statusCode).toBe(403);
    expect(write.headers['content-type']).toContain('application/problem+json');
    expect(write.json()).toMatchObject({ code: 'forbidden', detail: expect.stringMatching(/viewer/) });
    expect((await as(viewer, 'POST', '/webhooks/endpoints', { url: 'https://example.com/hook' })).statusCode).toBe(403);
    expect((await as(viewer, 'POST', '/admins/invitations', { email: 'x@example.com', role: 'owner' })).statusCode).toBe(403);
    expect((await as(owner, 'GET', '/tokens')).json().data.length).toBe(before);
  });

  it('an admin writes the store, keys and webhooks but may not manage administrators', async () => {
    expect((await as(admin, 'POST', '/tokens', { name: 'by admin' })).statusCode).toBe(201);
    const refused = await as(admin, 'POST', '/admins/invitations', { email: 'x@example.com', role: 'owner' });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().detail).toMatch(/owner/);
    expect((await as(admin, 'GET', '/admins/invitations')).statusCode).toBe(403);
  });

  it("an operator's API token with the admin scope acts as an admin: it writes, but never invites (owner-only)", async () => {
    const headers = await t.auth(['admin']);
    expect((await t.app.inject({ method: 'POST', url: '/admin/api/v1/tokens', headers, payload: { name: 'scripted' } })).statusCode).toBe(201);
    const res = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/admins/invitations',
      headers,
      payload: { email: 'scripted@example.com', role: 'viewer' },
    });
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json().detail).toMatch(/owner-only/);
  });

  it("changing a role ends that administrator's sessions; the last owner can be neither demoted nor removed", async () => {
    const me = (await as(owner, 'GET', '/admins')).json().data.find((a: { email: string }) => a.email === OWNER);
    const demote = await as(owner, 'PATCH', `/admins/${me.id}`, { role: 'admin' });
    expect(demote.statusCode).toBe(409);
    expect((await as(owner, 'DELETE', `/admins/${me.id}`)).statusCode).toBe(409);
    const adminId = (await as(owner, 'GET', '/admins')).json().data.find((a: { email: string }) => a.email === 'admin@example.com').id;
    const promoted = await as(owner, 'PATCH', `/admins/${adminId}`, { role: 'viewer' });
    expect(promoted.json().data.role).toBe('viewer');
    expect((await as(admin, 'GET', '/tokens')).statusCode).toBe(401);
    admin = await signIn('admin@example.com');
    expect((await as(admin, 'POST', '/tokens', { name: 'now a viewer' })).statusCode).toBe(403);
    expect((await as(owner, 'PATCH', `/admins/${adminId}`, { role: 'admin' })).statusCode).toBe(200);
    admin = await signIn('admin@example.com');
  });

  it('removing an administrator ends their sessions at once', async () => {
    const code = await invite(owner, 'leaver@example.com', 'admin');
    const joined = await join(code);
    const leaver = { cookie: cookieOf(joined), csrf: joined.json().data.csrf_token };
    expect((await as(leaver, 'GET', '/tokens')).statusCode).toBe(200);
    const id = (await as(owner, 'GET', '/admins')).json().data.find((a: { email: string }) => a.email === 'leaver@example.com').id;
    const removed = await as(owner, 'DELETE', `/admins/${id}`);
    expect(removed.statusCode).toBe(200);
    expect((await as(leaver, 'GET', '/tokens')).statusCode).toBe(401);
    const retry = await t.app.inject({
      method: 'POST',
      url: '/admin/session',
      payload: { email: 'leaver@example.com', password: PASSWORD },
      remoteAddress: nextIp(),
    });
    expect(retry.statusCode).toBe(401);
  });

  it("changes one's own password with the current one (wrong current: 400 at current_password); other sessions end", async () => {
    const other = await signIn('viewer@example.com');
    const wrong = await as(viewer, 'POST', '/account/password', { current_password: 'not it at all', new_password: 'a brand new password' });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().errors).toEqual([{ param: 'current_password', message: 'is wrong' }]);
    const short = await as(viewer, 'POST', '/account/password', { current_password: PASSWORD, new_password: 'short' });
    expect(short.json().errors[0].param).toBe('new_password');
    const ok = await as(viewer, 'POST', '/account/password', { current_password: PASSWORD, new_password: 'a brand new password' });
    expect(ok.statusCode, ok.body).toBe(200);
    expect((await as(viewer, 'GET', '/tokens')).statusCode).toBe(200);
    expect((await as(other, 'GET', '/tokens')).statusCode).toBe(401);
    viewer = await signIn('viewer@example.com', 'a brand new password');
    const byToken = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/account/password',
      headers: await t.auth(['admin']),
      payload: { current_password: 'x', new_password: 'yyyyyyyyyyyy' },
    });
    expect(byToken.statusCode).toBe(403);
  });

  it("an owner's one-time reset link sets a new password, signs the administrator out everywhere, and works once", async () => {
    const id = (await as(owner, 'GET', '/admins')).json().data.find((a: { email: string }) => a.email === 'viewer@example.com').id;
    expect((await as(admin, 'POST', `/admins/${id}/password-reset`)).statusCode).toBe(403);
    const issued = await as(owner, 'POST', `/admins/${id}/password-reset`);
    expect(issued.statusCode).toBe(201);
    expect(issued.headers['cache-control']).toBe('no-store');
    const code = codeOf(issued.json().data.url);
    expect((await t.app.inject({ method: 'POST', url: '/admin/links/check', payload: { code } })).json().data.purpose).toBe('password_reset');
    const used = await join(code, 'reset by the owner 1');
    expect(used.statusCode, used.body).toBe(200);
    expect((await as(viewer, 'GET', '/tokens')).statusCode).toBe(401);
    expect((await join(code, 'reset by the owner 2')).statusCode).toBe(409);
    viewer = await signIn('viewer@example.com', 'reset by the owner 1');
  });
});
