/**
 * The read caches of decision 0016: a cached token never outlives a revocation, a roll, a scope
 * change or its own expiry; a cached list page never outlives a write to the store (PostgreSQL,
 * where the page cache runs), whichever process or path wrote.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { updateProduct } from '../../src/catalog/catalog.service.ts';
import { createToken, revokeToken, rollToken, updateToken } from '../../src/tokens/token.service.ts';
import { TokenCache } from '../../src/tokens/token-cache.ts';
import { createStore, homeStore } from '../../src/stores/store.service.ts';
import { inStore, observeStatements } from '../../src/db/store-scope.ts';
import { storeGeneration, tokenGeneration } from '../../src/db/read-cache-signals.ts';
import { listPageCacheOf } from '../../src/api/list-page-cache.ts';

describe.each(backends)('read caches (%s)', (backend) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    await aProduct(t.ctx.database.db, { name: 'first' });
  });
  afterAll(async () => t?.close());

  const list = (authorization: string, url = '/api/v1/products') => t.app.inject({ url, headers: { authorization } });

  it('a revoked token is refused on its next request, though its identity was cached', async () => {
    const db = t.ctx.database.db;
    const { token, summary } = await createToken(db, { name: 'cached' });
    const auth = `Bearer ${token}`;
    expect((await list(auth)).statusCode).toBe(200);
    expect((await list(auth)).statusCode).toBe(200); // served from the cache
    await revokeToken(db, summary.id);
    const refused = await list(auth);
    expect(refused.statusCode).toBe(401);
    expect(refused.json().detail).toMatch(/revoked/);
  });

  it('a rolled-out secret is refused at once when the roll leaves no overlap; a scope taken away is 403 at once', async () => {
    const db = t.ctx.database.db;
    const { token, summary } = await createToken(db, { name: 'rolled' });
    expect((await list(`Bearer ${token}`)).statusCode).toBe(200);
    const rolled = await rollToken(db, summary.id, 0, undefined);
    expect((await list(`Bearer ${token}`)).statusCode).toBe(401);
    expect((await list(`Bearer ${rolled.token}`)).statusCode).toBe(200);

    const limited = await createToken(db, { name: 'limited' });
    expect((await list(`Bearer ${limited.token}`)).statusCode).toBe(200);
    await updateToken(db, limited.summary.id, { rateLimitStandard: 1 });
    const first = await list(`Bearer ${limited.token}`);
    expect(first.headers['x-ratelimit-limit']).toBe('1');
  });

  it.runIf(backend === 'postgres')('a scope taken away by another process (SQL on another connection) is 403 once its NOTIFY arrives', async () => {
    const db = t.ctx.database.db;
    const narrow = await createToken(db, { name: 'narrow', scopes: ['products:read'] });
    expect((await list(`Bearer ${narrow.token}`)).statusCode).toBe(200);
    const before = tokenGeneration(db);
    await sql`UPDATE api_tokens SET scopes = ARRAY['orders:read'] WHERE id = ${narrow.summary.id}`.execute(db);
    await vi.waitFor(() => expect(tokenGeneration(db)).toBeGreaterThan(before));
    expect((await list(`Bearer ${narrow.token}`)).statusCode).toBe(403);
  });

  it.runIf(backend === 'postgres')('a revocation by another process (SQL on another connection) is refused once its NOTIFY arrives', async () => {
    const db = t.ctx.database.db;
    const { token, summary } = await createToken(db, { name: 'elsewhere' });
    expect((await list(`Bearer ${token}`)).statusCode).toBe(200);
    const before = tokenGeneration(db);
    await sql`UPDATE api_tokens SET revoked_at = now() WHERE id = ${summary.id}`.execute(db);
    await vi.waitFor(() => expect(tokenGeneration(db)).toBeGreaterThan(before));
    expect((await list(`Bearer ${token}`)).statusCode).toBe(401);
  });

  it('a cached token is not served past its expiry', async () => {
    const db = t.ctx.database.db;
    let now = Date.now();
    const cache = new TokenCache(db, { maxAgeMs: 24 * 3600_000, live: () => true, now: () => now });
    const expiresAt = new Date(Date.now() + 3600_000).toISOString();
    const { token, summary } = await createToken(db, { name: 'expiring', expiresAt });
    expect(typeof (await cache.authenticate(token))).toBe('object');
    // The database's clock cannot be moved: the row is made expired, with no notification, and the
    // cache's clock moved past the old expiry. An entry kept past its expiry would still answer.
    await sql`ALTER TABLE api_tokens DISABLE TRIGGER USER`.execute(db);
    try {
      await sql`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = ${summary.id}`.execute(db);
    } finally {
      await sql`ALTER TABLE api_tokens ENABLE TRIGGER USER`.execute(db);
    }
    now += 3600_000 + 1000;
    expect(await cache.authenticate(token)).toBe('expired');
  });

  it.runIf(backend === 'postgres')('a cached list page is not served after a write, in process or by another connection', async () => {
    const db = t.ctx.database.db;
    expect(listPageCacheOf(db)).toBeDefined();
    const { authorization } = await t.auth();
    const product = await aProduct(db, { name: 'cached page' });
    const names = async () => ((await list(authorization)).json().data as { id: string; name: string }[]).find((p) => p.id === product.id)?.name;
    expect(await names()).toBe('cached page');
    expect(await names()).toBe('cached page'); // now from the cache
    // The write path of the service (runWrite): in process, at commit.
    await updateProduct(db, product.id, { name: 'renamed by the service' });
    expect(await names()).toBe('renamed by the service');
    // Another connection's write: the store_changed NOTIFY.
    const storeOfDb = (await homeStore(db))!.id;
    const before = storeGeneration(db, storeOfDb);
    await sql`UPDATE products SET name = 'renamed by SQL', last_modified = clock_timestamp() WHERE id = ${product.id}`.execute(db);
    // The NOTIFY names the writing connection's store: that store's generation moves.
    await vi.waitFor(() => expect(storeGeneration(db, storeOfDb)).not.toBe(before));
    expect(await names()).toBe('renamed by SQL');
  });

  describe.runIf(backend === 'postgres')('export pages read ahead (decision 0069)', () => {
    /** Page statements (readPageBody's) sent since the last reset. */
    let pageReads = 0;
    beforeAll(() =>
      observeStatements((text) => {
        if (text.startsWith('SELECT n::text, iso, id, cut::text, data')) pageReads += 1;
      }),
    );
    afterAll(() => observeStatements(undefined));
    const exportPage = async (authorization: string, cursor?: string) => {
      const res = await list(authorization, `/api/v1/products/export?limit=2&order=asc${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.statusCode).toBe(200);
      const ids = res.body
        .split('\n')
        .filter(Boolean)
        .map((line) => (JSON.parse(line) as { id: string }).id);
      return { ids, next: String(res.headers['x-next-cursor']), more: res.headers['x-has-more'] === 'true' };
    };

    it('reads the next page while the client takes this one, and answers its request with it: each page read once', async () => {
      const db = t.ctx.database.db;
      const { authorization } = await t.auth();
      for (let i = 0; i < 5; i++) await aProduct(db, { name: `walked ${i}` });
      const { rows } = await sql<{ id: string }>`SELECT id::text AS id FROM products ORDER BY last_modified, id`.execute(db);
      pageReads = 0;
      let page = await exportPage(authorization);
      // The next page's statement went out before its request.
      await vi.waitFor(() => expect(pageReads).toBe(2));
      const walked = [...page.ids];
      let requests = 1;
      while (page.more) {
        page = await exportPage(authorization, page.next);
        requests += 1;
        walked.push(...page.ids);
      }
      expect(walked).toEqual(rows.map((r) => r.id));
      // One statement per page: every request after the first was answered by the page read ahead
      // (the last page has no next one to read).
      await vi.waitFor(() => expect(pageReads).toBe(requests));
    });

    it('does not answer with a page read ahead after a write to the store: the record moved is not on it', async () => {
      const db = t.ctx.database.db;
      const { authorization } = await t.auth();
      const { rows } = await sql<{ id: string }>`SELECT id::text AS id FROM products ORDER BY last_modified, id OFFSET 2 LIMIT 1`.execute(db);
      const onNextPage = rows[0]!.id;
      pageReads = 0;
      const first = await exportPage(authorization);
      expect(first.more).toBe(true);
      await vi.waitFor(() => expect(pageReads).toBe(2));
      await listPageCacheOf(db)!.aheadRead(); // the next page read, the record on it
      await updateProduct(db, onNextPage, { name: 'moved past the walk' });
      const second = await exportPage(authorization, first.next);
      expect(second.ids).not.toContain(onNextPage);
      expect(second.ids).toHaveLength(2);
    });
  });

  it.runIf(backend === 'postgres')("another store's write, in process or by another connection, leaves a store's cached pages (decision 0051)", async () => {
    const db = t.ctx.database.db;
    const { authorization } = await t.auth();
    const home = (await homeStore(db))!.id;
    const other = (await createStore(db, { name: `Other ${Date.now()}` })).id;
    const otherProduct = await inStore(other, () => aProduct(db, { name: 'elsewhere' }));
    expect((await list(authorization)).statusCode).toBe(200);
    const before = storeGeneration(db, home);
    const otherBefore = storeGeneration(db, other);
    await inStore(other, () => updateProduct(db, otherProduct.id, { name: 'renamed elsewhere' }));
    const otherMid = storeGeneration(db, other);
    expect(otherMid).not.toBe(otherBefore);
    await inStore(other, () =>
      sql`UPDATE products SET name = 'renamed by SQL elsewhere', last_modified = clock_timestamp() WHERE id = ${otherProduct.id}`.execute(db),
    );
    await vi.waitFor(() => expect(storeGeneration(db, other)).not.toBe(otherMid));
    // Both of the other store's writes have been heard (the in-process one and the NOTIFY): the home store's pages stayed.
    expect(storeGeneration(db, home)).toBe(before);
  });
});
