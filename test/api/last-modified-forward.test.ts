/**
 * A record's last_modified only moves forward (migrations 0006 and 0007), past equal stamps too. A writer stamps its transaction
 * when it starts and may wait for a row lock held by a later-stamped writer; committing the row with
 * the earlier stamp would send its last_modified back in time, and every consumer keeping the newest
 * version of a record (the sync tool's mirror, an ERP ignoring older payloads) would keep the stale
 * one. The PostgreSQL chaos test found this as a product differing in the mirror.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aCustomer, aProduct } from '../helpers/store-fixtures.ts';
import { runWrite } from '../../src/db/write-clock.ts';
import { updateProduct } from '../../src/catalog/catalog.service.ts';
import { applyStockChanges } from '../../src/inventory/stock.service.ts';
import { updateCustomer } from '../../src/customers/customer.service.ts';

type Versioned = { id: string; last_modified: string } & Record<string, unknown>;

/** What a consumer keeping the newest version of a record ends with, given its events in arrival order. */
function newestWins(events: Versioned[]): Versioned | undefined {
  let held: Versioned | undefined;
  for (const e of events) if (!held || held.last_modified < e.last_modified) held = e;
  return held;
}

async function lastModified(t: TestApp, table: 'products' | 'orders' | 'customers', id: string): Promise<string> {
  const { rows } = await sql<{ v: string }>`SELECT last_modified::text AS v FROM ${sql.table(table)} WHERE id = ${id}::uuid`.execute(t.ctx.database.db);
  return rows[0]!.v;
}

describe.each(backends)('last_modified only moves forward (%s)', (backend) => {
  let t: TestApp;
  let headers: { authorization: string };
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    headers = await t.auth();
  });
  afterAll(async () => t?.close());

  it('an update stamped before the current version lands one microsecond after it', async () => {
    const db = t.ctx.database.db;
    const product = await aProduct(db);
    const before = await lastModified(t, 'products', product.id);
    await runWrite(db, async (ctx) => {
      await sql`UPDATE products SET name = 'older stamp', last_modified = last_modified - interval '1 second' WHERE id = ${product.id}::uuid`.execute(ctx.trx);
    });
    const { rows } = await sql<{ forward: boolean; step: string }>`
      SELECT last_modified > ${before}::timestamptz AS forward, (last_modified - ${before}::timestamptz)::text AS step
      FROM products WHERE id = ${product.id}::uuid`.execute(db);
    expect(rows[0]).toEqual({ forward: true, step: '00:00:00.000001' });

    // An update that leaves last_modified alone keeps it; a later stamp is kept as it is.
    await sql`UPDATE products SET name = 'same stamp' WHERE id = ${product.id}::uuid`.execute(db);
    const kept = await lastModified(t, 'products', product.id);
    const updated = (await updateProduct(db, product.id, { name: 'later stamp' })) as Versioned;
    expect(updated.last_modified > kept).toBe(true);
    const res = await t.app.inject({ url: `/api/v1/products/${product.id}`, headers });
    expect((res.json() as { data: Versioned }).data.last_modified).toBe(updated.last_modified);
  });
});

describe.each(backends)('last_modified of two transactions in one clock tick (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
  });
  afterAll(async () => t?.close());

  it('a second transaction stamping a record with the same last_modified (one millisecond on the embedded clock) lands one microsecond after it; a transaction writing its own row twice keeps its stamp', async () => {
    const db = t.ctx.database.db;
    const product = await aProduct(db);
    const first = await lastModified(t, 'products', product.id);
    // What two writers within one tick of PGlite's millisecond clock do: the same stamp again.
    await runWrite(db, async (ctx) => {
      await sql`UPDATE products SET name = 'same tick', last_modified = ${first}::timestamptz WHERE id = ${product.id}::uuid`.execute(ctx.trx);
    });
    const { rows } = await sql<{ step: string }>`
      SELECT (last_modified - ${first}::timestamptz)::text AS step FROM products WHERE id = ${product.id}::uuid`.execute(db);
    expect(rows[0]!.step).toBe('00:00:00.000001');
    const second = await lastModified(t, 'products', product.id);

    // One transaction writing the row twice with its stamp: the second write keeps it.
    const stamp = await runWrite(db, async (ctx) => {
      await sql`UPDATE products SET name = 'once', last_modified = ${ctx.stamp}::timestamptz WHERE id = ${product.id}::uuid`.execute(ctx.trx);
      await sql`UPDATE products SET name = 'twice', last_modified = ${ctx.stamp}::timestamptz WHERE id = ${product.id}::uuid`.execute(ctx.trx);
      return ctx.stamp;
    });
    const { rows: kept } = await sql<{ own: boolean; later: boolean }>`
      SELECT last_modified = ${stamp}::timestamptz AS own, last_modified > ${second}::timestamptz AS later
      FROM products WHERE id = ${product.id}::uuid`.execute(db);
    expect(kept[0]).toEqual({ own: true, later: true });

    // The same for orders and customers (every table with the trigger).
    const customer = await aCustomer(db);
    const c1 = await lastModified(t, 'customers', customer.id);
    await runWrite(db, async (ctx) => {
      await sql`UPDATE customers SET last_modified = ${c1}::timestamptz WHERE id = ${customer.id}::uuid`.execute(ctx.trx);
    });
    const c2 = (
      await sql<{ step: string }>`SELECT (last_modified - ${c1}::timestamptz)::text AS step FROM customers WHERE id = ${customer.id}::uuid`.execute(db)
    ).rows[0]!.step;
    expect(c2).toBe('00:00:00.000001');
  });
});

describe.runIf(backends.includes('postgres'))('last_modified with interleaved writers (postgres)', () => {
  let t: TestApp;
  let headers: { authorization: string };
  beforeAll(async () => {
    t = await buildTestApp('postgres', UNLIMITED);
    headers = await t.auth();
  });
  afterAll(async () => t?.close());

  /** Runs `early` in a transaction stamped before `late` runs and commits, then lets `early` go on. */
  async function interleave(early: Parameters<typeof runWrite>[1], late: () => Promise<unknown>): Promise<void> {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let stamped!: () => void;
    const stampedSignal = new Promise<void>((resolve) => (stamped = resolve));
    const slow = runWrite(t.ctx.database.db, async (ctx) => {
      stamped();
      await gate;
      return early(ctx);
    });
    await stampedSignal;
    try {
      await late();
    } finally {
      release();
    }
    await slow;
  }

  async function eventsOf(resourceId: string, resourceType: string): Promise<Versioned[]> {
    const { rows } = await sql<{
      data: Versioned;
    }>`SELECT data FROM events WHERE resource_id = ${resourceId} AND resource_type = ${resourceType} ORDER BY seq`.execute(t.ctx.database.db);
    return rows.map((r) => r.data);
  }

  it('a product written by an earlier-stamped transaction after a later one committed ends newest, events included', async () => {
    const db = t.ctx.database.db;
    const product = await aProduct(db, { stock: 10 });
    let later!: Versioned;
    await interleave(
      (ctx) => applyStockChanges(ctx, [{ productId: product.id, variantId: null, delta: -3, reason: 'adjustment' }]),
      async () => (later = (await updateProduct(db, product.id, { name: 'renamed meanwhile' })) as Versioned),
    );
    const current = ((await t.app.inject({ url: `/api/v1/products/${product.id}`, headers })).json() as { data: Versioned }).data;
    expect(current).toMatchObject({ name: 'renamed meanwhile', stock: 7 });
    expect(current.last_modified > later.last_modified).toBe(true);

    // Whatever order the events arrive in, keeping the newest gives the current record.
    for (const type of ['product', 'inventory'] as const) {
      const events = await eventsOf(product.id, type);
      const url = type === 'product' ? `/api/v1/products/${product.id}` : `/api/v1/inventory?limit=200`;
      const { data } = (await t.app.inject({ url, headers })).json() as { data: Versioned | (Versioned & { product_id: string })[] };
      const expected = Array.isArray(data) ? data.find((r) => r.product_id === product.id) : data;
      expect(newestWins(events)).toEqual(expected);
      expect(newestWins([...events].reverse())).toEqual(expected);
    }
  });

  it('a customer written by an earlier-stamped transaction after a later one committed ends newest', async () => {
    const db = t.ctx.database.db;
    const customer = await aCustomer(db);
    let later!: Versioned;
    await interleave(
      async (ctx) => {
        await ctx.trx.updateTable('customers').set({ city: 'Porto', last_modified: ctx.stamp }).where('id', '=', customer.id).execute();
      },
      async () => (later = (await updateCustomer(db, customer.id, { name: 'later stamp' })) as Versioned),
    );
    const current = ((await t.app.inject({ url: `/api/v1/customers/${customer.id}`, headers })).json() as { data: Versioned }).data;
    expect(current).toMatchObject({ name: 'later stamp', city: 'Porto' });
    expect(current.last_modified > later.last_modified).toBe(true);
  });
});
