/**
 * Inventory records (stock levels of the stock-tracked product types, inactive products included
 * with `is_active`) and stock movements, as SQL JSON expressions shared by lists, exports and events.
 * An inventory record's last_modified is its product's.
 */
import { sql, type RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';
import { childOfStore } from '../db/documents.ts';

/**
 * JSON of the inventory record of the product row aliased `p` (compact, column order). `stores`:
 * its variants joined by their store too (false: a database before migration 0031).
 */
function inventoryJsonOf(stores: boolean): RawBuilder<unknown> {
  return sql`(SELECT row_to_json(r) FROM (SELECT
  p.id AS product_id, p.name AS product_name, p.sku, p.stock, p.is_active,
  coalesce((SELECT json_agg(row_to_json(v2)) FROM (
    SELECT v.id AS variant_id, v.name AS variant_name, v.sku, v.stock FROM variants v
    WHERE ${childOfStore(stores, 'v', 'p')}v.product_id = p.id AND v.is_active ORDER BY v.position, v.id) v2), '[]'::json) AS variants,
  iso_utc(p.last_modified) AS last_modified) r)`;
}

export const inventoryJson: RawBuilder<unknown> = inventoryJsonOf(true);
/** inventoryJson without the stores (migrations before 0031 install the triggers with it). */
export const inventoryJsonBeforeStores: RawBuilder<unknown> = inventoryJsonOf(false);

export const stockTrackedCondition: RawBuilder<unknown> = sql`p.product_type IN ('physical','food','digital_card')`;

export const inventorySource: ListSource = {
  from: sql`products p`,
  store: 'p.store_id',
  lastModified: sql`p.last_modified`,
  id: sql`p.id`,
  json: sql`p.inventory_doc`,
  where: stockTrackedCondition,
};

/** JSON of the stock movement row aliased `m` (compact, column order). */
export const movementJson: RawBuilder<unknown> = sql`(SELECT row_to_json(r) FROM (SELECT
  m.id, m.product_id, m.variant_id, m.sku, m.reason, m.quantity_change, m.stock_before, m.stock_after,
  m.order_id, m.note, iso_utc(m.created_at) AS created_at, iso_utc(m.last_modified) AS last_modified) r)`;

export const movementSource: ListSource = {
  from: sql`stock_movements m`,
  store: 'm.store_id',
  lastModified: sql`m.last_modified`,
  id: sql`m.id`,
  json: sql`m.doc`,
};

export const MOVEMENT_REASONS = ['sale', 'refund', 'cancel', 'adjustment', 'bulk_import'] as const;
export type MovementReason = (typeof MOVEMENT_REASONS)[number];
