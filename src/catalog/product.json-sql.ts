/**
 * The Product resource as SQL: one JSON expression used by the list, the single GET, the export and
 * the events, so every way a product leaves the service has the same shape.
 * Only active variants and images are part of a product; deactivating one moves the product's
 * last_modified, so integrators see the new set as an update.
 */
import { sql, type RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';

/** JSON of the product row aliased `p`. */
export const productJson: RawBuilder<unknown> = sql`json_build_object(
  'id', p.id, 'name', p.name, 'slug', p.slug, 'product_type', p.product_type,
  'barcode', p.barcode, 'sku', p.sku, 'price', p.price, 'cost_price', p.cost_price, 'stock', p.stock,
  'category_id', p.category_id, 'thumbnail_url', p.thumbnail_url, 'is_active', p.is_active,
  'variants', coalesce((
    SELECT json_agg(json_build_object('id', v.id, 'name', v.name, 'sku', v.sku, 'price', v.price,
      'stock', v.stock, 'attributes', v.attributes) ORDER BY v.position, v.id)
    FROM variants v WHERE v.product_id = p.id AND v.is_active), '[]'::json),
  'images', coalesce((
    SELECT json_agg(json_build_object('id', i.id, 'image_url', i.image_url, 'is_primary', i.is_primary)
      ORDER BY i.position, i.id)
    FROM images i WHERE i.product_id = p.id AND i.is_active), '[]'::json),
  'created_at', iso_utc(p.created_at),
  'last_modified', iso_utc(p.last_modified))`;

export const productSource: ListSource = {
  from: sql`products p`,
  lastModified: sql`p.last_modified`,
  id: sql`p.id`,
  json: productJson,
};

/** Product types whose stock is tracked (inventory records, stock movements). */
export const STOCK_TRACKED_TYPES = ['physical', 'food', 'digital_card'] as const;
export const PRODUCT_TYPES = ['physical', 'food', 'digital', 'digital_card', 'service', 'bundle'] as const;
export type ProductType = (typeof PRODUCT_TYPES)[number];

export function isStockTracked(type: string): boolean {
  return (STOCK_TRACKED_TYPES as readonly string[]).includes(type);
}
