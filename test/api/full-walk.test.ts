/**
 * The initial-sync guarantee at scale: on a store of 10,000 products whose stock was bulk-imported
 * (thousands of records share one last_modified), walking every list and every export to the end
 * returns each record exactly once — the same set the database holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { importStockCsv } from '../../src/inventory/stock-import.ts';

const PRODUCTS = 10_000;

describe.each(backends)('walking every list and export of a 10,000-product store (%s)', (backend) => {
  let t: TestApp;
  let headers: { authorization: string };
  let importedTies = 0;

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    headers = await t.auth();
    const db = t.ctx.database.db;
    await generateDemoStore(db, { products: PRODUCTS, customers: 600, orders: 150, batchSize: 500 });
    // One bulk import over 4,000 skus (products and variants): one stamp for all of them.
    const { rows } = await sql<{ sku: string }>`
      (SELECT v.sku FROM variants v JOIN products p ON p.id = v.product_id WHERE p.product_type IN ('physical','food','digital_card') ORDER BY v.sku LIMIT 2000)
      UNION ALL
      (SELECT p.sku FROM products p WHERE p.product_type IN ('physical','food','digital_card')
         AND NOT EXISTS (SELECT 1 FROM variants v WHERE v.product_id = p.id) ORDER BY p.sku LIMIT 2000)`.execute(db);
    await importStockCsv(db, ['sku,stock', ...rows.map((r, i) => `${r.sku},${(i % 97) + 1}`)].join('\n'));
    const ties = await sql<{ n: number }>`SELECT max(c)::int AS n FROM (SELECT count(*) AS c FROM products GROUP BY last_modified) x`.execute(db);
    importedTies = ties.rows[0]!.n;
  }, 600_000);
  afterAll(async () => t?.close());

  async function walk(path: string, limit: number, extra: Record<string, string> = {}): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    const isExport = path.endsWith('/export');
    for (let page = 0; page < 10_000; page++) {
      const q = new URLSearchParams({ limit: String(limit), ...extra });
      if (cursor) q.set('cursor', cursor);
      const res = await t.app.inject({ url: `${path}?${q}`, headers });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
      let records: Record<string, string>[];
      let hasMore: boolean;
      if (isExport) {
        records = res.body
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line));
        expect(records.length).toBeLessThanOrEqual(limit);
        hasMore = res.headers['x-has-more'] === 'true';
        cursor = String(res.headers['x-next-cursor']);
      } else {
        const body = res.json() as { data: Record<string, string>[]; pagination: { next_cursor: string; has_more: boolean } };
        records = body.data;
        hasMore = body.pagination.has_more;
        cursor = body.pagination.next_cursor;
      }
      ids.push(...records.map((r) => r.id ?? r.product_id));
      if (!hasMore) return ids;
    }
    throw new Error(`walk of ${path} did not end`);
  }

  async function idsOf(query: ReturnType<typeof sql<{ id: string }>>): Promise<string[]> {
    return (await query.execute(t.ctx.database.db)).rows.map((r) => r.id).sort();
  }

  const expectExactlyOnce = (walked: string[], expected: string[]) => {
    expect(walked.length).toBe(expected.length);
    expect(new Set(walked).size).toBe(walked.length);
    expect([...walked].sort()).toEqual(expected);
  };

  it('has bulk-imported ties to walk through', () => {
    expect(importedTies).toBeGreaterThanOrEqual(2000);
  });

  it('products: list and export, active only and all', async () => {
    const active = await idsOf(sql<{ id: string }>`SELECT id::text AS id FROM products WHERE is_active`);
    const all = await idsOf(sql<{ id: string }>`SELECT id::text AS id FROM products`);
    expect(all.length).toBe(PRODUCTS);
    expectExactlyOnce(await walk('/api/v1/products', 200), active);
    expectExactlyOnce(await walk('/api/v1/products/export', 500), active);
    expectExactlyOnce(await walk('/api/v1/products', 200, { include_inactive: 'true', order: 'desc' }), all);
    expectExactlyOnce(await walk('/api/v1/products/export', 500, { include_inactive: 'true' }), all);
  });

  it('orders, customers: list and export', async () => {
    const orders = await idsOf(sql<{ id: string }>`SELECT id::text AS id FROM orders`);
    const customers = await idsOf(sql<{ id: string }>`SELECT id::text AS id FROM customers`);
    expectExactlyOnce(await walk('/api/v1/orders', 37), orders);
    expectExactlyOnce(await walk('/api/v1/orders/export', 50), orders);
    expectExactlyOnce(await walk('/api/v1/customers', 200), customers);
    expectExactlyOnce(await walk('/api/v1/customers/export', 500, { order: 'desc' }), customers);
  });

  it('inventory and stock movements: list and export', async () => {
    const inventory = await idsOf(sql<{ id: string }>`SELECT id::text AS id FROM products WHERE product_type IN ('physical','food','digital_card')`);
    const movements = await idsOf(sql<{ id: string }>`SELECT id::text AS id FROM stock_movements`);
    expect(movements.length).toBeGreaterThan(PRODUCTS);
    expectExactlyOnce(await walk('/api/v1/inventory', 200), inventory);
    expectExactlyOnce(await walk('/api/v1/inventory/export', 500), inventory);
    expectExactlyOnce(await walk('/api/v1/inventory/movements', 200), movements);
    expectExactlyOnce(await walk('/api/v1/inventory/movements/export', 500), movements);
  });
});
