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

  it('says how to create the first administrator while there is none', async () => {
    const hint = await adminSignInHint(t.ctx, t.app);
    expect(hint).toContain(`Admin dashboard: ${url}\n`);
    expect(hint).toContain('No administrator exists yet');
    expect(hint).toContain('npx store-api admin create --email you@example.com');
    // The embedded database admits one process: the CLI can only run while the server is stopped.
    if (backend === 'pglite') expect(hint).toContain('stop the server');
    else expect(hint).toContain('in another terminal');
  });

  it('only says where the dashboard is once an administrator exists', async () => {
    await createAdminUser(t.database.db, { email: 'first@example.com', password: 'a long enough password' });
    expect(await adminSignInHint(t.ctx, t.app)).toBe(`Admin dashboard: ${url}\n`);
  });
});
