/** The Order resource as one SQL JSON expression (lists, single GET, export, events). */
import { sql, type RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';
import { childOfStore } from '../db/documents.ts';

/**
 * JSON of the order row aliased `o` (compact, column order; items in their order). `stores`: its
 * items joined by their store too (false: a database before migration 0031).
 */
function orderJsonOf(stores: boolean): RawBuilder<unknown> {
  return sql`(SELECT row_to_json(r) FROM (SELECT
  o.id, o.source, o.status, o.payment_status, o.payment_method, o.customer_id, o.customer_name,
  o.customer_phone, o.subtotal, o.discount, o.delivery_fee, o.total,
  coalesce((SELECT json_agg(row_to_json(i2)) FROM (
    SELECT it.id, it.product_id, it.variant_id, it.product_name, it.variant_name, it.quantity,
      it.unit_price, it.total FROM order_items it
    WHERE ${childOfStore(stores, 'it', 'o')}it.order_id = o.id ORDER BY it.position, it.id) i2), '[]'::json) AS items,
  iso_utc(o.created_at) AS created_at,
  iso_utc(o.last_modified) AS last_modified) r)`;
}

export const orderJson: RawBuilder<unknown> = orderJsonOf(true);
/** orderJson without the stores (migrations before 0031 install the triggers with it). */
export const orderJsonBeforeStores: RawBuilder<unknown> = orderJsonOf(false);

export const orderSource: ListSource = {
  from: sql`orders o`,
  store: 'o.store_id',
  lastModified: sql`o.last_modified`,
  id: sql`o.id`,
  json: sql`o.doc`,
};

export const ORDER_SOURCES = ['pos', 'online'] as const;
