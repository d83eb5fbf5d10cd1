/**
 * The list page cache of a process (decision 0016, PostgreSQL only): the body of a list page, by
 * the page statement's text and parameters (the horizon aside) and the cursor as sent, kept until
 * the next write to the store. Every write moves its store's generation (db/read-cache-signals.ts):
 * at once in this process, by NOTIFY in the others; a page read under another generation is never
 * served, and one whose read overlapped a write is never kept. Per store (decision 0051): one
 * store's writes leave every other store's pages cached. While the process does not listen,
 * nothing is served from it.
 *
 * Why a cached page never breaks the sync guarantee (every record is on a page or after its next
 * cursor): a page holds the records below its read horizon H, and no row can commit below H after H
 * was read (decision 0001). So any record whose key is at or before the page's next cursor was
 * committed, with that key and that content, when the page was read, and is on it; any later write
 * gets a key above H, after the cursor. That holds however late the page is served: the cache only
 * delays news by as long as a notification takes to arrive, as a slower request would.
 */
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { storeGeneration } from '../db/read-cache-signals.ts';
import type { PageBytes } from '../db/keyset-page.ts';

export interface CachedPage {
  /** The whole response body, encoded once. */
  readonly body: Buffer;
  readonly nextCursor: string | null;
  readonly hasMore: boolean;
}

/** One store's pages, in least recently used order, with the generation they were read under. */
interface StorePages {
  generation: string;
  readonly pages: Map<string, CachedPage>;
  bytes: number;
}

/**
 * Export pages read ahead at most (decision 0069): each up to 500 records (~1 MiB of products) held
 * until its request comes; beyond, the oldest is dropped (its request then reads the page itself).
 */
export const PAGES_READ_AHEAD = 8;

/** A page read ahead for the request expected to ask for it, with the generation it was read under. */
interface PageAhead {
  readonly storeId: string;
  readonly generation: string;
  readonly page: Promise<PageBytes | undefined>;
}

export class ListPageCache {
  readonly #db: Kysely<Database>;
  readonly #maxBytes: number;
  readonly #live: () => boolean;
  readonly #stores = new Map<string, StorePages>();
  #bytes = 0;
  readonly #ahead = new Map<string, PageAhead>();

  constructor(db: Kysely<Database>, maxBytes: number, live: () => boolean) {
    this.#db = db;
    this.#maxBytes = maxBytes;
    this.#live = live;
  }

  /** `storeId`'s generation now: take it before reading a page, hand it to `put`. */
  generation(storeId: string): string {
    return storeGeneration(this.#db, storeId);
  }

  get(storeId: string, key: string): CachedPage | undefined {
    if (!this.#live()) return undefined;
    const store = this.#sync(storeId);
    const name = nameOf(key);
    const page = store?.pages.get(name);
    if (page) {
      store!.pages.delete(name);
      store!.pages.set(name, page);
    }
    return page;
  }

  /**
   * Keeps `page` of `storeId`, read under `generation`, unless a write of that store (or of no
   * store) was announced since. Bounded in total (LIST_PAGE_CACHE_MB), evicting fairly across
   * stores (decision 0051): when full, the store holding the most bytes gives up its least recently
   * used page, so a store walking thousands of distinct pages evicts its own pages rather than every
   * other store's, and a deployment of one store keeps plain least-recently-used order.
   */
  put(storeId: string, key: string, page: CachedPage, generation: string): void {
    if (!this.#live()) return;
    let store = this.#sync(storeId);
    if (generation !== this.generation(storeId)) return;
    // A page larger than a quarter of the budget would evict most others: not kept.
    const name = nameOf(key);
    const size = page.body.byteLength + name.length;
    if (size * 4 > this.#maxBytes) return;
    if (store?.pages.has(name)) this.#remove(storeId, store, name);
    while (this.#bytes + size > this.#maxBytes) {
      let largest: [string, StorePages] | undefined;
      for (const entry of this.#stores) if (!largest || entry[1].bytes > largest[1].bytes) largest = entry;
      const [largestId, largestPages] = largest!;
      this.#remove(largestId, largestPages, largestPages.pages.keys().next().value!);
    }
    store = this.#stores.get(storeId);
    if (!store) {
      store = { generation, pages: new Map(), bytes: 0 };
      this.#stores.set(storeId, store);
    }
    store.pages.set(name, ownedBody(page));
    store.bytes += size;
    this.#bytes += size;
  }

  /**
   * Reads the page named `key` of `storeId` now (`read`), for the request expected next (an export's
   * next page, decision 0069): `takeAhead` hands it over if no write of the store was announced
   * since. A page read ahead stands on the same ground as a cached one (the file's comment): it holds
   * the records below its own horizon, read after the generation it is kept under.
   */
  readAhead(storeId: string, key: string, read: () => Promise<PageBytes>): void {
    if (!this.#live()) return;
    const generation = this.generation(storeId);
    const page = read().catch(() => undefined);
    const name = nameOf(key);
    this.#ahead.delete(name);
    this.#ahead.set(name, { storeId, generation, page });
    while (this.#ahead.size > PAGES_READ_AHEAD) this.#ahead.delete(this.#ahead.keys().next().value!);
  }

  /** Resolves once every page being read ahead now has been read (or failed). */
  async aheadRead(): Promise<void> {
    await Promise.all([...this.#ahead.values()].map((ahead) => ahead.page));
  }

  /** The page read ahead under `key` for `storeId` (once), unless the store was written since or the read failed. */
  async takeAhead(storeId: string, key: string): Promise<PageBytes | undefined> {
    const name = nameOf(key);
    const ahead = this.#ahead.get(name);
    if (!ahead) return undefined;
    this.#ahead.delete(name);
    if (ahead.storeId !== storeId) return undefined;
    const page = await ahead.page;
    // Checked after the read ended: a write announced while it ran is caught too.
    if (!this.#live() || ahead.generation !== this.generation(storeId)) return undefined;
    return page;
  }

  #remove(storeId: string, store: StorePages, name: string): void {
    const page = store.pages.get(name)!;
    store.pages.delete(name);
    const size = page.body.byteLength + name.length;
    store.bytes -= size;
    this.#bytes -= size;
    if (store.pages.size === 0) this.#stores.delete(storeId);
  }

  /** `storeId`'s pages, emptied first when its generation moved. */
  #sync(storeId: string): StorePages | undefined {
    const store = this.#stores.get(storeId);
    if (!store) return undefined;
    if (store.generation === this.generation(storeId)) return store;
    for (const name of [...store.pages.keys()]) this.#remove(storeId, store, name);
    return undefined;
  }
}

/**
 * What a page is kept under: the SHA-256 of its key (43 characters). A key holds the page
 * statement's text, kilobytes built by concatenation, which V8 keeps as a tree of string pieces: a
 * cache of 3,800 small pages held 7.6 MiB of key strings beside its 14.5 MiB of bodies, where the
 * budget had counted the keys' lengths. Pages are kept per store, so even two keys of one digest
 * could only ever meet within one store.
 */
function nameOf(key: string): string {
  return createHash('sha256').update(key).digest('base64url');
}

/**
 * `page` with a body in a buffer of its own: a body that is a view into a larger buffer would keep
 * all of that buffer alive while the budget counts only its own bytes. Node hands out buffers under
 * half of `Buffer.poolSize` (64 KiB on Node 24) as slices of one shared slab, so a cached page of
 * 10 small products pinned a whole 64 KiB slab: `serve` grew by 60 MiB over 10,000 stores' first
 * pages while the cache counted 16. Copied once, when kept, into a buffer outside the pool.
 */
function ownedBody(page: CachedPage): CachedPage {
  const { body } = page;
  if (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength) return page;
  const owned = Buffer.allocUnsafeSlow(body.byteLength);
  body.copy(owned);
  return { ...page, body: owned };
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
