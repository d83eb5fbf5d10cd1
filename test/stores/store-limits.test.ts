/**
 * Limits per store (decision 0051): a store's API keys and webhook endpoints stop at
 * STORE_MAX_API_KEYS and STORE_MAX_WEBHOOK_ENDPOINTS with 409 store_limit_reached naming the limit,
 * nothing written; what another store holds does not count against it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { createStore, homeStore } from '../../src/stores/store.service.ts';
import { asPlatform, inStore } from '../../src/db/store-scope.ts';
import { loadConfig } from '../../src/config/config.ts';

describe('store limits: defaults', () => {
  it('are 1000 keys and 1000 endpoints per store, and no limit of products or orders', () => {
    const config = loadConfig({});
    expect(config.STORE_MAX_API_KEYS).toBe(1000);
    expect(config.STORE_MAX_WEBHOOK_ENDPOINTS).toBe(1000);
    expect(config.STORE_MAX_PRODUCTS).toBe(0);
    expect(config.STORE_MAX_ORDERS).toBe(0);
  });
});

describe.each(backends)('store limits (%s)', (backend) => {
  let t: TestApp;
  const keys: Record<string, Record<string, string>> = {};
  const post = (url: string, headers: Record<string, string>, payload: object) => t.app.inject({ method: 'POST', url, headers, payload });

  beforeAll(async () => {
    t = await buildTestApp(backend, {
      ...UNLIMITED,
      STORE_MAX_API_KEYS: '3',
      STORE_MAX_WEBHOOK_ENDPOINTS: '2',
      STORE_MAX_PRODUCTS: '2',
      STORE_MAX_ORDERS: '1',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    });
    const db = t.database.db;
    const stores = { alpha: (await homeStore(db))!.id, bravo: (await createStore(db, { name: 'Bravo' })).id };
    for (const [name, store] of Object.entries(stores)) {
      keys[name] = { authorization: `Bearer ${(await inStore(store, () => createToken(db, { name, scopes: [...SCOPES] }))).token}` };
    }
  });
  afterAll(async () => t?.close());

  it("refuses a store's product past STORE_MAX_PRODUCTS and order past STORE_MAX_ORDERS, nothing written; another store's do not count", async () => {
    const product = (name: string) => ({ name, product_type: 'physical', sku: name, price: 5, stock: 10 });
    const count = async (table: string, store: string) =>
      (await asPlatform(() => sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE store_id = ${store}::uuid`.execute(t.database.db)))
        .rows[0]!.n;
    const alpha = (await homeStore(t.database.db))!.id;
    const made: string[] = [];
    while ((await count('products', alpha)) < 2) {
      const res = await post('/admin/api/v1/products', keys.alpha!, product(`P-${made.length}`));
      expect(res.statusCode, res.body).toBe(201);
      made.push(res.json().data.id);
    }
    const refused = await post('/admin/api/v1/products', keys.alpha!, product('P-too-many'));
    expect(refused.statusCode).toBe(409);
    expect(refused.headers['content-type']).toContain('application/problem+json');
    expect(refused.json()).toMatchObject({ code: 'store_limit_reached' });
    expect(refused.json().detail).toContain('STORE_MAX_PRODUCTS = 2');
    expect(await count('products', alpha)).toBe(2);
    // Bravo's products are its own.
    expect((await post('/admin/api/v1/products', keys.bravo!, product('B-1'))).statusCode).toBe(201);

    const productId =
      made[0] ??
      (await asPlatform(() => sql<{ id: string }>`SELECT id FROM products WHERE store_id = ${alpha}::uuid LIMIT 1`.execute(t.database.db))).rows[0]!.id;
    const order = { source: 'pos', items: [{ product_id: productId, quantity: 1 }] };
    if ((await count('orders', alpha)) === 0) expect((await post('/admin/api/v1/orders', keys.alpha!, order)).statusCode).toBe(201);
    const ordersBefore = await count('orders', alpha);
    const stockBefore = (await asPlatform(() => sql<{ stock: number }>`SELECT stock FROM products WHERE id = ${productId}::uuid`.execute(t.database.db)))
      .rows[0]!.stock;
    const noOrder = await post('/admin/api/v1/orders', keys.alpha!, order);
    expect(noOrder.statusCode).toBe(409);
    expect(noOrder.json().detail).toContain('STORE_MAX_ORDERS = 1');
    expect(await count('orders', alpha)).toBe(ordersBefore);
    // Nothing taken from stock by the refused order.
    expect(
      (await asPlatform(() => sql<{ stock: number }>`SELECT stock FROM products WHERE id = ${productId}::uuid`.execute(t.database.db))).rows[0]!.stock,
    ).toBe(stockBefore);
  });

  it("refuses a store's key past STORE_MAX_API_KEYS until one is revoked; another store's keys do not count", async () => {
    const made: string[] = [];
    for (const n of [1, 2]) {
      const res = await post('/admin/api/v1/tokens', keys.alpha!, { name: `k${n}`, scopes: ['products:read'] });
      expect(res.statusCode, res.body).toBe(201);
      made.push(res.json().data.id);
    }
    const count = async () => (await asPlatform(() => sql<{ n: number }>`SELECT count(*)::int AS n FROM api_tokens`.execute(t.database.db))).rows[0]!.n;
    const before = await count();
    const refused = await post('/admin/api/v1/tokens', keys.alpha!, { name: 'one too many', scopes: ['products:read'] });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ code: 'store_limit_reached' });
    expect(refused.json().detail).toContain('STORE_MAX_API_KEYS = 3');
    expect(await count()).toBe(before);
    // Bravo holds one key: it may make two more.
    for (const n of [1, 2]) expect((await post('/admin/api/v1/tokens', keys.bravo!, { name: `b${n}`, scopes: ['products:read'] })).statusCode).toBe(201);
    expect((await post('/admin/api/v1/tokens', keys.bravo!, { name: 'b3', scopes: ['products:read'] })).statusCode).toBe(409);
    // A revoked key no longer counts.
    expect((await post(`/admin/api/v1/tokens/${made[0]}/revoke`, keys.alpha!, {})).statusCode).toBe(200);
    expect((await post('/admin/api/v1/tokens', keys.alpha!, { name: 'after a revocation', scopes: ['products:read'] })).statusCode).toBe(201);
  });

  it('refuses an endpoint past STORE_MAX_WEBHOOK_ENDPOINTS, per store', async () => {
    for (const name of ['alpha', 'bravo']) {
      for (const n of [1, 2]) {
        const res = await post('/admin/api/v1/webhooks/endpoints', keys[name]!, { url: `http://127.0.0.1:9/${name}-${n}` });
        expect(res.statusCode, res.body).toBe(201);
      }
      const refused = await post('/admin/api/v1/webhooks/endpoints', keys[name]!, { url: `http://127.0.0.1:9/${name}-3` });
      expect(refused.statusCode).toBe(409);
      expect(refused.json()).toMatchObject({ code: 'store_limit_reached' });
      expect(refused.json().detail).toContain('STORE_MAX_WEBHOOK_ENDPOINTS = 2');
    }
  });
});
