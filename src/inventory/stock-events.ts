/** The events of stock changes (records/record-events.ts appends them from the declarations). */
import type { WriteContext } from '../db/write-clock.ts';
import { recordsChanged, recordsChangedInOrder } from '../records/record-events.ts';
import { productResource } from '../catalog/product.resource.ts';
import { inventoryResource, movementResource } from './inventory.resource.ts';

/** inventory.updated for the stock-tracked ones among `productIds`. */
export async function inventoryChanged(ctx: WriteContext, productIds: readonly string[]): Promise<void> {
  await recordsChanged(ctx, inventoryResource, 'updated', productIds);
}

/**
 * The events of stock changes, in this order: stock_movement.created for each movement,
 * inventory.updated for each stock-tracked product and, with `announceProducts`, product.updated.
 */
export async function stockChanged(ctx: WriteContext, movementIds: readonly string[], productIds: readonly string[], announceProducts: boolean): Promise<void> {
  await recordsChangedInOrder(ctx, [
    { resource: movementResource, kind: 'created', ids: movementIds },
    { resource: inventoryResource, kind: 'updated', ids: productIds },
    ...(announceProducts ? [{ resource: productResource, kind: 'updated', ids: productIds }] : []),
  ]);
}
