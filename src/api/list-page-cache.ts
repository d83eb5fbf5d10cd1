/**
 * The list page cache of a process (decision 0016, PostgreSQL only): the body of a list page, by
 * the page statement's text and parameters (the horizon aside) and the cursor as sent, kept until
 * the next write to the store. Every write moves the store generation (db/read-cache-signals.ts):
 * at once in this process, by NOTIFY in the others; a page read under another generation is never
 * served, and one whose read overlapped a write is never kept. While the process does not listen,
 * nothing is served from it.
 *
 * Why a cached page never breaks the sync guarantee (every record is on a page or after its next
 * cursor): a page holds the records below its read horizon H, and no row can commit below H after H
 * was read (decision 0001). So any record whose key is at or before the page's next cursor was
 * committed, with that key and that content, when the page was read, and is on it; any later write
 * gets a key above H, after the cursor. That holds however late the page is served: the cache only
 * delays news by as long as a notification takes to arrive, as a slower request would.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { storeGeneration } from '../db/read-cache-signals.ts';

export interface CachedPage {
  /** The whole response body, encoded once. */
  readonly body: Buffer;
  readonly nextCursor: string | null;
  readonly hasMore: boolean;
}

export class ListPageCache {
  readonly #db: Kysely<Database>;
  readonly #maxBytes: number;
  readonly #live: () => boolean;
  /** In least recently used order. */
  readonly #pages = new Map<string, CachedPage>();
  #bytes = 0;
  #generation: number;

  constructor(db: Kysely<Database>, maxBytes: number, live: () => boolean) {
    this.#db = db;
    this.#maxBytes = maxBytes;
    this.#live = live;
    this.#generation = storeGeneration(db);
  }

  /** The store generation now: take it before reading a page, hand it to `put`. */
  generation(): number {
    return storeGeneration(this.#db);
  }

  get(key: string): CachedPage | undefined {
    this.#sync();
    if (!this.#live()) return undefined;
    const page = this.#pages.get(key);
    if (page) {
      this.#pages.delete(key);
      this.#pages.set(key, page);
    }
    return page;
  }

  /** Keeps `page`, read under `generation`, unless a write was announced since. */
  put(key: string, page: CachedPage, generation: number): void {
    this.#sync();
    if (generation !== this.#generation || !this.#live()) return;
    // A page larger than a quarter of the budget would evict most others: not kept.
    const size = page.body.byteLength + key.length;
    if (size * 4 > this.#maxBytes) return;
    const old = this.#pages.get(key);
    if (old) {
      this.#pages.delete(key);
      this.#bytes -= old.body.byteLength + key.length;
    }
    while (this.#bytes + size > this.#maxBytes) {
      const [oldestKey, oldest] = this.#pages.entries().next().value!;
      this.#pages.delete(oldestKey);
      this.#bytes -= oldest.body.byteLength + oldestKey.length;
    }
    this.#pages.set(key, page);
    this.#bytes += size;
  }

  /** Empties the cache when the store generation moved. */
  #sync(): void {
    const generation = storeGeneration(this.#db);
    if (generation !== this.#generation) {
      this.#pages.clear();
      this.#bytes = 0;
      this.#generation = generation;
    }
  }
}

const caches = new WeakMap<Kysely<Database>, ListPageCache>();

/** Turns the list page cache on for `db` (the app factory does, on PostgreSQL). */
export function enableListPageCache(db: Kysely<Database>, maxBytes: number, live: () => boolean): void {
  caches.set(db, new ListPageCache(db, maxBytes, live));
}

/** `db`'s list page cache, if it has one. */
export function listPageCacheOf(db: Kysely<Database>): ListPageCache | undefined {
  return caches.get(db);
}
