/**
 * One snapshot per token at a time (GET /api/v1/{resource}/snapshot, decisions 0012 and 0017): a
 * second one while the first streams is answered 429 with Retry-After. Per process always; across
 * every API process of a deployment when Redis is configured, as every bound of long work is
 * (stores/store-slots.ts: a lease renewed while the stream runs, released when the response closes,
 * expiring after StoreSlots.LEASE_MS if its process dies; per process while Redis is out).
 */
import { StoreSlots, type SharedStore } from '../stores/store-slots.ts';

export class SnapshotSlots extends StoreSlots {
  constructor(shared?: SharedStore) {
    super('snapshot-token', 1, shared);
  }
}
