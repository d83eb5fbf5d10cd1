/**
 * The stock SQL: locking the rows a change touches, writing stock levels, recomputing products'
 * stock, finding stock rows by SKU. Typed rows in, typed rows out; every statement takes one array
 * parameter per chunk (never a bind parameter per id) and the caller's transaction.
 */
import { sql, type Insertable, type Kysely, type Transaction } from 'kysely';
import type { Database, StockMovementTable } from '../db/schema.ts';
import { documentsBuilt, documentsSetFromBuilt, storedDocument } from '../db/documents.ts';
import { documentKindsOf } from '../records/resource.ts';
import { productResource } from '../catalog/product.resource.ts';
import { inventoryResource, movementResource } from './inventory.resource.ts';
import { ownStore, ownStoreIs } from '../db/store-scope.ts';

type Trx = Transaction<Database>;

/**
 * The documents stored on the products table (a product's, its inventory record's), rebuilt by the
 * stock recompute's UPDATE itself. test/db/store-tables.test.ts holds this to every declared
 * document of that table.
 */
export const PRODUCT_TABLE_DOCUMENTS = documentKindsOf([productResource, inventoryResource]).filter((k) => k.table === 'products');

/** A stock movement's stored document (its version is 1: a movement never changes). */
const MOVEMENT_DOCUMENT = documentKindsOf([movementResource])[0]!;

export interface LockedProduct {
  id: string;
  product_type: string;
  sku: string | null;
  own_stock: number;
}

export interface LockedVariant {
  id: string;
  product_id: string;
  sku: string | null;
  stock: number;
}

/** A stock row found by SKU: a variant, or a product without variants (variant_id null). */
export interface StockBySku {
  sku: string;
  product_id: string;
  variant_id: string | null;
  stock: number;
  product_type: string;
}

/** Locks the products `ids` (sorted by the caller) FOR NO KEY UPDATE; see stock.service.ts. */
export async function lockProducts(trx: Trx, ids: readonly string[]): Promise<LockedProduct[]> {
  return trx
    .selectFrom('products')
    .select(['id', 'product_type', 'sku', 'own_stock'])
    .where(ownStoreIs('store_id'))
    .where('id', '=', sql<string>`ANY(${ids}::uuid[])`)
    .orderBy('id')
    .forNoKeyUpdate()
    .execute();
}

/** Locks the variants `ids` (sorted by the caller) FOR NO KEY UPDATE. */
export async function lockVariants(trx: Trx, ids: readonly string[]): Promise<LockedVariant[]> {
  return trx
    .selectFrom('variants')
    .select(['id', 'product_id', 'sku', 'stock'])
    .where(ownStoreIs('store_id'))
    .where('id', '=', sql<string>`ANY(${ids}::uuid[])`)
    .orderBy('id')
    .forNoKeyUpdate()
    .execute();
}

/** Sets each variant's stock: [variant id, stock] pairs. */
export async function setVariantStock(trx: Trx, levels: readonly (readonly [string, number])[]): Promise<void> {
  await sql`UPDATE variants v SET stock = x.stock
    FROM unnest(${levels.map(([id]) => id)}::uuid[], ${levels.map(([, s]) => s)}::int[]) AS x(id, stock)
    WHERE ${ownStoreIs('v.store_id')} AND v.id = x.id`.execute(trx);
}

/**
 * Inserts the movements with their stored documents (db/documents.ts) built in the same statement,
 * by the movement's own expression over the rows inserted: one row version each, not an INSERT and
 * then the documents trigger's UPDATE of every row (a third of the import's movement
 * cost). Run it with the documents' triggers silenced (`withDocumentsRebuiltLater`), or they
 * rebuild the same documents again. Nothing changes a movement's row on INSERT (migration 0006's
 * trigger is BEFORE UPDATE), so the document equals its rebuild.
 */
export async function insertMovements(trx: Trx, movements: readonly Insertable<StockMovementTable>[]): Promise<void> {
  const column = <T>(pick: (m: Insertable<StockMovementTable>) => T) => movements.map(pick);
  await trx
    .insertInto('stock_movements')
    .columns([
      'store_id',
      'id',
      'product_id',
      'variant_id',
      'sku',
      'reason',
      'quantity_change',
      'stock_before',
      'stock_after',
      'order_id',
      'note',
      'created_at',
      'last_modified',
      'version',
      'doc',
    ])
    .expression(
      sql`SELECT ${ownStore()}, m.*, ${storedDocument(MOVEMENT_DOCUMENT, sql.ref('m.version'))} FROM (SELECT u.*, 1 AS version FROM unnest(
      ${column((m) => m.id)}::uuid[], ${column((m) => m.product_id)}::uuid[], ${column((m) => m.variant_id ?? null)}::uuid[],
      ${column((m) => m.sku ?? null)}::text[], ${column((m) => m.reason)}::text[], ${column((m) => m.quantity_change)}::int[],
      ${column((m) => m.stock_before)}::int[], ${column((m) => m.stock_after)}::int[], ${column((m) => m.order_id ?? null)}::uuid[],
      ${column((m) => m.note ?? null)}::text[], ${column((m) => m.created_at)}::timestamptz[], ${column((m) => m.last_modified)}::timestamptz[]
    ) AS u(id, product_id, variant_id, sku, reason, quantity_change, stock_before, stock_after, order_id, note, created_at, last_modified)) AS m`,
    )
    .execute();
}

/** The first of `productIds` whose active variants' stock would sum past an integer, if any. */
export async function productWithOverflowingStock(trx: Trx, productIds: readonly string[]): Promise<string | undefined> {
  const { rows } = await sql<{ id: string }>`SELECT v.product_id AS id FROM variants v
    WHERE ${ownStoreIs('v.store_id')} AND v.product_id = ANY(${productIds}::uuid[]) AND v.is_active
    GROUP BY v.product_id HAVING abs(sum(v.stock)) > 2147483647 LIMIT 1`.execute(trx);
  return rows[0]?.id;
}

/**
 * Recomputes the products' stock (Σ active variants, else own stock) and stamps them with `stamp`.
 * `ownStock` is each product's new own stock (null: unchanged), set by the same UPDATE: a product
 * without variants is written once for its level and its recompute, not twice (the
 * import's products are its costliest rows).
 */
export async function recomputeProductStock(trx: Trx, productIds: readonly string[], stamp: string, ownStock: readonly (number | null)[]): Promise<void> {
  await sql`UPDATE products p SET
      own_stock = coalesce(x.own_stock, p.own_stock),
      stock = coalesce((SELECT sum(v.stock)::int FROM variants v WHERE v.store_id = p.store_id AND v.product_id = p.id AND v.is_active), x.own_stock, p.own_stock),
      last_modified = ${stamp}::timestamptz
    FROM unnest(${productIds}::uuid[], ${ownStock}::int[]) AS x(id, own_stock)
    WHERE ${ownStoreIs('p.store_id')} AND p.id = x.id`.execute(trx);
}

/**
 * recomputeProductStock, with the products' stored documents built by the same UPDATE: one row
 * version of each product instead of two (the recompute's, then the documents trigger's), the
 * import's costliest rows. The documents are built by their own expressions
 * (db/documents.ts `documentsBuilt`) over each row's new values, taken as a products row from
 * `jsonb_populate_record`, with their version and what changed (`documentsBuilt`,
 * `documentsSetFromBuilt`, decision 0057). Only products whose last_modified is below `stamp` are written: for
 * them `stamp` is the stamp the row keeps (migration 0007's forward trigger does not fire), so the
 * documents equal their rebuild. Returns the ids written; the caller recomputes the others (a row
 * already stamped by this or a later transaction) with recomputeProductStock. Run it with the
 * documents' triggers silenced (`withDocumentsRebuiltLater`).
 */
export async function recomputeProductStockAndDocuments(
  trx: Trx,
  productIds: readonly string[],
  stamp: string,
  ownStock: readonly (number | null)[],
): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`UPDATE products t SET
      own_stock = p.own_stock, stock = p.stock, last_modified = p.last_modified, ${documentsSetFromBuilt(PRODUCT_TABLE_DOCUMENTS, 'products', 't')}
    FROM unnest(${productIds}::uuid[], ${ownStock}::int[]) AS x(id, own_stock)
      JOIN products o ON ${ownStoreIs('o.store_id')} AND o.id = x.id AND o.last_modified < ${stamp}::timestamptz
      CROSS JOIN LATERAL jsonb_populate_record(o, jsonb_build_object(
        'own_stock', coalesce(x.own_stock, o.own_stock),
        'stock', coalesce((SELECT sum(v.stock)::int FROM variants v WHERE v.store_id = o.store_id AND v.product_id = o.id AND v.is_active), x.own_stock, o.own_stock),
        'last_modified', ${stamp}::timestamptz)) AS p
      ${documentsBuilt(PRODUCT_TABLE_DOCUMENTS, 'products')}
    WHERE t.store_id = o.store_id AND t.id = o.id
    RETURNING t.id::text AS id`.execute(trx);
  return rows.map((r) => r.id);
}

/** The stock rows (variants, then products without variants) holding any of `skus`. */
export async function stockBySku(trx: Trx | Kysely<Database>, skus: readonly string[]): Promise<StockBySku[]> {
  const { rows } = await sql<StockBySku>`
    SELECT v.sku, v.product_id, v.id AS variant_id, v.stock, p.product_type
      FROM variants v JOIN products p ON p.store_id = v.store_id AND p.id = v.product_id WHERE ${ownStoreIs('v.store_id')} AND v.sku = ANY(${skus}::text[])
    UNION ALL
    SELECT p.sku, p.id, NULL, p.own_stock, p.product_type FROM products p WHERE ${ownStoreIs('p.store_id')} AND p.sku = ANY(${skus}::text[])
  `.execute(trx);
  return rows;
}
