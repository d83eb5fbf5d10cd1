/**
 * Decision 0042: a products list asked while a CSV stock import runs waits for at most
 * the part of the import in progress when it was asked, never for a later one.
 *
 * Embedded database: the import runs in committed steps (decision 0036), and a list runs more than
 * one statement (its read horizon, then its page). The list is asked as the import's first step
 * commits; it must be answered before the import's third step commits. Before decision 0042 the
 * single connection was taken first come, first served: the next step queued the moment the
 * previous one ended, so the list's first statement waited for step two and its page, asked after
 * that, for step three (the list's p99 of decision 0036's measurement).
 *
 * PostgreSQL: the import is one transaction inside its request's; it is held after its first
 * movements until the list is answered, which it can only be if readers pass it (MVCC, connections
 * of their own). Ordering, counted in commits, never timed.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { writeCommits } from '../../src/db/write-clock.ts';
import { setRequestStatementHook } from '../../src/db/request-transaction.ts';

const PRODUCTS = 8;

describe.each(backends)('a products list during a stock import (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    // One product per step on the embedded database: PRODUCTS steps.
    t = await buildTestApp(backend, { ...UNLIMITED, STOCK_IMPORT_STEP_ROWS: '1' });
  });
  afterAll(async () => t?.close());

  it('waits for the part of the import in progress when it was asked, not for a later one', async () => {
    const db = t.ctx.database.db;
    const products = [];
    for (let i = 0; i < PRODUCTS; i++) products.push(await aProduct(db, { stock: 1 }));
    const [admin, reader] = [await t.auth(['admin']), await t.auth()];
    const csv = `sku,stock\n${products.map((p, i) => `${p.sku},${100 + i}`).join('\n')}\n`;

    // The list arrives as a client's request would: in an async context of its own, not in the
    // import's (the commit signal's listeners run inside it).
    const asAClient = AsyncLocalStorage.snapshot();
    let commits = 0;
    let askedAt: number | undefined;
    let answeredAt: number | undefined;
    let listing: Promise<{ statusCode: number; json(): unknown }> | undefined;
    const ask = () => {
      askedAt = commits;
      listing = t.app.inject({ method: 'GET', url: '/api/v1/products?limit=200', headers: reader }).then((res) => {
        answeredAt = commits;
        return res;
      });
      return listing;
    };
    const onCommit = () => {
      commits += 1;
      if (backend === 'pglite' && commits === 1) void asAClient(ask);
    };
    writeCommits.on('commit', onCommit);
    if (backend === 'postgres') {
      setRequestStatementHook(async (sqlText) => {
        if (listing === undefined && /^insert into "stock_movements"/i.test(sqlText)) await asAClient(ask);
      });
    }
    try {
      const imported = await t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/inventory/import',
        headers: { ...admin, 'content-type': 'text/csv' },
        payload: csv,
      });
      expect(imported.statusCode).toBe(201);
    } finally {
      writeCommits.off('commit', onCommit);
      setRequestStatementHook(undefined);
    }
    expect(listing).toBeDefined();
    const list = await listing!;
    expect(list.statusCode).toBe(200);
    if (backend === 'pglite') {
      // The steps did run (one commit each), and the list was asked as the first committed.
      expect(commits).toBe(PRODUCTS);
      expect(askedAt).toBe(1);
      // At most the step in progress when the list's first statement queued committed meanwhile.
      expect(answeredAt! - askedAt!).toBeLessThanOrEqual(1);
    } else {
      // Answered while the import's one transaction was held open mid-way.
      expect([askedAt, answeredAt]).toEqual([0, 0]);
      expect(commits).toBe(1);
    }
    // The import is whole: every product at its new level.
    const { rows } = await sql<{ sku: string; stock: number }>`
      SELECT sku, own_stock AS stock FROM products WHERE id IN (${sql.join(products.map((p) => p.id))}) ORDER BY sku`.execute(db);
    expect(rows.map((r) => r.stock).sort()).toEqual(products.map((_, i) => 100 + i).sort());
  });
});
