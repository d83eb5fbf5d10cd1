/** The events of customer changes (records/record-events.ts appends them from the declaration). */
import type { WriteContext } from '../db/write-clock.ts';
import { recordsChanged } from '../records/record-events.ts';
import { customerResource } from './customer.resource.ts';

export async function customersChanged(ctx: WriteContext, ids: readonly string[], created = false): Promise<void> {
  await recordsChanged(ctx, customerResource, created ? 'created' : 'updated', ids);
}
