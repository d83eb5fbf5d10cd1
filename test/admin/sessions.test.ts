/**
 * Sessions an administrator can see and end (decision 0061), through the admin API (inject), on
 * every back end: one's own list (device, address, started, last used, which one is this), "last
 * used" written at most once a minute, ending one or all others behind the fresh proof, an owner
 * seeing and ending any administrator's sessions, keys and other roles refused, every ending audited.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { describeUserAgent } from '../../src/admin/sessions/admin-session.service.ts';
import { createToken } from '../../src/tokens/token.service.ts';

const PASSWORD = 'correct horse battery';
const OWNER = 'owner@example.com';
const ADMIN = 'admin@example.com';
const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';
const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1';
const WINDOWS_CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='));
  if (!line) throw new Error(`no session cookie in ${JSON.stringify(header)} (${res.statusCode} ${res.body})`);
  return line.split(';')[0]!;
}

describe('describeUserAgent', () => {
  it('names the browser and system a person recognises', () => {
    expect(describeUserAgent(FIREFOX)).toBe('Firefox 128 on Linux');
    expect(describeUserAgent(IPHONE)).toBe('Safari 17 on iOS');
    expect(describeUserAgent(WINDOWS_CHROME)).toBe('Chrome 131 on Windows');
    expect(
      describeUserAgent('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0'),
    ).toBe('Edge 131 on macOS');
    expect(describeUserAgent('Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36')).toBe(
      'Chrome 131 on Android',
    );
    expect(describeUserAgent('curl/8.5.0')).toBe('curl 8');
    expect(describeUserAgent(null)).toBe('Unknown device');
    expect(describeUserAgent('x'.repeat(80))).toBe(`${'x'.repeat(59)}…`);
  });
});

describe.each(backends)('sessions you can see and end (%s)', (backend) => {
  let t: TestApp;
  let now = Date.now();
  let ip = 0;
  type Session = { cookie: string; csrf: string };

  async function signIn(email: string, userAgent: string, remoteAddress = `198.51.100.${++ip}`): Promise<Session> {
    const res = await t.app.inject({
      method: 'POST',
      url: '/admin/session',
      payload: { email, password: PASSWORD },
      headers: { 'user-agent': userAgent },
      remoteAddress,
    });
    expect(res.statusCode, res.body).toBe(200);
    return { cookie: cookieOf(res), csrf: res.json().data.csrf_token };
  }
  const as = (s: Session, method: 'GET' | 'POST' | 'DELETE', url: string, remoteAddress = '192.0.2.7') =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { cookie: s.cookie, 'x-csrf-token': s.csrf }, remoteAddress });
  const alive = async (s: Session) => (await as(s, 'GET', '/account/sessions')).statusCode === 200;
  const auditOf = async (action: string) =>
    (await t.database.db.selectFrom('admin_audit_log').selectAll().where('action', '=', action).orderBy('id').execute()).map((row) => ({
      actor: row.actor,
      target_type: row.target_type,
      target_id: row.target_id,
      client_ip: row.client_ip,
      details: row.details,
    }));
  let adminId: string;

  beforeAll(async () => {
    t = await buildTestApp(backend, { ADMIN_SIGN_IN_MAX_FAILURES: '1000', ADMIN_REAUTH_WINDOW_MS: '300000' }, { now: () => now });
    await createAdminUser(t.database.db, { email: OWNER, password: PASSWORD });
    adminId = (await createAdminUser(t.database.db, { email: ADMIN, password: PASSWORD, role: 'admin' })).id;
  });
  afterAll(async () => t?.close());
  // Each test starts with nobody signed in.
  beforeEach(async () => {
    await t.database.db.deleteFrom('admin_sessions').execute();
  });

  it("lists one's own live sessions: device, address, started, last used, the asking one marked", async () => {
    const laptop = await signIn(OWNER, FIREFOX, '198.51.100.200');
    const phone = await signIn(OWNER, IPHONE, '198.51.100.201');
    const res = await as(laptop, 'GET', '/account/sessions');
    expect(res.statusCode, res.body).toBe(200);
    const sessions = res.json().data as Record<string, unknown>[];
    expect(sessions).toHaveLength(2);
    const mine = sessions.find((s) => s.current)!;
    const other = sessions.find((s) => !s.current)!;
    expect(mine).toMatchObject({ device: 'Firefox 128 on Linux', user_agent: FIREFOX, client_ip: '198.51.100.200', current: true });
    expect(other).toMatchObject({ device: 'Safari 17 on iOS', client_ip: '198.51.100.201', current: false });
    for (const s of sessions) {
      expect(s.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(Date.parse(String(s.last_seen_at))).toBeGreaterThanOrEqual(Date.parse(String(s.created_at)));
      expect(Date.parse(String(s.expires_at))).toBeGreaterThan(Date.parse(String(s.created_at)));
    }
    // Neither the cookie nor its hash is ever shown.
    expect(res.body).not.toContain(laptop.cookie.split('=')[1]);
    const hashes = await t.database.db.selectFrom('admin_sessions').select('id_hash').execute();
    for (const { id_hash } of hashes) expect(res.body).not.toContain(id_hash);
    // The other session sees the same two, itself marked.
    const fromPhone = (await as(phone, 'GET', '/account/sessions')).json().data as { id: string; current: boolean }[];
    expect(fromPhone.find((s) => s.current)!.id).toBe(other.id);
  });

  it('records "last used" and its address at most once a minute', async () => {
    const s = await signIn(OWNER, FIREFOX, '198.51.100.210');
    const row = () =>
      t.database.db
        .selectFrom('admin_sessions')
        .select(['client_ip', sql<string>`iso_utc(last_seen_at)`.as('seen')])
        .executeTakeFirstOrThrow();
    const signedIn = await row();
    // Used again within the minute, from elsewhere: nothing is written.
    expect((await as(s, 'GET', '/overview', '203.0.113.1')).statusCode).toBe(200);
    expect(await row()).toEqual(signedIn);
    // Its last use recorded two minutes ago: the next request records this one and its address.
    await sql`UPDATE admin_sessions SET last_seen_at = now() - interval '2 minutes' `.execute(t.database.db);
    expect((await as(s, 'GET', '/overview', '203.0.113.2')).statusCode).toBe(200);
    const touched = await row();
    expect(touched.client_ip).toBe('203.0.113.2');
    expect(Date.parse(touched.seen)).toBeGreaterThanOrEqual(Date.parse(signedIn.seen));
  });

  it('ends one other session (audited), never the asking one, and only with a fresh proof', async () => {
    const laptop = await signIn(OWNER, FIREFOX);
    const phone = await signIn(OWNER, IPHONE, '198.51.100.99');
    const list = (await as(laptop, 'GET', '/account/sessions')).json().data as { id: string; current: boolean }[];
    const phoneId = list.find((s) => !s.current)!.id;
    const laptopId = list.find((s) => s.current)!.id;

    const self = await as(laptop, 'DELETE', `/account/sessions/${laptopId}`);
    expect(self.statusCode).toBe(409);
    expect(self.headers['content-type']).toContain('application/problem+json');
    expect(self.json().errors).toEqual([{ param: 'id', message: 'is the current session' }]);
    const bad = await as(laptop, 'DELETE', '/account/sessions/not-a-uuid');
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('id');
    expect((await as(laptop, 'DELETE', '/account/sessions/00000000-0000-4000-8000-000000000000')).statusCode).toBe(404);

    // A proof older than the window: refused, nothing ended.
    now += 301_000;
    const stale = await as(laptop, 'DELETE', `/account/sessions/${phoneId}`);
    expect(stale.statusCode).toBe(403);
    expect(stale.json().code).toBe('reauthentication_required');
    expect(await alive(phone)).toBe(true);
    const proof = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/account/reauthenticate',
      headers: { cookie: laptop.cookie, 'x-csrf-token': laptop.csrf },
      payload: { password: PASSWORD },
    });
    expect(proof.statusCode, proof.body).toBe(200);

    const ended = await as(laptop, 'DELETE', `/account/sessions/${phoneId}`);
    expect(ended.statusCode, ended.body).toBe(200);
    expect(ended.json().data).toMatchObject({ id: phoneId, device: 'Safari 17 on iOS', current: false });
    expect(await alive(phone)).toBe(false);
    expect(await alive(laptop)).toBe(true);
    expect((await as(laptop, 'DELETE', `/account/sessions/${phoneId}`)).statusCode).toBe(404);
    expect(await auditOf('session.ended')).toEqual([
      {
        actor: OWNER,
        target_type: 'session',
        target_id: phoneId,
        client_ip: '192.0.2.7',
        details: expect.objectContaining({ device: 'Safari 17 on iOS', client_ip: '198.51.100.99' }),
      },
    ]);
  });

  it("ends all one's other sessions (audited with how many), keeping the asking one; not another account's", async () => {
    const a = await signIn(OWNER, FIREFOX);
    const b = await signIn(OWNER, IPHONE);
    const c = await signIn(OWNER, WINDOWS_CHROME);
    const theirs = await signIn(ADMIN, FIREFOX);
    // Another administrator's session id names no session of mine.
    const theirId = ((await as(theirs, 'GET', '/account/sessions')).json().data as { id: string }[])[0]!.id;
    expect((await as(a, 'DELETE', `/account/sessions/${theirId}`)).statusCode).toBe(404);
    const before = (await auditOf('session.others_ended')).length;
    const res = await as(a, 'POST', '/account/sessions/end-others');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toEqual({ ended: 2 });
    expect([await alive(a), await alive(b), await alive(c), await alive(theirs)]).toEqual([true, false, false, true]);
    const entries = await auditOf('session.others_ended');
    expect(entries).toHaveLength(before + 1);
    expect(entries.at(-1)).toMatchObject({ actor: OWNER, target_type: 'admin', details: { ended: 2 } });
  });

  it("lets an owner see and end an administrator's sessions (audited); not an admin, not a key", async () => {
    const owner = await signIn(OWNER, FIREFOX);
    const one = await signIn(ADMIN, IPHONE, '198.51.100.150');
    const two = await signIn(ADMIN, WINDOWS_CHROME);
    const listed = await as(owner, 'GET', `/admins/${adminId}/sessions`);
    expect(listed.statusCode, listed.body).toBe(200);
    expect((listed.json().data as { device: string; current: boolean }[]).map((s) => [s.device, s.current]).sort()).toEqual([
      ['Chrome 131 on Windows', false],
      ['Safari 17 on iOS', false],
    ]);
    // An admin may not look at another's sessions, nor end them; a key of any maker may not either.
    expect((await as(one, 'GET', `/admins/${adminId}/sessions`)).statusCode).toBe(403);
    expect((await as(one, 'DELETE', `/admins/${adminId}/sessions`)).statusCode).toBe(403);
    const { token } = await createToken(t.database.db, { name: 'ops', scopes: ['admin'] });
    const byKey = await t.app.inject({ method: 'DELETE', url: `/admin/api/v1/admins/${adminId}/sessions`, headers: { authorization: `Bearer ${token}` } });
    expect(byKey.statusCode).toBe(403);
    expect(await alive(one)).toBe(true);
    expect((await as(owner, 'GET', '/admins/00000000-0000-4000-8000-000000000000/sessions')).statusCode).toBe(404);

    now += 301_000;
    expect((await as(owner, 'DELETE', `/admins/${adminId}/sessions`)).json().code).toBe('reauthentication_required');
    expect(await alive(one)).toBe(true);
    const fresh = await signIn(OWNER, FIREFOX);
    const ended = await as(fresh, 'DELETE', `/admins/${adminId}/sessions`);
    expect(ended.statusCode, ended.body).toBe(200);
    expect(ended.json().data).toEqual({ ended: 2 });
    expect([await alive(one), await alive(two), await alive(fresh)]).toEqual([false, false, true]);
    expect((await as(fresh, 'GET', `/admins/${adminId}/sessions`)).json().data).toEqual([]);
    expect(await auditOf('admin.sessions_ended')).toEqual([
      { actor: OWNER, target_type: 'admin', target_id: adminId, client_ip: '192.0.2.7', details: { email: ADMIN, ended: 2 } },
    ]);
    // She signs in again as before: ending sessions is no removal.
    expect(await alive(await signIn(ADMIN, IPHONE))).toBe(true);
  });
});
