/**
 * Rate limits (spec §8, docs/contract/decisions.md): per token, standard and export budgets counted separately,
 * per-token overrides, headers on every authenticated response, 429 problem+json with Retry-After,
 * and — with Redis — one shared count per token across app instances.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

const REDIS_URL = process.env.TEST_REDIS_URL;

async function tokenHeader(t: TestApp, overrides: { rateLimitStandard?: number; rateLimitExport?: number } = {}) {
  const { token } = await createToken(t.database.db, { name: 'rate-limit test', ...overrides });
  return { authorization: `Bearer ${token}` };
}

function expectRateLimitHeaders(headers: Record<string, unknown>, policy: 'standard' | 'export', limit: number, remaining: number, windowSeconds: number) {
  expect(headers['x-ratelimit-limit']).toBe(String(limit));
  expect(headers['x-ratelimit-remaining']).toBe(String(remaining));
  const reset = Number(headers['x-ratelimit-reset']);
  const nowSeconds = Date.now() / 1000;
  // Unix epoch seconds of the window's end, not a delta.
  expect(reset).toBeGreaterThanOrEqual(Math.floor(nowSeconds));
  expect(reset).toBeLessThanOrEqual(Math.ceil(nowSeconds) + windowSeconds);
  expect(headers['ratelimit-policy']).toBe(`"${policy}";q=${limit};w=${windowSeconds}`);
  expect(headers.ratelimit).toMatch(new RegExp(`^"${policy}";r=${remaining};t=\\d+$`));
}

describe.each(backends)('rate limits (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('allows 60 standard requests per minute and refuses the 61st with 429 rate_limited and Retry-After', async () => {
    const headers = await tokenHeader(t);
    for (let i = 1; i <= 60; i++) {
      const res = await t.app.inject({ url: i % 2 ? '/api/v1/products' : '/api/v1/customers?limit=5', headers });
      expect(res.statusCode, `request ${i}`).toBe(200);
      expectRateLimitHeaders(res.headers, 'standard', 60, 60 - i, 60);
    }
    const refused = await t.app.inject({ url: '/api/v1/orders', headers });
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.json()).toMatchObject({ status: 429, code: 'rate_limited', title: 'Too Many Requests' });
    const retryAfter = Number(refused.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expectRateLimitHeaders(refused.headers, 'standard', 60, 0, 60);
  });

  it('counts exports in their own budget of 10, apart from the standard one', async () => {
    const headers = await tokenHeader(t);
    for (let i = 1; i <= 10; i++) {
      const res = await t.app.inject({ url: '/api/v1/products/export', headers });
      expect(res.statusCode, `export ${i}`).toBe(200);
      expectRateLimitHeaders(res.headers, 'export', 10, 10 - i, 60);
    }
    const refused = await t.app.inject({ url: '/api/v1/orders/export', headers });
    expect(refused.statusCode).toBe(429);
    expect(refused.json().code).toBe('rate_limited');
    // The standard budget is untouched by the exports.
    const standard = await t.app.inject({ url: '/api/v1/products', headers });
    expect(standard.statusCode).toBe(200);
    expectRateLimitHeaders(standard.headers, 'standard', 60, 59, 60);
  });

  it("applies a token's own limits over the deployment defaults", async () => {
    const headers = await tokenHeader(t, { rateLimitStandard: 3, rateLimitExport: 1 });
    for (let i = 1; i <= 3; i++) expect((await t.app.inject({ url: '/api/v1/customers', headers })).statusCode).toBe(200);
    const refused = await t.app.inject({ url: '/api/v1/customers', headers });
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['x-ratelimit-limit']).toBe('3');
    expect((await t.app.inject({ url: '/api/v1/customers/export', headers })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/api/v1/customers/export', headers })).statusCode).toBe(429);
  });

  it("counts per token: one token's exhaustion leaves another untouched", async () => {
    const first = await tokenHeader(t, { rateLimitStandard: 1 });
    const second = await tokenHeader(t, { rateLimitStandard: 1 });
    expect((await t.app.inject({ url: '/api/v1/products', headers: first })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/api/v1/products', headers: first })).statusCode).toBe(429);
    expect((await t.app.inject({ url: '/api/v1/products', headers: second })).statusCode).toBe(200);
  });

  it('puts the headers on every authenticated response, errors included, and none on unauthenticated ones', async () => {
    const headers = await tokenHeader(t);
    const invalid = await t.app.inject({ url: '/api/v1/products?limit=0', headers });
    expect(invalid.statusCode).toBe(400);
    expectRateLimitHeaders(invalid.headers, 'standard', 60, 59, 60);
    const missing = await t.app.inject({ url: '/api/v1/orders/6f1c1b1e-0000-4000-8000-000000000000', headers });
    expect(missing.statusCode).toBe(404);
    expectRateLimitHeaders(missing.headers, 'standard', 60, 58, 60);
    const ordersOnly = { authorization: `Bearer ${(await createToken(t.database.db, { name: 'orders only', scopes: ['orders:read'] })).token}` };
    const forbidden = await t.app.inject({ url: '/api/v1/products', headers: ordersOnly });
    expect(forbidden.statusCode).toBe(403);
    expectRateLimitHeaders(forbidden.headers, 'standard', 60, 59, 60);
    expect((await t.app.inject({ url: '/api/v1/orders', headers: ordersOnly })).headers['x-ratelimit-remaining']).toBe('58');
    const anonymous = await t.app.inject({ url: '/api/v1/products' });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.headers['x-ratelimit-limit']).toBeUndefined();
  });

  it('takes its defaults from the deployment configuration and opens a new window when one ends', async () => {
    const config = loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', RATE_LIMIT_STANDARD: '2', RATE_LIMIT_EXPORT: '1', RATE_LIMIT_WINDOW_MS: '1000' });
    const app = await buildApp({ config, database: t.database, logger: pino({ level: 'silent' }) });
    try {
      const headers = await tokenHeader(t);
      const first = await app.inject({ url: '/api/v1/products', headers });
      expectRateLimitHeaders(first.headers, 'standard', 2, 1, 1);
      expect((await app.inject({ url: '/api/v1/products', headers })).statusCode).toBe(200);
      const refused = await app.inject({ url: '/api/v1/products', headers });
      expect(refused.statusCode).toBe(429);
      const resetAt = Number(refused.headers['x-ratelimit-reset']) * 1000;
      // The window ends at X-RateLimit-Reset; a request after that instant is counted afresh.
      await vi.waitFor(
        async () => {
          expect(Date.now()).toBeGreaterThanOrEqual(resetAt);
        },
        { timeout: 3000, interval: 50 },
      );
      const fresh = await app.inject({ url: '/api/v1/products', headers });
      expect(fresh.statusCode).toBe(200);
      expect(fresh.headers['x-ratelimit-remaining']).toBe('1');
    } finally {
      await app.close();
    }
  });

  it('does not limit the admin API', async () => {
    const { token } = await createToken(t.database.db, { name: 'admin', scopes: ['admin'], rateLimitStandard: 1 });
    for (let i = 0; i < 3; i++) {
      const res = await t.app.inject({ url: '/admin/api/v1/tokens', headers: { authorization: `Bearer ${token}` } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
  });

  it('serves requests uncounted, and says so in the log and metrics, while Redis is unreachable', async () => {
    // Port 1 on loopback: connection refused at once.
    const config = loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', REDIS_URL: 'redis://127.0.0.1:1' });
    const app = await buildApp({ config, database: t.database, logger: pino({ level: 'silent' }) });
    try {
      const headers = await tokenHeader(t, { rateLimitStandard: 1 });
      for (let i = 0; i < 3; i++) {
        const res = await app.inject({ url: '/api/v1/products', headers });
        expect(res.statusCode).toBe(200);
        expect(res.headers['x-ratelimit-limit']).toBeUndefined();
      }
      const metrics = (await app.inject({ url: '/metrics' })).body;
      // Each is a failed check or, once the breaker has opened (a refused connection opens it at
      // once), a request served without asking Redis.
      const failed = Number(/^store_api_rate_limit_store_errors_total (\d+)/m.exec(metrics)?.[1] ?? 0);
      const uncounted = Number(/^store_api_rate_limit_uncounted_total (\d+)/m.exec(metrics)?.[1] ?? 0);
      expect(failed + uncounted).toBeGreaterThanOrEqual(3);
      expect(metrics).toMatch(/^store_api_rate_limit_store_out 1$/m);
    } finally {
      await app.close();
    }
  });

  describe.skipIf(!REDIS_URL)('with REDIS_URL (TEST_REDIS_URL)', () => {
    let apps: App[] = [];
    beforeAll(async () => {
      // A key prefix of this run only, so parallel runs on one Redis never share counts.
      const env = { LOG_LEVEL: 'silent', SEED_DEMO: 'false', REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: `store-api-test:${randomBytes(6).toString('hex')}:` };
      for (let i = 0; i < 2; i++) {
        const app = await buildApp({ config: loadConfig(env), database: t.database, logger: pino({ level: 'silent' }) });
        await app.ready();
        apps.push(app);
      }
    });
    afterAll(async () => {
      await Promise.all(apps.map((app) => app.close()));
      apps = [];
    });

    it('shares one budget per token between app instances: the 61st request is refused by either', async () => {
      const headers = await tokenHeader(t);
      for (let i = 1; i <= 60; i++) {
        const res = await apps[i % 2]!.inject({ url: '/api/v1/products', headers });
        expect(res.statusCode, `request ${i}`).toBe(200);
        expect(res.headers['x-ratelimit-remaining']).toBe(String(60 - i));
      }
      for (const app of apps) {
        const refused = await app.inject({ url: '/api/v1/products', headers });
        expect(refused.statusCode).toBe(429);
        expect(refused.json().code).toBe('rate_limited');
        expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
      // Both instances report the same window end.
      const a = await apps[0]!.inject({ url: '/api/v1/products', headers });
      const b = await apps[1]!.inject({ url: '/api/v1/products', headers });
      expect(Math.abs(Number(a.headers['x-ratelimit-reset']) - Number(b.headers['x-ratelimit-reset']))).toBeLessThanOrEqual(1);
    });

    it('keeps the export budget separate in Redis too', async () => {
      const headers = await tokenHeader(t, { rateLimitExport: 2 });
      expect((await apps[0]!.inject({ url: '/api/v1/products/export', headers })).statusCode).toBe(200);
      expect((await apps[1]!.inject({ url: '/api/v1/products/export', headers })).statusCode).toBe(200);
      expect((await apps[0]!.inject({ url: '/api/v1/products/export', headers })).statusCode).toBe(429);
      expect((await apps[1]!.inject({ url: '/api/v1/products', headers })).headers['x-ratelimit-remaining']).toBe('59');
    });
  });
});
