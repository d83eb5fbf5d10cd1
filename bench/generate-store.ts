/**
 * Fast store generator for benchmarks: every row is built by the database itself from
 * generate_series (one multi-table INSERT statement per chunk), so nothing crosses the wire but the
 * chunk bounds. 100k products with 2 variants and 2 images each take seconds on PostgreSQL, where
 * the demo generator (one write-clock transaction per product, events included) takes minutes.
 * Ids are md5-derived UUIDs of the row number, so orders and items can refer to customers and
 * products without a lookup. No events are written: the bench measures reads, exports and
 * deliveries of changes it makes itself.
 *
 * Stored documents (src/db/documents.ts) are written by the load itself, each row written once:
 * every chunk is one transaction with `session_replication_role = replica` (the scratch database's
 * superuser; triggers — the documents' and the foreign keys' — do not fire), the child rows
 * (variants and images, order items) go in first, the owner rows are built in a temporary staging
 * table and copied into the real one with their documents computed by the same expressions the
 * triggers use (documentKinds). The documents' backfill, which wrote a second, non-HOT version of
 * every row and dominated the generation (48.6 s of 81.9 s at 100k products), is no longer part of
 * it; `verifyDocuments` checks the result against `checkDocuments`, and `benchBackfill` times the
 * backfill on its own.
 */
import { sql, type Kysely } from 'kysely';
import cliProgress from 'cli-progress';
import type { Database } from '../src/db/schema.ts';
import type { DatabaseHandle } from '../src/db/database.ts';
import { formatCursor } from '../src/shared/cursor.ts';
import { checkStoreDocuments, documentKinds } from '../src/resources/store-schema.ts';
import { storedDocument } from '../src/db/documents.ts';

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

/** The generation's progress bars (one per table, loaded concurrently); a single bar when unset. */
let bars: cliProgress.MultiBar | undefined;

/** Concurrent chunk writers per table (generateBenchStore's `streams`; 1 on the embedded database). */
let streams = 1;

async function chunked(label: string, total: number, step: (from: number, to: number) => Promise<void>): Promise<void> {
  await progress(label, total, async (update) => {
    let next = 1;
    let done = 0;
    await Promise.all(
      Array.from({ length: streams }, async () => {
        while (next <= total) {
          const from = next;
          const to = Math.min(total, from + CHUNK - 1);
          next = to + 1;
          await step(from, to);
          done += to - from + 1;
          update(done);
        }
      }),
    );
  });
}

const barOptions = (format: string): cliProgress.Options => ({
  format,
  stream: process.stderr,
  noTTYOutput: true,
  notTTYSchedule: 5000,
  hideCursor: true,
});

/** A progress bar on stderr around `work` (plain lines every 5 s when not a terminal). */
export async function progress(label: string, total: number, work: (update: (done: number) => void) => Promise<void>): Promise<void> {
  if (total <= 0) return;
  const format = `  ${label.padEnd(18)} [{bar}] {percentage}% {value}/{total} {duration}s`;
  const multi = bars;
  const bar = multi ? multi.create(total, 0, {}, { format }) : new cliProgress.SingleBar(barOptions(format), cliProgress.Presets.shades_classic);
  if (!multi) (bar as cliProgress.SingleBar).start(total, 0);
  try {
    await work((done) => bar.update(done));
  } finally {
    if (!multi) bar.stop();
    else bar.update(total);
  }
}

/** Columns of each owner table, in order (read once per generation). */
type Owner = 'products' | 'customers' | 'orders' | 'stock_movements';
const columnCache = new Map<Owner, string[]>();

async function columnsOf(db: Kysely<Database>, table: Owner): Promise<string[]> {
  let columns = columnCache.get(table);
  if (!columns) {
    const { rows } = await sql<{ name: string }>`
      SELECT column_name AS name FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = ${table} AND is_generated = 'NEVER'
      ORDER BY ordinal_position`.execute(db);
    columns = rows.map((r) => r.name);
    columnCache.set(table, columns);
  }
  return columns;
}

/**
 * One chunk, one transaction, triggers off: `children` (if any) first, then `stage` fills the
 * temporary table `stage_<owner>` (same columns and defaults as the owner), whose rows are copied
 * into the owner table with every stored document built by its document expression (resources/store-schema.ts documentKinds) — the
 * expression the triggers and `checkDocuments` use, reading the staged row under the owner's alias.
 */
export async function loadChunk(db: Kysely<Database>, owner: Owner, stage: ReturnType<typeof sql>, children?: ReturnType<typeof sql>): Promise<void> {
  const columns = await columnsOf(db, owner);
  const kinds = documentKinds().filter((k) => k.table === owner);
  const alias = kinds[0]!.alias;
  const select = columns.map((c) => {
    const kind = kinds.find((k) => k.column === c);
    // As stored: the build with the row's version appended (storedDocument, decision 0057).
    return kind ? storedDocument(kind, sql.raw(`${alias}.version`)).compile(db).sql : `${alias}.${c}`;
  });
  await db.transaction().execute(async (trx) => {
    await sql`SET LOCAL session_replication_role = replica`.execute(trx);
    await sql`SET LOCAL synchronous_commit = off`.execute(trx);
    // The documents look children up by their parent index; the fresh tables have no statistics yet.
    await sql`SET LOCAL enable_seqscan = off`.execute(trx);
    // A chunk's statement is costly enough for PostgreSQL to JIT-compile it, anew for every chunk:
    // measured on the products' document expressions, 10,000 rows in 0.5 s without and 3.4 s with
    // the compilation (PostgreSQL 15, jit on by default).
    await sql`SET LOCAL jit = off`.execute(trx);
    await sql.raw(`CREATE TEMP TABLE IF NOT EXISTS stage_${owner} (LIKE ${owner} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`).execute(trx);
    if (children) await children.execute(trx);
    await stage.execute(trx);
    await sql.raw(`INSERT INTO ${owner} (${columns.join(', ')}) SELECT ${select.join(', ')} FROM stage_${owner} ${alias}`).execute(trx);
  });
}

/** Products 1..n: a tenth inactive, six types, 2 variants and 2 images each (all active). */
async function products(db: Kysely<Database>, total: number): Promise<void> {
  await chunked('products', total, async (from, to) => {
    await loadChunk(
      db,
      'products',
      sql`
      INSERT INTO stage_products (id, name, slug, product_type, barcode, sku, price, cost_price, own_stock, stock,
                                  category_id, thumbnail_url, is_active, created_at, last_modified)
      SELECT md5('p' || g)::uuid, 'Product ' || g, 'product-' || g,
             (ARRAY['physical','food','digital','digital_card','service','bundle'])[1 + g % 6],
             lpad(g::text, 13, '0'), 'SKU-' || g, 5 + (g * 7919 % 10000) / 100.0, 2 + (g * 7919 % 5000) / 100.0,
             0, 2 * (g % 20), 'cat-' || (g % 50), 'https://cdn.example.com/p/' || g || '.jpg',
             g % 10 <> 0, ${EPOCH}::timestamptz + g * interval '1 second', ${EPOCH}::timestamptz + g * interval '1 second'
      FROM generate_series(${from}::bigint, ${to}::bigint) g
    `,
      sql`
      WITH g AS (
        SELECT g, md5('p' || g)::uuid AS id, ${EPOCH}::timestamptz + g * interval '1 second' AS ts
        FROM generate_series(${from}::bigint, ${to}::bigint) g
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
    await loadChunk(
      db,
      'customers',
      sql`
      INSERT INTO stage_customers (id, name, phone, email, city, is_active, created_at, last_modified)
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
  const g = (from: number, to: number) => sql`
        SELECT g, md5('o' || g)::uuid AS id, ${EPOCH}::timestamptz + g * interval '1 second' AS ts,
               1 + (g * 31 % ${productCount}::int) AS p1, 1 + (g * 37 % ${productCount}::int) AS p2,
               CASE WHEN ${customerCount}::int > 0 THEN md5('c' || (1 + g % greatest(${customerCount}::int, 1)))::uuid END AS customer_id,
               (1 + g % 3) AS q1, 1 AS q2, (5 + g % 50)::numeric(14,2) AS u1, (3 + g % 20)::numeric(14,2) AS u2
        FROM generate_series(${from}::bigint, ${to}::bigint) g`;
  await chunked('orders', total, async (from, to) => {
    await loadChunk(
      db,
      'orders',
      sql`
      WITH g AS (${g(from, to)})
      INSERT INTO stage_orders (id, source, status, payment_status, payment_method, customer_id, customer_name, customer_phone,
                                subtotal, discount, delivery_fee, total, created_at, last_modified)
      SELECT id, (ARRAY['pos','online'])[1 + g % 2], (ARRAY['pending','processing','completed','delivered','cancelled'])[1 + g % 5],
             (ARRAY['pending','paid'])[1 + g % 2], 'cash', customer_id, 'Customer ' || g, NULL,
             q1 * u1 + q2 * u2, 0, 0, q1 * u1 + q2 * u2, ts, ts
      FROM g
    `,
      sql`
      WITH g AS (${g(from, to)})
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
    await loadChunk(
      db,
      'stock_movements',
      sql`
      INSERT INTO stage_stock_movements (id, product_id, variant_id, sku, reason, quantity_change, stock_before, stock_after,
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
 * Generates the store, stored documents included, into an empty, migrated database and refreshes
 * planner statistics. Returns the seconds it took. `streams`: chunk writers per table on PostgreSQL
 * (three tables load at once, so 2 streams hold 6 connections); leave 1 on the embedded database.
 */
export async function generateBenchStore(
  db: Kysely<Database>,
  size: StoreSize,
  options: { streams?: number } = {},
): Promise<{ seconds: number; indexSeconds: number }> {
  const started = performance.now();
  streams = options.streams ?? 1;
  const indexes = await dropLoadIndexes(db);
  bars = new cliProgress.MultiBar({ ...barOptions(''), clearOnComplete: false }, cliProgress.Presets.shades_classic);
  try {
    // The tables share nothing while loading (ids are derived, foreign keys are not checked), so
    // they load concurrently, each on its own connection: the two cores are used even when one
    // statement waits on the disk, and a shared machine's scheduler gives the load a fairer share.
    await Promise.all([
      products(db, size.products),
      size.products > 0 ? orders(db, size.orders, size.customers, size.products) : undefined,
      (async () => {
        await customers(db, size.customers);
        if (size.products > 0) await movements(db, size.movements, size.products);
      })(),
    ]);
  } finally {
    bars.stop();
    bars = undefined;
  }
  const loaded = performance.now();
  await recreateIndexes(db, indexes);
  const indexSeconds = (performance.now() - loaded) / 1000;
  // As autovacuum would soon after such a load on a store that lives: the statistics, and the
  // visibility map, without which a count (the snapshot's X-Total-Count) reads the whole heap
  // instead of an index (380 ms for 100,000 products, before the snapshot's first byte).
  await sql`VACUUM (ANALYZE)`.execute(db);
  return { seconds: (performance.now() - started) / 1000, indexSeconds };
}

/**
 * Secondary indexes the load need not maintain row by row: not a constraint's, and not one the
 * document expressions look rows up by (the children's parent indexes). Dropped before the load and
 * built again after it from their own definitions (a sort each, instead of ~10 million scattered
 * insertions). Unique ones are built unique again, so the load is still checked.
 */
export async function dropLoadIndexes(db: Kysely<Database>): Promise<{ name: string; definition: string }[]> {
  const keep = ['variants_product_idx', 'images_product_idx', 'order_items_order_idx'];
  const { rows } = await sql<{ name: string; definition: string }>`
    SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition
    FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
    WHERE t.relname IN ('products', 'variants', 'images', 'customers', 'orders', 'order_items', 'stock_movements')
      AND t.relnamespace = current_schema()::regnamespace
      AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
      AND i.indexrelid::regclass::text <> ALL(${keep}::text[])`.execute(db);
  for (const { name } of rows) await sql.raw(`DROP INDEX ${name}`).execute(db);
  return rows;
}

export async function recreateIndexes(db: Kysely<Database>, indexes: { name: string; definition: string }[]): Promise<void> {
  await progress('indexes', indexes.length, async (update) => {
    let done = 0;
    // Two at a time: one per core.
    const queue = [...indexes];
    await Promise.all(
      [0, 1].map(async () => {
        for (let next = queue.shift(); next; next = queue.shift()) {
          await sql.raw(next.definition).execute(db);
          update(++done);
        }
      }),
    );
  });
}

/**
 * The generated documents against what `checkDocuments` (`store-api documents check`) rebuilds from
 * the tables: throws on the first difference. Reads every row: minutes at the large size.
 */
export async function verifyDocuments(db: Kysely<Database>): Promise<{ seconds: number }> {
  const started = performance.now();
  const differences = await checkStoreDocuments(db, { limit: 5 });
  if (differences.length > 0) throw new Error(`generated documents differ from checkDocuments: ${JSON.stringify(differences).slice(0, 2000)}`);
  return { seconds: (performance.now() - started) / 1000 };
}

export interface BackfillFigures {
  /** Per owner table: rows rebuilt, of how many, and the seconds it took. */
  tables: { table: string; rows: number; total: number; seconds: number }[];
  /** Rows rebuilt in all and their seconds; `estimatedSeconds` extrapolates to every row. */
  rows: number;
  seconds: number;
  estimatedSeconds: number;
}

/**
 * The documents' backfill as `store-api documents backfill --all` runs it (rebuildDocuments in
 * src/db/documents.ts: per owner table, in id order, an UPDATE … SET <documents> of the next batch,
 * each batch its own transaction flagged so the triggers do not rebuild it again), with a progress
 * bar, over at most `maxRowsPerTable` rows of each table (the large store's whole backfill would
 * take longer than the benchmark's budget); the rest is extrapolated per table.
 */
export async function benchBackfill(db: Kysely<Database>, maxRowsPerTable: number, batch = 2000): Promise<BackfillFigures> {
  const tables: BackfillFigures['tables'] = [];
  for (const owner of ['products', 'customers', 'orders', 'stock_movements'] as const) {
    const kinds = documentKinds().filter((k) => k.table === owner);
    const a = kinds[0]!.alias;
    const set = kinds.map((k) => `${k.column} = ${storedDocument(k, sql.raw(`${a}.version`)).compile(db).sql}`).join(', ');
    const { rows: counted } = await sql<{ n: string }>`SELECT count(*)::text AS n FROM ${sql.raw(owner)}`.execute(db);
    const total = Number(counted[0]!.n);
    const target = Math.min(total, maxRowsPerTable);
    const started = performance.now();
    let done = 0;
    await progress(`${owner.replace('stock_movements', 'movements')} backfill`, target, async (update) => {
      let after = '00000000-0000-0000-0000-000000000000';
      while (done < target) {
        const rows = await db.transaction().execute(async (trx) => {
          await sql`SELECT set_config('store_api.rebuilding_documents', 'on', true)`.execute(trx);
          const result = await sql<{ id: string }>`
            UPDATE ${sql.raw(`${owner} ${a}`)} SET ${sql.raw(set)}
            WHERE ${sql.raw(`${a}.id`)} IN (SELECT id FROM ${sql.raw(owner)} WHERE id > ${after}::uuid ORDER BY id LIMIT ${Math.min(batch, target - done)})
            RETURNING ${sql.raw(`${a}.id`)}::text AS id`.execute(trx);
          return result.rows;
        });
        if (rows.length === 0) break;
        done += rows.length;
        // biome-ignore lint/complexity/useMathMinMax: ids are uuid text compared as strings, not numbers.
        after = rows.reduce((max, r) => (r.id > max ? r.id : max), after);
        update(done);
      }
    });
    tables.push({ table: owner, rows: done, total, seconds: (performance.now() - started) / 1000 });
  }
  const rows = tables.reduce((n, t) => n + t.rows, 0);
  const seconds = tables.reduce((n, t) => n + t.seconds, 0);
  const estimatedSeconds = tables.reduce((n, t) => n + (t.rows > 0 ? (t.seconds * t.total) / t.rows : 0), 0);
  return { tables, rows, seconds, estimatedSeconds };
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
