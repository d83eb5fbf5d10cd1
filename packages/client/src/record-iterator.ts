/**
 * The walk of a list, an export or a snapshot as an async iterable that keeps its cursor, and the
 * cursor format the API builds (`<last_modified>_<id>`).
 */
import { StoreApiError } from './store-api.error.ts';
import type { ResponseMetadata } from './response-metadata.ts';

/** Options of an iterator. */
export interface IterateOptions {
  /**
   * Called when every record of a page has been consumed, with the cursor to resume after it; await
   * it to persist the cursor before the next page is fetched.
   */
  onPage?: (page: PageProgress) => void | Promise<void>;
  /** Aborts the iteration (and the request in flight). */
  signal?: AbortSignal;
}

/** What `onPage` receives. */
export interface PageProgress {
  /** Cursor after this page: pass it as `cursor` to resume. */
  cursor: string | null;
  /** Records in this page. */
  count: number;
  /** Whether more pages follow. */
  hasMore: boolean;
  /** The metadata of the answer this page came from (request id, rate-limit budget …). */
  lastResponse: ResponseMetadata;
}

/**
 * An async iterable over records that keeps `cursor`: after the consumer has taken a record and asked
 * for the next one, `cursor` resumes right after it, so persisting `cursor` at any point never skips a
 * record that was not processed (at most the one in hand is seen again).
 */
export class RecordIterator<T> implements AsyncIterable<T> {
  /** Cursor to resume after the last record consumed (the starting cursor until then; null if none). */
  cursor: string | null;
  /** Records consumed so far. */
  count = 0;
  /** Pages (list pages or export requests) fetched so far. */
  pages = 0;
  /**
   * At most how many records the whole walk holds, when the server says so before sending them (a
   * snapshot's X-Total-Count, counted at its start: a record changed meanwhile comes after the
   * cursor instead, so the walk may see fewer); null until the first request answers, and for lists
   * and exports, which do not announce their size.
   */
  total: number | null = null;
  /**
   * The metadata of the latest answer of the walk (a list page, an export request, the snapshot):
   * status, request id, the rate-limit budget left; null until the first request answers.
   */
  lastResponse: ResponseMetadata | null = null;
  readonly #source: (self: RecordIterator<T>) => AsyncGenerator<T>;
  #started = false;

  constructor(start: string | undefined, source: (self: RecordIterator<T>) => AsyncGenerator<T>) {
    this.cursor = start ?? null;
    this.#source = source;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.#started) throw new Error('This iterator has already been iterated; call iterate()/export() again for a new walk');
    this.#started = true;
    return this.#source(this);
  }

  /**
   * Collects every record into an array (for small resources and tests; prefer for await). Fails with
   * code `too_many_records` past `max` records (default 10 000), before holding more in memory.
   */
  async toArray({ max = DEFAULT_TO_ARRAY_MAX }: { max?: number } = {}): Promise<T[]> {
    if (!Number.isInteger(max) || max < 0) throw new TypeError(`max must be a non-negative integer, got ${max}`);
    const all: T[] = [];
    for await (const record of this) {
      if (all.length === max) {
        throw new StoreApiError(`toArray() stopped at its cap of ${max} records; iterate with for await, or pass a larger { max }`, {
          code: 'too_many_records',
          request: 'toArray',
        });
      }
      all.push(record);
    }
    return all;
  }
}

/** Default cap of RecordIterator.toArray(). */
export const DEFAULT_TO_ARRAY_MAX = 10_000;

/** What a cursor is built from: the list's sort key (last_modified, or created_at for events) and id. */
export interface Cursored {
  last_modified?: string;
  created_at?: string;
  id?: string;
  product_id?: string;
}

/**
 * The cursor that resumes right after `record`, built as the API builds next_cursor: the record's
 * sort timestamp (last_modified; created_at for events), `_`, its id (product_id for inventory).
 */
export function cursorAfter(record: Cursored): string {
  return `${record.last_modified ?? record.created_at}_${record.id ?? record.product_id}`;
}
