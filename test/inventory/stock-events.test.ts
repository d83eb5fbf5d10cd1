/**
 * The events of a stock change (decision 0047): stock_movement.created for each movement, then
 * inventory.updated for each product, then product.updated, each kind by id, all stamped alike and
 * appended in one statement per step; each event's data is the record's stored document after the
 * change. Whether an import runs in one transaction or in steps, the log reads the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';
import { importStockCsv } from '../../src/inventory/stock-import.ts';
import type { Database } from '../../src/db/schema.ts';

interface LoggedEvent {
  type: string;
  resource_id: string;
  data: string;
  created_at: string;
}

describe.each(backends)('the events of a stock import (%s)', (backend) => {
  let t: TestApp;
  let db: Kysely<Database>;
  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = t.database.db;
  });
  afterAll(async () => t?.close());

  const eventsAfter = async (seq: string) =>
    (
      await sql<LoggedEvent & { seq: string }>`SELECT seq::text, type, resource_id, data::text AS data, created_at::text FROM events
        WHERE seq > ${seq}::bigint AND NOT test ORDER BY seq`.execute(db)
    ).rows;
  const lastSeq = async () => (await sql<{ seq: string }>`SELECT coalesce(max(seq), 0)::text AS seq FROM events`.execute(db)).rows[0]!.seq;
  const stored = async (type: string, id: string) => {
    const query =
      type === 'stock_movement.created'
        ? sql<{ doc: string }>`SELECT doc::text AS doc FROM stock_movements WHERE id = ${id}::uuid`
        : type === 'inventory.updated'
          ? sql<{ doc: string }>`SELECT inventory_doc::text AS doc FROM products WHERE id = ${id}::uuid`
          : sql<{ doc: string }>`SELECT doc::text AS doc FROM products WHERE id = ${id}::uuid`;
    return (await query.execute(db)).rows[0]!.doc;
  };

  for (const stepRows of [undefined, 1]) {
    it(`${stepRows ? 'in steps' : 'in one transaction'}: movements, then inventory records, then products, each kind by id, with their stored documents`, async () => {
      const products = [await aProduct(db), await aProduct(db), await aProductWithVariants(db, [5, 7])];
      const [plain1, plain2, withVariants] = products;
      const [v0, v1] = withVariants!.variants!;
      const before = await lastSeq();
      await importStockCsv(db, `sku,stock\n${plain1!.sku},41\n${v1!.sku},2\n${plain2!.sku},3\n${v0!.sku},8\n`, stepRows ? { stepRows } : {});
      const events = await eventsAfter(before);
      // Each transaction's events (one per step in steps, else all) in order.
      const transactions = [...new Set(events.map((e) => e.created_at))];
      expect(transactions).toHaveLength(stepRows ? 3 : 1);
      for (const stamp of transactions) {
        const own = events.filter((e) => e.created_at === stamp);
        const kinds = [...new Set(own.map((e) => e.type))];
        expect(kinds).toEqual(['stock_movement.created', 'inventory.updated', 'product.updated']);
        for (const kind of kinds) {
          const ids = own.filter((e) => e.type === kind).map((e) => e.resource_id);
          expect(ids).toEqual([...ids].sort());
        }
        expect(own.filter((e) => e.type === 'stock_movement.created').length).toBeGreaterThan(0);
        expect(own.filter((e) => e.type === 'inventory.updated').map((e) => e.resource_id)).toEqual(
          own.filter((e) => e.type === 'product.updated').map((e) => e.resource_id),
        );
      }
      expect(events.filter((e) => e.type === 'stock_movement.created')).toHaveLength(4);
      expect(new Set(events.filter((e) => e.type === 'product.updated').map((e) => e.resource_id))).toEqual(new Set(products.map((p) => p!.id)));
      // The very bytes a GET returns after the import.
      for (const event of events) expect(event.data).toBe(await stored(event.type, event.resource_id));
    });
  }
});
