/**
 * Initial sync: walks each resource's snapshot (or, against a server without snapshots, its paged
 * export) from its stored position and applies it in batches.
 * Each batch and the export cursor after it are written in one mirror transaction, so a crash
 * resumes at the first batch not committed and never leaves a half-applied one.
 */
import { inTransaction, type MirrorDatabase } from './mirror/mirror-database.ts';
import { applyRecords, readSyncState, saveExportProgress } from './mirror/mirror.repository.ts';
import type { StoreReader } from './store-reader.ts';
import { cursorAfter, type MirrorRecord, type SyncResource } from './sync-resources.ts';

export interface InitialSyncProgress {
  resource: SyncResource;
  /** Records applied by this run so far. */
  records: number;
  /** Records this run applies in all when the server announced it (a snapshot's X-Total-Count); null when unknown. */
  total: number | null;
  done: boolean;
}

export interface InitialSyncOptions {
  /** Records per local transaction (default 500). */
  batchSize?: number;
  onProgress?: (progress: InitialSyncProgress) => void;
}

/** Runs (or resumes) the initial sync of `resources`; a resource already done is skipped. */
export async function initialSync(
  mirror: MirrorDatabase,
  reader: StoreReader,
  resources: readonly SyncResource[],
  options: InitialSyncOptions = {},
): Promise<Map<string, number>> {
  const batchSize = options.batchSize ?? 500;
  const totals = new Map<string, number>();
  for (const resource of resources) {
    const state = await readSyncState(mirror.db, resource.name);
    let records = 0;
    if (state.initial_done) {
      options.onProgress?.({ resource, records, total: 0, done: true });
      totals.set(resource.name, 0);
      continue;
    }
    let cursor = state.export_cursor;
    let batch: MirrorRecord[] = [];
    // One snapshot stream when the reader has it (it falls back to the exports by itself), else the exports.
    const snapshot = reader.snapshotRecords?.(resource, cursor);
    const flush = async (done: boolean) => {
      const last = batch[batch.length - 1];
      // Done: the snapshot's end cursor, so the reconcile continues exactly where the snapshot's horizon was.
      const next = (done ? snapshot?.endCursor() : null) ?? (last ? cursorAfter(resource, last) : cursor);
      await inTransaction(mirror, async (trx) => {
        await applyRecords(trx, resource, batch);
        await saveExportProgress(trx, resource.name, next, batch.length, done);
      });
      records += batch.length;
      cursor = next;
      batch = [];
      options.onProgress?.({ resource, records, total: snapshot?.total?.() ?? null, done });
    };
    for await (const record of snapshot ?? reader.exportRecords(resource, cursor)) {
      batch.push(record);
      if (batch.length >= batchSize) await flush(false);
    }
    await flush(true);
    totals.set(resource.name, records);
  }
  return totals;
}
