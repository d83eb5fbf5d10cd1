/**
 * The admin write path: every write changes the records, moves last_modified (also for nested
 * variants, images and items), appends its events in the same transaction, and stock changes append
 * the right movements. Transitions outside the allowed ones are 409 and change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';

type Json = Record<string, any>;

describe.each(backends)('admin write path (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };
  let read: { authorization: string };
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    admin = await t.auth(['admin']);
    read = await t.auth();
  });
  afterAll(async () => t?.close());

  const call = async (method: 'POST' | 'PATCH' | 'GET', url: string, payload?: unknown, contentType = 'application/json') => {
    const res = await t.app.inject({
      method,
      url: `/admin/api/v1${url}`,
      headers: { ...admin, ...(payload === undefined ? {} : { 'content-type': contentType }) },
      payload: payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
    return { status: res.statusCode, body: res.json() as Json };
  };
  const events = async (since: string) =>
    (
      await sql<{
        type: string;
        resource_id: string;
        data: Json;
      }>`SELECT type, resource_id, data FROM events WHERE seq > ${since}::bigint ORDER BY created_at, seq`.execute(t.ctx.database.db)
    ).rows;
  // The log's position now (its last seq), not the clock: PGlite's clock_timestamp() has millisecond
  // precision, so a write in the same millisecond as a clock reading would fall before it.
  const now = async () => (await sql<{ t: string }>`SELECT coalesce(max(seq), 0)::text AS t FROM events`.execute(t.ctx.database.db)).rows[0]!.t;
  const movements = async (productId: string) =>
    (await t.app.inject({ url: `/api/v1/inventory/movements?product_id=${productId}&limit=200`, headers: read })).json().data as Json[];

  it('creates a product with variants and images; nested changes move last_modified and emit product.updated', async () => {
    const start = await now();
    const created = await call('POST', '/products', {
      name: 'Linen Shirt',
      product_type: 'physical',
      sku: 'LS-1',
      price: 49.9,
      variants: [
        { name: 'S', sku: 'LS-1-S', price: 49.9, stock: 4, attributes: { size: 'S' } },
        { name: 'M', sku: 'LS-1-M', price: 49.9, stock: 6, attributes: { size: 'M' } },
      ],
      images: [{ image_url: 'https://img.example.com/ls.jpg', is_primary: true }],
    });
    expect(created.status).toBe(201);
    const p = created.body.data;
    expect(p.stock).toBe(10);
    expect(p.variants).toHaveLength(2);
    const createdEvents = await events(start);
    expect(createdEvents.map((e) => e.type)).toEqual(['stock_movement.created', 'stock_movement.created', 'inventory.updated', 'product.created']);
    expect(createdEvents[3]!.data).toEqual(p); // product.created carries the final product, stock included

    let last = p.last_modified;
    const steps: [string, string, unknown][] = [
      ['PATCH', `/products/${p.id}/variants/${p.variants[0].id}`, { price: 45 }],
      ['POST', `/products/${p.id}/images`, { image_url: 'https://img.example.com/ls2.jpg', is_primary: true }],
      ['PATCH', `/products/${p.id}/variants/${p.variants[1].id}`, { is_active: false }],
      ['PATCH', `/products/${p.id}`, { name: 'Linen Shirt II', price: 52.5 }],
      ['PATCH', `/products/${p.id}`, { price: 53 }],
    ];
    for (const [method, url, payload] of steps) {
      const before = await now();
      const res = await call(method as 'POST', url, payload);
      expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
      expect(res.body.data.last_modified > last).toBe(true);
      last = res.body.data.last_modified;
      const evs = await events(before);
      expect(evs.map((e) => e.type)).toContain('product.updated');
      const updated = evs.find((e) => e.type === 'product.updated')!;
      expect(updated.data).toEqual(res.body.data); // the event carries exactly what GET returns
      // The inventory record's last_modified is the product's: every change announces it too, with
      // exactly what the inventory list serves now.
      const inventory = evs.find((e) => e.type === 'inventory.updated');
      expect(inventory?.data.last_modified, `${method} ${url}`).toBe(res.body.data.last_modified);
    }
    const final = (await t.app.inject({ url: `/api/v1/products/${p.id}`, headers: read })).json().data;
    expect(final.variants).toHaveLength(1); // the deactivated variant left the product
    expect(final.stock).toBe(4);
    expect(final.images.filter((i: Json) => i.is_primary)).toHaveLength(1);
    expect(final.images[1].is_primary).toBe(true);
  });

  it('deactivating a product reaches integrators as an update and hides it from the list', async () => {
    const p = (await call('POST', '/products', { name: 'Old Mug', product_type: 'physical', price: 5, stock: 2 })).body.data;
    const start = await now();
    const res = await call('PATCH', `/products/${p.id}`, { is_active: false });
    expect(res.body.data.is_active).toBe(false);
    expect((await events(start)).map((e) => e.type)).toEqual(['product.updated', 'inventory.updated']);
    const list = (await t.app.inject({ url: '/api/v1/products?limit=200', headers: read })).json().data as Json[];
    expect(list.find((x) => x.id === p.id)).toBeUndefined();
  });

  it('orders: sale movements, allowed transitions only, cancel and refund restore stock', async () => {
    const p = (await call('POST', '/products', { name: 'Beans', product_type: 'food', price: 12.34, stock: 10 })).body.data;
    const service = (await call('POST', '/products', { name: 'Gift wrap', product_type: 'service', price: 2 })).body.data;
    const start = await now();
    const order = await call('POST', '/orders', {
      source: 'pos',
      payment_method: 'cash',
      discount: 0.68,
      items: [
        { product_id: p.id, quantity: 3 },
        { product_id: service.id, quantity: 1 },
      ],
    });
    expect(order.status).toBe(201);
    const o = order.body.data;
    expect(o.subtotal).toBe(39.02);
    expect(o.total).toBe(38.34);
    expect((await events(start)).map((e) => e.type)).toEqual(['order.created', 'stock_movement.created', 'inventory.updated', 'product.updated']);
    expect((await movements(p.id)).map((m) => [m.reason, m.quantity_change, m.stock_after])).toEqual([
      ['adjustment', 10, 10],
      ['sale', -3, 7],
    ]);
    expect(await movements(service.id)).toEqual([]);

    const bad = await call('POST', `/orders/${o.id}/status`, { status: 'delivered' });
    expect(bad.status).toBe(409);
    expect(bad.body.code).toBe('conflict');
    expect(bad.body.detail).toMatch(/pending.*delivered/);
    expect((await call('POST', `/orders/${o.id}/payment-status`, { payment_status: 'paid' })).status).toBe(200);
    const badPayment = await call('POST', `/orders/${o.id}/payment-status`, { payment_status: 'failed' });
    expect(badPayment.status).toBe(409);
    expect(badPayment.body.detail).toBe("A payment cannot move from 'paid' to 'failed'. Allowed from 'paid': none (final state).");
    for (const status of ['processing', 'shipped', 'delivered']) {
      const r = await call('POST', `/orders/${o.id}/status`, { status });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.data.status).toBe(status);
    }
    const before = await now();
    const refunded = await call('POST', `/orders/${o.id}/status`, { status: 'refunded' });
    expect(refunded.status).toBe(200);
    expect((await events(before)).map((e) => e.type)).toEqual(['order.updated', 'stock_movement.created', 'inventory.updated', 'product.updated']);
    expect((await movements(p.id)).at(-1)).toMatchObject({ reason: 'refund', quantity_change: 3, stock_before: 7, stock_after: 10, order_id: o.id });
    expect((await call('POST', `/orders/${o.id}/status`, { status: 'cancelled' })).status).toBe(409);

    const second = (await call('POST', '/orders', { source: 'online', items: [{ product_id: p.id, quantity: 4 }] })).body.data;
    expect((await call('POST', `/orders/${second.id}/status`, { status: 'cancelled' })).status).toBe(200);
    expect((await movements(p.id)).slice(-2).map((m) => [m.reason, m.quantity_change])).toEqual([
      ['sale', -4],
      ['cancel', 4],
    ]);
  });

  it('refuses to oversell or adjust below zero (409) and changes nothing', async () => {
    const p = (await call('POST', '/products', { name: 'Rare Tea', product_type: 'food', price: 3, stock: 2 })).body.data;
    const oversell = await call('POST', '/orders', { source: 'online', items: [{ product_id: p.id, quantity: 3 }] });
    expect(oversell.status).toBe(409);
    expect((await call('POST', '/inventory/adjustments', { product_id: p.id, quantity_change: -5 })).status).toBe(409);
    const ok = await call('POST', '/inventory/adjustments', { product_id: p.id, quantity_change: -1, note: 'broken jar' });
    expect(ok.status).toBe(201);
    expect(ok.body.data.product.stock).toBe(1);
    expect((await movements(p.id)).map((m) => m.reason)).toEqual(['adjustment', 'adjustment']);
    const withVariants = (await call('POST', '/products', { name: 'Cap', product_type: 'physical', price: 9, variants: [{ name: 'One', price: 9, stock: 1 }] }))
      .body.data;
    const missingVariant = await call('POST', '/inventory/adjustments', { product_id: withVariants.id, quantity_change: 1 });
    expect(missingVariant.status).toBe(400);
    expect(missingVariant.body.errors[0].param).toBe('variant_id');
  });

  it('CSV import: one stamp, bulk_import movements, all rows or none', async () => {
    const a = (await call('POST', '/products', { name: 'Pen', product_type: 'physical', sku: 'CSV-A', price: 1, stock: 5 })).body.data;
    const b = (
      await call('POST', '/products', { name: 'Pad', product_type: 'physical', price: 2, variants: [{ name: 'A5', sku: 'CSV-B-A5', price: 2, stock: 1 }] })
    ).body.data;
    const bad = await call('POST', '/inventory/import', 'sku,stock\nCSV-A,9\nNOPE,3\n', 'text/csv');
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([{ param: 'line 3', message: "unknown sku 'NOPE'" }]);
    expect((await movements(a.id)).map((m) => m.reason)).toEqual(['adjustment']);

    const start = await now();
    const ok = await call('POST', '/inventory/import', 'sku,stock,note\nCSV-A,9,recount\nCSV-B-A5,40,\n', 'text/csv');
    expect(ok.status).toBe(201);
    expect(ok.body.data).toEqual({ rows: 2, movements: 2, products: 2 });
    const types = (await events(start)).map((e) => e.type);
    expect(types.filter((x) => x === 'stock_movement.created')).toHaveLength(2);
    expect(types.filter((x) => x === 'inventory.updated')).toHaveLength(2);
    expect(types.filter((x) => x === 'product.updated')).toHaveLength(2);
    const ma = (await movements(a.id)).at(-1)!;
    const mb = (await movements(b.id)).at(-1)!;
    expect(ma).toMatchObject({ reason: 'bulk_import', quantity_change: 4, stock_after: 9, note: 'recount' });
    expect(mb).toMatchObject({ reason: 'bulk_import', quantity_change: 39, stock_after: 40, sku: 'CSV-B-A5' });
    expect(ma.last_modified).toBe(mb.last_modified);

    const delta = await call('POST', '/inventory/import', 'sku,quantity_change\nCSV-A,-2\nCSV-A,-3\n', 'text/csv');
    expect(delta.status).toBe(201);
    expect((await movements(a.id)).slice(-2).map((m) => [m.stock_before, m.stock_after])).toEqual([
      [9, 7],
      [7, 4],
    ]);
  });

  it('customers: create and update emit customer.created / customer.updated with the full resource', async () => {
    const start = await now();
    const c = await call('POST', '/customers', { name: 'Ada', email: 'ada@example.com', city: 'London' });
    expect(c.status).toBe(201);
    const u = await call('PATCH', `/customers/${c.body.data.id}`, { city: 'Paris', is_active: false });
    expect(u.body.data).toMatchObject({ city: 'Paris', is_active: false });
    const evs = await events(start);
    expect(evs.map((e) => e.type)).toEqual(['customer.created', 'customer.updated']);
    expect(evs[1]!.data).toEqual(u.body.data);
    expect((await call('PATCH', '/customers/00000000-0000-4000-8000-000000000000', { city: 'x' })).status).toBe(404);
  });

  it('duplicate sku is a 409 naming the problem', async () => {
    await call('POST', '/products', { name: 'Dup 1', product_type: 'digital', sku: 'DUP-1', price: 1 });
    const dup = await call('POST', '/products', { name: 'Dup 2', product_type: 'digital', sku: 'DUP-1', price: 1 });
    expect(dup.status).toBe(409);
    expect(dup.body.detail).toMatch(/sku/);
  });

  it('tokens: create (secret once), list without secrets, revoke', async () => {
    const created = await call('POST', '/tokens', { name: 'erp', scopes: ['orders:read'] });
    expect(created.status).toBe(201);
    expect(created.body.data.token).toMatch(/^sia_/);
    const list = await call('GET', '/tokens');
    expect(JSON.stringify(list.body)).not.toContain(created.body.data.token);
    const revoked = await call('POST', `/tokens/${created.body.data.id}/revoke`);
    expect(revoked.body.data.status).toBe('revoked');
    expect((await call('POST', `/tokens/${created.body.data.id}/revoke`)).status).toBe(409);
  });
});
