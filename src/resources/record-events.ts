/**
 * The events each kind of change appends, from the resource's own source (its declaration,
 * resources/resource.ts): `data` is the record's stored document (db/documents.ts) as the statement
 * triggers left it after the change, the same bytes a GET returns at that moment.
 */
import { sql } from 'kysely';
import type { WriteContext } from '../db/write-clock.ts';
import { productResource } from '../catalog/product.resource.ts';
import { customerResource } from '../customers/customer.resource.ts';
import { inventoryResource, movementResource } from '../inventory/inventory.resource.ts';
import { orderResource } from '../orders/order.resource.ts';
import type { FeedEventType } from './registry.ts';
import type { ResourceDeclaration } from './resource.ts';
import { appendEvents } from '../events/event-log.ts';
import { chunks } from '../shared/chunks.ts';

/**
 * Sorted distinct ids in chunks of bounded size: a bulk import touching 100k resources appends its
 * events in statements of at most EVENT_CHUNK rows (a product's JSON is the costliest to build), so
 * the embedded database yields to the HTTP side between them (db/database.ts).
 */
const EVENT_CHUNK = 250;
const idChunks = (ids: readonly string[]) => chunks([...new Set(ids)].sort(), EVENT_CHUNK);

/**
 * Appends `${prefix}.${kind}` for each record of `resource` among `ids` (records outside the
 * source's base condition, e.g. untracked products for inventory, are skipped), set-based.
 */
export async function recordsChanged<Prefix extends string, Kind extends string>(
  ctx: WriteContext,
  resource: ResourceDeclaration<string, string, Prefix, Kind>,
  kind: NoInfer<Kind>,
  ids: readonly string[],
): Promise<void> {
  const { source, events } = resource;
  if (!events) throw new Error(`resource ${resource.name} declares no events`);
  const type = `${events.prefix}.${kind}` as FeedEventType;
  for (const part of idChunks(ids)) {
    const base = source.where ? sql` AND ${source.where}` : sql``;
    await appendEvents(
      ctx,
      type,
      sql`SELECT ${source.id} AS resource_id, ${source.json} AS data FROM ${source.from} WHERE ${source.id} = ANY(${part}::uuid[])${base}`,
    );
  }
}

const createdOrUpdated = (created: boolean) => (created ? 'created' : 'updated');

export async function productsChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  await recordsChanged(ctx, productResource, createdOrUpdated(created), ids);
}

/** inventory.updated for the stock-tracked ones among `productIds`. */
export async function inventoryChanged(ctx: WriteContext, productIds: readonly string[]): Promise<void> {
  await recordsChanged(ctx, inventoryResource, 'updated', productIds);
}

export async function movementsCreated(ctx: WriteContext, movementIds: readonly string[]): Promise<void> {
  await recordsChanged(ctx, movementResource, 'created', movementIds);
}

export async function ordersChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  await recordsChanged(ctx, orderResource, createdOrUpdated(created), ids);
}

export async function orderChanged(ctx: WriteContext, id: string, created = false): Promise<void> {
  await ordersChanged(ctx, [id], created);
}

export async function customersChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  await recordsChanged(ctx, customerResource, createdOrUpdated(created), ids);
}
