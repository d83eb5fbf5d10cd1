/**
 * Bad input never gets a 500: wrong types, out-of-range limits, malformed cursors and dates, unknown
 * enum values and parameters, SQL-looking strings, 10 kB values, invalid UTF-8 and broken bodies
 * each get a 4xx problem+json naming what was wrong, and the server keeps serving.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { sql } from 'kysely';

const big = 'x'.repeat(10 * 1024);

/** [url, parameter the problem must name] */
const badQueries: [string, string][] = [
  ['/api/v1/products?limit=0', 'limit'],
  ['/api/v1/products?limit=201', 'limit'],
  ['/api/v1/products?limit=-5', 'limit'],
  ['/api/v1/products?limit=abc', 'limit'],
  ['/api/v1/products?limit=1.5', 'limit'],
  ['/api/v1/products/export?limit=501', 'limit'],
  ['/api/v1/products?cursor=yesterday', 'cursor'],
  ['/api/v1/products?cursor=2026-13-01T00:00:00Z', 'cursor'],
  ['/api/v1/products?cursor=2026-02-30T00:00:00Z', 'cursor'],
  ['/api/v1/products?cursor=2026-01-01T00:00:00.1234567Z', 'cursor'],
  ['/api/v1/products?cursor=2026-01-01T00:00:00Z_not-a-uuid', 'cursor'],
  ["/api/v1/products?cursor=2026-01-01T00:00:00Z'%20OR%201=1--", 'cursor'],
  [`/api/v1/products?cursor=${big}`, 'cursor'],
  ['/api/v1/products?cursor=%FF%FE', 'cursor'],
  ['/api/v1/products?order=sideways', 'order'],
  ['/api/v1/products?include_inactive=maybe', 'include_inactive'],
  ['/api/v1/products?colour=red', 'colour'],
  ['/api/v1/orders?status=lost', 'status'],
  ["/api/v1/orders?status=pending'%3B%20DROP%20TABLE%20orders%3B--", 'status'],
  ['/api/v1/orders?source=fax', 'source'],
  ['/api/v1/orders?since=last-week', 'since'],
  ['/api/v1/orders?since=2026-01-01T25:00:00Z', 'since'],
  [`/api/v1/orders?since=${big}`, 'since'],
  ['/api/v1/customers?order=1', 'order'],
  ['/api/v1/inventory/movements?product_id=1%20OR%201%3D1', 'product_id'],
  [`/api/v1/inventory/movements?product_id=${big}`, 'product_id'],
  ['/api/v1/inventory?limit=%00', 'limit'],
  // Classes that used to reach PostgreSQL: numbers coerced to ±Infinity, timestamps outside its
  // range, text it cannot store (NUL).
  ['/api/v1/products?limit=1e400', 'limit'],
  ['/api/v1/orders/export?limit=-1e400', 'limit'],
  ['/api/v1/products?cursor=0000-01-01T00:00:00Z', 'cursor'],
  ['/api/v1/products?cursor=0000-06-01T00:00:00Z_00000000-0000-4000-8000-000000000000', 'cursor'],
  ['/api/v1/products?cursor=9999-12-31T23:59:59-14:00', 'cursor'],
  ['/api/v1/orders?since=0000-01-01', 'since'],
  ['/api/v1/orders?since=-infinity', 'since'],
  ['/api/v1/inventory/movements?since=10000-01-01', 'since'],
  ['/api/v1/inventory/movements?product_id=a%00b', 'product_id'],
  ['/admin/api/v1/webhooks/stats?hours=1e400', 'hours'],
  ['/admin/api/v1/webhooks/deliveries?limit=1e400', 'limit'],
  ['/admin/api/v1/webhooks/deliveries?cursor=0000-01-01T00:00:00Z_00000000-0000-4000-8000-000000000000', 'cursor'],
];

describe.each(backends)('bad input (%s)', (backend) => {
  let t: TestApp;
  let headers: { authorization: string };
  let admin: { authorization: string };
  let productId: string;
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    headers = await t.auth();
    admin = await t.auth(['admin']);
    productId = (await aProduct(t.ctx.database.db)).id;
  });
  afterAll(async () => t?.close());

  const expectProblem = (res: { statusCode: number; headers: Record<string, unknown>; json(): any; body: string }, status: number, param?: string) => {
    expect(res.statusCode, res.body.slice(0, 300)).toBe(status);
    expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
    const body = res.json();
    expect(body.status).toBe(status);
    expect(typeof body.title).toBe('string');
    expect(typeof body.detail).toBe('string');
    expect(body.detail).not.toMatch(/SELECT|INSERT|at .*\.ts:\d+/);
    if (param) expect(body.errors.map((e: { param: string }) => e.param)).toContain(param);
  };

  it.each(badQueries)('GET %s → 400 naming %s', async (url, param) => {
    const res = await t.app.inject({ url, headers: url.startsWith('/admin/') ? admin : headers });
    expectProblem(res, 400, param);
    expect(res.json().code).toBe('invalid_parameter');
  });

  it('unknown routes and methods are problem+json, never 500', async () => {
    expectProblem(await t.app.inject({ url: '/api/v1/nothing-here', headers }), 404);
    expectProblem(await t.app.inject({ url: `/api/v1/products/${big}`, headers }), 414);
    expectProblem(await t.app.inject({ url: '/api/v1/products/%E0%A4%A', headers }), 400);
    const post = await t.app.inject({ method: 'POST', url: '/api/v1/products', headers, payload: {} });
    expect(post.statusCode).toBeGreaterThanOrEqual(400);
    expect(post.statusCode).toBeLessThan(500);
  });

  it('admin bodies: wrong types, unknown fields, broken JSON, bad money → 400 naming the field; data untouched', async () => {
    const post = (url: string, payload: unknown, extra: Record<string, string> = {}) =>
      t.app.inject({
        method: 'POST',
        url,
        headers: { ...admin, 'content-type': 'application/json', ...extra },
        payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
      });
    expectProblem(await post('/admin/api/v1/products', { name: 'x', product_type: 'weapon', price: 1 }), 400, 'body.product_type');
    expectProblem(await post('/admin/api/v1/products', { name: 'x', product_type: 'physical', price: 'free' }), 400, 'body.price');
    expectProblem(await post('/admin/api/v1/products', { name: 'x', product_type: 'physical', price: 1.999 }), 400, 'body.price');
    expectProblem(await post('/admin/api/v1/products', { name: 'x', product_type: 'physical', price: 1, hacker: true }), 400, 'body.hacker');
    expectProblem(await post('/admin/api/v1/products', '{"name": "x",'), 400, 'body');
    expectProblem(await post('/admin/api/v1/orders', { source: 'online', items: [] }), 400, 'body.items');
    expectProblem(await post('/admin/api/v1/orders', { source: 'online', items: [{ product_id: productId, quantity: 0 }] }), 400, 'body.items.0.quantity');
    expectProblem(
      await post('/admin/api/v1/orders', { source: 'online', items: [{ product_id: '00000000-0000-4000-8000-000000000000', quantity: 1 }] }),
      400,
      'body.items[0].product_id',
    );
    expectProblem(await post('/admin/api/v1/inventory/adjustments', { product_id: productId, quantity_change: 'lots' }), 400, 'body.quantity_change');
    expectProblem(await post('/admin/api/v1/customers', { name: 'x', email: 'not-an-email' }), 400, 'body.email');
    expectProblem(await post('/admin/api/v1/inventory/import', 'sku,stock\nnope,-1\n', { 'content-type': 'text/csv' }), 400, 'line 2');
    // An import over the body limit: 413 naming the limit, nothing read further.
    const oversized = await post('/admin/api/v1/inventory/import', `sku,stock\n${'SKU-1,1\n'.repeat(1_400_000)}`, { 'content-type': 'text/csv' });
    expectProblem(oversized, 413, 'body');
    expect(oversized.json().detail).toContain('10485760 bytes');
    // Money: more than 2 decimals is refused however small the excess, never rounded; amounts
    // whose product or sum overflows numeric(14,2) are refused before PostgreSQL sees them.
    expectProblem(await post('/admin/api/v1/products', { name: 'x', product_type: 'physical', price: 1.0000000001 }), 400, 'body.price');
    expectProblem(await post('/admin/api/v1/products', '{"name": "x", "product_type": "physical", "price": 1e400}'), 400, 'body.price');
    const huge = { product_id: productId, quantity: 1_000_000, unit_price: 999_999_999_999.99 };
    expectProblem(await post('/admin/api/v1/orders', { source: 'pos', items: [huge] }), 400, 'body.items[0].quantity');
    const half = { product_id: productId, quantity: 1, unit_price: 600_000_000_000 };
    expectProblem(await post('/admin/api/v1/orders', { source: 'pos', items: [half, half] }), 400, 'body.items');
    expectProblem(await post('/admin/api/v1/orders', { source: 'pos', items: [half], delivery_fee: 999_999_999_999.99 }), 400, 'body.delivery_fee');
    // Each variant's stock fits an integer column, their sum (the product's stock) would not.
    const twoBillion = { name: 'v', price: 1, stock: 2_000_000_000 };
    expectProblem(
      await post('/admin/api/v1/products', { name: 'x', product_type: 'physical', price: 1, variants: [twoBillion, { ...twoBillion, name: 'w' }] }),
      409,
    );
    // Text PostgreSQL cannot store: NUL anywhere (values, keys, CSV), lone surrogates.
    expectProblem(await post('/admin/api/v1/customers', { name: 'a\u0000b' }), 400, 'body.name');
    expectProblem(await post('/admin/api/v1/customers', '{"name": "a\\udc00"}'), 400, 'body.name');
    expectProblem(
      await post('/admin/api/v1/products', {
        name: 'x',
        product_type: 'physical',
        price: 1,
        variants: [{ name: 'v', price: 1, attributes: { 'k\u0000': 'v' } }],
      }),
      400,
      'body.variants.0.attributes',
    );
    expectProblem(await post('/admin/api/v1/inventory/import', 'sku,stock\nT\u0000,1\n', { 'content-type': 'text/csv' }), 400, 'body');
    expectProblem(await post('/admin/api/v1/tokens', { name: 'x', expires_at: '0000-01-01T00:00:00Z' }), 400, 'body.expires_at');
    expectProblem(await post('/admin/api/v1/tokens', { name: 'x\u0000' }), 400, 'body.name');
    // The unauthenticated sign-in route too.
    const signIn = (payload: string) => t.app.inject({ method: 'POST', url: '/admin/session', headers: { 'content-type': 'application/json' }, payload });
    expectProblem(await signIn('{"email": "a\\u0000@x.io", "password": "p"}'), 400, 'body.email');
    expectProblem(await signIn('{"email": "a@x.io", "password": "\\ud800"}'), 400, 'body.password');
    const res = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/customers',
      headers: { ...admin, 'content-type': 'application/xml' },
      payload: '<x/>',
    });
    expectProblem(res, 415);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders`.execute(t.ctx.database.db);
    expect(rows[0]!.n).toBe(0);
  });

  it('still serves after all of that', async () => {
    const res = await t.app.inject({ url: '/api/v1/products', headers });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.length).toBe(1);
  });
});
