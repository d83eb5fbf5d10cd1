/**
 * No key outranks or outlives its maker (decision 0026), through the admin API (inject), on every
 * back end: the escalation once found from outside (an admin's admin-scoped key making her an owner) refused;
 * a demotion shrinking her keys and a removal ending their write and admin powers on the next
 * request, though the key was cached, and from another process (NOTIFY, PostgreSQL); owner-only
 * actions never reachable with a key; a key made by a key keeping its maker; an owner transferring
 * or revoking a maker's keys in one step; every refusal a 403 problem+json that writes nothing and
 * logs no secret. A transfer's and a revocation's statements name their store (decision 0051).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { tokenGeneration } from '../../src/db/read-cache-signals.ts';
import { createToken, getToken } from '../../src/tokens/token.service.ts';
import { recordAudit } from '../../src/admin/audit/audit-log.ts';
import { attributeKeysFromAuditLog } from '../../src/schema/migrations/0017-key-makers.ts';
import { startStatementAudit, type StatementAudit } from '../helpers/statement-audit.ts';

const PASSWORD = 'correct horse battery';
type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='));
  if (!line) throw new Error(`no session cookie (${res.statusCode} ${res.body})`);
  return line.split(';')[0]!;
}

describe.each(backends)('keys bounded by their maker (%s)', (backend) => {
  let t: TestApp;
  const logLines: string[] = [];
  type Session = { cookie: string; csrf: string };
  let owner: Session;
  let ip = 0;

  async function signIn(email: string): Promise<Session> {
    const res = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email, password: PASSWORD }, remoteAddress: `10.9.0.${++ip}` });
    expect(res.statusCode, res.body).toBe(200);
    return { cookie: cookieOf(res), csrf: res.json().data.csrf_token };
  }
  const as = (s: Session, method: Method, url: string, payload?: object) =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { cookie: s.cookie, 'x-csrf-token': s.csrf }, payload });
  const withKey = (key: string, method: Method, url: string, payload?: object) =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { authorization: `Bearer ${key}` }, payload });
  const readWithKey = (key: string) => t.app.inject({ url: '/api/v1/products?limit=1', headers: { authorization: `Bearer ${key}` } });

  /** A new administrator with `role`, signed in, and an all-scopes key she made in her session. */
  async function administrator(email: string, role: 'admin' | 'viewer' | 'owner') {
    const user = await createAdminUser(t.database.db, { email, password: PASSWORD, role });
    const session = await signIn(email);
    const made =
      role === 'viewer' ? undefined : await as(session, 'POST', '/tokens', { name: `${email}'s key`, scopes: ['products:read', 'orders:read', 'admin'] });
    if (made) expect(made.statusCode, made.body).toBe(201);
    return { user, session, key: made?.json().data.token as string, keyId: made?.json().data.id as string };
  }
  const roleOf = async (id: string) => (await t.database.db.selectFrom('admin_users').select('role').where('id', '=', id).executeTakeFirst())?.role;
  const auditCount = async () => Number((await sql<{ n: number }>`SELECT count(*) AS n FROM admin_audit_log`.execute(t.database.db)).rows[0]!.n);
  const expectRefusal = (res: LightMyRequestResponse, reason: RegExp) => {
    expect(res.statusCode, res.body).toBe(403);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ code: 'forbidden', status: 403, detail: expect.stringMatching(reason) });
  };

  beforeAll(async () => {
    // A long token cache: every "at once" below is the cache being told, not an entry expiring.
    t = await buildTestApp(backend, { ...UNLIMITED, TOKEN_CACHE_MS: '600000', LOG_LEVEL: 'warn', ADMIN_SIGN_IN_MAX_FAILURES: '1000' }, { logLines });
    await createAdminUser(t.database.db, { email: 'owner@example.com', password: PASSWORD });
    owner = await signIn('owner@example.com');
  });
  afterAll(async () => t?.close());
  /** The statement audit of a test that runs one (stopped after it, even when it failed). */
  let audit: StatementAudit | undefined;
  afterEach(() => {
    audit?.stop();
    audit = undefined;
  });

  it("the escalation found from outside: an admin's admin-scoped key may not make her an owner, demote the owner or invite an owner (403, nothing written)", async () => {
    const alice = await administrator('alice@example.com', 'admin');
    const ownerId = (await as(owner, 'GET', '/admins')).json().data.find((a: { email: string }) => a.email === 'owner@example.com').id;
    const audits = await auditCount();
    expectRefusal(await withKey(alice.key, 'PATCH', `/admins/${alice.user.id}`, { role: 'owner' }), /owner-only.*never an API key/);
    expectRefusal(await withKey(alice.key, 'PATCH', `/admins/${ownerId}`, { role: 'viewer' }), /owner-only/);
    expectRefusal(await withKey(alice.key, 'POST', '/admins/invitations', { email: 'mallory@example.com', role: 'owner' }), /owner-only/);
    expectRefusal(await withKey(alice.key, 'DELETE', `/admins/${ownerId}`), /owner-only/);
    expect(await roleOf(alice.user.id)).toBe('admin');
    expect(await roleOf(ownerId)).toBe('owner');
    expect((await as(owner, 'GET', '/admins/invitations')).json().data).toEqual([]);
    expect(await auditCount()).toBe(audits);
    // Signed in, the same PATCH was and stays refused; the key keeps what an admin may do.
    expectRefusal(await as(alice.session, 'PATCH', `/admins/${alice.user.id}`, { role: 'owner' }), /role \(admin\)/);
    expect((await withKey(alice.key, 'POST', '/customers', { name: 'Ada', email: 'ada@example.com' })).statusCode).toBe(201);
  });

  it("an owner's own key acts as an admin: it writes, but owner-only actions need her signed-in session", async () => {
    const made = await as(owner, 'POST', '/tokens', { name: 'owner script', scopes: ['admin'] });
    const key = made.json().data.token as string;
    expect(made.json().data.made_by).toMatchObject({ kind: 'administrator', email: 'owner@example.com', role: 'owner', removed: false });
    expect((await withKey(key, 'POST', '/tokens', { name: 'child' })).statusCode).toBe(201);
    expectRefusal(await withKey(key, 'POST', '/admins/invitations', { email: 'x@example.com', role: 'viewer' }), /owner-only/);
    expectRefusal(await withKey(key, 'GET', '/admins/invitations'), /owner-only/);
    expectRefusal(await withKey(key, 'POST', '/account/password', { current_password: 'x', new_password: 'yyyyyyyyyyyy' }), /signed in/);
  });

  it('a demotion shrinks her key on its next request, though the key was cached; a promotion gives it back', async () => {
    const bea = await administrator('bea@example.com', 'admin');
    expect((await withKey(bea.key, 'GET', '/tokens')).statusCode).toBe(200);
    expect((await withKey(bea.key, 'GET', '/tokens')).statusCode).toBe(200); // cached now
    expect((await as(owner, 'PATCH', `/admins/${bea.user.id}`, { role: 'viewer' })).statusCode).toBe(200);
    const before = (await as(owner, 'GET', '/tokens')).json().data.length;
    expectRefusal(await withKey(bea.key, 'POST', '/tokens', { name: 'sneaky' }), /maker bea@example.com is now viewer/);
    expectRefusal(await withKey(bea.key, 'POST', '/customers', { name: 'Eve', email: 'eve@example.com' }), /viewer/);
    expect((await as(owner, 'GET', '/tokens')).json().data.length).toBe(before);
    expect((await withKey(bea.key, 'GET', '/tokens')).statusCode).toBe(200); // a viewer reads
    expect((await readWithKey(bea.key)).statusCode).toBe(200);
    const listed = (await as(owner, 'GET', `/tokens/${bea.keyId}`)).json().data;
    expect(listed.made_by).toEqual({ kind: 'administrator', id: bea.user.id, email: 'bea@example.com', role: 'viewer', removed: false });
    expect((await as(owner, 'PATCH', `/admins/${bea.user.id}`, { role: 'admin' })).statusCode).toBe(200);
    expect((await withKey(bea.key, 'POST', '/tokens', { name: 'allowed again' })).statusCode).toBe(201);
  });

  it("a removed administrator's key loses every write and admin power at once; its read scopes keep reading store data", async () => {
    const cleo = await administrator('cleo@example.com', 'admin');
    // A key made by her key is hers too: it cannot outlive her either.
    const child = await withKey(cleo.key, 'POST', '/tokens', { name: 'made by a key', scopes: ['admin', 'products:read'] });
    expect(child.json().data.made_by).toMatchObject({ email: 'cleo@example.com', id: cleo.user.id });
    const childKey = child.json().data.token as string;
    expect((await withKey(cleo.key, 'GET', '/tokens')).statusCode).toBe(200); // cached
    expect((await as(owner, 'DELETE', `/admins/${cleo.user.id}`)).statusCode).toBe(200);
    const keysBefore = (await as(owner, 'GET', '/tokens')).json().data.length;
    const audits = await auditCount();
    for (const key of [cleo.key, childKey]) {
      expectRefusal(
        await withKey(key, 'POST', '/admins/invitations', { email: 'back@example.com', role: 'admin' }),
        /cleo@example.com, who is no longer an administrator/,
      );
      expectRefusal(await withKey(key, 'POST', '/tokens', { name: 'one more' }), /no longer an administrator/);
      expectRefusal(await withKey(key, 'POST', '/customers', { name: 'Zed', email: 'zed@example.com' }), /no longer an administrator/);
      expectRefusal(await withKey(key, 'GET', '/tokens'), /no longer an administrator/);
      expect((await readWithKey(key)).statusCode).toBe(200);
    }
    expect((await as(owner, 'GET', '/tokens')).json().data.length).toBe(keysBefore);
    expect(await auditCount()).toBe(audits);
    const listed = (await as(owner, 'GET', '/tokens')).json().data.filter((k: { made_by: { id: string } }) => k.made_by.id === cleo.user.id);
    expect(listed).toHaveLength(2);
    for (const k of listed) expect(k.made_by).toMatchObject({ email: 'cleo@example.com', role: null, removed: true });
    // Each refusal is logged with the key's id and its maker, never the secret.
    const refusals = logLines.filter((l) => l.includes('admin API refused an API key') && l.includes(cleo.keyId));
    expect(refusals.length).toBeGreaterThanOrEqual(4);
    expect(JSON.parse(refusals[0]!)).toMatchObject({ reason: 'maker_removed', maker: { email: 'cleo@example.com', role: null } });
    for (const line of logLines) expect(line).not.toContain(cleo.key.slice(4));
  });

  it("an owner transfers a removed maker's keys to another administrator in one step; the secrets she saw stay bounded by her until the new maker rolls them", async () => {
    audit = startStatementAudit();
    const dora = await administrator('dora@example.com', 'admin');
    const erin = await administrator('erin@example.com', 'admin');
    expect((await as(owner, 'DELETE', `/admins/${dora.user.id}`)).statusCode).toBe(200);
    expectRefusal(await withKey(dora.key, 'POST', '/tokens', { name: 'x' }), /no longer/);
    // Only an owner, signed in: not an admin, not a key.
    expectRefusal(await as(erin.session, 'POST', `/tokens/made-by/${dora.user.id}/transfer`, { to_admin_id: erin.user.id }), /role \(admin\)/);
    expectRefusal(await withKey(erin.key, 'POST', `/tokens/made-by/${dora.user.id}/transfer`, { to_admin_id: erin.user.id }), /owner-only/);
    const unknownTarget = await as(owner, 'POST', `/tokens/made-by/${dora.user.id}/transfer`, { to_admin_id: '00000000-0000-4000-8000-000000000000' });
    expect(unknownTarget.statusCode).toBe(404);
    expect(unknownTarget.json().errors).toEqual([{ param: 'to_admin_id', message: 'unknown' }]);
    const moved = await as(owner, 'POST', `/tokens/made-by/${dora.user.id}/transfer`, { to_admin_id: erin.user.id });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json().data.map((k: { id: string }) => k.id)).toEqual([dora.keyId]);
    expect(moved.json().data[0].made_by).toMatchObject({ id: erin.user.id, email: 'erin@example.com', role: 'admin', removed: false });
    // The removed maker still holds this secret; the transfer does not revive it.
    expectRefusal(await withKey(dora.key, 'POST', '/tokens', { name: 'revived' }), /dora@example.com, who is no longer an administrator/);
    expect((await readWithKey(dora.key)).statusCode).toBe(200);
    // The new maker rolls it: the new secret is hers and acts with her role; the old one stays bound.
    const rolled = await as(erin.session, 'POST', `/tokens/${dora.keyId}/roll`, { overlap_seconds: 3600 });
    expect(rolled.statusCode, rolled.body).toBe(200);
    expect((await withKey(rolled.json().data.token as string, 'POST', '/tokens', { name: 'works again' })).statusCode).toBe(201);
    expectRefusal(await withKey(dora.key, 'POST', '/tokens', { name: 'still not' }), /no longer an administrator/);
    const entry = (await as(owner, 'GET', '/audit-log?action=key.transferred')).json().data[0];
    expect(entry.details).toMatchObject({ from: dora.user.id, to: 'erin@example.com' });
    expect(JSON.stringify(entry)).not.toContain(dora.key);
    const nothingLeft = await as(owner, 'POST', `/tokens/made-by/${dora.user.id}/transfer`, { to_admin_id: erin.user.id });
    expect(nothingLeft.statusCode).toBe(404);
    expect(audit.stop()).toEqual([]);
  });

  it('an owner revokes every key of a maker in one step; the keys stay listed with their maker', async () => {
    audit = startStatementAudit();
    const finn = await administrator('finn@example.com', 'admin');
    const second = (await as(finn.session, 'POST', '/tokens', { name: 'finn erp', scopes: ['orders:read'] })).json().data;
    const revoked = await as(owner, 'POST', `/tokens/made-by/${finn.user.id}/revoke`);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect(
      revoked
        .json()
        .data.map((k: { id: string }) => k.id)
        .sort(),
    ).toEqual([finn.keyId, second.id].sort());
    expect((await readWithKey(second.token)).statusCode).toBe(401);
    expect((await withKey(finn.key, 'GET', '/tokens')).statusCode).toBe(401);
    const listed = (await as(owner, 'GET', '/tokens')).json().data.filter((k: { made_by: { id: string } }) => k.made_by.id === finn.user.id);
    expect(listed.map((k: { status: string }) => k.status)).toEqual(['revoked', 'revoked']);
    const bad = await as(owner, 'POST', '/tokens/made-by/somebody/revoke');
    expect(bad.statusCode).toBe(400);
    expect(bad.headers['content-type']).toContain('application/problem+json');
    expect(audit.stop()).toEqual([]);
  });

  it("a CLI key (the operator's) acts as an admin: it writes and mints keys, never an owner-only action; an owner can give it a maker", async () => {
    const { token, summary } = await createToken(t.database.db, { name: 'cli', scopes: ['admin'] });
    expect(summary.made_by).toEqual({ kind: 'operator', id: null, email: null, role: null, removed: false });
    const minted = await withKey(token, 'POST', '/tokens', { name: 'from cli', scopes: ['admin'] });
    expect(minted.statusCode).toBe(201);
    expect(minted.json().data.made_by.kind).toBe('operator');
    expectRefusal(await withKey(token, 'PATCH', `/admins/${summary.id}`, { role: 'owner' }), /owner-only/);
    expectRefusal(await withKey(token, 'POST', '/admins/invitations', { email: 'o@example.com', role: 'owner' }), /owner-only/);
    const gina = await administrator('gina@example.com', 'viewer');
    const moved = await as(owner, 'POST', '/tokens/made-by/operator/transfer', { to_admin_id: gina.user.id });
    expect(moved.statusCode, moved.body).toBe(200);
    expectRefusal(await withKey(token, 'POST', '/tokens', { name: 'now read-only' }), /gina@example.com is now viewer/);
  });

  it("keys made before makers were recorded get the maker the audit log names (a key made by a key: its maker); others stay the operator's", async () => {
    const db = t.database.db;
    const ivy = await createAdminUser(db, { email: 'ivy@example.com', password: PASSWORD, role: 'admin' });
    const [bySession, byKey, unnamed] = await Promise.all(['legacy by session', 'legacy by key', 'legacy unnamed'].map((name) => createToken(db, { name })));
    const created = (actor: { kind: 'session' | 'token'; id: string; name: string }, keyId: string) =>
      recordAudit(db, { actor, action: 'key.created', target: { type: 'key', id: keyId }, clientIp: '192.0.2.1', details: {} });
    await created({ kind: 'session', id: ivy.id, name: ivy.email }, bySession!.summary.id);
    await created({ kind: 'token', id: bySession!.summary.id, name: 'legacy by session' }, byKey!.summary.id);
    await attributeKeysFromAuditLog(db);
    expect((await getToken(db, bySession!.summary.id)).made_by).toEqual({
      kind: 'administrator',
      id: ivy.id,
      email: 'ivy@example.com',
      role: 'admin',
      removed: false,
    });
    expect((await getToken(db, byKey!.summary.id)).made_by).toMatchObject({ kind: 'administrator', id: ivy.id });
    expect((await getToken(db, unnamed!.summary.id)).made_by.kind).toBe('operator');
  });

  it("rolling another maker's key makes the roller its maker: the secret she was shown does not outlive her removal", async () => {
    const made = await as(owner, 'POST', '/tokens', { name: 'owner integration', scopes: ['products:read', 'admin'] });
    expect(made.statusCode, made.body).toBe(201);
    const keyId = made.json().data.id as string;
    const dora = await administrator('dora@example.com', 'admin');
    const rolled = await as(dora.session, 'POST', `/tokens/${keyId}/roll`, { overlap_seconds: 0 });
    expect(rolled.statusCode, rolled.body).toBe(200);
    expect(rolled.json().data.made_by).toMatchObject({ kind: 'administrator', id: dora.user.id, email: 'dora@example.com', role: 'admin' });
    const secret = rolled.json().data.token as string;
    expect((await withKey(secret, 'POST', '/customers', { name: 'Rolled', email: 'rolled@example.com' })).statusCode).toBe(201);
    expect((await as(owner, 'DELETE', `/admins/${dora.user.id}`)).statusCode).toBe(200);
    expectRefusal(
      await withKey(secret, 'POST', '/customers', { name: 'Kept', email: 'kept@example.com' }),
      /dora@example.com, who is no longer an administrator/,
    );
    expectRefusal(await withKey(secret, 'POST', '/tokens', { name: 'one more' }), /no longer an administrator/);
    expect((await readWithKey(secret)).statusCode).toBe(200);
  });

  it("a rolled-out secret acts for the weaker of its maker and the roller: a removed maker's old secret gains nothing by the roll", async () => {
    const fay = await administrator('fay@example.com', 'admin');
    expect((await as(owner, 'DELETE', `/admins/${fay.user.id}`)).statusCode).toBe(200);
    const rolled = await as(owner, 'POST', `/tokens/${fay.keyId}/roll`, { overlap_seconds: 3600 });
    expect(rolled.statusCode, rolled.body).toBe(200);
    const fresh = rolled.json().data.token as string;
    const keysBefore = (await as(owner, 'GET', '/tokens')).json().data.length;
    // The old secret, valid for the overlap, still acts for its removed maker: no admin, no write power.
    expectRefusal(await withKey(fay.key, 'GET', '/admins'), /fay@example.com, who is no longer an administrator/);
    expectRefusal(await withKey(fay.key, 'GET', '/audit-log'), /no longer an administrator/);
    expectRefusal(await withKey(fay.key, 'POST', `/tokens/${fay.keyId}/roll`, {}), /no longer an administrator/);
    expectRefusal(await withKey(fay.key, 'POST', '/tokens', { name: 'laundered' }), /no longer an administrator/);
    expectRefusal(await withKey(fay.key, 'POST', '/customers', { name: 'Old', email: 'old@example.com' }), /no longer an administrator/);
    expect((await readWithKey(fay.key)).statusCode).toBe(200);
    expect((await as(owner, 'GET', '/tokens')).json().data.length).toBe(keysBefore);
    // The new secret, shown to the owner only, acts for her (capped at admin, as every key).
    expect((await withKey(fresh, 'POST', '/customers', { name: 'New', email: 'new@example.com' })).statusCode).toBe(201);
    expect((await withKey(fresh, 'GET', '/tokens')).statusCode).toBe(200);
  });

  it("a demoted maker's rolled-out secret acts as the demoted role, though an owner rolled it", async () => {
    const gil = await administrator('gil@example.com', 'admin');
    expect((await as(owner, 'PATCH', `/admins/${gil.user.id}`, { role: 'viewer' })).statusCode).toBe(200);
    const rolled = await as(owner, 'POST', `/tokens/${gil.keyId}/roll`, { overlap_seconds: 3600 });
    expect(rolled.statusCode, rolled.body).toBe(200);
    expect((await withKey(gil.key, 'GET', '/tokens')).statusCode).toBe(200); // a viewer reads
    expectRefusal(await withKey(gil.key, 'POST', '/customers', { name: 'Gil', email: 'gil-c@example.com' }), /gil@example.com is now viewer/);
    expectRefusal(await withKey(gil.key, 'POST', `/tokens/${gil.keyId}/roll`, {}), /viewer/);
    expect((await withKey(rolled.json().data.token as string, 'POST', '/customers', { name: 'Gil 2', email: 'gil-2@example.com' })).statusCode).toBe(201);
  });

  it.runIf(backend === 'postgres')("a demotion or removal made by another process reaches this process's cached keys by NOTIFY", async () => {
    const db = t.database.db;
    const hana = await administrator('hana@example.com', 'admin');
    expect((await withKey(hana.key, 'POST', '/tokens', { name: 'cached' })).statusCode).toBe(201);
    let before = tokenGeneration(db);
    // The role is the membership's in the key's store (migration 0033).
    await sql`UPDATE admin_memberships SET role = 'viewer' WHERE admin_user_id = ${hana.user.id}`.execute(db);
    await vi.waitFor(() => expect(tokenGeneration(db)).toBeGreaterThan(before));
    expectRefusal(await withKey(hana.key, 'POST', '/tokens', { name: 'x' }), /viewer/);
    expect((await withKey(hana.key, 'GET', '/tokens')).statusCode).toBe(200);
    before = tokenGeneration(db);
    await sql`DELETE FROM admin_users WHERE id = ${hana.user.id}`.execute(db);
    await vi.waitFor(() => expect(tokenGeneration(db)).toBeGreaterThan(before));
    expectRefusal(await withKey(hana.key, 'GET', '/tokens'), /no longer an administrator/);
  });
});
