/**
 * Decision 0067: a bulk write keeps the planner's statistics of the tables it grows current
 * (db/statistics.ts, migration 0051). The embedded database has no autovacuum, and no autovacuum
 * sees rows a transaction has not committed: without statistics the planner took `store_id = $1` for
 * a small share of a table and joined each chunk's ids to the whole store's rows through a store-led
 * index, once per chunk, and an import's time grew with the square of its rows. After an import (as
 * one transaction or in steps) the tables it grew are analysed and the planner's estimate of the
 * store's rows is right; small writes check once per CHECK_EVERY rows at most; the function
 * analyses the store tables only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { observeStatements } from '../../src/db/store-scope.ts';
import { CHECK_EVERY } from '../../src/db/statistics.ts';

const ROWS = 3 * CHECK_EVERY;

// One transaction (the rows it grows are its own until it commits), and committed steps of 100 rows
// (the embedded database's default: no step writes CHECK_EVERY rows). Never a job.
const cases = backends.flatMap((backend) => [[backend, 'one transaction', '0'] as const, [backend, 'steps of 100 rows', '100'] as const]);

describe.each(cases)('statistics kept by bulk writes (%s, %s)', (backend, _mode, stepRows) => {
  let t: TestApp;
  let storeId: string;
  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED, STOCK_IMPORT_STEP_ROWS: stepRows, IMPORT_JOB_ROWS: '1000000' });
    await sql`INSERT INTO products (id, name, slug, product_type, sku, price, created_at, last_modified)
      SELECT gen_random_uuid(), 'P' || i, 'stats-' || i, 'physical', 'STATS-' || i, 1, now(), now()
      FROM generate_series(1, ${ROWS}::int) AS i`.execute(t.ctx.database.db);
    storeId = (await sql<{ id: string }>`SELECT store_id::text AS id FROM products LIMIT 1`.execute(t.ctx.database.db)).rows[0]!.id;
  });
  afterAll(async () => t?.close());

  const db = () => t.ctx.database.db;
  const knownRows = async (table: string) =>
    (await sql<{ n: number }>`SELECT reltuples::float8 AS n FROM pg_class WHERE oid = ${table}::regclass`.execute(db())).rows[0]!.n;
  /** The statements `fn` runs that check a table's statistics. */
  const checksDuring = async (fn: () => Promise<void>) => {
    // A statement may be reported more than once (its layers each report it), with the same parameters.
    const checks = new Set<readonly unknown[]>();
    observeStatements((text, parameters) => {
      if (text.includes('store_api_analyze_if_stale')) checks.add(parameters);
    });
    try {
      await fn();
    } finally {
      observeStatements(undefined);
    }
    return [...checks];
  };

  it('an import analyses the tables it grew: the planner knows how many rows the store has', async () => {
    const admin = await t.auth(['admin']);
    const csv = `sku,stock\n${Array.from({ length: ROWS }, (_, i) => `STATS-${i + 1},${(i % 7) + 1}`).join('\n')}\n`;
    const checks = await checksDuring(async () => {
      const imported = await t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/inventory/import',
        headers: { ...admin, 'content-type': 'text/csv' },
        payload: csv,
      });
      expect(imported.statusCode, imported.body).toBe(201);
    });
    // Checked every CHECK_EVERY rows of each table, not per statement: the import wrote ROWS
    // movements, ROWS products and 3 × ROWS events (a movement's, an inventory record's, a product's),
    // and each table's count may have carried up to CHECK_EVERY rows from earlier writes.
    expect(checks.length).toBeGreaterThan(0);
    expect(checks.length).toBeLessThanOrEqual((5 * ROWS) / CHECK_EVERY + 3);
    expect(await knownRows('stock_movements')).toBeGreaterThanOrEqual(CHECK_EVERY);
    expect(await knownRows('events')).toBeGreaterThanOrEqual(CHECK_EVERY);

    // What the planner expects of the store's rows: every movement (the store is the table's only
    // one), not the default share of a condition it knows nothing of. Joining a chunk of ids to the
    // store's rows, it then chooses the primary key once the store's rows outnumber the chunk's.
    for (const table of ['stock_movements', 'events']) {
      const { rows } = await sql<{ 'QUERY PLAN': string }>`EXPLAIN SELECT 1 FROM ${sql.table(table)} WHERE store_id = ${storeId}::uuid`.execute(db());
      const expected = Number(/rows=(\d+)/.exec(rows[0]!['QUERY PLAN'])![1]);
      const actual = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(db())).rows[0]!.n;
      expect(expected, `${table}: ${rows[0]!['QUERY PLAN']}`).toBeGreaterThanOrEqual(actual / 2);
    }
  });

  it('small writes check once every CHECK_EVERY rows at most', async () => {
    const admin = await t.auth(['admin']);
    const checks = await checksDuring(async () => {
      for (let i = 0; i < 5; i++) {
        const imported = await t.app.inject({
          method: 'POST',
          url: '/admin/api/v1/inventory/import',
          headers: { ...admin, 'content-type': 'text/csv' },
          payload: `sku,stock\nSTATS-1,${40 + i}\nSTATS-2,${41 + i}\n`,
        });
        expect(imported.statusCode, imported.body).toBe(201);
      }
    });
    // 10 rows of levels, movements and products each, 30 events: whatever the count before, one
    // check of a table at most.
    expect(checks.length).toBeLessThanOrEqual(4);
  });

  it('analyses the store tables only', async () => {
    await expect(sql`SELECT store_api_analyze_if_stale('api_tokens', 100000, false)`.execute(db())).rejects.toThrow(/not a table it analyses/);
    // A table whose statistics are current is left alone.
    await sql`ANALYZE stock_movements`.execute(db());
    const { rows } = await sql<{ analysed: boolean }>`SELECT store_api_analyze_if_stale('stock_movements', 10, false) AS analysed`.execute(db());
    expect(rows[0]!.analysed).toBe(false);
  });
});
