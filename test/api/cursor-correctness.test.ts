/**
 * Cursor correctness (docs/contract/decisions.md "Lists, cursors, exports"):
 *  1. records sharing one last_modified (a bulk import) are never skipped or repeated across pages;
 *  2. an incremental pull never misses a change whose transaction commits after the reader passed
 *     its timestamp (the read horizon) — on real PostgreSQL with two connections.
 * Both would fail on a naive `last_modified > cursor` implementation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { importStockCsv } from '../../src/inventory/stock-import.ts';
import { readHorizon, runWrite, sharedHorizon } from '../../src/db/write-clock.ts';
import { updateProduct } from '../../src/catalog/catalog.service.ts';

type Page = {
  data: { id: string; product_id?: string; last_modified: string }[];
  pagination: { next_cursor: string | null; has_more: boolean; limit: number };
};

describe.each(backends)('cursor correctness (%s)', (backend) => {
  let t: TestApp;
  let headers: { authorization: string };
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    headers = await t.auth();
  });
  afterAll(async () => t?.close());

  async function walk(path: string, limit: number, order: 'asc' | 'desc' = 'asc', start?: string) {
    const seen: string[] = [];
    let cursor = start;
    for (let pages = 0; pages < 1000; pages++) {
      const q = new URLSearchParams({ limit: String(limit), order });
      if (cursor) q.set('cursor', cursor);
      const res = await t.app.inject({ url: `${path}?${q}`, headers });
      expect(res.statusCode).toBe(200);
      const page = res.json() as Page;
      seen.push(...page.data.map((r) => r.id ?? r.product_id!));
      cursor = page.pagination.next_cursor ?? undefined;
      if (!page.pagination.has_more) return { seen, cursor };
    }
    throw new Error('walk did not end');
  }

  it('walks records sharing one last_modified exactly once, in both directions', async () => {
    const products = [];
    for (let i = 0; i < 25; i++) products.push(await aProduct(t.ctx.database.db, { stock: 1 }));
    // One CSV import stamps all 25 products alike.
    const csv = ['sku,stock', ...products.map((p, i) => `${p.sku},${100 + i}`)].join('\n');
    await importStockCsv(t.ctx.database.db, csv);
    const { rows } = await sql<{ n: number }>`SELECT count(DISTINCT last_modified)::int AS n FROM products`.execute(t.ctx.database.db);
    expect(rows[0]!.n).toBe(1);

    for (const order of ['asc', 'desc'] as const) {
      for (const path of ['/api/v1/products', '/api/v1/inventory']) {
        const { seen } = await walk(path, 7, order);
        expect(seen).toHaveLength(25);
        expect(new Set(seen).size).toBe(25);
      }
    }
    // The movements of the import share one stamp too.
    const movements = await walk('/api/v1/inventory/movements', 6);
    expect(new Set(movements.seen).size).toBe(movements.seen.length);
    expect(movements.seen.length).toBe(50); // 25 initial adjustments + 25 bulk_import
  });

  it('hands back a cursor on the last page that yields exactly the later changes', async () => {
    const { seen, cursor } = await walk('/api/v1/products', 50);
    expect(cursor).toBeTruthy();
    const first = await t.app.inject({ url: `/api/v1/products?cursor=${encodeURIComponent(cursor!)}`, headers });
    expect((first.json() as Page).data).toEqual([]);
    expect((first.json() as Page).pagination.next_cursor).toBe(cursor);
    const changed = (await updateProduct(t.ctx.database.db, seen[3]!, { name: 'Renamed' })) as { id: string };
    const later = await t.app.inject({ url: `/api/v1/products?cursor=${encodeURIComponent(cursor!)}`, headers });
    expect((later.json() as Page).data.map((r) => r.id)).toEqual([changed.id]);
  });

  it('shares one horizon statement among the readers waiting for it, each read after the reader arrived (decision 0037)', async () => {
    const db = t.ctx.database.db;
    const first = sharedHorizon(db);
    // Arriving while the first read runs: they must not take it (it began before they arrived), but
    // share the next one, read after it.
    const waiting = [sharedHorizon(db), sharedHorizon(db), sharedHorizon(db)];
    const [a, ...rest] = await Promise.all([first, ...waiting]);
    expect(new Set(rest).size).toBe(1);
    // Not earlier (equal when a write in flight holds the horizon back at its start: readHorizon).
    const cmp = await sql<{ later: boolean }>`SELECT ${rest[0]!}::timestamptz >= ${a!}::timestamptz AS later`.execute(db);
    expect(cmp.rows[0]!.later).toBe(true);
    // Nothing under way: a caller gets a read of its own, not earlier than everything before it.
    const alone = await sharedHorizon(db);
    const own = await sql<{ later: boolean }>`SELECT ${alone}::timestamptz >= ${rest[0]!}::timestamptz AS later`.execute(db);
    expect(own.rows[0]!.later).toBe(true);
    // A write committed before a list is asked is in it (read your writes), with readers in flight.
    const inFlight = sharedHorizon(db);
    const product = await aProduct(db);
    const listed = (await t.app.inject({ url: `/api/v1/products?limit=5&order=desc`, headers })).json() as Page;
    expect(listed.data.map((r) => r.id)).toContain(product.id);
    await inFlight;
    expect(typeof (await readHorizon(db))).toBe('string');
  });

  it('accepts a plain ISO timestamp as cursor: strictly after it (asc), strictly before it (desc)', async () => {
    const all = (await walk('/api/v1/products', 200)).seen;
    const res = await t.app.inject({ url: '/api/v1/products?limit=200', headers });
    const data = (res.json() as Page).data;
    const pivot = data[Math.floor(data.length / 2)]!.last_modified;
    const after = await t.app.inject({ url: `/api/v1/products?limit=200&cursor=${pivot}`, headers });
    const before = await t.app.inject({ url: `/api/v1/products?limit=200&order=desc&cursor=${pivot}`, headers });
    const afterRows = (after.json() as Page).data;
    const beforeRows = (before.json() as Page).data;
    expect(afterRows.every((r) => r.last_modified > pivot)).toBe(true);
    expect(beforeRows.every((r) => r.last_modified < pivot)).toBe(true);
    const atPivot = data.filter((r) => r.last_modified === pivot).length;
    expect(afterRows.length + beforeRows.length + atPivot).toBe(all.length);
  });
});

describe.runIf(backends.includes('postgres'))('read horizon with concurrent writers (postgres)', () => {
  let t: TestApp;
  let headers: { authorization: string };
  beforeAll(async () => {
    t = await buildTestApp('postgres', UNLIMITED);
    headers = await t.auth();
  });
  afterAll(async () => t?.close());

  it('never misses a write that commits after a reader passed its timestamp', async () => {
    const db = t.ctx.database.db;
    const early = await aProduct(db);
    const late = await aProduct(db);
    const { pagination } = (await t.app.inject({ url: '/api/v1/products?limit=200', headers })).json() as Page;
    const cursor = pagination.next_cursor!;

    // Writer A: stamps `early` now, then holds its transaction open (a slow admin write).
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let stamped!: () => void;
    const stampedSignal = new Promise<void>((resolve) => (stamped = resolve));
    const slowWrite = runWrite(db, async (ctx) => {
      await sql`UPDATE products SET name = 'slow write', last_modified = ${ctx.stamp}::timestamptz WHERE id = ${early.id}::uuid`.execute(ctx.trx);
      stamped();
      await gate;
    });
    await stampedSignal;

    let during: Page;
    try {
      // Writer B: a later write that commits first (its stamp is after A's).
      await updateProduct(db, late.id, { name: 'fast write' });

      // The reader polls now: it must not hand out a cursor past A's stamp.
      during = (await t.app.inject({ url: `/api/v1/products?cursor=${encodeURIComponent(cursor)}`, headers })).json() as Page;
      expect(during.data.map((r) => r.id)).not.toContain(late.id);
    } finally {
      release();
      await slowWrite;
    }

    const resumeFrom = during.pagination.next_cursor!;
    const after = (await t.app.inject({ url: `/api/v1/products?cursor=${encodeURIComponent(resumeFrom)}`, headers })).json() as Page;
    const seen = [...during.data, ...after.data].map((r) => r.id);
    expect(seen).toContain(early.id);
    expect(seen).toContain(late.id);
    expect(new Set(seen).size).toBe(seen.length);
  });
});
