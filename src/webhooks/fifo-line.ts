/**
 * FIFO endpoints (decision 0059), the pure part: the settings' bounds, a batch's id and body.
 * The line itself (claim, settle) is in delivery-queue.ts, its sending in delivery-dispatcher.ts.
 *
 * A FIFO endpoint's line is its undelivered deliveries (pending or failed) in the write order of their
 * events, (created_at, seq): the order the event poller fans them out in (db/write-clock.ts: below
 * the read horizon no write can still commit, so a store's later event is never queued before an
 * earlier one). One worker holds the line at a time, by the leases of the batch it sends; the head
 * batch is sent, settled, and only then the next one is claimed.
 */
import type { DeliveryOrder } from './webhook.tables.ts';

/** The values `delivery_order` takes; `unordered` is the default. */
export const DELIVERY_ORDERS = ['unordered', 'fifo'] as const satisfies readonly DeliveryOrder[];
/** Bounds of `batch_size` (the migration's CHECK says the same), and its default. */
export const BATCH_SIZE_MIN = 1;
export const BATCH_SIZE_MAX = 500;
export const DEFAULT_BATCH_SIZE = 50;

/**
 * The `webhook-id` of a batch: its first event's id and its length. A batch sent again unchanged
 * (a retry, a worker that died mid-request) carries the same id, so a receiver can tell it has it;
 * a batch that grew behind the same head is a new message.
 */
export function batchId(firstEventId: string, size: number): string {
  return `batch_${firstEventId}_${size}`;
}

/** The body of an HTTP batch: a JSON array of the events' usual envelopes, in line order. */
export function batchBody(bodies: readonly string[]): string {
  return `[${bodies.join(',')}]`;
}
