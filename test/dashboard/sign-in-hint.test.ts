/** What `npm start` prints about the dashboard, before and after the first administrator exists. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { adminSignInHint } from '../../src/admin/dashboard/sign-in-hint.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';

describe.each(backends)('dashboard sign-in hint (%s)', (backend) => {
  let t: TestApp;
  let url: string;
  beforeAll(async () => {
    t = await buildTestApp(backend);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}/admin`;
  });
  afterAll(async () => t?.close());

  it('prints a one-time setup link while there is none, and the CLI as the alternative', async () => {
    const hint = await adminSignInHint(t.ctx, t.app);
    expect(hint).toContain(`Admin dashboard: ${url}\n`);
    expect(hint).toContain('No administrator exists yet');
    expect(hint).toMatch(new RegExp(`${url.replace(/[.]/g, '\\.')}#/setup\\?code=[A-Za-z0-9_-]{43}\n`));
    expect(hint).toContain('works once, for 1 h');
    expect(hint).toContain('npx store-api admin create --email you@example.com');
    // Each start issues its own code; only hashes are stored.
    const again = await adminSignInHint(t.ctx, t.app);
    expect(again.match(/code=([\w-]+)/)![1]).not.toBe(hint.match(/code=([\w-]+)/)![1]);
    const stored = await t.database.db.selectFrom('admin_setup_codes').select('code_hash').execute();
    expect(stored.length).toBe(2);
    expect(stored.map((r) => r.code_hash).join()).not.toContain(hint.match(/code=([\w-]+)/)![1]);
  });

  it('only says where the dashboard is once an administrator exists', async () => {
    await createAdminUser(t.database.db, { email: 'first@example.com', password: 'a long enough password' });
    expect(await adminSignInHint(t.ctx, t.app)).toBe(`Admin dashboard: ${url}\n`);
  });
});
