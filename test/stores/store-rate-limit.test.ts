/**
 * A store's budget across all of its keys (decision 0051, STORE_RATE_LIMIT): however many keys a
 * store makes, their requests together stop at the store's limit per window (429 rate_limited naming
 * the store's limit, Retry-After); another store's keys are counted apart; a request its own key's
 * budget refuses does not spend the store's; 0 (the default) sets no store-wide limit. With Redis,
 * every app instance shares the store's count.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { createStore, homeStore } from '../../src/stores/store.service.ts';
import { inStore } from '../../src/db/store-scope.ts';
import { loadConfig } from '../../src/config/config.ts';
import { buildApp, type App } from '../../src/app.ts';

const REDIS_URL = process.env.TEST_REDIS_URL;

describe('store rate limit: default', () => {
  it('is off (0): a store of one key notices nothing new', () => {
    expect(loadConfig({}).STORE_RATE_LIMIT).toBe(0);
  });
});

describe.each(backends)('store rate limit (%s)', (backend) => {
  let t: TestApp;
  let stores: { alpha: string; bravo: string };
  const keyOf = async (store: string, rateLimitStandard?: number) =>
    ({
      authorization: `Bearer ${(await inStore(store, () => createToken(t.database.db, { name: 'k', scopes: [...SCOPES], ...(rateLimitStandard ? { rateLimitStandard } : {}) }))).token}`,
    }) as Record<string, string>;

  beforeAll(async () => {
    t = await buildTestApp(backend, { RATE_LIMIT_STANDARD: '1000', RATE_LIMIT_EXPORT: '1000', STORE_RATE_LIMIT: '5' });
    const db = t.database.db;
    stores = { alpha: (await homeStore(db))!.id, bravo: (await createStore(db, { name: 'Bravo' })).id };
  });
  afterAll(async () => t?.close());

  it("counts every key of a store together, and another store's apart", async () => {
    const alpha = [await keyOf(stores.alpha), await keyOf(stores.alpha), await keyOf(stores.alpha)];
    const bravo = await keyOf(stores.bravo);
    for (let i = 0; i < 5; i++) {
      const res = await t.app.inject({ url: i % 2 ? '/api/v1/products/export' : '/api/v1/products', headers: alpha[i % 3]! });
      expect(res.statusCode, `request ${i + 1}`).toBe(200);
    }
    for (const headers of alpha) {
      const refused = await t.app.inject({ url: '/api/v1/customers', headers });
      expect(refused.statusCode).toBe(429);
      expect(refused.headers['content-type']).toContain('application/problem+json');
      expect(refused.json()).toMatchObject({ code: 'rate_limited' });
      expect(refused.json().detail).toContain("5 requests per 60 s across all of this store's API keys");
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    // A new key of the same store starts with nothing of the store's budget left.
    expect((await t.app.inject({ url: '/api/v1/products', headers: await keyOf(stores.alpha) })).statusCode).toBe(429);
    // Bravo's budget is its own.
    for (let i = 0; i < 5; i++) expect((await t.app.inject({ url: '/api/v1/orders', headers: bravo })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/api/v1/orders', headers: bravo })).statusCode).toBe(429);
  });

  it("does not spend the store's budget on a request its key's own budget refused", async () => {
    const store = (await createStore(t.database.db, { name: `Charlie ${backend}` })).id;
    const tight = await keyOf(store, 1);
    expect((await t.app.inject({ url: '/api/v1/products', headers: tight })).statusCode).toBe(200);
    for (let i = 0; i < 10; i++) expect((await t.app.inject({ url: '/api/v1/products', headers: tight })).statusCode).toBe(429);
    // 1 of the store's 5 spent: four more from another key.
    const other = await keyOf(store);
    for (let i = 0; i < 4; i++) expect((await t.app.inject({ url: '/api/v1/products', headers: other })).statusCode).toBe(200);
    const refused = await t.app.inject({ url: '/api/v1/products', headers: other });
    expect(refused.statusCode).toBe(429);
    expect(refused.json().detail).toContain("across all of this store's API keys");
  });

  describe.skipIf(!REDIS_URL)('with REDIS_URL (TEST_REDIS_URL)', () => {
    let apps: App[] = [];
    beforeAll(async () => {
      const env = {
        LOG_LEVEL: 'silent',
        SEED_DEMO: 'false',
        REDIS_URL: REDIS_URL!,
        REDIS_KEY_PREFIX: `store-api-test:${randomBytes(6).toString('hex')}:`,
        RATE_LIMIT_STANDARD: '1000',
        STORE_RATE_LIMIT: '4',
      };
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

    it("shares a store's budget between app instances", async () => {
      const store = (await createStore(t.database.db, { name: `Delta ${backend}` })).id;
      const keys = [await keyOf(store), await keyOf(store)];
      for (let i = 0; i < 4; i++) expect((await apps[i % 2]!.inject({ url: '/api/v1/products', headers: keys[i % 2]! })).statusCode).toBe(200);
      for (const app of apps) expect((await app.inject({ url: '/api/v1/products', headers: keys[0]! })).statusCode).toBe(429);
    });
  });
});
