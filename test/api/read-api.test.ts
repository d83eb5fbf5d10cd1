/**
 * Every read endpoint returns the documented shape (checked against the API's own schemas), with
 * the spec's filters, envelopes and headers; and authentication answers per docs/contract/decisions.md.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { expectSchema } from '../helpers/schema-check.ts';
import { aCustomer, aProduct, aProductWithVariants, anOrder } from '../helpers/store-fixtures.ts';
import { listOf, single } from '../../src/api/schemas.ts';
import { Product } from '../../src/catalog/product.resource.ts';
import { Customer } from '../../src/customers/customer.resource.ts';
import { InventoryRecord, StockMovement } from '../../src/inventory/inventory.resource.ts';
import { Order } from '../../src/orders/order.resource.ts';
import { changeOrderStatus } from '../../src/orders/order.service.ts';
import { updateProduct } from '../../src/catalog/catalog.service.ts';
import { createToken, revokeToken } from '../../src/tokens/token.service.ts';
import { sql } from 'kysely';

describe.each(backends)('read API (%s)', (backend) => {
  let t: TestApp;
  let headers: { authorization: string };
  let ids: { product: string; variantProduct: string; inactive: string; customer: string; order: string; cancelled: string };

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    headers = await t.auth();
    const db = t.ctx.database.db;
    const product = await aProduct(db, { stock: 50, price: 19.99 });
    const variantProduct = await aProductWithVariants(db, [3, 4]);
    const inactive = await aProduct(db);
    await updateProduct(db, inactive.id, { is_active: false });
    await aProduct(db, { product_type: 'service', stock: 0, sku: null });
    const customer = await aCustomer(db);
    const order = await anOrder(
      db,
      [
        { product_id: product.id, quantity: 3 },
        { product_id: variantProduct.id, variant_id: variantProduct.variants[0]!.id, quantity: 2 },
      ],
      { discount: 1.5, delivery_fee: 4.99 },
    );
    const cancelled = await anOrder(db, [{ product_id: product.id, quantity: 1 }]);
    await changeOrderStatus(db, cancelled.id, 'cancelled');
    ids = { product: product.id, variantProduct: variantProduct.id, inactive: inactive.id, customer: customer.id, order: order.id, cancelled: cancelled.id };
  });
  afterAll(async () => t?.close());

  const get = (url: string, h: Record<string, string> = headers) => t.app.inject({ url, headers: h });

  it('lists, single GETs and exports have the documented shapes', async () => {
    const lists = [
      ['/api/v1/products', Product],
      ['/api/v1/orders', Order],
      ['/api/v1/customers', Customer],
      ['/api/v1/inventory', InventoryRecord],
      ['/api/v1/inventory/movements', StockMovement],
    ] as const;
    for (const [url, schema] of lists) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expectSchema(listOf(schema), res.json());
      expect(res.json().data.length, url).toBeGreaterThan(0);
      expect(res.json().pagination.limit).toBe(50);

      const exp = await get(`${url}/export`);
      expect(exp.statusCode, `${url}/export`).toBe(200);
      expect(exp.headers['content-type']).toMatch(/^application\/x-ndjson/);
      expect(exp.headers['x-has-more']).toBe('false');
      expect(exp.headers['x-next-cursor']).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z_[0-9a-f-]{36}$/);
      const lines = exp.body.split('\n').filter(Boolean);
      expect(lines.length, `${url}: ${exp.body}`).toBe(res.json().data.length);
      // NDJSON: every record, the last one included, ends with its line break; nothing else in between.
      expect(exp.body).toBe(`${lines.join('\n')}\n`);
      expect(lines.map((line) => (JSON.parse(line) as { id?: string }).id)).toEqual(res.json().data.map((r: { id?: string }) => r.id));
      for (const line of lines) expectSchema(schema, JSON.parse(line));
    }
    for (const [url, schema] of [
      [`/api/v1/products/${ids.variantProduct}`, Product],
      [`/api/v1/orders/${ids.order}`, Order],
      [`/api/v1/customers/${ids.customer}`, Customer],
    ] as const) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(200);
      expectSchema(single(schema), res.json());
    }
  });

  it('products: active only unless include_inactive; stock sums variants; money exact', async () => {
    const list = (await get('/api/v1/products?limit=200')).json().data as { id: string }[];
    expect(list.map((p) => p.id)).not.toContain(ids.inactive);
    const all = (await get('/api/v1/products?limit=200&include_inactive=true')).json().data as { id: string }[];
    expect(all.map((p) => p.id)).toContain(ids.inactive);
    const single = (await get(`/api/v1/products/${ids.inactive}`)).json().data;
    expect(single.is_active).toBe(false);
    const vp = (await get(`/api/v1/products/${ids.variantProduct}`)).json().data;
    expect(vp.stock).toBe(vp.variants.reduce((s: number, v: { stock: number }) => s + v.stock, 0));
    expect(vp.variants[0].attributes).toEqual({ size: '0', color: 'red' });
    const p = (await get(`/api/v1/products/${ids.product}`)).json().data;
    expect(p.price).toBe(19.99);
    expect(p.last_modified).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
  });

  it('orders: totals hold, filters by status, source and since', async () => {
    const order = (await get(`/api/v1/orders/${ids.order}`)).json().data;
    for (const item of order.items) expect(item.total).toBeCloseTo(item.quantity * item.unit_price, 2);
    const subtotal = order.items.reduce((s: number, i: { total: number }) => s + i.total, 0);
    expect(order.subtotal).toBeCloseTo(subtotal, 2);
    expect(order.total).toBeCloseTo(order.subtotal - order.discount + order.delivery_fee, 2);
    expect(String(order.total)).toMatch(/^\d+(\.\d{1,2})?$/);

    const cancelled = (await get('/api/v1/orders?status=cancelled')).json().data as { id: string }[];
    expect(cancelled.map((o) => o.id)).toEqual([ids.cancelled]);
    expect((await get('/api/v1/orders?source=pos')).json().data).toEqual([]);
    expect((await get('/api/v1/orders?source=online')).json().data).toHaveLength(2);
    expect((await get('/api/v1/orders?since=2999-01-01')).json().data).toEqual([]);
    expect((await get(`/api/v1/orders?since=${encodeURIComponent(order.created_at)}`)).json().data.map((o: { id: string }) => o.id)).not.toContain(ids.order);
    expect((await get('/api/v1/orders?since=2000-01-01T00:00:00Z')).json().data).toHaveLength(2);
    expect((await get('/api/v1/orders/export?status=cancelled')).body.trim().split('\n')).toHaveLength(1);

    // `since` is about creation: an order changed after `since` but created before it stays out.
    await changeOrderStatus(t.ctx.database.db, ids.order, 'processing');
    const changed = (await get(`/api/v1/orders/${ids.order}`)).json().data;
    expect(Date.parse(changed.last_modified)).toBeGreaterThan(Date.parse(order.created_at));
    expect((await get(`/api/v1/orders?since=${encodeURIComponent(order.created_at)}`)).json().data.map((o: { id: string }) => o.id)).not.toContain(ids.order);
    expect((await get(`/api/v1/orders/export?since=${encodeURIComponent(order.created_at)}`)).body).not.toContain(ids.order);
  });

  it('movements: sale, cancel and initial adjustments recorded; product_id and since filters', async () => {
    const res = (await get(`/api/v1/inventory/movements?product_id=${ids.product}&limit=200`)).json().data as {
      reason: string;
      quantity_change: number;
      stock_before: number;
      stock_after: number;
      order_id: string | null;
    }[];
    expect(res.map((m) => m.reason)).toEqual(['adjustment', 'sale', 'sale', 'cancel']);
    expect(res.map((m) => m.quantity_change)).toEqual([50, -3, -1, 1]);
    for (const m of res) expect(m.stock_after).toBe(m.stock_before + m.quantity_change);
    expect(res[3]!.order_id).toBe(ids.cancelled);
    expect((await get('/api/v1/inventory/movements?since=2999-01-01')).json().data).toEqual([]);
    const inv = (await get('/api/v1/inventory?limit=200')).json().data as { product_id: string; stock: number }[];
    expect(inv.find((r) => r.product_id === ids.product)!.stock).toBe(47);
    expect(inv.every((r) => r.product_id)).toBe(true);
  });

  it('unknown ids are 404 problem+json; malformed ids are 400 naming the parameter', async () => {
    for (const path of ['products', 'orders', 'customers']) {
      const res = await get(`/api/v1/${path}/00000000-0000-4000-8000-000000000000`);
      expect(res.statusCode).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json().code).toBe('not_found');
      const bad = await get(`/api/v1/${path}/not-a-uuid`);
      expect(bad.statusCode).toBe(400);
      expect(bad.json().errors[0].param).toBe('id');
    }
  });

  it('authentication: 401 with WWW-Authenticate when missing or malformed, 401 unknown/revoked/expired, 403 without scope', async () => {
    const missing = await get('/api/v1/products', {});
    expect(missing.statusCode).toBe(401);
    expect(missing.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(missing.json().code).toBe('unauthorized');
    const malformed = await get('/api/v1/products', { authorization: 'Basic abc' });
    expect(malformed.statusCode).toBe(401);
    expect(malformed.headers['www-authenticate']).toMatch(/^Bearer/);
    const unknown = await get('/api/v1/products', { authorization: `Bearer sia_${'A'.repeat(43)}` });
    expect(unknown.statusCode).toBe(401);

    const db = t.ctx.database.db;
    const { token, summary } = await createToken(db, { name: 'to revoke' });
    expect((await get('/api/v1/products', { authorization: `Bearer ${token}` })).statusCode).toBe(200);
    await revokeToken(db, summary.id);
    expect((await get('/api/v1/products', { authorization: `Bearer ${token}` })).statusCode).toBe(401);

    const expired = await createToken(db, { name: 'expired', expiresAt: '2000-01-01T00:00:00Z' });
    const res = await get('/api/v1/products', { authorization: `Bearer ${expired.token}` });
    expect(res.statusCode).toBe(401);
    expect(res.json().detail).toMatch(/expired/);

    const ordersOnly = await createToken(db, { name: 'orders only', scopes: ['orders:read'] });
    const h = { authorization: `Bearer ${ordersOnly.token}` };
    expect((await get('/api/v1/orders', h)).statusCode).toBe(200);
    const forbidden = await get('/api/v1/products', h);
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.json().code).toBe('forbidden');
    expect((await get('/api/v1/inventory/movements', h)).statusCode).toBe(403);
    // Read tokens cannot use the admin API.
    expect((await t.app.inject({ method: 'POST', url: '/admin/api/v1/customers', headers, payload: { name: 'x' } })).statusCode).toBe(403);
  });

  it('tokens are stored only as a hash', async () => {
    const { token } = await createToken(t.ctx.database.db, { name: 'hash check' });
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM api_tokens WHERE token_hash = ${token} OR prefix = ${token}`.execute(
      t.ctx.database.db,
    );
    expect(rows[0]!.n).toBe(0);
  });
});
