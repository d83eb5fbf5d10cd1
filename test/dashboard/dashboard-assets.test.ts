/** The dashboard's page and assets as served (inject): types, security headers, no stray files. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

const ASSETS = fileURLToPath(new URL('../../src/admin/dashboard/public/assets/', import.meta.url));

describe.each(backends)('dashboard page and assets (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('serves the page at /admin and /admin/ with a strict Content-Security-Policy', async () => {
    for (const url of ['/admin', '/admin/']) {
      const page = await t.app.inject({ url });
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toContain('text/html');
      expect(page.headers['content-security-policy']).toContain("script-src 'self'");
      expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(page.headers['x-frame-options']).toBe('DENY');
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.body).toContain('<script type="module" src="/admin/assets/app.js">');
    }
  });

  it('serves every module the page imports, as JavaScript', async () => {
    const files = readdirSync(ASSETS, { recursive: true, withFileTypes: true })
      .filter((f) => f.isFile() && f.name.endsWith('.js'))
      .map((f) => `${f.parentPath.slice(ASSETS.length)}/${f.name}`.replace(/^\//, ''));
    expect(files).toContain('app.js');
    for (const file of files) {
      const res = await t.app.inject({ url: `/admin/assets/${file}` });
      expect(res.statusCode, file).toBe(200);
      expect(res.headers['content-type'], file).toMatch(/javascript/);
      // Every relative import resolves to a served file.
      for (const [, target] of res.body.matchAll(/from '(\.{1,2}\/[^']+)'/g)) {
        const resolved = new URL(target!, `http://x/admin/assets/${file}`).pathname;
        expect((await t.app.inject({ url: resolved })).statusCode, `${file} imports ${target}`).toBe(200);
      }
    }
  });

  it('answers unknown asset paths with the JSON 404, and does not serve the page under /admin/assets', async () => {
    for (const url of ['/admin/assets/missing.js', '/admin/assets/index.html', '/admin/assets/../dashboard.plugin.ts']) {
      const res = await t.app.inject({ url });
      expect(res.statusCode, url).toBe(404);
    }
  });
});
