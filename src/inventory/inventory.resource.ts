/** Inventory records and stock movements as resources of the read API, the events and the mirror. */
import { Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import { defineResource } from '../records/resource.ts';
import { requireUuid, sinceOf } from '../records/filters.ts';
import { Nullable, StringEnum, Timestamp, Uuid, sinceParam, Version } from '../shared/typebox.ts';
import { MOVEMENT_REASONS, inventoryJson, inventoryJsonBeforeStores, inventorySource, movementJson, movementSource } from './inventory.json-sql.ts';

export const InventoryVariant = Type.Object(
  {
    variant_id: Uuid,
    variant_name: Type.String(),
    sku: Nullable(Type.String()),
    stock: Type.Integer(),
  },
  { title: 'InventoryVariant', additionalProperties: false },
);

export const InventoryRecord = Type.Object(
  {
    product_id: Uuid,
    product_name: Type.String(),
    sku: Nullable(Type.String()),
    stock: Type.Integer(),
    is_active: Type.Boolean(),
    variants: Type.Array(InventoryVariant),
    last_modified: Timestamp,
    version: Version,
  },
  { title: 'InventoryRecord', additionalProperties: false },
);

export const StockMovement = Type.Object(
  {
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
    version: Version,
  },
  { title: 'StockMovement', additionalProperties: false },
);

export const inventoryResource = defineResource({
  name: 'inventory',
  path: 'inventory',
  noun: 'inventory record',
  summary: 'stock levels',
  label: 'Inventory',
  scope: 'inventory:read',
  table: 'products',
  key: 'product_id',
  record: InventoryRecord,
  nested: [InventoryVariant],
  source: inventorySource,
  filters: {
    include_inactive: Type.Optional(Type.Boolean({ default: true, description: 'Include deactivated products (default true)' })),
  },
  conditions: (q) => (q.include_inactive === false ? [sql`p.is_active`] : []),
  single: false,
  description: { list: 'Current stock of every stock-tracked product and its variants', export: 'Export inventory records as NDJSON' },
  events: {
    prefix: 'inventory',
    kinds: ['updated'],
    when: "a stock-tracked product changes (its stock, or anything else: the inventory record's `last_modified` and `version` are the product's)",
    examplePrevious: {
      stock: 14,
      variants: [{ variant_id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f61', variant_name: 'M / white', sku: 'SHIRT-LIN-M-W', stock: 14 }],
    },
  },
  document: {
    name: 'inventory',
    alias: 'p',
    column: 'inventory_doc',
    build: inventoryJson,
    buildBeforeStores: inventoryJsonBeforeStores,
    children: [{ table: 'variants', key: 'product_id' }],
  },
  labelDescription: 'Stock levels per product and variant, and the stock movements that changed them.',
  example: {
    product_id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f60',
    product_name: 'Linen shirt',
    sku: 'SHIRT-LIN',
    stock: 12,
    is_active: true,
    variants: [{ variant_id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f61', variant_name: 'M / white', sku: 'SHIRT-LIN-M-W', stock: 12 }],
    last_modified: '2026-11-21T14:05:30.770123Z',
    version: 3,
  },
});

export const movementResource = defineResource({
  name: 'stock_movements',
  path: 'inventory/movements',
  noun: 'stock movement',
  summary: 'stock movements',
  label: 'Inventory',
  scope: 'inventory:read',
  table: 'stock_movements',
  key: 'id',
  record: StockMovement,
  source: movementSource,
  filters: {
    product_id: Type.Optional(Type.String({ maxLength: 100, description: 'Only movements of this product' })),
    since: Type.Optional(sinceParam),
  },
  conditions: (q) => {
    const c = [];
    if (q.product_id !== undefined) c.push(sql`m.product_id = ${requireUuid(String(q.product_id), 'product_id')}::uuid`);
    if (q.since !== undefined) {
      const since = sinceOf(q.since);
      c.push(sql`m.created_at > ${since}::timestamptz AND m.last_modified > ${since}::timestamptz`);
    }
    return c;
  },
  single: false,
  description: { list: 'Stock change audit log', export: 'Export stock movements as NDJSON' },
  events: { prefix: 'stock_movement', kinds: ['created'], when: 'a stock movement is recorded (sale, cancel, refund, adjustment, bulk_import)' },
  document: { name: 'stock_movement', alias: 'm', column: 'doc', build: movementJson },
  example: {
    id: '0193a5c3-0b12-7d34-a5b6-c7d8e9f0a1b4',
    product_id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f60',
    variant_id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f61',
    sku: 'SHIRT-LIN-M-W',
    reason: 'sale',
    quantity_change: -2,
    stock_before: 14,
    stock_after: 12,
    order_id: '0193a5c3-0b12-7d34-a5b6-c7d8e9f0a1b2',
    note: null,
    created_at: '2026-11-21T14:05:30.770123Z',
    last_modified: '2026-11-21T14:05:30.770123Z',
    version: 1,
  },
});
