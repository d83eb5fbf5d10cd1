/**
 * Snapshot export (GET /api/v1/{resource}/snapshot): a whole resource in one NDJSON stream for an
 * initial sync, without the 500-record page limit and without holding a transaction.
 *
 * The read horizon H (write-clock.ts) is fixed once at the start. The stream is every record with
 * (last_modified, id) after the resume cursor and last_modified < H, read in keyset chunks of ~1 MiB
 * (at most SNAPSHOT_CHUNK rows), each chunk its own short statement (the embedded database has one
 * connection and serves other requests between chunks). The end cursor is H with the nil id, i.e. "every key
 * at or after H": a record is either streamed or changed after the cursor. Why: rows below H are
 * final when H is read (decision 0001); a record changed while the stream runs gets a stamp above H
 * (its writer took its stamp after H was read), so it moves to a key the end cursor covers, whether
 * its old key was streamed yet or not. Records created meanwhile are likewise above H.
 * Resuming from the last record received with a fresh horizon keeps the same property.
 * Decision: docs/decisions/0012-stored-documents.md.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from './schema.ts';
import { atOrBefore, chunkBounds, chunkQuery, readOneRow, type ChunkRow, type KeyRow, type ListSource } from './keyset-page.ts';
import type { Cursor } from '../shared/cursor.ts';
import type { Bytes, RowReader } from './copy-out.ts';

/**
 * Rows per statement at most. PostgreSQL: large, so the round trips and statement starts are few
 * against the rows of small records (each chunk is one value, see chunkQuery). PGlite: small, since
 * its one connection serves nothing else while a chunk is read.
 */
export const SNAPSHOT_CHUNK = { postgres: 5000, pglite: 1000 } as const;
/**
 * Characters a chunk aims at (~1 MiB of mostly ASCII JSON): the next statement reads as many rows
 * as fit at the previous chunk's characters per row, within the doubling and SNAPSHOT_CHUNK. A chunk
 * is held several times over while it passes (pg's receive buffer, which doubles as the message
 * arrives, the decoded string, the socket's copy, the next chunk read ahead meanwhile), so its size,
 * not its rows, bounds a stream's memory: 5,000 products were ~5 MB (decision 0023).
 */
export const SNAPSHOT_CHUNK_CHARS = 1 << 20;
/**
 * Chunks read at once (decision 0069). PostgreSQL: two, each on its own connection, so the server
 * reads the next chunk while the previous one crosses to `serve` and leaves for the client (with one,
 * the two sides took turns: the database's backend was busy 55 % of a snapshot). The embedded
 * database: one (one connection; a second statement would only wait in its thread).
 */
export const SNAPSHOT_DEPTH = { postgres: 2, pglite: 1 } as const;
/** Chunks whose bounds one key walk fixes (chunkBounds) when chunks are read two at a time. */
const BOUNDS_AHEAD = 8;
/** Rows of the first chunk; each next one doubles up to the back end's SNAPSHOT_CHUNK. */
const SNAPSHOT_FIRST_CHUNK = 500;
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/**
 * The cursor after a snapshot read below `horizon` from `from`: every key at or after the horizon;
 * a resume cursor already at or past the horizon (nothing to stream) is handed back as it came, so
 * the end cursor never goes back behind what the client asked for.
 */
export async function snapshotEndCursor(db: Kysely<Database>, horizon: string, from?: { text: string; cursor: Cursor }): Promise<string> {
  const { rows } = await sql<{ iso: string; past: boolean }>`
    SELECT iso_utc(${horizon}::timestamptz) AS iso, ${from ? sql`${from.cursor.ts}::timestamptz >= ${horizon}::timestamptz` : sql`false`} AS past`.execute(db);
  return from && rows[0]!.past ? from.text : `${rows[0]!.iso}_${NIL_UUID}`;
}

/** A chunk as read: its NDJSON as text (Kysely) or as the bytes the database sent (binary COPY). */
type Chunk = Omit<ChunkRow, 'text'> & { text: string | Buffer | Bytes | null; limit: number };

/**
 * The snapshot's NDJSON text, chunk by chunk (each chunk one statement, nothing held between them).
 * The next chunk is read while the previous one is written (one chunk ahead at most: the stream is
 * pulled only as fast as the socket drains, Readable.from's high-water mark being one chunk).
 * Stopping the iteration (client gone) leaves nothing open: a chunk read ahead finishes on its own
 * (one statement, no transaction) and is dropped; the next one is never started.
 */
export async function* snapshotStream(
  db: Kysely<Database>,
  source: ListSource,
  req: { cursor?: Cursor; horizon: string; filters: readonly RawBuilder<unknown>[] },
  chunkSize: number = SNAPSHOT_CHUNK.postgres,
  chunkChars: number = SNAPSHOT_CHUNK_CHARS,
  /** Read each chunk's bytes undecoded (decisions 0037, 0046, 0050). */
  readRows?: RowReader,
  /** Chunks read at once (SNAPSHOT_DEPTH); above one, readRows is needed. */
  depth = 1,
): AsyncGenerator<string | Buffer | Bytes> {
  // The first chunks are smaller (doubling up to chunkSize), so the first bytes leave early and
  // writing them overlaps reading the next; from then on a chunk's rows follow its records' size.
  const read = async (cursor: Cursor | undefined, limit: number, upTo?: KeyRow): Promise<Chunk> => {
    const filters = upTo ? [...req.filters, atOrBefore(source, upTo)] : req.filters;
    const query = chunkQuery(source, { cursor, horizon: req.horizon, filters }, limit);
    if (readRows) {
      return readOneRow(readRows, db, sql`SELECT n::text, iso, id, text FROM (${query}) q`, (row, owned) => {
        const [n, iso, id, text] = row!;
        const latin = (field: Bytes | null) => (field === null ? null : field.toString('latin1'));
        // Owned: the pieces as the connection read them, written to the socket as they are; else
        // (the embedded database's shared area) one copy.
        return { text: text === null || owned ? text! : text.copy(), n: Number(latin(n)), iso: latin(iso), id: latin(id), limit };
      });
    }
    const { rows } = await query.execute(db);
    return { ...rows[0]!, limit };
  };
  // A read ahead may fail while the consumer is busy with the previous chunk: marked handled at
  // once (no unhandled rejection), it still throws where it is awaited.
  const ahead = (cursor: Cursor | undefined, limit: number, upTo?: KeyRow) => {
    const promise = read(cursor, limit, upTo);
    promise.catch(() => {});
    return promise;
  };
  if (depth > 1 && readRows) {
    yield* chunksAtOnce(db, source, req, { chunkSize, chunkChars, depth, readRows, ahead });
    return;
  }
  let next: Promise<Chunk> | undefined = ahead(req.cursor, Math.min(SNAPSHOT_FIRST_CHUNK, chunkSize));
  while (next) {
    const chunk: Chunk = await next;
    next = undefined;
    if (chunk.n === 0 || chunk.text === null) return;
    if (chunk.n === chunk.limit) {
      const fits = Math.floor((chunkChars * chunk.n) / chunk.text.length);
      next = ahead({ ts: chunk.iso!, id: chunk.id! }, Math.max(1, Math.min(chunk.limit * 2, chunkSize, fits)));
    }
    yield chunk.text;
  }
}

/** A chunk still to read: the records after `from` up to and including `upTo` (to the walk's end when absent). */
interface Segment {
  readonly from: Cursor | undefined;
  readonly upTo: KeyRow | undefined;
  readonly rows: number;
}

/**
 * snapshotStream with `depth` chunks read at once (decision 0069). A chunk's resume key is known only
 * once it is read, so the next chunks' bounds are fixed ahead by a walk over the keys alone
 * (chunkBounds, BOUNDS_AHEAD chunks at a time): chunk i is the records after bound i−1 up to and
 * including bound i, below the horizon. Rows below the horizon are final when it is read (a record
 * changed meanwhile moves to a key at or above it, decision 0001), so the bounds stay exact: a chunk
 * may come back shorter (its record moved past the end cursor), never longer, and no record falls
 * between two chunks. The chunks are yielded in key order; `depth` reads are in flight at most
 * (each on its own connection), so at most `depth` chunks are held besides the one being written.
 */
async function* chunksAtOnce(
  db: Kysely<Database>,
  source: ListSource,
  req: { cursor?: Cursor; horizon: string; filters: readonly RawBuilder<unknown>[] },
  options: {
    chunkSize: number;
    chunkChars: number;
    depth: number;
    readRows: RowReader;
    ahead: (cursor: Cursor | undefined, limit: number, upTo?: KeyRow) => Promise<Chunk>;
  },
): AsyncGenerator<string | Buffer | Bytes> {
  const { chunkSize, chunkChars, depth, readRows, ahead } = options;
  // The first chunk alone: its early bytes, and the records' size the next chunks are cut by.
  const first = await ahead(req.cursor, Math.min(SNAPSHOT_FIRST_CHUNK, chunkSize));
  if (first.n === 0 || first.text === null) return;
  if (first.n < first.limit) {
    yield first.text;
    return;
  }
  let charsPerRow = first.text.length / first.n;
  const rowsPerChunk = () => Math.max(1, Math.min(chunkSize, Math.floor(chunkChars / charsPerRow)));
  const segments: Segment[] = [];
  /** Where the next bounds start: the last bound planned (or the first chunk's last key). */
  let planFrom: Cursor = { ts: first.iso!, id: first.id! };
  let planned = false;
  let planning: Promise<void> | undefined;
  let planFailure: { error: unknown } | undefined;
  const plan = (): Promise<void> => {
    if (planning) return planning;
    const from = planFrom;
    const rows = rowsPerChunk();
    planning = chunkBounds(readRows, db, source, { cursor: from, horizon: req.horizon, filters: req.filters }, rows, BOUNDS_AHEAD).then(
      ({ bounds, n }) => {
        let at = from;
        for (const bound of bounds) {
          segments.push({ from: at, upTo: bound, rows });
          at = { ts: bound.iso, id: bound.id };
        }
        planFrom = at;
        if (n < rows * BOUNDS_AHEAD) {
          // The walk ends within the chunks planned: the rest after the last bound, if any.
          if (n > bounds.length * rows) segments.push({ from: at, upTo: undefined, rows });
          planned = true;
        }
        planning = undefined;
      },
      (error: unknown) => {
        planFailure = { error };
        planning = undefined;
      },
    );
    return planning;
  };
  const reads: { segment: Segment; chunk: Promise<Chunk> }[] = [];
  const fill = () => {
    while (reads.length < depth && segments.length > 0) {
      const segment = segments.shift()!;
      reads.push({ segment, chunk: ahead(segment.from, segment.upTo ? segment.rows : chunkSize, segment.upTo) });
    }
    if (segments.length < depth && !planned) void plan();
  };
  void plan();
  yield first.text;
  for (;;) {
    if (planFailure) throw planFailure.error;
    fill();
    const head = reads.shift();
    if (!head) {
      if (planned) return;
      await plan();
      continue;
    }
    const chunk = await head.chunk;
    if (head.segment.upTo === undefined && chunk.n === chunk.limit) {
      // The walk's last chunk came back full: records the count did not see (it cannot happen
      // below the horizon, but nothing is dropped on that belief): walk on from its last key.
      planFrom = { ts: chunk.iso!, id: chunk.id! };
      planned = false;
    }
    if (chunk.n === 0 || chunk.text === null) continue;
    charsPerRow = chunk.text.length / chunk.n;
    // The next reads start before this chunk is handed over, so `depth` are in flight while it is written.
    fill();
    yield chunk.text;
  }
}

/**
 * A snapshot's chunks as a stream takes them: a chunk read as pieces (binary COPY on PostgreSQL)
 * goes out as those pieces, never joined into one buffer (decision 0068).
 */
export async function* snapshotPieces(chunks: AsyncIterable<string | Buffer | Bytes>): AsyncGenerator<string | Buffer> {
  for await (const chunk of chunks) {
    if (typeof chunk === 'string' || Buffer.isBuffer(chunk)) yield chunk;
    else yield* chunk.pieces;
  }
}
