/**
 * The Product resource as SQL: one JSON expression used by the list, the single GET, the export and
 * the events, so every way a product leaves the service has the same shape.
 * Only active variants and images are part of a product; deactivating one moves the product's
 * last_modified, so integrators see the new set as an update.
 */
import { sql, type RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';
import { childOfStore } from '../db/documents.ts';

/**
 * JSON of the product row aliased `p`. row_to_json over a sub-select gives compact JSON in column
 * order (measured ~20% faster and ~6% smaller than json_build_object); nested arrays keep their
 * order from the ordered sub-select. json_agg takes row_to_json values, not rows: for composite
 * rows it puts a newline between elements, which would break NDJSON. `stores`: the variants and
 * images are joined by their store too (false: a database before migration 0031, db/documents.ts
 * `childOfStore`).
 */
function productJsonOf(stores: boolean): RawBuilder<unknown> {
  return sql`(SELECT row_to_json(r) FROM (SELECT
  p.id, p.name, p.slug, p.product_type, p.barcode, p.sku, p.price, p.cost_price, p.stock,
  p.category_id, p.thumbnail_url, p.is_active,
  coalesce((SELECT json_agg(row_to_json(v2)) FROM (
    SELECT v.id, v.name, v.sku, v.price, v.stock, v.attributes FROM variants v
    WHERE ${childOfStore(stores, 'v', 'p')}v.product_id = p.id AND v.is_active ORDER BY v.position, v.id) v2), '[]'::json) AS variants,
  coalesce((SELECT json_agg(row_to_json(i2)) FROM (
    SELECT i.id, i.image_url, i.is_primary FROM images i
    WHERE ${childOfStore(stores, 'i', 'p')}i.product_id = p.id AND i.is_active ORDER BY i.position, i.id) i2), '[]'::json) AS images,
  iso_utc(p.created_at) AS created_at,
  iso_utc(p.last_modified) AS last_modified) r)`;
}

export const productJson: RawBuilder<unknown> = productJsonOf(true);
/** productJson without the stores (migrations before 0031 install the triggers with it). */
export const productJsonBeforeStores: RawBuilder<unknown> = productJsonOf(false);

export const productSource: ListSource = {
  from: sql`products p`,
  store: 'p.store_id',
  lastModified: sql`p.last_modified`,
  id: sql`p.id`,
  // The stored document (db/documents.ts): productJson as of the row's last write.
  json: sql`p.doc`,
};

/** Product types whose stock is tracked (inventory records, stock movements). */
export const STOCK_TRACKED_TYPES = ['physical', 'food', 'digital_card'] as const;
export const PRODUCT_TYPES = ['physical', 'food', 'digital', 'digital_card', 'service', 'bundle'] as const;
export type ProductType = (typeof PRODUCT_TYPES)[number];

export function isStockTracked(type: string): boolean {
  return (STOCK_TRACKED_TYPES as readonly string[]).includes(type);
}
