/** The Order resource as one SQL JSON expression (lists, single GET, export, events). */
import { sql, type RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';

/** JSON of the order row aliased `o`. */
export const orderJson: RawBuilder<unknown> = sql`json_build_object(
  'id', o.id, 'source', o.source, 'status', o.status, 'payment_status', o.payment_status,
  'payment_method', o.payment_method, 'customer_id', o.customer_id, 'customer_name', o.customer_name,
  'customer_phone', o.customer_phone, 'subtotal', o.subtotal, 'discount', o.discount,
  'delivery_fee', o.delivery_fee, 'total', o.total,
  'items', coalesce((
    SELECT json_agg(json_build_object('id', it.id, 'product_id', it.product_id, 'variant_id', it.variant_id,
      'product_name', it.product_name, 'variant_name', it.variant_name, 'quantity', it.quantity,
      'unit_price', it.unit_price, 'total', it.total) ORDER BY it.position, it.id)
    FROM order_items it WHERE it.order_id = o.id), '[]'::json),
  'created_at', iso_utc(o.created_at),
  'last_modified', iso_utc(o.last_modified))`;

export const orderSource: ListSource = {
  from: sql`orders o`,
  lastModified: sql`o.last_modified`,
  id: sql`o.id`,
  json: orderJson,
};

export const ORDER_SOURCES = ['pos', 'online'] as const;
