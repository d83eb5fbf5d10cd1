/**
 * Reconcile: pulls each resource's list from its stored next_cursor, applies every page (newest
 * last_modified wins, so records the webhooks already brought change nothing) and stores the
 * cursor in the page's transaction. Reports per resource what it pulled, what it had to apply
 * (changes the webhooks had not delivered) and the lag of the oldest such change.
 */
import { inTransaction, type MirrorDatabase } from './mirror/mirror-database.ts';
import { applyRecords, readSyncState, saveReconcileCursor, saveReconcileRun } from './mirror/mirror.repository.ts';
import type { StoreReader } from './store-reader.ts';
import { SyncError } from './sync-errors.ts';
import type { SyncResource } from './sync-resources.ts';

export interface ReconcileReport {
  resource: string;
  pulled: number;
  /** Records the mirror did not hold at that last_modified yet (missed or not yet delivered events). */
  applied: number;
  /** Milliseconds between the oldest applied change and now: how far behind the mirror was. */
  lagMs: number | null;
  cursor: string | null;
}

export interface ReconcileOptions {
  /** List page size (1–200, default 200). */
  pageSize?: number;
  now?: () => number;
}

/** Reconciles `resources` once. The initial sync must have finished for each. */
export async function reconcile(
  mirror: MirrorDatabase,
  reader: StoreReader,
  resources: readonly SyncResource[],
  options: ReconcileOptions = {},
): Promise<ReconcileReport[]> {
  const pageSize = options.pageSize ?? 200;
  const now = options.now ?? Date.now;
  const reports: ReconcileReport[] = [];
  for (const resource of resources) {
    const state = await readSyncState(mirror.db, resource.name);
    if (!state.initial_done) {
      // Skipped by init for a missing scope: asked again, so that a scope still missing is said as
      // such (the 403, which the CLI skips) rather than as an init to run.
      if (state.skipped_scope !== null) await reader.listPage(resource, null, 1);
      throw new SyncError(`${resource.name}: the initial sync has not finished; run \`store-api-sync init\` first`);
    }
    let cursor = state.cursor;
    let pulled = 0;
    let applied = 0;
    let oldest: string | null = null;
    for (;;) {
      const page = await reader.listPage(resource, cursor, pageSize);
      const next = page.nextCursor ?? cursor;
      await inTransaction(mirror, async (trx) => {
        const written = new Set(await applyRecords(trx, resource, page.data));
        applied += written.size;
        for (const record of page.data) {
          if (written.has(String(record[resource.key])) && (oldest === null || record.last_modified < oldest)) oldest = record.last_modified;
        }
        await saveReconcileCursor(trx, resource.name, next);
      });
      pulled += page.data.length;
      cursor = next;
      if (!page.hasMore) break;
    }
    await saveReconcileRun(mirror.db, resource.name, pulled, applied);
    reports.push({ resource: resource.name, pulled, applied, lagMs: oldest === null ? null : Math.max(0, now() - Date.parse(oldest)), cursor });
  }
  return reports;
}
