/**
 * Decision 0036: an absolute CSV stock import applied in committed steps (the embedded database's
 * way, STOCK_IMPORT_STEP_ROWS) keeps what the one-transaction import promises: every row is checked
 * before anything is written (a bad row anywhere is a 400 naming its line, nothing written), all of a
 * product's rows fall in one step (its levels, movements, stock and events change together), repeated
 * skus apply in order, each level is set against the level read in its step, and a client that went
 * away before the steps began leaves nothing written. Through the admin API on the embedded database
 * the import runs outside the request's transaction and still gets its audit entry and its stored
 * Idempotency-Key answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';
import { adjustStock } from '../../src/inventory/stock.service.ts';
import { importStockCsv } from '../../src/inventory/stock-import.ts';
import { writeCommits } from '../../src/db/write-clock.ts';
import { ApiError } from '../../src/shared/problem.ts';

describe.each(backends)('stock import in committed steps (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
  });
  afterAll(async () => t?.close());

  const db = () => t.ctx.database.db;
  const count = async (table: string) => (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(db())).rows[0]!.n;
  const stockOf = async (sku: string) =>
    (await sql<{ stock: number }>`SELECT stock FROM variants WHERE sku = ${sku} UNION ALL SELECT own_stock FROM products WHERE sku = ${sku}`.execute(db()))
      .rows[0]!.stock;
  /** Runs `fn` counting the write transactions committed meanwhile. */
  const commitsDuring = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
    let commits = 0;
    const onCommit = () => (commits += 1);
    writeCommits.on('commit', onCommit);
    try {
      return [await fn(), commits];
    } finally {
      writeCommits.off('commit', onCommit);
    }
  };

  it('reads records ended by \\r\\n or by a lone \\r as by \\n, in steps and in one transaction', async () => {
    const a = await aProduct(db(), { stock: 1 });
    const b = await aProduct(db(), { stock: 1 });
    for (const [breakChars, stepRows] of [
      ['\r\n', 1],
      ['\r', 1],
      ['\r', undefined],
    ] as const) {
      const level = breakChars.length + (stepRows ?? 0) * 10;
      const csv = ['sku,stock', `${a.sku},${level}`, `${b.sku},${level + 1}`, ''].join(breakChars);
      const summary = await importStockCsv(db(), csv, stepRows === undefined ? {} : { stepRows });
      expect(summary).toMatchObject({ rows: 2 });
      expect([await stockOf(a.sku!), await stockOf(b.sku!)]).toEqual([level, level + 1]);
    }
  });

  it('applies every row, a product per step at the least, repeated skus in order', async () => {
    const plain = await aProduct(db(), { stock: 3 });
    const sized = await aProductWithVariants(db(), [5, 7]);
    const [v0, v1] = sized.variants.map((v) => v.sku!);
    const csv = `sku,stock,note\n${plain.sku},10,first\n${v0},8,\n${plain.sku},12,second\n${v1},7,unchanged\n${v1},1,\n`;
    const movements = await count('stock_movements');
    const [summary, commits] = await commitsDuring(() => importStockCsv(db(), csv, { stepRows: 1 }));
    expect(summary).toEqual({ rows: 5, movements: 4, products: 2 });
    // stepRows 1, but a product's rows are never split: one step (one commit) per product.
    expect(commits).toBe(2);
    expect(await count('stock_movements')).toBe(movements + 4);
    expect(await stockOf(plain.sku!)).toBe(12);
    expect([await stockOf(v0!), await stockOf(v1!)]).toEqual([8, 1]);
    const product = (await sql<{ stock: number }>`SELECT stock FROM products WHERE id = ${sized.id}`.execute(db())).rows[0]!;
    expect(product.stock).toBe(9);
    const { rows: chain } = await sql<{ quantity_change: number; stock_before: number; stock_after: number; note: string | null }>`
      SELECT quantity_change, stock_before, stock_after, note FROM stock_movements
      WHERE product_id = ${plain.id} AND reason = 'bulk_import' ORDER BY id`.execute(db());
    expect(chain).toEqual([
      { quantity_change: 7, stock_before: 3, stock_after: 10, note: 'first' },
      { quantity_change: 2, stock_before: 10, stock_after: 12, note: 'second' },
    ]);
    // Each product's change is announced (its step's events).
    const { rows: events } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM events WHERE type = 'product.updated' AND resource_id IN (${plain.id}, ${sized.id})`.execute(db());
    expect(events[0]!.n).toBeGreaterThanOrEqual(2);
  });

  it('groups interleaved rows by product in the order of their first rows, steps of whole products', async () => {
    const [a, c, d] = await Promise.all([aProduct(db(), { stock: 1 }), aProduct(db(), { stock: 1 }), aProduct(db(), { stock: 1 })]);
    const b = await aProductWithVariants(db(), [1, 1]);
    const [v0, v1] = b.variants.map((v) => v.sku!);
    const csv = `sku,stock\n${a.sku},5\n${c.sku},6\n${v0},2\n${a.sku},7\n${d.sku},8\n${v1},3\n${c.sku},9\n`;
    // Products a (2 rows), c (2), b (2), d (1): steps of 3 rows end after c, then after d.
    const [summary, commits] = await commitsDuring(() => importStockCsv(db(), csv, { stepRows: 3 }));
    expect(summary).toEqual({ rows: 7, movements: 7, products: 4 });
    expect(commits).toBe(2);
    expect([await stockOf(a.sku!), await stockOf(c.sku!), await stockOf(v0!), await stockOf(v1!), await stockOf(d.sku!)]).toEqual([7, 9, 2, 3, 8]);
    const afters = async (id: string) =>
      (
        await sql<{ stock_after: number }>`
          SELECT stock_after FROM stock_movements WHERE product_id = ${id} AND reason = 'bulk_import' ORDER BY id`.execute(db())
      ).rows.map((m) => m.stock_after);
    expect([await afters(a.id), await afters(c.id), await afters(b.id), await afters(d.id)]).toEqual([[5, 7], [6, 9], [2, 3], [8]]);
  });

  it.each([
    ['one transaction', undefined],
    ['steps', 1],
  ])('a 400 counts every bad row and lists the first 100, unknown skus before untracked ones (%s)', async (_, stepRows) => {
    const tracked = await aProduct(db());
    const service = await aProduct(db(), { product_type: 'service' });
    const movements = await count('stock_movements');
    const malformed = await importStockCsv(db(), `sku,stock\n${tracked.sku},1\n${',-1\n'.repeat(150)}`, { stepRows }).catch((e: unknown) => e);
    expect((malformed as ApiError).status).toBe(400);
    // Each of the 150 rows has two faults: 300 counted, the first 100 listed in the rows' order.
    expect((malformed as ApiError).detail).toMatch(/^300 invalid row/);
    expect((malformed as ApiError).errors).toHaveLength(100);
    expect((malformed as ApiError).errors!.slice(0, 3)).toEqual([
      { param: 'line 3', message: 'sku is empty' },
      { param: 'line 3', message: 'stock must be a non-negative whole number' },
      { param: 'line 4', message: 'sku is empty' },
    ]);
    const unknown = await importStockCsv(db(), `sku,stock\nNOPE-1,1\n${service.sku},1\n${tracked.sku},1\nNOPE-2,1\n${'NOPE-3,1\n'.repeat(120)}`, {
      stepRows,
    }).catch((e: unknown) => e);
    expect((unknown as ApiError).status).toBe(400);
    expect((unknown as ApiError).detail).toMatch(/^123 row\(s\) name an unknown or untracked sku/);
    expect((unknown as ApiError).errors).toHaveLength(100);
    expect((unknown as ApiError).errors!.slice(0, 3)).toEqual([
      { param: 'line 2', message: "unknown sku 'NOPE-1'" },
      { param: 'line 5', message: "unknown sku 'NOPE-2'" },
      { param: 'line 6', message: "unknown sku 'NOPE-3'" },
    ]);
    const fewer = await importStockCsv(db(), `sku,stock\nNOPE-1,1\n${service.sku},1\nNOPE-2,1\n`, { stepRows }).catch((e: unknown) => e);
    expect((fewer as ApiError).errors).toEqual([
      { param: 'line 2', message: "unknown sku 'NOPE-1'" },
      { param: 'line 4', message: "unknown sku 'NOPE-2'" },
      { param: 'line 3', message: `sku '${service.sku}' is a product type without stock` },
    ]);
    expect(await count('stock_movements')).toBe(movements);
    expect(await stockOf(tracked.sku!)).toBe(20);
  });

  it('sets each level against the level its step reads, whatever was written since the check', async () => {
    const first = await aProduct(db(), { stock: 5 });
    const second = await aProduct(db(), { stock: 5 });
    // Once the first product's step has committed, a sale-like adjustment takes 2 from the second.
    let adjusted: Promise<unknown> | undefined;
    const onCommit = () => {
      if (adjusted) return;
      adjusted = adjustStock(db(), { product_id: second.id, quantity_change: -2 });
    };
    // The steps follow the products' first rows: `first` is applied, then `second`.
    const csv = `sku,stock\n${first.sku},9\n${second.sku},9\n`;
    writeCommits.on('commit', onCommit);
    try {
      await importStockCsv(db(), csv, { stepRows: 1 });
      await adjusted;
    } finally {
      writeCommits.off('commit', onCommit);
    }
    // Whichever ran first, the movements chain: the last one's after is the level, each before the
    // previous after; the import's movement of `second` starts from the level it found.
    const { rows } = await sql<{ reason: string; stock_before: number; stock_after: number }>`
      SELECT reason, stock_before, stock_after FROM stock_movements WHERE product_id = ${second.id} ORDER BY id`.execute(db());
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.stock_before).toBe(rows[i - 1]!.stock_after);
    expect(await stockOf(second.sku!)).toBe(rows.at(-1)!.stock_after);
    const imported = rows.find((r) => r.reason === 'bulk_import')!;
    expect(imported.stock_after).toBe(9);
    expect([5, 3]).toContain(imported.stock_before);
  });

  it('a bad row or an unknown sku on the last line is a 400 naming it, with nothing written', async () => {
    const products = await Promise.all([aProduct(db()), aProduct(db()), aProduct(db())]);
    const good = products.map((p) => `${p.sku},77`);
    const movements = await count('stock_movements');
    for (const [last, line, text] of [
      ['nope,-1', 5, 'non-negative whole number'],
      ['NO-SUCH-SKU,1', 5, "unknown sku 'NO-SUCH-SKU'"],
    ] as const) {
      const error = await importStockCsv(db(), `sku,stock\n${good.join('\n')}\n${last}\n`, { stepRows: 1 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).status).toBe(400);
      expect((error as ApiError).errors).toEqual([{ param: `line ${line}`, message: expect.stringContaining(text) }]);
    }
    expect(await count('stock_movements')).toBe(movements);
    for (const p of products) expect(await stockOf(p.sku!)).toBe(20);
  });

  it('a client gone before the steps began leaves nothing written', async () => {
    const product = await aProduct(db());
    const movements = await count('stock_movements');
    const gone = new AbortController();
    gone.abort();
    const error = await importStockCsv(db(), `sku,stock\n${product.sku},99\n`, { stepRows: 1, signal: gone.signal }).catch((e: unknown) => e);
    expect((error as ApiError).status).toBe(400);
    expect(await count('stock_movements')).toBe(movements);
    expect(await stockOf(product.sku!)).toBe(20);
  });

  it('through the admin API: steps on the embedded database, the audit entry and the Idempotency-Key answer kept', async () => {
    const admin = await t.auth(['admin']);
    const products = await Promise.all([aProduct(db()), aProduct(db()), aProduct(db())]);
    const csv = `sku,stock\n${products.map((p, i) => `${p.sku},${30 + i}`).join('\n')}\n`;
    const post = () =>
      t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/inventory/import',
        headers: { ...admin, 'content-type': 'text/csv', 'idempotency-key': `steps-${backend}` },
        payload: csv,
      });
    const [movements, audits] = [await count('stock_movements'), await count('admin_audit_log')];
    const [first, commits] = await commitsDuring(post);
    expect(first.statusCode).toBe(201);
    expect(first.json()).toEqual({ data: { rows: 3, movements: 3, products: 3 } });
    // STOCK_IMPORT_STEP_ROWS is 100 by default: three products fit one step on the embedded
    // database; PostgreSQL keeps the one transaction (inside the request's).
    expect(commits).toBe(1);
    const again = await post();
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    expect(await count('stock_movements')).toBe(movements + 3);
    expect(await count('admin_audit_log')).toBe(audits + 1);
    for (const [i, p] of products.entries()) expect(await stockOf(p.sku!)).toBe(30 + i);
  });
});
