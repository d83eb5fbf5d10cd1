/**
 * The list page cache holds at most LIST_PAGE_CACHE_MB (decision 0016; its memory in decision 0039):
 * the bodies and keys it keeps never add up to more than its budget, whatever is put into it, the
 * least recently used page goes first, a page larger than a quarter of the budget is not kept, and a
 * write to the store empties it.
 */
import { describe, expect, it } from 'vitest';
import type { Kysely } from 'kysely';
import { ListPageCache, type CachedPage } from '../../src/api/list-page-cache.ts';
import { storeChanged } from '../../src/db/read-cache-signals.ts';
import type { Database } from '../../src/db/schema.ts';

const page = (bytes: number): CachedPage => ({ body: Buffer.alloc(bytes, 'x'), nextCursor: null, hasMore: false });

/** Keys and body bytes the cache still answers for, among `keys` (asking reorders it: check last). */
function held(cache: ListPageCache, keys: string[]): { keys: string[]; bytes: number } {
  const found = keys.filter((key) => cache.get(key) !== undefined);
  return { keys: found, bytes: found.reduce((sum, key) => sum + cache.get(key)!.body.byteLength + key.length, 0) };
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
      cache.put(key, page(500 + ((i * 37) % 2_000)), cache.generation());
      if (i % 3 === 0) cache.get(keys[Math.floor(i / 2)]!);
      expect(held(cache, keys).bytes).toBeLessThanOrEqual(budget);
    }
    const kept = held(cache, keys);
    expect(kept.keys).toContain('page-199');
    expect(kept.keys).not.toContain('page-0');
    // Filled: at most one more page would have gone over the budget.
    expect(kept.bytes).toBeGreaterThan(budget - 2_600);
    storeChanged(db);
    expect(held(cache, keys).keys).toEqual([]);
  });

  it('does not keep a page larger than a quarter of the budget', () => {
    const { cache } = fresh();
    cache.put('small', page(1_000), cache.generation());
    cache.put('large', page(budget / 4), cache.generation());
    expect(cache.get('large')).toBeUndefined();
    expect(cache.get('small')).toBeDefined();
  });

  it('replacing a page counts its bytes once', () => {
    const { cache } = fresh();
    for (let i = 0; i < 50; i++) cache.put('same', page(2_000), cache.generation());
    cache.put('other', page(2_000), cache.generation());
    cache.put('third', page(2_000), cache.generation());
    cache.put('fourth', page(2_000), cache.generation());
    expect(held(cache, ['same', 'other', 'third', 'fourth']).keys).toEqual(['same', 'other', 'third', 'fourth']);
  });
});
