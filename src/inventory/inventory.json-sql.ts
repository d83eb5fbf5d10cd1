/**
 * Inventory records (stock levels of the stock-tracked product types, inactive products included
 * with `is_active`) and stock movements, as SQL JSON expressions shared by lists, exports and events.
 * An inventory record's last_modified is its product's.
 */
import { sql, type RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';

/** JSON of the inventory record of the product row aliased `p`. */
export const inventoryJson: RawBuilder<unknown> = sql`json_build_object(
  'product_id', p.id, 'product_name', p.name, 'sku', p.sku, 'stock', p.stock, 'is_active', p.is_active,
  'variants', coalesce((
    SELECT json_agg(json_build_object('variant_id', v.id, 'variant_name', v.name, 'sku', v.sku, 'stock', v.stock)
      ORDER BY v.position, v.id)
    FROM variants v WHERE v.product_id = p.id AND v.is_active), '[]'::json),
  'last_modified', iso_utc(p.last_modified))`;

export const stockTrackedCondition: RawBuilder<unknown> = sql`p.product_type IN ('physical','food','digital_card')`;

export const inventorySource: ListSource = {
  from: sql`products p`,
  lastModified: sql`p.last_modified`,
  id: sql`p.id`,
  json: inventoryJson,
};

/** JSON of the stock movement row aliased `m`. */
export const movementJson: RawBuilder<unknown> = sql`json_build_object(
  'id', m.id, 'product_id', m.product_id, 'variant_id', m.variant_id, 'sku', m.sku, 'reason', m.reason,
  'quantity_change', m.quantity_change, 'stock_before', m.stock_before, 'stock_after', m.stock_after,
  'order_id', m.order_id, 'note', m.note,
  'created_at', iso_utc(m.created_at), 'last_modified', iso_utc(m.last_modified))`;

export const movementSource: ListSource = {
  from: sql`stock_movements m`,
  lastModified: sql`m.last_modified`,
  id: sql`m.id`,
  json: movementJson,
};

export const MOVEMENT_REASONS = ['sale', 'refund', 'cancel', 'adjustment', 'bulk_import'] as const;
export type MovementReason = (typeof MOVEMENT_REASONS)[number];
