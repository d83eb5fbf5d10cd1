/**
 * The one-time setup link. A valid code creates the first administrator and signs
 * in; a wrong, used or expired code, or any code once an administrator exists, is a clear 4xx and
 * counts like a failed sign-in; two codes used at once make one administrator.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { issueSetupCode, setupCodeState } from '../../src/admin/sessions/setup-code.service.ts';
import { countAdminUsers } from '../../src/admin/sessions/admin-user.service.ts';
import { SESSION_COOKIE } from '../../src/admin/sessions/session-cookie.ts';

describe('setupCodeState (pure)', () => {
  const now = new Date('2026-01-01T12:00:00Z');
  const row = (expires: string, used: string | null = null) => ({ expires_at: expires, used_at: used });
  it('decides every case', () => {
    expect(setupCodeState(row('2026-01-01T13:00:00Z'), 0, now)).toBe('valid');
    expect(setupCodeState(row('2026-01-01T12:00:00Z'), 0, now)).toBe('expired');
    expect(setupCodeState(undefined, 0, now)).toBe('unknown');
    expect(setupCodeState(row('2026-01-01T13:00:00Z', '2026-01-01T12:30:00Z'), 1, now)).toBe('used');
    expect(setupCodeState(row('2026-01-01T13:00:00Z'), 1, now)).toBe('administrator_exists');
    expect(setupCodeState(undefined, 1, now)).toBe('administrator_exists');
  });
});

describe.each(backends)('first-administrator setup link (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, { ADMIN_SIGN_IN_MAX_FAILURES: '3' });
  });
  afterAll(async () => t?.close());

  const post = (url: string, payload: unknown, ip = '10.0.0.1') => t.app.inject({ method: 'POST', url, payload: payload as object, remoteAddress: ip });
  const expectProblem = (res: Awaited<ReturnType<typeof post>>, status: number, text: string) => {
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json().detail).toContain(text);
  };

  it('refuses wrong and expired codes clearly, creates the administrator once with a valid one', async () => {
    const { code } = (await issueSetupCode(t.database.db, 3_600_000))!;
    const { code: expired } = (await issueSetupCode(t.database.db, 3_600_000))!;
    await sql`UPDATE admin_setup_codes SET expires_at = now() - interval '1 second' WHERE expires_at = (SELECT max(expires_at) FROM admin_setup_codes)`.execute(
      t.database.db,
    );

    expect((await post('/admin/setup/check', { code }, '10.0.0.9')).json()).toEqual({ data: { valid: true } });
    expectProblem(await post('/admin/setup/check', { code: 'nope' }), 404, 'not valid');
    expectProblem(await post('/admin/setup/check', { code: expired }), 404, 'expired');
    expectProblem(await post('/admin/setup/check', { code: 'bad code!' }, '10.0.0.9'), 400, 'code');
    // Same rules as `admin create`, naming the field; nothing is spent.
    const weak = await post('/admin/setup', { code, email: 'first@example.com', password: 'short' }, '10.0.0.9');
    expect(weak.statusCode).toBe(400);
    expect(weak.json().errors).toEqual([expect.objectContaining({ param: 'password' })]);

    const created = await post('/admin/setup', { code, email: 'First@Example.com', password: 'a long enough password' }, '10.0.0.9');
    expect(created.statusCode).toBe(201);
    expect(created.json().data).toMatchObject({ email: 'first@example.com', csrf_token: expect.any(String) });
    const cookie = created.cookies.find((c) => c.name === SESSION_COOKIE);
    expect(cookie?.httpOnly).toBe(true);
    const me = await t.app.inject({ url: '/admin/session', cookies: { [cookie!.name]: cookie!.value } });
    expect(me.json().data.email).toBe('first@example.com');

    expectProblem(await post('/admin/setup', { code, email: 'second@example.com', password: 'a long enough password' }, '10.0.0.9'), 409, 'already been used');
    expectProblem(await post('/admin/setup/check', { code: 'x'.repeat(43) }, '10.0.0.9'), 409, 'already exists');
    expect(await issueSetupCode(t.database.db, 3_600_000)).toBeUndefined();
    expect(await countAdminUsers(t.database.db)).toBe(1);
  });

  it('throttles refused codes like failed sign-ins (per client address)', async () => {
    for (let i = 0; i < 3; i++) expect((await post('/admin/setup/check', { code: `wrong${i}` }, '10.0.0.7')).statusCode).toBe(409);
    const limited = await post('/admin/setup/check', { code: 'wrong' }, '10.0.0.7');
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect((await post('/admin/setup/check', { code: 'wrong' }, '10.0.0.8')).statusCode).toBe(409);
  });
});

describe.each(backends)('two setup codes used at once (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('makes exactly one administrator', async () => {
    const a = (await issueSetupCode(t.database.db, 3_600_000))!.code;
    const b = (await issueSetupCode(t.database.db, 3_600_000))!.code;
    const answers = await Promise.all(
      [a, b].map((code, i) =>
        t.app.inject({
          method: 'POST',
          url: '/admin/setup',
          payload: { code, email: `admin${i}@example.com`, password: 'a long enough password' },
        }),
      ),
    );
    expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 409]);
    expect(await countAdminUsers(t.database.db)).toBe(1);
  });
});
