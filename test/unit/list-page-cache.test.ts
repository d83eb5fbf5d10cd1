/**
 * The list page cache holds at most LIST_PAGE_CACHE_MB (decision 0016; its memory in decision 0039):
 * the bodies and keys it keeps never add up to more than its budget, whatever is put into it, the
 * least recently used page goes first, a page larger than a quarter of the budget is not kept, and a
 * write to the store empties it. Across stores (decision 0051): a write of one store leaves another's
 * pages, a write of no store empties every store's, and when full the store holding the most gives
 * up its pages first, so one store walking many pages does not evict the others.
 */
import { describe, expect, it } from 'vitest';
import type { Kysely } from 'kysely';
import { ListPageCache, type CachedPage } from '../../src/api/list-page-cache.ts';
import { storeChanged } from '../../src/db/read-cache-signals.ts';
import type { Database } from '../../src/db/schema.ts';

const STORE = 'store-a';
const page = (bytes: number): CachedPage => ({ body: Buffer.alloc(bytes, 'x'), nextCursor: null, hasMore: false });

/** Keys and body bytes the cache still answers for, among `keys` (asking reorders it: check last). */
function held(cache: ListPageCache, keys: string[]): { keys: string[]; bytes: number } {
  const found = keys.filter((key) => cache.get(STORE, key) !== undefined);
  return { keys: found, bytes: found.reduce((sum, key) => sum + cache.get(STORE, key)!.body.byteLength + key.length, 0) };
}

describe('list page cache budget', () => {
  const budget = 10_000;
  const fresh = () => {
    const db = {} as Kysely<Database>;
    return { db, cache: new ListPageCache(db, budget, () => true) };
  };

  it('never holds more than its budget, keeping the most recently used pages', () => {
    const { db, cache } = fresh();
    const keys: string[] = [];
    for (let i = 0; i < 200; i++) {
      const key = `page-${i}`;
      keys.push(key);
      // Sizes vary from 500 to 2,490 bytes (all under a quarter of the budget).
      cache.put(STORE, key, page(500 + ((i * 37) % 2_000)), cache.generation(STORE));
      if (i % 3 === 0) cache.get(STORE, keys[Math.floor(i / 2)]!);
      expect(held(cache, keys).bytes).toBeLessThanOrEqual(budget);
    }
    const kept = held(cache, keys);
    expect(kept.keys).toContain('page-199');
    expect(kept.keys).not.toContain('page-0');
    // Filled: at most one more page would have gone over the budget.
    expect(kept.bytes).toBeGreaterThan(budget - 2_600);
    storeChanged(db, STORE);
    expect(held(cache, keys).keys).toEqual([]);
  });

  it('does not keep a page larger than a quarter of the budget', () => {
    const { cache } = fresh();
    cache.put(STORE, 'small', page(1_000), cache.generation(STORE));
    cache.put(STORE, 'large', page(budget / 4), cache.generation(STORE));
    expect(cache.get(STORE, 'large')).toBeUndefined();
    expect(cache.get(STORE, 'small')).toBeDefined();
  });

  it('holds no more memory than it counts: a body sliced from a larger buffer is kept in one of its own', () => {
    const { cache } = fresh();
    const keys: string[] = [];
    for (let i = 0; i < 50; i++) {
      const key = `slice-${i}`;
      keys.push(key);
      // As Node hands out small buffers: each a view into a 64 KiB slab (Buffer.poolSize on Node 24).
      const slab = Buffer.alloc(65_536, 'y');
      slab.write(`{"page":${i}}`, 100);
      cache.put(STORE, key, { body: slab.subarray(100, 1_100), nextCursor: null, hasMore: false }, cache.generation(STORE));
    }
    const kept = keys.flatMap((key) => {
      const found = cache.get(STORE, key);
      return found ? [{ key, body: found.body }] : [];
    });
    expect(kept.length).toBeGreaterThan(5);
    // The buffers the cache keeps alive, not only the bytes it serves, stay within its budget.
    const buffers = new Set(kept.map((k) => k.body.buffer));
    expect([...buffers].reduce((sum, b) => sum + b.byteLength, 0)).toBeLessThanOrEqual(budget);
    // The same bytes are served.
    for (const { key, body } of kept) {
      expect(body.byteLength).toBe(1_000);
      expect(body.subarray(0, 12).toString()).toBe(`{"page":${key.slice('slice-'.length)}}`.padEnd(12, 'y'));
    }
  });

  it('replacing a page counts its bytes once', () => {
    const { cache } = fresh();
    for (let i = 0; i < 50; i++) cache.put(STORE, 'same', page(2_000), cache.generation(STORE));
    cache.put(STORE, 'other', page(2_000), cache.generation(STORE));
    cache.put(STORE, 'third', page(2_000), cache.generation(STORE));
    cache.put(STORE, 'fourth', page(2_000), cache.generation(STORE));
    expect(held(cache, ['same', 'other', 'third', 'fourth']).keys).toEqual(['same', 'other', 'third', 'fourth']);
  });

  it("keeps another store's pages through one store's writes; a write of no store empties every store's", () => {
    const { db, cache } = fresh();
    cache.put('a', 'a1', page(1_000), cache.generation('a'));
    cache.put('b', 'b1', page(1_000), cache.generation('b'));
    storeChanged(db, 'a');
    expect(cache.get('a', 'a1')).toBeUndefined();
    expect(cache.get('b', 'b1')).toBeDefined();
    // A page read before that write of its store is not kept.
    const stale = cache.generation('b');
    storeChanged(db, 'b');
    cache.put('b', 'b2', page(1_000), stale);
    expect(cache.get('b', 'b2')).toBeUndefined();
    cache.put('b', 'b3', page(1_000), cache.generation('b'));
    storeChanged(db);
    expect(cache.get('b', 'b3')).toBeUndefined();
  });

  it("evicts the store holding the most first: one store's many pages do not push out another's few", () => {
    const { cache } = fresh();
    cache.put('quiet', 'q1', page(1_000), cache.generation('quiet'));
    cache.put('quiet', 'q2', page(1_000), cache.generation('quiet'));
    // A busy store walks 100 distinct pages, 20 times the budget.
    for (let i = 0; i < 100; i++) cache.put('busy', `b${i}`, page(2_000), cache.generation('busy'));
    expect(cache.get('quiet', 'q1')).toBeDefined();
    expect(cache.get('quiet', 'q2')).toBeDefined();
    expect(cache.get('busy', 'b99')).toBeDefined();
    expect(cache.get('busy', 'b0')).toBeUndefined();
  });
});
