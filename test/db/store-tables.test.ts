/**
 * Schema-wide invariants of the store tables (the tables of the declared resources,
 * resources/registry.ts), on every back end:
 *  - each has the keyset index (last_modified, id) and the forward trigger (migration 0006), and no
 *    other table carries a last_modified (a table holding records must be declared);
 *  - each table a stored document reads has its document trigger and the cache-notify trigger;
 *  - every admin write moves the stamp of each record whose JSON it changed: after each write, any
 *    record of any resource whose JSON (last_modified aside) differs from before has a newer
 *    last_modified, so a newest-wins consumer can never miss a change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { Type } from '@sinclair/typebox';
import { createStoreTable } from '../../src/db/store-table.ts';
import { createRecord, updateRecord } from '../../src/records/record-writes.ts';
import { defineResource } from '../../src/records/resource.ts';
import { RESOURCES } from '../../src/resources/registry.ts';
import { documentKinds, storeTables } from '../../src/resources/store-schema.ts';
import { PRODUCT_TABLE_DOCUMENTS } from '../../src/inventory/stock.repository.ts';
import { backends, openTestDatabase } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';

type Json = Record<string, any>;
const STORE_TABLES = [...new Set(RESOURCES.map((r) => r.table))].sort();

async function indexColumns<DB>(db: Kysely<DB>, table: string): Promise<string[]> {
  const { rows } = await sql<{ columns: string }>`
    SELECT string_agg(a.attname, ',' ORDER BY k.ord) AS columns
    FROM pg_index i
    CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
    WHERE i.indrelid = ${table}::regclass AND i.indpred IS NULL
    GROUP BY i.indexrelid`.execute(db);
  return rows.map((r) => r.columns);
}

async function triggers<DB>(db: Kysely<DB>, table: string): Promise<{ fn: string; before_update: boolean }[]> {
  const { rows } = await sql<{ fn: string; before_update: boolean }>`
    SELECT p.proname AS fn, (tg.tgtype & 2) <> 0 AND (tg.tgtype & 16) <> 0 AS before_update
    FROM pg_trigger tg JOIN pg_proc p ON p.oid = tg.tgfoid
    WHERE tg.tgrelid = ${table}::regclass AND NOT tg.tgisinternal`.execute(db);
  return rows;
}

describe('documents the stock recompute rebuilds', () => {
  it("are every declared document stored on the products table (the recompute's UPDATE sets them itself)", () => {
    const declared = documentKinds().filter((k) => k.table === 'products');
    expect(PRODUCT_TABLE_DOCUMENTS.map((k) => k.column)).toEqual(declared.map((k) => k.column));
  });
});

describe.each(backends)('store tables (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    admin = await t.auth(['admin']);
  });
  afterAll(async () => t?.close());

  it('are exactly the tables with a last_modified, each with its keyset index and forward trigger', async () => {
    const db = t.ctx.database.db;
    const { rows: stamped } = await sql<{ table: string }>`
      SELECT table_name AS table FROM information_schema.columns
      WHERE table_schema = current_schema() AND column_name = 'last_modified' ORDER BY 1`.execute(db);
    expect(stamped.map((r) => r.table)).toEqual(STORE_TABLES);
    for (const table of STORE_TABLES) {
      // Led by the store (decision 0051): a page is one keyset lookup inside its store.
      expect(await indexColumns(db, table), `${table}: keyset index`).toContain('store_id,last_modified,id');
      const { rows: security } = await sql<{ enabled: boolean; forced: boolean }>`
        SELECT relrowsecurity AS enabled, relforcerowsecurity AS forced FROM pg_class WHERE oid = ${table}::regclass`.execute(db);
      expect(security[0], `${table}: row-level security`).toEqual({ enabled: true, forced: true });
      expect(await triggers(db, table), `${table}: forward trigger`).toContainEqual({ fn: 'last_modified_forward', before_update: true });
    }
    // The triggers derived from the declarations (resources/store-schema.ts): every table a stored
    // document reads rebuilds it and tells the other processes' page caches (decision 0016).
    for (const table of storeTables()) {
      const fns = (await triggers(db, table)).map((t) => t.fn);
      expect(fns, `${table}: document trigger`).toContain(`${table}_documents_after`);
      expect(fns, `${table}: cache-notify trigger`).toContain('notify_store_changed');
    }
  });

  it('createStoreTable gives a new store table its stamp columns, keyset index and a working forward trigger', async () => {
    const scratch = await openTestDatabase(backend);
    try {
      const db = scratch.db;
      await createStoreTable(db, 'scratch_things', ['id uuid PRIMARY KEY', 'name text NOT NULL']);
      expect(await indexColumns(db, 'scratch_things')).toContain('store_id,last_modified,id');
      expect(await triggers(db, 'scratch_things')).toContainEqual({ fn: 'last_modified_forward', before_update: true });
      // …the very trigger the first store tables have (same timing, columns and WHEN clause).
      const definition = async (table: string) =>
        (
          await sql<{ def: string }>`
        SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgrelid = ${table}::regclass AND tgname = ${`${table}_last_modified_forward`}`.execute(db)
        ).rows[0]?.def.replaceAll(table, 'T');
      expect(await definition('scratch_things')).toBe(await definition('customers'));
      const id = '0190a000-0000-7000-8000-000000000001';
      await sql`INSERT INTO scratch_things VALUES (${id}, 'a', '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z')`.execute(db);
      // A late writer's older stamp moves the row forward instead of back.
      await sql`UPDATE scratch_things SET name = 'b', last_modified = '2026-01-01T12:00:00Z' WHERE id = ${id}`.execute(db);
      const { rows } = await sql<{ t: string }>`SELECT iso_utc(last_modified) AS t FROM scratch_things`.execute(db);
      expect(rows[0]!.t).toBe('2026-01-02T00:00:00.000001Z');

      // A flat resource over it: the derived writes stamp the row and append its events in one transaction.
      const things = defineResource({
        name: 'things',
        path: 'things',
        noun: 'thing',
        summary: 'things',
        label: 'Things',
        scope: 'things:read',
        table: 'scratch_things',
        key: 'id',
        record: Type.Object({ id: Type.String(), name: Type.String(), last_modified: Type.String() }, { title: 'Thing' }),
        source: {
          from: sql`scratch_things t`,
          store: 't.store_id',
          lastModified: sql`t.last_modified`,
          id: sql`t.id`,
          json: sql`json_build_object('id', t.id, 'name', t.name, 'last_modified', iso_utc(t.last_modified))`,
        },
        filters: {},
        conditions: () => [],
        single: true,
        description: { list: 'things', export: 'things' },
        events: { prefix: 'thing', kinds: ['created', 'updated'] },
        document: {
          name: 'thing',
          alias: 't',
          column: 'doc',
          build: sql`json_build_object('id', t.id, 'name', t.name, 'last_modified', iso_utc(t.last_modified))`,
        },
        example: { id: '0190a000-0000-7000-8000-000000000001', name: 'a', last_modified: '2026-01-02T00:00:00.000001Z' },
      });
      const created = (await createRecord(scratch.db, things, { name: 'first' })) as { id: string; name: string; last_modified: string };
      expect(created.name).toBe('first');
      const updated = (await updateRecord(scratch.db, things, created.id, { name: 'second' })) as { name: string; last_modified: string };
      expect(updated.name).toBe('second');
      expect(Date.parse(updated.last_modified)).toBeGreaterThan(Date.parse(created.last_modified));
      const { rows: logged } = await sql<{ type: string; data: { name: string; last_modified: string } }>`
        SELECT type, data FROM events WHERE resource_id = ${created.id} ORDER BY created_at`.execute(scratch.db);
      expect(logged).toEqual([
        { type: 'thing.created', data: created },
        { type: 'thing.updated', data: updated },
      ]);
      await expect(updateRecord(scratch.db, things, '0190a000-0000-7000-8000-00000000ffff', { name: 'x' })).rejects.toMatchObject({ code: 'not_found' });
    } finally {
      await scratch.close();
    }
  });

  /** Every record of every resource: key → { stamp, body without last_modified }. */
  async function snapshot(): Promise<Map<string, { stamp: string; body: string }>> {
    const all = new Map<string, { stamp: string; body: string }>();
    for (const r of RESOURCES) {
      const where = r.source.where ? sql`WHERE ${r.source.where}` : sql``;
      const { rows } = await sql<{ json: Json }>`SELECT ${r.source.json} AS json FROM ${r.source.from} ${where}`.execute(t.ctx.database.db);
      for (const { json } of rows) {
        const { last_modified, ...body } = json;
        all.set(`${r.name}/${json[r.key]}`, { stamp: last_modified, body: JSON.stringify(body) });
      }
    }
    return all;
  }

  async function call(method: 'POST' | 'PATCH', url: string, payload: unknown): Promise<Json> {
    const csv = typeof payload === 'string';
    const res = await t.app.inject({
      method,
      url: `/admin/api/v1${url}`,
      headers: { ...admin, 'content-type': csv ? 'text/csv' : 'application/json' },
      payload: csv ? payload : JSON.stringify(payload),
    });
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
    return res.json().data;
  }

  it('every admin write gives each record it changes a newer last_modified', async () => {
    let before = await snapshot();
    const write = async (method: 'POST' | 'PATCH', url: string, payload: unknown): Promise<Json> => {
      const data = await call(method, url, payload);
      const after = await snapshot();
      let changed = 0;
      for (const [key, now] of after) {
        const was = before.get(key);
        if (was && was.body === now.body) continue;
        changed += 1;
        if (was) expect(Date.parse(now.stamp), `${method} ${url} changed ${key} without moving its last_modified`).toBeGreaterThan(Date.parse(was.stamp));
      }
      expect(changed, `${method} ${url} changed no record`).toBeGreaterThan(0);
      before = after;
      return data;
    };
    // Every write route of the admin API's store data (admin/routes/store.admin-routes.ts).
    const product = await write('POST', '/products', {
      name: 'Stamp Shirt',
      product_type: 'physical',
      sku: 'ST-1',
      price: 10,
      variants: [{ name: 'S', sku: 'ST-1-S', price: 10, stock: 3 }],
      images: [{ image_url: 'https://img.example.com/st.jpg' }],
    });
    await write('PATCH', `/products/${product.id}`, { price: 11 });
    const variant = await write('POST', `/products/${product.id}/variants`, { name: 'M', sku: 'ST-1-M', price: 10, stock: 2 });
    await write('PATCH', `/products/${product.id}/variants/${variant.variants[1].id}`, { price: 12 });
    const withImage = await write('POST', `/products/${product.id}/images`, { image_url: 'https://img.example.com/st2.jpg' });
    await write('PATCH', `/products/${product.id}/images/${withImage.images[1].id}`, { is_primary: true });
    const customer = await write('POST', '/customers', { name: 'Ada' });
    await write('PATCH', `/customers/${customer.id}`, { city: 'Dhaka' });
    const order = await write('POST', '/orders', {
      source: 'pos',
      customer_id: customer.id,
      items: [{ product_id: product.id, variant_id: product.variants[0].id, quantity: 1 }],
    });
    await write('POST', `/orders/${order.id}/payment-status`, { payment_status: 'paid' });
    await write('POST', `/orders/${order.id}/status`, { status: 'cancelled' });
    await write('POST', '/inventory/adjustments', { product_id: product.id, variant_id: product.variants[0].id, quantity_change: 5 });
    await write('POST', '/inventory/import', 'sku,stock\nST-1-M,9\n');
  });
});
