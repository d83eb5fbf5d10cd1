/** The events of product changes (records/record-events.ts appends them from the declaration). */
import type { WriteContext } from '../db/write-clock.ts';
import { recordsChanged } from '../records/record-events.ts';
import { productResource } from './product.resource.ts';

export async function productsChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  await recordsChanged(ctx, productResource, created ? 'created' : 'updated', ids);
}
