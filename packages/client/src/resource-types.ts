/**
 * Public types of the client, all derived from the generated OpenAPI types (generated/api-types.ts),
 * so a change of the API's schemas changes them at the next `npm run generate`.
 */
import type { components, operations, webhooks } from './generated/api-types.ts';
import type { RESOURCES } from './generated/resources.ts';

type Schemas = components['schemas'];

/** A resource of the API as its declaration describes it (generated/resources.ts, from `x-resources`). */
export type ApiResource = (typeof RESOURCES)[number];
/** Every resource name, e.g. `'orders'`. */
export type ResourceName = ApiResource['name'];
/** The record of a resource, e.g. `RecordOf<'orders'>` is `Order`. */
export type RecordOf<N extends ResourceName> = Schemas[Extract<ApiResource, { name: N }>['record']];

/** A product with its variants and images, as GET /api/v1/products/{id} returns it. */
export type Product = Schemas['Product'];
/** A product variant. */
export type Variant = Schemas['Variant'];
/** A product image. */
export type Image = Schemas['Image'];
/** An order with its items. */
export type Order = Schemas['Order'];
/** One line of an order. */
export type OrderItem = Schemas['OrderItem'];
/** A registered customer. */
export type Customer = Schemas['Customer'];
/** Current stock of a stock-tracked product and its variants. */
export type InventoryRecord = Schemas['InventoryRecord'];
/** A range's record count and checksum (GET /api/v1/{resource}/checksums). */
export type RangeChecksum = Schemas['RangeChecksum'];
/** One record's checksum (GET /api/v1/{resource}/checksums/records). */
export type RecordChecksum = Schemas['RecordChecksum'];
/** Stock of one variant inside an inventory record. */
export type InventoryVariant = Schemas['InventoryVariant'];
/** One entry of the stock audit log. */
export type StockMovement = Schemas['StockMovement'];
/** A distinct attribute key of the variants with its distinct values (GET /api/v1/attributes). */
export type Attribute = Schemas['Attribute'];
/** One distinct value of an attribute and how many variants carry it. */
export type AttributeValue = Schemas['AttributeValue'];
/** The `pagination` object of a list page. */
export type Pagination = Schemas['Pagination'];
/** An event of the events feed (GET /api/v1/events): a webhook payload, discriminated by `type`. */
export type StoreEvent = Schemas['Event'];
/** Every event type the feed serves (all webhook types but `ping`). */
export type StoreEventType = StoreEvent['type'];
/** An RFC 9457 problem+json error body. */
export type Problem = Schemas['Problem'];
/** Every error code the service answers with (its error-code registry, through the OpenAPI document). */
export type ProblemCode = Problem['code'];

type QueryOf<Op extends keyof operations> = Partial<NonNullable<operations[Op]['parameters']['query']>>;

/** Query of GET /api/v1/products (every field optional; the server applies the defaults). */
export type ProductListQuery = QueryOf<'listProducts'>;
/** Query of GET /api/v1/products/export. */
export type ProductExportQuery = QueryOf<'exportProducts'>;
/** Query of GET /api/v1/orders. */
export type OrderListQuery = QueryOf<'listOrders'>;
/** Query of GET /api/v1/orders/export. */
export type OrderExportQuery = QueryOf<'exportOrders'>;
/** Query of GET /api/v1/customers. */
export type CustomerListQuery = QueryOf<'listCustomers'>;
/** Query of GET /api/v1/customers/export. */
export type CustomerExportQuery = QueryOf<'exportCustomers'>;
/** Query of GET /api/v1/inventory. */
export type InventoryListQuery = QueryOf<'listInventory'>;
/** Query of GET /api/v1/inventory/export. */
export type InventoryExportQuery = QueryOf<'exportInventory'>;
/** Query of GET /api/v1/inventory/movements. */
export type StockMovementListQuery = QueryOf<'listInventoryMovements'>;
/** Query of GET /api/v1/inventory/movements/export. */
export type StockMovementExportQuery = QueryOf<'exportInventoryMovements'>;

/** Query of GET /api/v1/attributes (`cursor`: the key of the last attribute of the previous page). */
export type AttributeListQuery = QueryOf<'listAttributes'>;

/** Query of GET /api/v1/events; `type` takes one event type or several. */
export type EventListQuery = Omit<QueryOf<'listEvents'>, 'type'> & { type?: StoreEventType | StoreEventType[] };
/** Query of GET /api/v1/events/export. */
export type EventExportQuery = Omit<QueryOf<'exportEvents'>, 'type'> & { type?: StoreEventType | StoreEventType[] };

/** One page of a list: `data` and `pagination` (pass `pagination.next_cursor` back as `cursor`). */
export interface Page<T> {
  data: T[];
  pagination: Pagination;
}

type WebhookPayload<K extends keyof webhooks> = webhooks[K] extends { post: { requestBody: { content: { 'application/json': infer B } } } } ? B : never;

/** A webhook event, discriminated by `type` (narrow with `switch (event.type)`). */
export type WebhookEvent = { [K in Exclude<keyof webhooks, 'fifo.batch'>]: WebhookPayload<K> }[Exclude<keyof webhooks, 'fifo.batch'>];
/** What a FIFO endpoint receives: its events in the order they were written, in one request (verifyWebhookBatch). */
export type WebhookBatch = WebhookEvent[];
/** Every webhook event type, e.g. `'order.updated'`. */
export type WebhookEventType = WebhookEvent['type'];
/** The event of one type, e.g. `WebhookEventOf<'order.created'>`. */
export type WebhookEventOf<T extends WebhookEventType> = Extract<WebhookEvent, { type: T }>;
