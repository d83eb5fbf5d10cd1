/**
 * Fast store generator for benchmarks: every row is built by the database itself from
 * generate_series (one multi-table INSERT statement per chunk), so nothing crosses the wire but the
 * chunk bounds. 100k products with 2 variants and 2 images each take seconds on PostgreSQL, where
 * the demo generator (one write-clock transaction per product, events included) takes minutes.
 * Ids are md5-derived UUIDs of the row number, so orders and items can refer to customers and
 * products without a lookup. No events are written: the bench measures reads, exports and
 * deliveries of changes it makes itself. The rows go in with the stored-document triggers held
 * (store_api.rebuilding_documents, src/db/documents.ts); the documents are then filled by the same
 * batched backfill an operator runs (`store-api documents backfill`), timed on its own.
 */
import { sql, type Kysely } from 'kysely';
import cliProgress from 'cli-progress';
import type { Database } from '../src/db/schema.ts';
import type { DatabaseHandle } from '../src/db/database.ts';
import { formatCursor } from '../src/shared/cursor.ts';
import { rebuildDocuments } from '../src/db/documents.ts';

export interface StoreSize {
  products: number;
  customers: number;
  orders: number;
  /** Stock movements (on products 1..n). */
  movements: number;
}

/** Rows per statement: large enough to amortise the round trip, small enough for a moving progress bar. */
const CHUNK = 10_000;

/** Spread of last_modified: one second per row from this instant on, so every row is final (past). */
const EPOCH = '2024-01-01T00:00:00Z';

async function chunked(label: string, total: number, step: (from: number, to: number) => Promise<void>): Promise<void> {
  await progress(label, total, async (update) => {
    for (let from = 1; from <= total; from += CHUNK) {
      const to = Math.min(total, from + CHUNK - 1);
      await step(from, to);
      update(to);
    }
  });
}

/** A progress bar on stderr around `work` (plain lines every 5 s when not a terminal). */
async function progress(label: string, total: number, work: (update: (done: number) => void) => Promise<void>): Promise<void> {
  if (total <= 0) return;
  const bar = new cliProgress.SingleBar(
    {
      format: `  ${label.padEnd(10)} [{bar}] {percentage}% {value}/{total} {duration}s`,
      stream: process.stderr,
      noTTYOutput: true,
      notTTYSchedule: 5000,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0);
  try {
    await work((done) => bar.update(done));
  } finally {
    bar.stop();
  }
}

/** Runs one generator statement with the document triggers held (the backfill builds them after). */
async function withoutDocuments(db: Kysely<Database>, statement: ReturnType<typeof sql>): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await sql`SELECT set_config('store_api.rebuilding_documents', 'on', true)`.execute(trx);
    await statement.execute(trx);
  });
}

/** Products 1..n: a tenth inactive, six types, 2 variants and 2 images each (all active). */
async function products(db: Kysely<Database>, total: number): Promise<void> {
  await chunked('products', total, async (from, to) => {
    await withoutDocuments(
      db,
      sql`
      WITH g AS (
        SELECT g, md5('p' || g)::uuid AS id, ${EPOCH}::timestamptz + g * interval '1 second' AS ts
        FROM generate_series(${from}::bigint, ${to}::bigint) g
      ), p AS (
        INSERT INTO products (id, name, slug, product_type, barcode, sku, price, cost_price, own_stock, stock,
                              category_id, thumbnail_url, is_active, created_at, last_modified)
        SELECT id, 'Product ' || g, 'product-' || g,
               (ARRAY['physical','food','digital','digital_card','service','bundle'])[1 + g % 6],
               lpad(g::text, 13, '0'), 'SKU-' || g, 5 + (g * 7919 % 10000) / 100.0, 2 + (g * 7919 % 5000) / 100.0,
               0, 2 * (g % 20), 'cat-' || (g % 50), 'https://cdn.example.com/p/' || g || '.jpg',
               g % 10 <> 0, ts, ts
        FROM g
      ), v AS (
        INSERT INTO variants (id, product_id, name, sku, price, stock, attributes, position, is_active, created_at)
        SELECT md5('v' || g || '-' || k)::uuid, id, (ARRAY['Small','Large'])[k + 1], 'SKU-' || g || '-' || k,
               5 + (g * 7919 % 10000) / 100.0 + k, g % 20,
               jsonb_build_object('size', (ARRAY['S','L'])[k + 1], 'colour', (ARRAY['red','green','blue'])[1 + g % 3]),
               k, true, ts
        FROM g CROSS JOIN generate_series(0, 1) k
      )
      INSERT INTO images (id, product_id, image_url, is_primary, position, is_active, created_at)
      SELECT md5('i' || g || '-' || k)::uuid, id, 'https://cdn.example.com/p/' || g || '/' || k || '.jpg', k = 0, k, true, ts
      FROM g CROSS JOIN generate_series(0, 1) k
    `,
    );
  });
}

async function customers(db: Kysely<Database>, total: number): Promise<void> {
  await chunked('customers', total, async (from, to) => {
    await withoutDocuments(
      db,
      sql`
      INSERT INTO customers (id, name, phone, email, city, is_active, created_at, last_modified)
      SELECT md5('c' || g)::uuid, 'Customer ' || g, '+2547' || lpad(g::text, 8, '0'), 'customer' || g || '@example.com',
             (ARRAY['Nairobi','Mombasa','Kisumu','Nakuru'])[1 + g % 4], g % 25 <> 0,
             ${EPOCH}::timestamptz + g * interval '1 second', ${EPOCH}::timestamptz + g * interval '1 second'
      FROM generate_series(${from}::bigint, ${to}::bigint) g
    `,
    );
  });
}

/** Orders 1..n with 2 items each, on customers 1..c (none when c = 0) and products 1..p. */
async function orders(db: Kysely<Database>, total: number, customerCount: number, productCount: number): Promise<void> {
  await chunked('orders', total, async (from, to) => {
    await withoutDocuments(
      db,
      sql`
      WITH g AS (
        SELECT g, md5('o' || g)::uuid AS id, ${EPOCH}::timestamptz + g * interval '1 second' AS ts,
               1 + (g * 31 % ${productCount}::int) AS p1, 1 + (g * 37 % ${productCount}::int) AS p2,
               CASE WHEN ${customerCount}::int > 0 THEN md5('c' || (1 + g % greatest(${customerCount}::int, 1)))::uuid END AS customer_id,
               (1 + g % 3) AS q1, 1 AS q2, (5 + g % 50)::numeric(14,2) AS u1, (3 + g % 20)::numeric(14,2) AS u2
        FROM generate_series(${from}::bigint, ${to}::bigint) g
      ), o AS (
        INSERT INTO orders (id, source, status, payment_status, payment_method, customer_id, customer_name, customer_phone,
                            subtotal, discount, delivery_fee, total, created_at, last_modified)
        SELECT id, (ARRAY['pos','online'])[1 + g % 2], (ARRAY['pending','processing','completed','delivered','cancelled'])[1 + g % 5],
               (ARRAY['pending','paid'])[1 + g % 2], 'cash', customer_id, 'Customer ' || g, NULL,
               q1 * u1 + q2 * u2, 0, 0, q1 * u1 + q2 * u2, ts, ts
        FROM g
      )
      INSERT INTO order_items (id, order_id, product_id, variant_id, product_name, variant_name, quantity, unit_price, total, position)
      SELECT md5('oi' || g || '-' || k)::uuid, id, md5('p' || CASE k WHEN 0 THEN p1 ELSE p2 END)::uuid, NULL,
             'Product ' || CASE k WHEN 0 THEN p1 ELSE p2 END, NULL,
             CASE k WHEN 0 THEN q1 ELSE q2 END, CASE k WHEN 0 THEN u1 ELSE u2 END,
             CASE k WHEN 0 THEN q1 * u1 ELSE q2 * u2 END, k
      FROM g CROSS JOIN generate_series(0, 1) k
    `,
    );
  });
}

/** Stock movements 1..n on products 1..p, every reason, none tied to an order. */
async function movements(db: Kysely<Database>, total: number, productCount: number): Promise<void> {
  await chunked('movements', total, async (from, to) => {
    await withoutDocuments(
      db,
      sql`
      INSERT INTO stock_movements (id, product_id, variant_id, sku, reason, quantity_change, stock_before, stock_after,
                                   order_id, note, created_at, last_modified)
      SELECT md5('m' || g)::uuid, md5('p' || p)::uuid, NULL, 'SKU-' || p, (ARRAY['sale','refund','adjustment','bulk_import'])[1 + g % 4],
             q, 100, 100 + q, NULL, NULL, ts, ts
      FROM (SELECT g, 1 + (g * 13 % ${productCount}::int) AS p, CASE WHEN g % 2 = 0 THEN -(1 + g % 3) ELSE 1 + g % 3 END AS q,
                   ${EPOCH}::timestamptz + g * interval '1 second' AS ts
            FROM generate_series(${from}::bigint, ${to}::bigint) g) s
    `,
    );
  });
}

/**
 * Generates the store into an empty, migrated database, fills its stored documents (the backfill,
 * with a progress bar per table) and refreshes planner statistics. Returns the seconds of each part.
 */
export async function generateBenchStore(db: Kysely<Database>, size: StoreSize): Promise<{ rowsSeconds: number; documentsSeconds: number }> {
  const started = performance.now();
  await products(db, size.products);
  await customers(db, size.customers);
  if (size.products > 0) await orders(db, size.orders, size.customers, size.products);
  if (size.products > 0) await movements(db, size.movements, size.products);
  const rowsDone = performance.now();
  let current: { table: string; update: (done: number) => void; finish: () => void } | undefined;
  await rebuildDocuments(db, {
    batch: CHUNK,
    onProgress: ({ table, done, total }) => {
      if (current?.table !== table) {
        current?.finish();
        let update: (done: number) => void = () => {};
        let finish: () => void = () => {};
        const finished = new Promise<void>((resolve) => (finish = resolve));
        void progress(`${table.replace('stock_movements', 'movements')} docs`, total, async (u) => {
          update = u;
          await finished;
        });
        current = { table, update: (d) => update(d), finish };
      }
      current.update(done);
    },
  });
  current?.finish();
  const documentsDone = performance.now();
  await sql`ANALYZE`.execute(db);
  return { rowsSeconds: (rowsDone - started) / 1000, documentsSeconds: (documentsDone - rowsDone) / 1000 };
}

/** The cursor of the active product at `position` (0-based) in list order. */
export async function cursorAt(database: DatabaseHandle, position: number): Promise<string> {
  const { rows } = await sql<{ iso: string; id: string }>`
    SELECT iso_utc(last_modified) AS iso, id::text AS id FROM products WHERE is_active
    ORDER BY last_modified, id OFFSET ${Math.max(0, position)} LIMIT 1
  `.execute(database.db);
  const row = rows[0];
  if (!row) throw new Error(`no active product at position ${position}`);
  return formatCursor(row.iso, row.id);
}

/** Active products in the store. */
export async function activeCount(database: DatabaseHandle): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM products WHERE is_active`.execute(database.db);
  return Number(rows[0]!.n);
}
