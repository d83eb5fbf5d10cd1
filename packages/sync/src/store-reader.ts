/**
 * What the sync tool reads from the Store Integration API: list pages from a cursor and export
 * batches from a cursor, per resource. Built on the typed client (@store-api/client).
 */
import type { RangeChecksum } from './mirror/mirror.repository.ts';
import type { MirrorRecord, SyncResource } from './sync-resources.ts';

/** One record's checksum as the server computes it (GET /{resource}/checksums/records). */
export interface RecordChecksum {
  readonly id: string;
  readonly last_modified: string;
  readonly checksum: string;
}

export interface Page {
  readonly data: MirrorRecord[];
  readonly nextCursor: string | null;
  readonly hasMore: boolean;
}

export interface StoreReader {
  /** One list page of `resource` after `cursor` (oldest first). */
  listPage(resource: SyncResource, cursor: string | null, limit: number): Promise<Page>;
  /** The export of `resource` after `cursor`, record by record, across every export request. */
  exportRecords(resource: SyncResource, cursor: string | null): AsyncIterable<MirrorRecord>;
  /**
   * Every record of `resource` after `cursor` in one snapshot stream, when the reader can; falls
   * back to the export by itself against a server without snapshots.
   */
  snapshotRecords?(resource: SyncResource, cursor: string | null): SnapshotWalk;
  /**
   * The same walk as snapshotRecords, each record as the NDJSON line the server sent (not parsed,
   * so the initial sync hands it to the mirror as it came); a walk that falls back to the export
   * yields its records serialised.
   */
  snapshotLines?(resource: SyncResource, cursor: string | null): SnapshotLineWalk;
  /**
   * Count and checksum per id range, `digits` hex digits past `prefix` (GET /{resource}/checksums,
   * decision 0038); null against a server without checksums.
   */
  rangeChecksums?(resource: SyncResource, prefix: string, digits: number): Promise<RangeChecksum[] | null>;
  /** Every record's checksum whose key starts with `prefix`, by key, across as many requests as it takes. */
  recordChecksums?(resource: SyncResource, prefix: string): AsyncIterable<RecordChecksum>;
}

/** Lines of a snapshot (one record's JSON each) and, once they are all consumed, the cursor to continue from. */
export interface SnapshotLineWalk extends AsyncIterable<string> {
  /** As SnapshotWalk's. */
  endCursor(): string | null;
  /** As SnapshotWalk's. */
  total(): number | null;
}

/** Records of a snapshot and, once they are all consumed, the cursor to continue from. */
export interface SnapshotWalk extends AsyncIterable<MirrorRecord> {
  /** The snapshot's end cursor after a complete walk; null when the walk fell back to the export. */
  endCursor(): string | null;
  /** Records the walk holds in all, once the server said so (a snapshot's X-Total-Count); null when unknown. */
  total?(): number | null;
}
