/**
 * Snapshot export (GET /api/v1/{resource}/snapshot): a whole resource in one NDJSON stream for an
 * initial sync, without the 500-record page limit and without holding a transaction.
 *
 * The read horizon H (write-clock.ts) is fixed once at the start. The stream is every record with
 * (last_modified, id) after the resume cursor and last_modified < H, read in keyset chunks of
 * SNAPSHOT_CHUNK rows, each chunk its own short statement (the embedded database has one connection
 * and serves other requests between chunks). The end cursor is H with the nil id, i.e. "every key
 * at or after H": a record is either streamed or changed after the cursor. Why: rows below H are
 * final when H is read (decision 0001); a record changed while the stream runs gets a stamp above H
 * (its writer took its stamp after H was read), so it moves to a key the end cursor covers, whether
 * its old key was streamed yet or not. Records created meanwhile are likewise above H.
 * Resuming from the last record received with a fresh horizon keeps the same property.
 * Decision: docs/decisions/0012-stored-documents.md.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from './schema.ts';
import { recordsQuery, type ListSource } from './keyset-page.ts';
import type { Cursor } from '../shared/cursor.ts';

/** Rows per statement: large enough to read at the database's speed, short enough to interleave. */
export const SNAPSHOT_CHUNK = 1000;
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/** The cursor after a snapshot read below `horizon`: every key at or after the horizon. */
export async function snapshotEndCursor(db: Kysely<Database>, horizon: string): Promise<string> {
  const { rows } = await sql<{ iso: string }>`SELECT iso_utc(${horizon}::timestamptz) AS iso`.execute(db);
  return `${rows[0]!.iso}_${NIL_UUID}`;
}

/**
 * The snapshot's NDJSON text, chunk by chunk (each chunk one statement, nothing held between them).
 * Stopping the iteration (client gone) leaves nothing open: the next statement is simply not run.
 */
export async function* snapshotStream(
  db: Kysely<Database>,
  source: ListSource,
  req: { cursor?: Cursor; horizon: string; filters: readonly RawBuilder<unknown>[] },
  chunkSize = SNAPSHOT_CHUNK,
): AsyncGenerator<string> {
  let cursor = req.cursor;
  for (;;) {
    const { rows } = await recordsQuery(source, { cursor, order: 'asc', horizon: req.horizon, filters: req.filters }, chunkSize).execute(db);
    if (rows.length === 0) return;
    let text = '';
    for (const row of rows) text += `${row.json}\n`;
    yield text;
    if (rows.length < chunkSize) return;
    const tail = rows[rows.length - 1]!;
    cursor = { ts: tail.iso, id: tail.id };
  }
}

/** At most one snapshot per token at a time (per process). */
export class SnapshotSlots {
  /** Retry-After of the 429 for a second concurrent snapshot. */
  static readonly RETRY_AFTER_SECONDS = 1;
  readonly #busy = new Set<string>();

  /** A release function, or undefined when `tokenId` already streams one. */
  acquire(tokenId: string): (() => void) | undefined {
    if (this.#busy.has(tokenId)) return undefined;
    this.#busy.add(tokenId);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#busy.delete(tokenId);
    };
  }

  /** Snapshots streaming now. */
  get size(): number {
    return this.#busy.size;
  }
}
