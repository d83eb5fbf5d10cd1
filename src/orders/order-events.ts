/** The events of order changes (records/record-events.ts appends them from the declaration). */
import type { WriteContext } from '../db/write-clock.ts';
import { recordsChanged } from '../records/record-events.ts';
import { orderResource } from './order.resource.ts';

export async function ordersChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  await recordsChanged(ctx, orderResource, created ? 'created' : 'updated', ids);
}

export async function orderChanged(ctx: WriteContext, id: string, created = false): Promise<void> {
  await ordersChanged(ctx, [id], created);
}
