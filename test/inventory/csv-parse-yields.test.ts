/**
 * Parsing a large CSV import lets the event loop turn (point 6: a 100k-row import stalled
 * /healthz ~2 s on both back ends, in the synchronous CSV parse). The CSV here has a bad last row, so
 * the import fails validation right after parsing, before any database statement: every turn of the
 * event loop counted meanwhile happened during the parse. Ordering, not timing: a synchronous parse
 * allows none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importStockCsv } from '../../src/inventory/stock-import.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';

describe('CSV import parsing', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase('pglite');
  });
  afterAll(async () => {
    await database?.close();
  });

  it('yields to the event loop while parsing 100k rows, and still names the bad line', async () => {
    const rows = Array.from({ length: 100_000 }, (_, i) => `SKU-${i},${i % 50}`);
    const csv = ['sku,stock', ...rows, 'SKU-last,not-a-number'].join('\n');
    let turns = 0;
    let parsing = true;
    const tick = () => {
      turns++;
      if (parsing) setImmediate(tick);
    };
    setImmediate(tick);
    const failure = await importStockCsv(database.db, csv).catch((error: { code?: string; errors?: { param: string }[] }) => error);
    parsing = false;
    expect(failure).toMatchObject({ code: 'invalid_parameter' });
    expect((failure as { errors: { param: string }[] }).errors[0]!.param).toBe('line 100002');
    expect(turns).toBeGreaterThan(10);
  });

  it('a CSV the parser refuses is a 400 naming the body', async () => {
    const failure = await importStockCsv(database.db, 'sku,stock\n"unclosed,1\n').catch((error: { code?: string; detail?: string }) => error);
    expect(failure).toMatchObject({ code: 'invalid_parameter' });
  });
});
