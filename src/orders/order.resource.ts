/** Orders as a resource of the read API, the events and the mirror (resources/resource.ts). */
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import { defineResource } from '../records/resource.ts';
import { sinceOf } from '../records/filters.ts';
import { Money, Nullable, StringEnum, Timestamp, Uuid, sinceParam, Version } from '../shared/typebox.ts';
import { ORDER_STATUSES, PAYMENT_STATUSES } from './order-status.ts';
import { ORDER_SOURCES, orderJson, orderJsonBeforeStores, orderSource } from './order.json-sql.ts';

export const OrderItem = Type.Object(
  {
    id: Uuid,
    product_id: Nullable(Uuid),
    variant_id: Nullable(Uuid),
    product_name: Type.String(),
    variant_name: Nullable(Type.String()),
    quantity: Type.Integer({ minimum: 1 }),
    unit_price: Money,
    total: Money,
  },
  { title: 'OrderItem', additionalProperties: false },
);

export const Order = Type.Object(
  {
    id: Uuid,
    source: StringEnum(ORDER_SOURCES),
    status: StringEnum(ORDER_STATUSES),
    payment_status: StringEnum(PAYMENT_STATUSES),
    payment_method: Nullable(Type.String()),
    customer_id: Nullable(Uuid),
    customer_name: Nullable(Type.String()),
    customer_phone: Nullable(Type.String()),
    subtotal: Money,
    discount: Money,
    delivery_fee: Money,
    total: Money,
    items: Type.Array(OrderItem),
    created_at: Timestamp,
    last_modified: Timestamp,
    version: Version,
  },
  { title: 'Order', additionalProperties: false },
);
/** A order as the read API serves it. */
export type Order = Static<typeof Order>;

export const orderResource = defineResource({
  name: 'orders',
  path: 'orders',
  noun: 'order',
  summary: 'orders and their items',
  label: 'Orders',
  scope: 'orders:read',
  table: 'orders',
  key: 'id',
  record: Order,
  nested: [OrderItem],
  source: orderSource,
  filters: {
    status: Type.Optional(StringEnum(ORDER_STATUSES, { description: 'Only orders in this status' })),
    source: Type.Optional(StringEnum(ORDER_SOURCES, { description: 'Only orders from this channel' })),
    since: Type.Optional(sinceParam),
  },
  conditions: (q) => {
    const c = [];
    if (q.status !== undefined) c.push(sql`o.status = ${q.status}`);
    if (q.source !== undefined) c.push(sql`o.source = ${q.source}`);
    if (q.since !== undefined) {
      const since = sinceOf(q.since);
      // created_at <= last_modified always, so the second condition only helps the index.
      c.push(sql`o.created_at > ${since}::timestamptz AND o.last_modified > ${since}::timestamptz`);
    }
    return c;
  },
  single: true,
  description: { list: 'List orders with their items', get: 'One order with its items', export: 'Export orders as NDJSON' },
  events: {
    prefix: 'order',
    kinds: ['created', 'updated'],
    when: 'an order is placed / its status or payment status changes',
    examplePrevious: { status: 'ready', payment_status: 'pending' },
  },
  document: {
    name: 'order',
    alias: 'o',
    column: 'doc',
    build: orderJson,
    buildBeforeStores: orderJsonBeforeStores,
    children: [{ table: 'order_items', key: 'order_id' }],
  },
  labelDescription: 'Orders with their items, POS and online.',
  example: {
    id: '0193a5c3-0b12-7d34-a5b6-c7d8e9f0a1b2',
    source: 'pos',
    status: 'completed',
    payment_status: 'paid',
    payment_method: 'card',
    customer_id: '0193a5c2-8a10-7c22-8e31-4d5e6f708192',
    customer_name: 'Amira Haddad',
    customer_phone: '+33 6 12 34 56 78',
    subtotal: 99.8,
    discount: 0,
    delivery_fee: 0,
    total: 99.8,
    items: [
      {
        id: '0193a5c3-0b12-7d34-a5b6-c7d8e9f0a1b3',
        product_id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f60',
        variant_id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f61',
        product_name: 'Linen shirt',
        variant_name: 'M / white',
        quantity: 2,
        unit_price: 49.9,
        total: 99.8,
      },
    ],
    created_at: '2026-11-21T14:05:30.770123Z',
    last_modified: '2026-11-21T14:05:30.770123Z',
    version: 3,
  },
});
