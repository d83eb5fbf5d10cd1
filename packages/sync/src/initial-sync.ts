/**
 * Initial sync: walks each resource's snapshot (or, against a server without snapshots, its paged
 * export) from its stored position and applies it in batches.
 * Each batch and the export cursor after it are written in one mirror transaction, so a crash
 * resumes at the first batch not committed and never leaves a half-applied one.
 *
 * Records travel as the NDJSON lines the service sent (the reader's snapshotLines), their text
 * stored as it came (see applyRecordLines); here only a batch's last line is parsed, for the cursor.
 * Readers without lines give records, serialised here.
 *
 * Reading and writing overlap: while one batch is applied, the next is read from the stream (one
 * batch in flight at most, applied in stream order, so the stored cursor only moves forward). The
 * batch transactions commit without waiting for the WAL flush (synchronous_commit off): a mirror
 * database that crashes may lose the last few commits, but each takes its cursor with it, so the
 * next run re-reads exactly what was lost.
 */
import type { MirrorDatabase } from './mirror/mirror-database.ts';
import { applyRecordLines, readSyncState } from './mirror/mirror.repository.ts';
import type { SnapshotLineWalk, StoreReader } from './store-reader.ts';
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
  /** Records per local transaction (default INITIAL_SYNC_BATCH). */
  batchSize?: number;
  onProgress?: (progress: InitialSyncProgress) => void;
}

/** Records per local transaction of the initial sync unless told otherwise. */
export const INITIAL_SYNC_BATCH = 5000;

/** Runs (or resumes) the initial sync of `resources`; a resource already done is skipped. */
export async function initialSync(
  mirror: MirrorDatabase,
  reader: StoreReader,
  resources: readonly SyncResource[],
  options: InitialSyncOptions = {},
): Promise<Map<string, number>> {
  const batchSize = options.batchSize ?? INITIAL_SYNC_BATCH;
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
    let batch: string[] = [];
    // One snapshot stream when the reader has it (it falls back to the exports by itself), else the exports.
    const snapshot = walk(reader, resource, cursor);
    // The batch being applied while the next one is read (resolved when nothing is in flight).
    let applying: Promise<void> = Promise.resolve();
    const apply = async (applied: string[], next: string | null, done: boolean) => {
      await applyRecordLines(mirror, resource, applied, { cursor: next, records: applied.length, done });
      records += applied.length;
      options.onProgress?.({ resource, records, total: snapshot.total(), done });
    };
    const flush = async (done: boolean) => {
      const taken = batch;
      batch = [];
      const last = taken[taken.length - 1];
      // Done: the snapshot's end cursor, so the reconcile continues exactly where the snapshot's horizon was.
      const next = (done ? snapshot.endCursor() : null) ?? (last ? cursorAfter(resource, JSON.parse(last) as MirrorRecord) : cursor);
      cursor = next;
      // In stream order: the previous batch commits (or fails, which stops the walk) first.
      await applying;
      applying = apply(taken, next, done);
      // Observed at the next flush or at the end; marked handled meanwhile.
      applying.catch(() => {});
    };
    try {
      for await (const line of snapshot) {
        batch.push(line);
        if (batch.length >= batchSize) await flush(false);
      }
      await flush(true);
    } finally {
      // A failed read still lets the batch in flight commit (or fail) before the walk reports.
      await applying.catch(() => {});
    }
    await applying;
    totals.set(resource.name, records);
  }
  return totals;
}

/** The resource's records after `cursor` as lines: the reader's snapshot lines, else its snapshot or export records serialised. */
function walk(reader: StoreReader, resource: SyncResource, cursor: string | null): SnapshotLineWalk {
  const lines = reader.snapshotLines?.(resource, cursor);
  if (lines) return lines;
  const records = reader.snapshotRecords?.(resource, cursor);
  const source = records ?? reader.exportRecords(resource, cursor);
  return {
    async *[Symbol.asyncIterator]() {
      for await (const record of source) yield JSON.stringify(record);
    },
    endCursor: () => records?.endCursor() ?? null,
    total: () => records?.total?.() ?? null,
  };
}
