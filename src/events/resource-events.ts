/**
 * The events each kind of change appends. An event's `data` is the record's stored document
 * (db/documents.ts) as the statement triggers left it after the change, the same bytes a GET returns
 * at that moment.
 */
import { sql } from 'kysely';
import type { WriteContext } from '../db/write-clock.ts';
import { productSource } from '../catalog/product.json-sql.ts';
import { inventorySource, movementSource, stockTrackedCondition } from '../inventory/inventory.json-sql.ts';
import { orderSource } from '../orders/order.json-sql.ts';
import { customerSource } from '../customers/customer.json-sql.ts';
import { appendEvents } from './event-log.ts';
import { chunks } from '../shared/chunks.ts';

/**
 * Sorted distinct ids in chunks of bounded size: a bulk import touching 100k resources appends its
 * events in statements of at most EVENT_CHUNK rows (a product's JSON is the costliest to build), so
 * the embedded database yields to the HTTP side between them (db/database.ts).
 */
const EVENT_CHUNK = 250;
const idChunks = (ids: readonly string[]) => chunks([...new Set(ids)].sort(), EVENT_CHUNK);
const uuids = (ids: readonly string[]) => sql`${ids}::uuid[]`;

export async function productsChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  if (ids.length === 0) return;
  for (const part of idChunks(ids)) {
    await appendEvents(ctx, created ? 'product.created' : 'product.updated',
      sql`SELECT p.id AS resource_id, ${productSource.json} AS data FROM products p WHERE p.id = ANY(${uuids(part)})`);
  }
}

/** inventory.updated for the stock-tracked ones among `productIds`. */
export async function inventoryChanged(ctx: WriteContext, productIds: readonly string[]): Promise<void> {
  if (productIds.length === 0) return;
  for (const part of idChunks(productIds)) {
    await appendEvents(ctx, 'inventory.updated',
      sql`SELECT p.id AS resource_id, ${inventorySource.json} AS data FROM products p WHERE p.id = ANY(${uuids(part)}) AND ${stockTrackedCondition}`);
  }
}

export async function movementsCreated(ctx: WriteContext, movementIds: readonly string[]): Promise<void> {
  if (movementIds.length === 0) return;
  for (const part of idChunks(movementIds)) {
    await appendEvents(ctx, 'stock_movement.created',
      sql`SELECT m.id AS resource_id, ${movementSource.json} AS data FROM stock_movements m WHERE m.id = ANY(${uuids(part)})`);
  }
}

/** order.created (or order.updated) for each of `ids`, set-based like productsChanged. */
export async function ordersChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  for (const part of idChunks(ids)) {
    await appendEvents(ctx, created ? 'order.created' : 'order.updated',
      sql`SELECT o.id AS resource_id, ${orderSource.json} AS data FROM orders o WHERE o.id = ANY(${uuids(part)})`);
  }
}

export async function orderChanged(ctx: WriteContext, id: string, created = false): Promise<void> {
  await ordersChanged(ctx, [id], created);
}

/** customer.created (or customer.updated) for each of `ids`, set-based like productsChanged. */
export async function customersChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  for (const part of idChunks(ids)) {
    await appendEvents(ctx, created ? 'customer.created' : 'customer.updated',
      sql`SELECT c.id AS resource_id, ${customerSource.json} AS data FROM customers c WHERE c.id = ANY(${uuids(part)})`);
  }
}

export async function customerChanged(ctx: WriteContext, id: string, created = false): Promise<void> {
  await customersChanged(ctx, [id], created);
}
