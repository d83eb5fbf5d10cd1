/**
 * GET /api/v1/attributes: the spec's external mapping (one attribute per distinct key of the
 * variants' attributes, one attribute value per distinct value), paged by key. What it lists must
 * equal what an integrator computes by walking every product, with and without include_inactive.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { createProduct, updateProduct, updateVariant } from '../../src/catalog/catalog.service.ts';
import { expectSchema } from '../helpers/schema-check.ts';
import { Attribute as AttributeSchema, listOf } from '../../src/api/schemas.ts';

type Attribute = { key: string; variant_count: number; values: { value: string; variant_count: number }[] };
type Product = { variants: { attributes: Record<string, string> }[] };

const bytewise = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** The attributes list as an integrator builds it from a full walk of the products list. */
function attributesOf(products: Product[]): Attribute[] {
  const keys = new Map<string, Map<string, number>>();
  for (const product of products) {
    for (const variant of product.variants) {
      for (const [key, value] of Object.entries(variant.attributes)) {
        const values = keys.get(key) ?? new Map<string, number>();
        values.set(value, (values.get(value) ?? 0) + 1);
        keys.set(key, values);
      }
    }
  }
  return [...keys.keys()].sort(bytewise).map((key) => {
    const values = [...keys.get(key)!].sort(([a], [b]) => bytewise(a, b)).map(([value, variant_count]) => ({ value, variant_count }));
    return { key, variant_count: values.reduce((n, v) => n + v.variant_count, 0), values };
  });
}

describe.each(backends)('GET /api/v1/attributes (%s)', (backend) => {
  let t: TestApp;
  let headers: { authorization: string };

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    headers = await t.auth();
    const db = t.ctx.database.db;
    await generateDemoStore(db, { products: 400, customers: 20, orders: 20, batchSize: 200 });
    // Keys and values whose order differs between bytes and a locale; a deactivated variant and a
    // deactivated product, which only include_inactive counts.
    const odd = (await createProduct(db, {
      name: 'Odd attributes',
      product_type: 'physical',
      price: 5,
      variants: [
        { name: 'a', price: 5, attributes: { Zubehör: 'Kabel', apple: 'é', Apple: 'E' } },
        { name: 'b', price: 5, attributes: { Zubehör: 'kabel', 'with space': 'x y', apple: 'e' } },
        { name: 'c', price: 5, attributes: { hidden: 'only on a deactivated variant' } },
      ],
    })) as { id: string; variants: { id: string }[] };
    await updateVariant(db, odd.id, odd.variants[2]!.id, { is_active: false });
    const gone = (await createProduct(db, {
      name: 'Deactivated',
      product_type: 'physical',
      price: 5,
      variants: [{ name: 'x', price: 5, attributes: { size: 'XXXL', retired: 'yes' } }],
    })) as { id: string };
    await updateProduct(db, gone.id, { is_active: false });
  }, 300_000);
  afterAll(async () => t?.close());

  async function walk(path: string, limit: number, extra: Record<string, string> = {}) {
    const records: unknown[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const q = new URLSearchParams({ limit: String(limit), ...extra });
      if (cursor !== undefined) q.set('cursor', cursor);
      const res = await t.app.inject({ url: `/api/v1/${path}?${q}`, headers });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
      const body = res.json() as { data: unknown[]; pagination: { next_cursor: string; has_more: boolean; limit: number } };
      if (path === 'attributes') expectSchema(listOf(AttributeSchema), body);
      expect(body.data.length).toBeLessThanOrEqual(limit);
      records.push(...body.data);
      pages++;
      if (!body.pagination.has_more) return { records, pages, last: body.pagination.next_cursor };
      cursor = body.pagination.next_cursor;
    }
  }

  it('equals what a full walk of the products computes, page by page', async () => {
    const products = (await walk('products', 200)).records as Product[];
    const expected = attributesOf(products);
    expect(expected.map((a) => a.key)).toEqual(expect.arrayContaining(['Apple', 'Zubehör', 'apple', 'with space']));
    expect(expected.map((a) => a.key)).not.toContain('hidden');
    expect(expected.map((a) => a.key)).not.toContain('retired');
    const attributes = await walk('attributes', 2);
    expect(attributes.pages).toBeGreaterThan(2);
    expect(attributes.records).toEqual(expected);
    expect(attributes.last).toBe(expected[expected.length - 1]!.key);
  });

  it('counts every product with include_inactive=true, as a walk with include_inactive does', async () => {
    const products = (await walk('products', 200, { include_inactive: 'true' })).records as Product[];
    const expected = attributesOf(products);
    expect(expected.map((a) => a.key)).toContain('retired');
    expect(expected.map((a) => a.key)).not.toContain('hidden');
    expect((await walk('attributes', 200, { include_inactive: 'true' })).records).toEqual(expected);
  });

  it('pages through keys the admin API no longer accepts (empty, over 100 characters): every next_cursor is accepted back', async () => {
    // Written before the admin API bounded keys (the service layer takes them as stored).
    const long = `k${'ü'.repeat(150)}`;
    await createProduct(t.ctx.database.db, {
      name: 'Unbounded keys',
      product_type: 'physical',
      price: 5,
      variants: [{ name: 'v', price: 5, attributes: { '': 'empty key', [long]: 'long key' } }],
    });
    const products = (await walk('products', 200)).records as Product[];
    const expected = attributesOf(products);
    expect(expected[0]!.key).toBe('');
    expect(expected.map((a) => a.key)).toContain(long);
    // Pages of one: the first page's next_cursor is the empty key, a later one the long key.
    const attributes = await walk('attributes', 1);
    expect(attributes.records).toEqual(expected);
    const first = await t.app.inject({ url: '/api/v1/attributes?limit=1', headers });
    expect(first.json().pagination).toMatchObject({ next_cursor: '', has_more: true });
    expect(first.headers.link).toMatch(/[?&]cursor=[&>]/);
  });

  it('the admin API refuses an empty or overlong attribute key with 400 naming it, and stores nothing', async () => {
    const admin = await t.auth(['admin']);
    const before = await t.app.inject({ url: '/api/v1/attributes?limit=200&include_inactive=true', headers });
    for (const key of ['', 'x'.repeat(101)]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/products',
        headers: { ...admin, 'content-type': 'application/json' },
        payload: JSON.stringify({
          name: 'Refused',
          product_type: 'physical',
          price: 5,
          variants: [{ name: 'v', price: 5, attributes: { size: 'M', [key]: 'x' } }],
        }),
      });
      expect(res.statusCode, res.body).toBe(400);
      const problem = res.json() as { code: string; errors: { param: string; message: string }[] };
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(problem.code).toBe('invalid_parameter');
      expect(problem.errors).toHaveLength(1);
      expect(problem.errors[0]!.param).toBe('body.variants.0.attributes');
      expect(problem.errors[0]!.message).toMatch(
        key === '' ? /^key "" must NOT have fewer than 1 characters/ : /^key "x{40}…" must NOT have more than 100 characters/,
      );
    }
    const after = await t.app.inject({ url: '/api/v1/attributes?limit=200&include_inactive=true', headers });
    // A stored product would have counted one more variant with size M.
    expect(after.json()).toEqual(before.json());
  });

  it('hands the cursor back on an empty page and refuses what it cannot serve', async () => {
    const past = await t.app.inject({ url: '/api/v1/attributes?cursor=%F0%9F%A6%84', headers });
    expect(past.json()).toEqual({ data: [], pagination: { next_cursor: '🦄', has_more: false, limit: 50 } });
    const tooMany = await t.app.inject({ url: '/api/v1/attributes?limit=201', headers });
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json()).toMatchObject({ code: 'invalid_parameter' });
    const orders = await t.app.inject({ url: '/api/v1/attributes', headers: await t.auth(['orders:read']) });
    expect(orders.statusCode).toBe(403);
  });
});
