/**
 * Administrators per store (decision 0051, migration 0033), on every back end: one account in two
 * stores with different roles; the switcher changes what every admin route answers (no row of the
 * other store); a viewer in B writes nothing in B though owner in A; the "last owner" rule, the
 * administrators list, invitations and resets are the selected store's; a key acts with its maker's
 * role in the key's store (none once the maker left that store); a store's setup link makes its
 * first owner, who signs in to that store only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { collectRoutes, type RouteSpec } from '../helpers/hostile-requests.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { addMembership, createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { storeSetupUrl } from '../../src/admin/sessions/setup-code.service.ts';
import { setSecondFactorRequired } from '../../src/admin/sessions/second-factor.service.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { createStore, homeStore } from '../../src/stores/store.service.ts';
import { inStore } from '../../src/db/store-scope.ts';

const PASSWORD = 'correct horse battery';

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='));
  if (!line) throw new Error(`no session cookie in ${JSON.stringify(header)} (${res.statusCode} ${res.body})`);
  return line.split(';')[0]!;
}
const codeOf = (url: string) => new URL(url).hash.split('code=')[1]!;

describe.each(backends)('administrators per store (%s)', (backend) => {
  let t: TestApp;
  let routes: RouteSpec[];
  let storeA: string;
  let storeB: string;
  let ip = 0;
  const nextIp = () => `10.9.0.${++ip}`;
  type Session = { cookie: string; csrf: string };

  async function signIn(email: string, password = PASSWORD): Promise<Session> {
    const res = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email, password }, remoteAddress: nextIp() });
    expect(res.statusCode, res.body).toBe(200);
    return { cookie: cookieOf(res), csrf: res.json().data.csrf_token };
  }
  const as = (s: Session, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { cookie: s.cookie, 'x-csrf-token': s.csrf }, payload, remoteAddress: '192.0.2.9' });
  const withKey = (key: string, method: 'GET' | 'POST', url: string, payload?: object) =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { authorization: `Bearer ${key}` }, payload });
  const whoAmI = async (s: Session) => (await t.app.inject({ url: '/admin/session', headers: { cookie: s.cookie } })).json().data;

  /** Marks of store A only and of store B only: no answer in the other store may hold one. */
  const onlyA: string[] = [];
  const onlyB: string[] = [];

  beforeAll(async () => {
    ({ app: t, routes } = await collectRoutes(() => buildTestApp(backend, { ADMIN_SIGN_IN_MAX_FAILURES: '1000' })));
    storeA = (await homeStore(t.database.db))!.id;
    storeB = (await createStore(t.database.db, { name: 'Bravo shop' })).id;
    const db = t.database.db;
    // multi: owner of A, viewer of B. alpha: owner of A only. bravo: owner of B only.
    const multi = await inStore(storeA, () => createAdminUser(db, { email: 'multi@example.com', password: PASSWORD }));
    await addMembership(db, { adminUserId: multi.id, role: 'viewer', storeId: storeB });
    await inStore(storeA, () => createAdminUser(db, { email: 'alpha-only@example.com', password: PASSWORD }));
    await inStore(storeB, () => createAdminUser(db, { email: 'bravo-only@example.com', password: PASSWORD }));
    const productA = await inStore(storeA, () => aProduct(db, { name: 'Alpha-only product' }));
    const productB = await inStore(storeB, () => aProduct(db, { name: 'Bravo-only product' }));
    const keyA = await inStore(storeA, () => createToken(db, { name: 'alpha-only-key' }));
    const keyB = await inStore(storeB, () => createToken(db, { name: 'bravo-only-key' }));
    onlyA.push('Alpha-only product', productA.id, 'alpha-only@example.com', 'alpha-only-key', keyA.summary.prefix);
    onlyB.push('Bravo-only product', productB.id, 'bravo-only@example.com', 'bravo-only-key', keyB.summary.prefix, 'Bravo shop');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('signs in to the home store with the role there; lists the account’s stores; switches with the CSRF token, audited in the store entered', async () => {
    const multi = await signIn('multi@example.com');
    expect(await whoAmI(multi)).toMatchObject({ role: 'owner', store: { id: storeA, name: 'Default store' } });
    const stores = await as(multi, 'GET', '/account/stores');
    expect(stores.statusCode, stores.body).toBe(200);
    expect(stores.json().data).toEqual([
      { id: storeA, name: 'Default store', status: 'active', role: 'owner', selected: true },
      { id: storeB, name: 'Bravo shop', status: 'active', role: 'viewer', selected: false },
    ]);
    // The session's CSRF token applies.
    const forged = await t.app.inject({ method: 'POST', url: '/admin/api/v1/session/store', headers: { cookie: multi.cookie }, payload: { store_id: storeB } });
    expect(forged.statusCode).toBe(403);
    const switched = await as(multi, 'POST', '/session/store', { store_id: storeB });
    expect(switched.statusCode, switched.body).toBe(200);
    expect(switched.json().data).toMatchObject({ id: storeB, role: 'viewer', selected: true });
    expect(await whoAmI(multi)).toMatchObject({ role: 'viewer', store: { id: storeB, name: 'Bravo shop' } });
    const log = await as(multi, 'GET', '/audit-log?action=session.store_switched');
    expect(log.statusCode, log.body).toBe(200);
    const entry = log.json().data[0];
    expect(entry.action).toBe('session.store_switched');
    expect(JSON.stringify(entry)).toContain('multi@example.com');
    expect(JSON.stringify(entry)).toContain(storeB);
  });

  it('refuses a store the account is no member of, naming it, and keeps the session where it was', async () => {
    const bravo = await signIn('bravo-only@example.com');
    expect(await whoAmI(bravo)).toMatchObject({ role: 'owner', store: { id: storeB } });
    const refused = await as(bravo, 'POST', '/session/store', { store_id: storeA });
    expect(refused.statusCode).toBe(404);
    expect(refused.json().detail).toContain(storeA);
    const unknown = await as(bravo, 'POST', '/session/store', { store_id: '00000000-0000-4000-8000-000000000000' });
    expect(unknown.statusCode).toBe(404);
    expect(await whoAmI(bravo)).toMatchObject({ store: { id: storeB } });
    expect((await as(bravo, 'GET', '/account/stores')).json().data.map((s: { id: string }) => s.id)).toEqual([storeB]);
  });

  it('every admin route answers with the selected store’s rows only, switching back and forth', async () => {
    const multi = await signIn('multi@example.com');
    const gets = routes.filter((r) => r.method === 'GET' && r.url.startsWith('/admin/api/v1/') && !r.url.includes(':'));
    expect(gets.length).toBeGreaterThan(10);
    for (const [store, own, other] of [
      [storeA, onlyA, onlyB],
      [storeB, onlyB, onlyA],
      [storeA, onlyA, onlyB],
    ] as const) {
      expect((await as(multi, 'POST', '/session/store', { store_id: store })).statusCode).toBe(200);
      let seenOwn = 0;
      for (const route of gets) {
        if (route.url.endsWith('/account/stores')) continue; // the account's stores: both, by design
        const res = await as(multi, 'GET', route.url.slice('/admin/api/v1'.length));
        for (const mark of other) expect(res.body.includes(mark), `${route.url} in ${store} holds ${mark}`).toBe(false);
        if (own.some((mark) => res.body.includes(mark))) seenOwn += 1;
      }
      // The answers do show the selected store's own rows (products, keys, administrators).
      expect(seenOwn).toBeGreaterThanOrEqual(2);
    }
    const admins = async () => (await as(multi, 'GET', '/admins')).json().data.map((u: { email: string; role: string }) => `${u.email}:${u.role}`);
    await as(multi, 'POST', '/session/store', { store_id: storeB });
    expect(await admins()).toEqual(['bravo-only@example.com:owner', 'multi@example.com:viewer']);
    await as(multi, 'POST', '/session/store', { store_id: storeA });
    expect(await admins()).toEqual(['alpha-only@example.com:owner', 'multi@example.com:owner']);
  });

  it('a viewer in B writes nothing in B though an owner in A; the last-owner rule is per store', async () => {
    const multi = await signIn('multi@example.com');
    await as(multi, 'POST', '/session/store', { store_id: storeB });
    expect((await as(multi, 'POST', '/tokens', { name: 'nope' })).statusCode).toBe(403);
    expect((await as(multi, 'POST', '/admins/invitations', { email: 'x@example.com', role: 'viewer' })).statusCode).toBe(403);
    expect((await as(multi, 'GET', '/tokens')).statusCode).toBe(200);
    // Back in A the same account is an owner: it writes.
    await as(multi, 'POST', '/session/store', { store_id: storeA });
    const made = await as(multi, 'POST', '/tokens', { name: 'multi in A' });
    expect(made.statusCode, made.body).toBe(201);
    await as(multi, 'DELETE', `/tokens/${made.json().data.id}`);

    // bravo is B's only owner: A's owners do not count.
    const bravo = await signIn('bravo-only@example.com');
    const me = (await as(bravo, 'GET', '/admins')).json().data.find((u: { email: string }) => u.email === 'bravo-only@example.com');
    const demote = await as(bravo, 'PATCH', `/admins/${me.id}`, { role: 'admin' });
    expect(demote.statusCode).toBe(409);
    expect(demote.json().detail).toContain('only owner of this store');
    // An owner of B may not touch an administrator of A only (404), nor reset the password of an
    // account other stores trust (409).
    const alphaOnly = (await as(multi, 'GET', '/admins')).json().data.find((u: { email: string }) => u.email === 'alpha-only@example.com');
    expect((await as(bravo, 'PATCH', `/admins/${alphaOnly.id}`, { role: 'viewer' })).statusCode).toBe(404);
    expect((await as(bravo, 'DELETE', `/admins/${alphaOnly.id}`)).statusCode).toBe(404);
    const multiId = (await as(bravo, 'GET', '/admins')).json().data.find((u: { email: string }) => u.email === 'multi@example.com').id;
    const reset = await as(bravo, 'POST', `/admins/${multiId}/password-reset`);
    expect(reset.statusCode).toBe(409);
    expect(reset.json().detail).toContain('also administers');
  });

  it("a key acts with its maker's role in the key's store; none once the maker left that store", async () => {
    const db = t.database.db;
    const multiId = (await as(await signIn('multi@example.com'), 'GET', '/admins'))
      .json()
      .data.find((u: { email: string }) => u.email === 'multi@example.com').id;
    const madeBy = { adminId: multiId, email: 'multi@example.com' };
    const keyA = (await inStore(storeA, () => createToken(db, { name: 'multi key A', scopes: [...SCOPES], madeBy }))).token;
    const keyB = (await inStore(storeB, () => createToken(db, { name: 'multi key B', scopes: [...SCOPES], madeBy }))).token;
    // Owner in A: the key acts as an admin (a key's ceiling) there.
    const inA = await withKey(keyA, 'POST', '/tokens', { name: 'by key in A' });
    expect(inA.statusCode, inA.body).toBe(201);
    // Viewer in B: the key reads, and writes nothing.
    expect((await withKey(keyB, 'GET', '/tokens')).statusCode).toBe(200);
    const inB = await withKey(keyB, 'POST', '/tokens', { name: 'by key in B' });
    expect(inB.statusCode).toBe(403);
    expect(inB.json().detail).toContain('is now viewer');
    // bravo (B's owner) removes multi from B: the B key loses its admin power at once, the A key keeps it.
    const bravo = await signIn('bravo-only@example.com');
    const removed = await as(bravo, 'DELETE', `/admins/${multiId}`);
    expect(removed.statusCode, removed.body).toBe(200);
    const gone = await withKey(keyB, 'GET', '/tokens');
    expect(gone.statusCode).toBe(403);
    expect(gone.json().detail).toContain('no longer an administrator of this store');
    expect((await withKey(keyA, 'GET', '/tokens')).statusCode).toBe(200);
    // The account lives on in A, with one store.
    const multi = await signIn('multi@example.com');
    expect((await as(multi, 'GET', '/account/stores')).json().data.map((s: { id: string }) => s.id)).toEqual([storeA]);
  });

  it('invites into the selected store: an existing account joins it with its own password, never a new one', async () => {
    const bravo = await signIn('bravo-only@example.com');
    const invited = await as(bravo, 'POST', '/admins/invitations', { email: 'alpha-only@example.com', role: 'admin' });
    expect(invited.statusCode, invited.body).toBe(201);
    const code = codeOf(invited.json().data.url);
    const check = await t.app.inject({ method: 'POST', url: '/admin/links/check', payload: { code }, remoteAddress: nextIp() });
    expect(check.json().data).toMatchObject({ purpose: 'invitation', existing_account: true });
    // A's owner lists no invitation of B's.
    const alpha = await signIn('alpha-only@example.com');
    expect((await as(alpha, 'GET', '/admins/invitations')).json().data).toEqual([]);
    // Not the account's password: refused, nothing changes (the link would otherwise take the account).
    const wrong = await t.app.inject({ method: 'POST', url: '/admin/links/use', payload: { code, password: 'a new password 123' }, remoteAddress: nextIp() });
    expect(wrong.statusCode).toBe(401);
    await signIn('alpha-only@example.com');
    const joined = await t.app.inject({ method: 'POST', url: '/admin/links/use', payload: { code, password: PASSWORD }, remoteAddress: nextIp() });
    expect(joined.statusCode, joined.body).toBe(200);
    expect(joined.json().data).toMatchObject({ role: 'admin', store: { id: storeB } });
    const session = { cookie: cookieOf(joined), csrf: joined.json().data.csrf_token };
    expect((await as(session, 'GET', '/account/stores')).json().data.map((s: { id: string; role: string }) => `${s.id}:${s.role}`)).toEqual([
      `${storeA}:owner`,
      `${storeB}:admin`,
    ]);
    // Invited again while a member: 409.
    expect((await as(bravo, 'POST', '/admins/invitations', { email: 'alpha-only@example.com', role: 'viewer' })).statusCode).toBe(409);
  });

  it("a store's setup link makes its first owner, who signs in to that store only", async () => {
    const storeC = (await createStore(t.database.db, { name: 'Charlie shop' })).id;
    const { url } = await storeSetupUrl(t.database.db, t.ctx.config, storeC);
    expect(url).toMatch(/\/admin#\/setup\?code=/);
    const code = codeOf(url);
    expect((await t.app.inject({ method: 'POST', url: '/admin/setup/check', payload: { code }, remoteAddress: nextIp() })).statusCode).toBe(200);
    const made = await t.app.inject({
      method: 'POST',
      url: '/admin/setup',
      payload: { code, email: 'charlie@example.com', password: PASSWORD },
      remoteAddress: nextIp(),
    });
    expect(made.statusCode, made.body).toBe(201);
    expect(made.json().data).toMatchObject({ role: 'owner', store: { id: storeC } });
    const again = await t.app.inject({ method: 'POST', url: '/admin/setup/check', payload: { code }, remoteAddress: nextIp() });
    expect(again.statusCode).toBe(409);
    const charlie = await signIn('charlie@example.com');
    expect(await whoAmI(charlie)).toMatchObject({ role: 'owner', store: { id: storeC } });
    expect((await as(charlie, 'GET', '/account/stores')).json().data.map((s: { id: string }) => s.id)).toEqual([storeC]);
    expect((await as(charlie, 'GET', '/admins')).json().data.map((u: { email: string }) => u.email)).toEqual(['charlie@example.com']);
    const products = await as(charlie, 'GET', '/tokens');
    for (const mark of [...onlyA, ...onlyB.filter((m) => m !== 'Bravo shop')]) expect(products.body).not.toContain(mark);
  });

  it('the second-factor requirement is per store', async () => {
    // B's owner requires a second factor (the route wants the owner to have one: the service here).
    await inStore(storeB, () => setSecondFactorRequired(t.database.db, { required: true, by: 'bravo-only@example.com' }));
    const bravo = await signIn('bravo-only@example.com');
    expect((await whoAmI(bravo)).second_factor).toEqual({ enabled: false, required: true });
    const alpha = await signIn('alpha-only@example.com');
    // Signed in to A: A requires none.
    expect((await whoAmI(alpha)).second_factor).toEqual({ enabled: false, required: false });
    expect((await as(alpha, 'GET', '/settings/security')).json().data).toEqual({ require_second_factor: false });
    // In B (a member since the invitation) the requirement applies: enrol first.
    expect((await as(alpha, 'POST', '/session/store', { store_id: storeB })).statusCode).toBe(200);
    expect((await whoAmI(alpha)).second_factor).toEqual({ enabled: false, required: true });
    expect((await as(alpha, 'GET', '/tokens')).json().code).toBe('second_factor_enrolment_required');
    // The switcher stays open: back to A, where nothing is required.
    expect((await as(alpha, 'POST', '/session/store', { store_id: storeA })).statusCode).toBe(200);
    expect((await as(alpha, 'GET', '/tokens')).statusCode).toBe(200);
    await inStore(storeB, () => setSecondFactorRequired(t.database.db, { required: false, by: 'bravo-only@example.com' }));
  });
});
