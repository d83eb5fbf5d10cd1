/**
 * The generated demo store looks like a real one and keeps every invariant the services keep: every
 * order status and payment status, stock movement chains without a gap, product stock = Σ active
 * variants (or own stock), nothing oversold, every resource's newest event equal to what a GET
 * returns now, and money that adds up. The store is small and its orders many, so stock runs out on
 * the way: no order may be refused for it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { generateDemoStore, type DemoSummary } from '../../src/demo/demo-store.ts';
import { ORDER_STATUSES, PAYMENT_STATUSES } from '../../src/orders/order-status.ts';
import { productJson } from '../../src/catalog/product.json-sql.ts';
import { orderJson } from '../../src/orders/order.json-sql.ts';
import { customerJson } from '../../src/customers/customer.json-sql.ts';
import { homeStore } from '../../src/stores/store.service.ts';
import { inStore } from '../../src/db/store-scope.ts';
import { startStatementAudit } from '../helpers/statement-audit.ts';

const ORDERS = 400;

describe.each(backends)('the generated demo store (%s)', (backend) => {
  let database: TestDatabase;
  let summary: DemoSummary;
  /** The generator's statements over store-owned tables that did not name its store. */
  let unnamed: string[];
  const db = () => database.db;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    // In the store's scope, as `store-api demo generate` runs it.
    const store = (await homeStore(database.db))!.id;
    const audit = startStatementAudit();
    summary = await inStore(store, () => generateDemoStore(database.db, { products: 12, customers: 15, orders: ORDERS, seed: 3, batchSize: 150 }));
    unnamed = audit.stop();
  });
  afterAll(async () => database?.close());

  it('names its store in every statement (decision 0051)', () => {
    expect(unnamed).toEqual([]);
  });

  it('leaves its tables vacuumed: the rows it rewrote leave no dead versions for pages to walk (decision 0066)', async () => {
    const { rows } = await sql<{ relname: string }>`
      SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname IN ('products', 'variants', 'customers', 'orders') AND last_vacuum IS NULL`.execute(
      db(),
    );
    expect(rows).toEqual([]);
  });

  it('places every order asked for, though stock runs out on the way', async () => {
    expect(summary.orders).toBe(ORDERS);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders`.execute(db());
    expect(rows[0]!.n).toBe(ORDERS);
    // Some line sold out: the store was tight enough for the rule to matter.
    const { rows: soldOut } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM stock_movements WHERE reason = 'sale' AND stock_after = 0`.execute(db());
    expect(soldOut[0]!.n).toBeGreaterThan(0);
  });

  it('has every order status and payment status, customers on online orders, discounts and delivery fees', async () => {
    const statuses = await db().selectFrom('orders').select('status').distinct().execute();
    expect(statuses.map((r) => r.status).sort()).toEqual([...ORDER_STATUSES].sort());
    const payments = await db().selectFrom('orders').select('payment_status').distinct().execute();
    expect(payments.map((r) => r.payment_status).sort()).toEqual([...PAYMENT_STATUSES].sort());
    const { rows } = await sql<{ online_customers: number; pos_customers: number; discounts: number; fees: number; pos_fees: number; unpaid_shipped: number }>`
      SELECT count(*) FILTER (WHERE source = 'online' AND customer_id IS NOT NULL)::int AS online_customers,
             count(*) FILTER (WHERE source = 'pos' AND customer_id IS NOT NULL)::int AS pos_customers,
             count(*) FILTER (WHERE discount > 0)::int AS discounts,
             count(*) FILTER (WHERE delivery_fee > 0)::int AS fees,
             count(*) FILTER (WHERE source = 'pos' AND delivery_fee > 0)::int AS pos_fees,
             count(*) FILTER (WHERE status IN ('shipped', 'delivered', 'completed', 'refunded') AND payment_status <> 'paid')::int AS unpaid_shipped
      FROM orders`.execute(db());
    expect(rows[0]).toMatchObject({ pos_customers: 0, pos_fees: 0, unpaid_shipped: 0 });
    expect(rows[0]!.online_customers).toBeGreaterThan(0);
    expect(rows[0]!.discounts).toBeGreaterThan(0);
    expect(rows[0]!.fees).toBeGreaterThan(0);
    const { rows: names } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders o JOIN customers c ON c.id = o.customer_id
      WHERE o.customer_name IS DISTINCT FROM c.name OR o.customer_phone IS DISTINCT FROM c.phone`.execute(db());
    expect(names[0]!.n).toBe(0);
  });

  it('adds up every order: item totals, subtotal, total', async () => {
    const { rows } = await sql<{ id: string }>`
      SELECT o.id FROM orders o
      WHERE o.subtotal <> (SELECT sum(i.total) FROM order_items i WHERE i.order_id = o.id)
         OR o.total <> o.subtotal - o.discount + o.delivery_fee
         OR o.discount > o.subtotal + o.delivery_fee
         OR EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id AND i.total <> i.quantity * i.unit_price)
         OR NOT EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id)`.execute(db());
    expect(rows).toEqual([]);
  });

  it('chains every stock level’s movements from 0 to its current stock, never below 0', async () => {
    const movements = await db().selectFrom('stock_movements').selectAll().orderBy('id').execute();
    const levels = new Map<string, number>();
    for (const m of movements) {
      const key = `${m.product_id}:${m.variant_id}`;
      expect(m.stock_before, `movement ${m.id}`).toBe(levels.get(key) ?? 0);
      expect(m.stock_after).toBe(m.stock_before + m.quantity_change);
      expect(m.stock_after).toBeGreaterThanOrEqual(0);
      levels.set(key, m.stock_after);
    }
    const { rows: stocks } = await sql<{ key: string; stock: number }>`
      SELECT v.product_id || ':' || v.id AS key, v.stock FROM variants v
      UNION ALL
      SELECT p.id || ':null', p.own_stock FROM products p WHERE p.product_type IN ('physical', 'food', 'digital_card')
        AND NOT EXISTS (SELECT 1 FROM variants v WHERE v.product_id = p.id)`.execute(db());
    for (const s of stocks) expect(s.stock, s.key).toBe(levels.get(s.key) ?? 0);
    const { rows: wrong } = await sql<{ id: string }>`SELECT p.id FROM products p
      WHERE p.stock <> coalesce((SELECT sum(v.stock)::int FROM variants v WHERE v.product_id = p.id AND v.is_active), p.own_stock)`.execute(db());
    expect(wrong).toEqual([]);
  });

  it('moves stock for exactly what the orders say: sales for all, restocks for cancelled and refunded ones', async () => {
    const { rows } = await sql<{ id: string }>`
      WITH items AS (
        SELECT i.order_id, i.product_id, i.variant_id, i.quantity, o.status FROM order_items i
        JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id
        WHERE p.product_type IN ('physical', 'food', 'digital_card')),
      expected AS (
        SELECT order_id, product_id, variant_id, 'sale' AS reason, -quantity AS change FROM items
        UNION ALL SELECT order_id, product_id, variant_id, 'cancel', quantity FROM items WHERE status = 'cancelled'
        UNION ALL SELECT order_id, product_id, variant_id, 'refund', quantity FROM items WHERE status = 'refunded'),
      actual AS (
        SELECT order_id, product_id, variant_id, reason, quantity_change AS change FROM stock_movements WHERE order_id IS NOT NULL)
      SELECT order_id::text AS id FROM ((TABLE expected EXCEPT ALL TABLE actual) UNION ALL (TABLE actual EXCEPT ALL TABLE expected)) d`.execute(db());
    expect(rows).toEqual([]);
  });

  it('gives every product, customer, order and movement its created event, the newest one byte for byte the resource now', async () => {
    const checks = [
      { type: 'product', from: sql`products p`, id: sql`p.id`, json: productJson, version: sql`p.version` },
      { type: 'customer', from: sql`customers c`, id: sql`c.id`, json: customerJson, version: sql`c.version` },
      { type: 'order', from: sql`orders o`, id: sql`o.id`, json: orderJson, version: sql`o.version` },
    ];
    for (const c of checks) {
      const { rows } = await sql<{ id: string; created: boolean; same: boolean }>`
        SELECT ${c.id}::text AS id,
          EXISTS (SELECT 1 FROM events e WHERE e.resource_id = ${c.id}::text AND e.type = ${`${c.type}.created`}) AS created,
          (SELECT e.data::text FROM events e WHERE e.resource_id = ${c.id}::text AND e.resource_type = ${c.type}
            ORDER BY e.created_at DESC, e.seq DESC LIMIT 1)
            -- The resource as built now, with its version last (decision 0057), as the read API serves it.
            = left(${c.json}::text, -1) || ',"version":' || ${c.version}::text || '}' AS same
        FROM ${c.from}`.execute(db());
      expect(rows.length, c.type).toBeGreaterThan(0);
      expect(
        rows.filter((r) => !r.created || !r.same),
        c.type,
      ).toEqual([]);
    }
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM stock_movements m
      WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.resource_id = m.id::text AND e.type = 'stock_movement.created')`.execute(db());
    expect(rows[0]!.n).toBe(0);
  });
});
