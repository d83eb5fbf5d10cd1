/**
 * Response and parameter schemas of the read API (TypeBox). They validate input, document every
 * response in the OpenAPI document, and are checked against real responses in the tests.
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { PRODUCT_TYPES } from '../catalog/product.json-sql.ts';
import { MOVEMENT_REASONS } from '../inventory/inventory.json-sql.ts';
import { ORDER_STATUSES, PAYMENT_STATUSES } from '../orders/order-status.ts';
import { ORDER_SOURCES } from '../orders/order.json-sql.ts';
import { FEED_EVENT_TYPES, type FeedEventType } from '../events/event-feed.ts';
import { errorCodes, type ErrorCode } from './problem.ts';

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const StringEnum = <T extends readonly string[]>(values: T, options: Record<string, unknown> = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601, UTC, microseconds', examples: ['2026-11-21T14:05:30.770123Z'] });
const Uuid = Type.String({ format: 'uuid' });
const Money = Type.Number({ description: 'Exact amount, at most 2 decimals' });

export const Variant = Type.Object({
  id: Uuid,
  name: Type.String(),
  sku: Nullable(Type.String()),
  price: Money,
  stock: Type.Integer(),
  attributes: Type.Record(Type.String(), Type.String(), { description: 'Attribute name → value' }),
}, { title: 'Variant', additionalProperties: false });

export const Image = Type.Object({
  id: Uuid,
  image_url: Type.String({ format: 'uri' }),
  is_primary: Type.Boolean(),
}, { title: 'Image', additionalProperties: false });

export const Product = Type.Object({
  id: Uuid,
  name: Type.String(),
  slug: Type.String(),
  product_type: StringEnum(PRODUCT_TYPES),
  barcode: Nullable(Type.String()),
  sku: Nullable(Type.String()),
  price: Money,
  cost_price: Nullable(Money),
  stock: Type.Integer({ description: 'Σ variants\' stock when the product has variants, else its own' }),
  category_id: Nullable(Type.String()),
  thumbnail_url: Nullable(Type.String({ format: 'uri' })),
  is_active: Type.Boolean(),
  variants: Type.Array(Variant),
  images: Type.Array(Image),
  created_at: Timestamp,
  last_modified: Timestamp,
}, { title: 'Product', additionalProperties: false });

export const OrderItem = Type.Object({
  id: Uuid,
  product_id: Nullable(Uuid),
  variant_id: Nullable(Uuid),
  product_name: Type.String(),
  variant_name: Nullable(Type.String()),
  quantity: Type.Integer({ minimum: 1 }),
  unit_price: Money,
  total: Money,
}, { title: 'OrderItem', additionalProperties: false });

export const Order = Type.Object({
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
}, { title: 'Order', additionalProperties: false });

export const Customer = Type.Object({
  id: Uuid,
  name: Type.String(),
  phone: Nullable(Type.String()),
  email: Nullable(Type.String()),
  city: Nullable(Type.String()),
  is_active: Type.Boolean(),
  created_at: Timestamp,
  last_modified: Timestamp,
}, { title: 'Customer', additionalProperties: false });

export const InventoryVariant = Type.Object({
  variant_id: Uuid,
  variant_name: Type.String(),
  sku: Nullable(Type.String()),
  stock: Type.Integer(),
}, { title: 'InventoryVariant', additionalProperties: false });

export const InventoryRecord = Type.Object({
  product_id: Uuid,
  product_name: Type.String(),
  sku: Nullable(Type.String()),
  stock: Type.Integer(),
  is_active: Type.Boolean(),
  variants: Type.Array(InventoryVariant),
  last_modified: Timestamp,
}, { title: 'InventoryRecord', additionalProperties: false });

export const StockMovement = Type.Object({
  id: Uuid,
  product_id: Uuid,
  variant_id: Nullable(Uuid),
  sku: Nullable(Type.String()),
  reason: StringEnum(MOVEMENT_REASONS),
  quantity_change: Type.Integer({ description: 'Signed change' }),
  stock_before: Type.Integer(),
  stock_after: Type.Integer(),
  order_id: Nullable(Uuid),
  note: Nullable(Type.String()),
  created_at: Timestamp,
  last_modified: Timestamp,
}, { title: 'StockMovement', additionalProperties: false });

/** The record each event type carries as `data`. */
export const EVENT_DATA: Readonly<Record<FeedEventType, TSchema>> = {
  'product.created': Product,
  'product.updated': Product,
  'order.created': Order,
  'order.updated': Order,
  'customer.created': Customer,
  'customer.updated': Customer,
  'inventory.updated': InventoryRecord,
  'stock_movement.created': StockMovement,
};

/**
 * One event as the webhooks POST it and the events feed lists it, per type. Unnamed on purpose: the
 * webhooks section of the OpenAPI document shows each inline, the feed references the `Event` union.
 */
export const EVENT_PAYLOADS = Object.fromEntries(FEED_EVENT_TYPES.map((type) => [type, Type.Object({
  id: Type.String({ format: 'uuid', description: 'Event id, stable across retries' }),
  type: Type.Literal(type),
  created_at: Type.String({ format: 'date-time' }),
  data: EVENT_DATA[type],
}, { additionalProperties: false })])) as unknown as Record<FeedEventType, TSchema>;

/** Any event of the feed: the union of the webhook payloads (ping excluded). */
export const Event = Type.Union(FEED_EVENT_TYPES.map((type) => EVENT_PAYLOADS[type]), {
  title: 'Event',
  description: 'A change to store data, exactly as POSTed to webhook endpoints: `data` is the full record at that moment.',
});

export const Pagination = Type.Object({
  next_cursor: Nullable(Type.String({ description: 'Pass back as `cursor`; null only on an empty first page' })),
  has_more: Type.Boolean(),
  limit: Type.Integer(),
}, { title: 'Pagination', additionalProperties: false });

export const ProblemSchema = Type.Object({
  type: Type.String(),
  title: Type.String(),
  status: Type.Integer(),
  detail: Type.String(),
  code: StringEnum(Object.keys(errorCodes) as ErrorCode[], { description: 'Machine-readable error code (the registry of src/api/problem.ts)' }),
  errors: Type.Optional(Type.Array(Type.Object({ param: Type.String(), message: Type.String() }))),
}, { title: 'Problem' });

export const listOf = <T extends TSchema>(item: T) => Type.Object({ data: Type.Array(item), pagination: Pagination });
export const single = <T extends TSchema>(item: T) => Type.Object({ data: item });

// ---- query parameters ----------------------------------------------------------------------

const limitParam = (max: number, def: number) =>
  Type.Integer({ minimum: 1, maximum: max, default: def, description: `Page size, 1–${max}, default ${def}` });
const cursorParam = Type.String({ minLength: 1, maxLength: 100, description: 'ISO 8601 timestamp or a next_cursor value' });
const orderParam = StringEnum(['asc', 'desc'] as const, { default: 'asc', description: 'Sort by last_modified' });
const sinceParam = Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601 date or timestamp; only records created after it' });

/** Query of a list (isExport: limit up to 500, default 500) with the resource's own filters. */
export function listQuery(filters: Record<string, TSchema>, isExport = false) {
  return Type.Object(
    {
      // Optional with a default (ajv fills it in): generated clients must not have to pass it.
      limit: Type.Optional(isExport ? limitParam(500, 500) : limitParam(200, 50)),
      cursor: Type.Optional(cursorParam),
      order: Type.Optional(orderParam),
      ...filters,
    },
    { additionalProperties: false },
  );
}

export const productFilters = {
  include_inactive: Type.Optional(Type.Boolean({ default: false, description: 'Include deactivated products' })),
};
export const orderFilters = {
  status: Type.Optional(StringEnum(ORDER_STATUSES, { description: 'Only orders in this status' })),
  source: Type.Optional(StringEnum(ORDER_SOURCES, { description: 'Only orders from this channel' })),
  since: Type.Optional(sinceParam),
};
export const customerFilters = {};
export const inventoryFilters = {
  include_inactive: Type.Optional(Type.Boolean({ default: true, description: 'Include deactivated products (default true)' })),
};
export const movementFilters = {
  product_id: Type.Optional(Type.String({ maxLength: 100, description: 'Only movements of this product' })),
  since: Type.Optional(sinceParam),
};

/** Filters of the events feed. */
export const eventFilters = {
  type: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 300 }), {
    maxItems: 20,
    description: `Only these event types: repeat the parameter and/or separate with commas (${FEED_EVENT_TYPES.join(', ')})`,
  })),
  since: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601 date or timestamp; only events created after it' })),
};

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) }, { additionalProperties: false });

/** All named schemas, for the OpenAPI components. */
export const namedSchemas = [Variant, Image, Product, OrderItem, Order, Customer, InventoryVariant, InventoryRecord, StockMovement, Event, Pagination, ProblemSchema];
