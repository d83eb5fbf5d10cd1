/**
 * Many stores for the multi-store benchmarks (`npm run bench -- --stores`, bench/stores-bench.ts):
 * `stores` stores of `productsPerStore` products each, every product with its stored documents,
 * built set-based by the database as bench/generate-store.ts builds one store (its `loadChunk`: one
 * transaction per chunk of ~10,000 rows, triggers off, documents computed by the expressions the
 * triggers use, secondary indexes dropped for the load and rebuilt after it). Every row names its
 * store (`store_id`); ids are md5-derived from the store and product numbers, so a store's rows can
 * be found without a look-up: store s is `md5('bench-store-' || s)::uuid`, its product g
 * `md5('p' || s || '-' || g)::uuid`, SKU `SKU-<g>` (unique within its store, as a real catalogue's).
 *
 * Layout: `contiguous` (default) loads a store's whole catalogue in one chunk, as an onboarding
 * import would: a store's rows sit together in the heap. `scattered` loads product g of every store
 * before product g + 1 of any: a store's rows spread over the whole table, as a catalogue written
 * over years among other stores' writes (a list page then reads one heap page per row).
 *
 * Variants and images (2 each, as the main bench's) are optional: they triple the rows written.
 * API keys are inserted set-based too (secrets made here, stored as their SHA-256 like
 * token.service.ts's `createToken`), one or more per store.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../src/db/schema.ts';
import { formatCursor } from '../src/shared/cursor.ts';
import { dropLoadIndexes, loadChunk, progress, recreateIndexes } from './generate-store.ts';

/** Spread of last_modified inside a store: one second per product from this instant on (all final). */
const EPOCH = '2024-01-01T00:00:00Z';
/** Rows per chunk (one transaction), as generate-store.ts. */
const CHUNK = 10_000;

export interface StoresSize {
  /** Stores numbered first..first + stores - 1. */
  stores: number;
  productsPerStore: number;
  /** The first store's number (default 1): a second call adds stores after the first call's. */
  first?: number;
  /** 2 variants and 2 images per product (default false). */
  children?: boolean;
  layout?: 'contiguous' | 'scattered';
  /** Every product `physical` (stock-tracked, importable by its SKU); default: six types in turn, a tenth inactive. */
  stockTracked?: boolean;
}

/** The id of bench store `n` (as SQL: `md5('bench-store-' || n)::uuid`). */
export function storeId(n: number): string {
  const h = createHash('md5').update(`bench-store-${n}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The id of product `g` of bench store `s`. */
export function productId(s: number, g: number): string {
  const h = createHash('md5').update(`p${s}-${g}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * Removes the store migration 0031 made ("Default store") when it owns nothing, so the database
 * holds exactly the bench's stores.
 */
export async function dropDefaultStore(db: Kysely<Database>): Promise<void> {
  await sql`DELETE FROM stores WHERE name = 'Default store'
    AND NOT EXISTS (SELECT 1 FROM products WHERE store_id = stores.id)
    AND NOT EXISTS (SELECT 1 FROM api_tokens WHERE store_id = stores.id)`.execute(db);
}

/** Inserts the stores first..first + n - 1 (named "Bench store <n>"), created one millisecond apart. */
export async function insertStores(db: Kysely<Database>, first: number, n: number): Promise<void> {
  await sql`
    INSERT INTO stores (id, name, status, created_at)
    SELECT md5('bench-store-' || s)::uuid, 'Bench store ' || s, 'active', ${EPOCH}::timestamptz + s * interval '1 millisecond'
    FROM generate_series(${first}::int, ${first + n - 1}::int) s`.execute(db);
}

/** One chunk's bounds: stores s0..s1, products g0..g1 of each. */
interface Chunk {
  s0: number;
  s1: number;
  g0: number;
  g1: number;
}

function chunks(first: number, stores: number, perStore: number, layout: 'contiguous' | 'scattered'): Chunk[] {
  const last = first + stores - 1;
  const out: Chunk[] = [];
  if (layout === 'contiguous') {
    // Whole catalogues per chunk (a catalogue larger than a chunk in slices).
    const storesPer = Math.max(1, Math.floor(CHUNK / perStore));
    const productsPer = Math.min(perStore, CHUNK);
    for (let s = first; s <= last; s += storesPer)
      for (let g = 1; g <= perStore; g += productsPer)
        out.push({ s0: s, s1: Math.min(last, s + storesPer - 1), g0: g, g1: Math.min(perStore, g + productsPer - 1) });
  } else {
    // Product g of every store, then g + 1: a store's rows spread over the whole load.
    const productsPer = Math.max(1, Math.floor(CHUNK / stores));
    const storesPer = Math.min(stores, CHUNK);
    for (let g = 1; g <= perStore; g += productsPer)
      for (let s = first; s <= last; s += storesPer)
        out.push({ s0: s, s1: Math.min(last, s + storesPer - 1), g0: g, g1: Math.min(perStore, g + productsPer - 1) });
  }
  return out;
}

function productsChunk(c: Chunk, stockTracked: boolean) {
  const type = stockTracked ? sql`'physical'` : sql`(ARRAY['physical','food','digital','digital_card','service','bundle'])[1 + g % 6]`;
  const active = stockTracked ? sql`true` : sql`g % 10 <> 0`;
  return sql`
    INSERT INTO stage_products (store_id, id, name, slug, product_type, barcode, sku, price, cost_price, own_stock, stock,
                                category_id, thumbnail_url, is_active, created_at, last_modified)
    SELECT md5('bench-store-' || s)::uuid, md5('p' || s || '-' || g)::uuid, 'Product ' || g, 'product-' || g, ${type},
           lpad(g::text, 13, '0'), 'SKU-' || g, 5 + (g * 7919 % 10000) / 100.0, 2 + (g * 7919 % 5000) / 100.0,
           0, 2 * (g % 20), 'cat-' || (g % 50), 'https://cdn.example.com/p/' || g || '.jpg',
           ${active}, ${EPOCH}::timestamptz + g * interval '1 second', ${EPOCH}::timestamptz + g * interval '1 second'
    FROM generate_series(${c.s0}::int, ${c.s1}::int) s CROSS JOIN generate_series(${c.g0}::int, ${c.g1}::int) g`;
}

function childrenChunk(c: Chunk) {
  return sql`
    WITH g AS (
      SELECT s, g, md5('bench-store-' || s)::uuid AS store_id, md5('p' || s || '-' || g)::uuid AS id, ${EPOCH}::timestamptz + g * interval '1 second' AS ts
      FROM generate_series(${c.s0}::int, ${c.s1}::int) s CROSS JOIN generate_series(${c.g0}::int, ${c.g1}::int) g
    ), v AS (
      INSERT INTO variants (store_id, id, product_id, name, sku, price, stock, attributes, position, is_active, created_at)
      SELECT store_id, md5('v' || s || '-' || g || '-' || k)::uuid, id, (ARRAY['Small','Large'])[k + 1], 'SKU-' || g || '-' || k,
             5 + (g * 7919 % 10000) / 100.0 + k, g % 20,
             jsonb_build_object('size', (ARRAY['S','L'])[k + 1], 'colour', (ARRAY['red','green','blue'])[1 + g % 3]),
             k, true, ts
      FROM g CROSS JOIN generate_series(0, 1) k
    )
    INSERT INTO images (store_id, id, product_id, image_url, is_primary, position, is_active, created_at)
    SELECT store_id, md5('i' || s || '-' || g || '-' || k)::uuid, id, 'https://cdn.example.com/p/' || g || '/' || k || '.jpg', k = 0, k, true, ts
    FROM g CROSS JOIN generate_series(0, 1) k`;
}

/**
 * Generates the stores and their products (documents included) into a migrated database, as a
 * superuser (triggers off). Returns the seconds it took and the share of the index rebuild.
 */
export async function generateStores(
  db: Kysely<Database>,
  size: StoresSize,
  options: { streams?: number; label?: string } = {},
): Promise<{ seconds: number; indexSeconds: number; rows: number }> {
  const started = performance.now();
  const first = size.first ?? 1;
  await insertStores(db, first, size.stores);
  const indexes = await dropLoadIndexes(db);
  const todo = chunks(first, size.stores, size.productsPerStore, size.layout ?? 'contiguous');
  const total = size.stores * size.productsPerStore;
  await progress(options.label ?? 'products', total, async (update) => {
    let next = 0;
    let done = 0;
    await Promise.all(
      Array.from({ length: options.streams ?? 1 }, async () => {
        for (let c = todo[next++]; c; c = todo[next++]) {
          await loadChunk(db, 'products', productsChunk(c, size.stockTracked ?? false), size.children ? childrenChunk(c) : undefined);
          done += (c.s1 - c.s0 + 1) * (c.g1 - c.g0 + 1);
          update(done);
        }
      }),
    );
  });
  const loaded = performance.now();
  await recreateIndexes(db, indexes);
  const indexSeconds = (performance.now() - loaded) / 1000;
  await sql`ANALYZE products`.execute(db);
  if (size.children) await sql`ANALYZE variants, images`.execute(db);
  await sql`ANALYZE stores`.execute(db);
  return { seconds: (performance.now() - started) / 1000, indexSeconds, rows: total };
}

export interface BenchKey {
  store: number;
  storeId: string;
  token: string;
}

/**
 * One API key per store for stores first..first + n - 1 (`scopes`, default every read scope),
 * inserted in statements of 5,000; returns the secrets.
 */
export async function insertKeys(db: Kysely<Database>, first: number, n: number, scopes?: string[], name = 'bench'): Promise<BenchKey[]> {
  const { READ_SCOPES } = await import('../src/resources/registry.ts');
  const keys: BenchKey[] = [];
  for (let s = first; s < first + n; s++) keys.push({ store: s, storeId: storeId(s), token: `sia_${randomBytes(32).toString('base64url')}` });
  for (let i = 0; i < keys.length; i += 5000) {
    const slice = keys.slice(i, i + 5000);
    await sql`
      INSERT INTO api_tokens (store_id, id, name, prefix, token_hash, scopes, created_at)
      SELECT k.store_id, k.id, ${name}, k.prefix, k.hash, ${scopes ?? [...READ_SCOPES]}::text[], now()
      FROM unnest(${slice.map((k) => k.storeId)}::uuid[], ${slice.map(() => randomUUID())}::uuid[], ${slice.map((k) => k.token.slice(0, 12))}::text[],
                  ${slice.map((k) => createHash('sha256').update(k.token).digest('hex'))}::text[]) AS k(store_id, id, prefix, hash)`.execute(db);
  }
  return keys;
}

/**
 * `count` cursors spread evenly over a store's active products in list order (the page after each
 * is a distinct page of `limit`), as distinct-pages.ts's spreadPositions for one store.
 */
export async function storeCursors(db: Kysely<Database>, store: string, count: number, limit: number): Promise<string[]> {
  const {
    rows: [active],
  } = await sql<{ n: string }>`SELECT count(*) AS n FROM products WHERE store_id = ${store}::uuid AND is_active`.execute(db);
  const step = Math.max(1, Math.floor(Math.max(1, Number(active!.n) - limit - 1) / count));
  const { rows } = await sql<{ iso: string; id: string }>`
    SELECT iso_utc(last_modified) AS iso, id::text AS id FROM (
      SELECT last_modified, id, row_number() OVER (ORDER BY last_modified, id) - 1 AS n
      FROM products WHERE store_id = ${store}::uuid AND is_active
    ) p WHERE n % ${step} = 0 AND n < greatest(1, ${Number(active!.n) - limit}) ORDER BY n LIMIT ${count}`.execute(db);
  return rows.map((r) => formatCursor(r.iso, r.id));
}

/** The cursor of a store's active product at `position` (0-based) in list order. */
export async function storeCursorAt(db: Kysely<Database>, store: string, position: number): Promise<string> {
  const { rows } = await sql<{ iso: string; id: string }>`
    SELECT iso_utc(last_modified) AS iso, id::text AS id FROM products WHERE store_id = ${store}::uuid AND is_active
    ORDER BY last_modified, id OFFSET ${Math.max(0, position)} LIMIT 1`.execute(db);
  if (!rows[0]) throw new Error(`no active product at position ${position} in store ${store}`);
  return formatCursor(rows[0].iso, rows[0].id);
}
