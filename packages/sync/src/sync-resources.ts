/**
 * The resources the mirror holds, as data: where each is read from the API, which field is its key,
 * which webhook events carry it, and the typed columns an ERP team queries (generated from the
 * stored JSON, so the record itself is the one source of truth).
 */

export type ResourceName = 'products' | 'orders' | 'customers' | 'inventory' | 'stock_movements';

export interface SyncResource {
  readonly name: ResourceName;
  /** Path under /api/v1 of the list; the export is `${path}/export`. */
  readonly path: string;
  /** Field holding the record's identity (inventory records are keyed by their product). */
  readonly key: 'id' | 'product_id';
  /** Query added to every list and export call (products: inactive ones too, a mirror needs them). */
  readonly query: Record<string, string>;
  /** Webhook event types whose `data` is a record of this resource. */
  readonly events: readonly string[];
  /** Typed columns generated from the record: name → SQL type (text, numeric, integer, boolean, jsonb). */
  readonly columns: Readonly<Record<string, 'text' | 'numeric' | 'integer' | 'boolean' | 'jsonb'>>;
}

/** Every mirrored resource, in the order the initial sync walks them. */
export const SYNC_RESOURCES: readonly SyncResource[] = [
  {
    name: 'products',
    path: 'products',
    key: 'id',
    query: { include_inactive: 'true' },
    events: ['product.created', 'product.updated'],
    columns: {
      name: 'text', slug: 'text', product_type: 'text', barcode: 'text', sku: 'text', price: 'numeric', cost_price: 'numeric',
      stock: 'integer', category_id: 'text', thumbnail_url: 'text', is_active: 'boolean', variants: 'jsonb', images: 'jsonb',
    },
  },
  {
    name: 'orders',
    path: 'orders',
    key: 'id',
    query: {},
    events: ['order.created', 'order.updated'],
    columns: {
      source: 'text', status: 'text', payment_status: 'text', payment_method: 'text', customer_name: 'text', customer_phone: 'text',
      subtotal: 'numeric', discount: 'numeric', delivery_fee: 'numeric', total: 'numeric', created_at: 'text', items: 'jsonb',
    },
  },
  {
    name: 'customers',
    path: 'customers',
    key: 'id',
    query: {},
    events: ['customer.created', 'customer.updated'],
    columns: { name: 'text', phone: 'text', email: 'text', city: 'text', is_active: 'boolean', created_at: 'text' },
  },
  {
    name: 'inventory',
    path: 'inventory',
    key: 'product_id',
    query: {},
    events: ['inventory.updated'],
    columns: { product_name: 'text', sku: 'text', stock: 'integer', is_active: 'boolean', variants: 'jsonb' },
  },
  {
    name: 'stock_movements',
    path: 'inventory/movements',
    key: 'id',
    query: {},
    events: ['stock_movement.created'],
    columns: {
      product_id: 'text', variant_id: 'text', sku: 'text', reason: 'text', quantity_change: 'integer', stock_before: 'integer',
      stock_after: 'integer', order_id: 'text', note: 'text', created_at: 'text',
    },
  },
];

/** The resource a webhook event type carries, or undefined (ping, unknown future types). */
export function resourceOfEvent(type: string): SyncResource | undefined {
  return SYNC_RESOURCES.find((r) => r.events.includes(type));
}

/** Resources by name; throws naming the valid ones for an unknown name (CLI `--resources`). */
export function resourcesNamed(names: readonly string[] | undefined): SyncResource[] {
  if (!names || names.length === 0) return [...SYNC_RESOURCES];
  return names.map((n) => {
    const found = SYNC_RESOURCES.find((r) => r.name === n);
    if (!found) throw new Error(`unknown resource "${n}" (one of: ${SYNC_RESOURCES.map((r) => r.name).join(', ')})`);
    return found;
  });
}

/** A mirrored record: the API's JSON object as received. */
export type MirrorRecord = Record<string, unknown> & { last_modified: string };

/** The identity of `record` in `resource`. */
export function recordKey(resource: SyncResource, record: MirrorRecord): string {
  const key = record[resource.key];
  if (typeof key !== 'string' || key === '') throw new Error(`${resource.name} record without ${resource.key}`);
  return key;
}

/** The list cursor just past `record` (`<last_modified>_<key>`, the API's next_cursor format). */
export function cursorAfter(resource: SyncResource, record: MirrorRecord): string {
  return `${record.last_modified}_${recordKey(resource, record)}`;
}
