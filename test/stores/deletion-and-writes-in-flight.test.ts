/**
 * A store's deletion and suspension against its writes in flight (decision 0051, "A platform
 * operator's control"). A key's store status is cached, so a write may pass authentication just
 * before the store is suspended or deleted. Each admin write of a store holds the store's row
 * `FOR SHARE` as its first statement (stores/store.service.ts `holdStoreOpen`):
 *  - a write already past that point finishes first: the deletion's status change waits for it, and
 *    then erases what it wrote (before, the deletion swept the table while the write was on its way
 *    and its rows stayed behind, owned by a store that no longer exists);
 *  - a write that comes after is refused 403 `store_suspended`, with nothing written, even by a key
 *    whose cached status still says active.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import pg from 'pg';
import { backends, type TestDatabase } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { STORE_OWNED_TABLES, createStore, deleteStore } from '../../src/stores/store.service.ts';
import { OWNER_SCOPE, asPlatform, inStore, runInScope } from '../../src/db/store-scope.ts';
import { setAdminWriteStepHook } from '../../src/admin/admin-write-transaction.ts';

describe.each(backends)('a store deleted or suspended while its writes are in flight (%s)', (backend) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
  });
  afterEach(() => setAdminWriteStepHook(undefined));
  afterAll(async () => t?.close());

  async function storeWithKey(name: string): Promise<{ id: string; headers: Record<string, string> }> {
    const { id } = await createStore(t.database.db, { name });
    const { token } = await inStore(id, () => createToken(t.database.db, { name, scopes: [...SCOPES] }));
    return { id, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } };
  }
  const product = (name: string) => JSON.stringify({ name, product_type: 'physical', price: 5, variants: [{ name: 'One', price: 5, stock: 3 }] });
  /** Rows of `storeId` in every store-owned table (as the platform: row-level security would hide them). */
  const rowsOf = (storeId: string) =>
    asPlatform(async () => {
      let n = 0;
      for (const table of STORE_OWNED_TABLES) {
        n += (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE store_id = ${storeId}::uuid`.execute(t.database.db)).rows[0]!.n;
      }
      return n;
    });

  it('a write authenticated while the store was active is refused once it is no longer, with nothing written', async () => {
    for (const status of ['suspended', 'deleting'] as const) {
      const store = await storeWithKey(`refused-${status}-${backend}`);
      // The key is authenticated and cached as active.
      expect((await t.app.inject({ url: '/admin/api/v1/tokens', headers: store.headers })).statusCode).toBe(200);
      const before = await rowsOf(store.id);
      // The status changes behind the cache's back (as another process would, before its notice arrives).
      await runInScope(OWNER_SCOPE, () => sql`ALTER TABLE stores DISABLE TRIGGER stores_notify_tokens`.execute(t.database.db));
      try {
        await asPlatform(() => sql`UPDATE stores SET status = ${status} WHERE id = ${store.id}::uuid`.execute(t.database.db));
      } finally {
        await runInScope(OWNER_SCOPE, () => sql`ALTER TABLE stores ENABLE TRIGGER stores_notify_tokens`.execute(t.database.db));
      }
      const res = await t.app.inject({ method: 'POST', url: '/admin/api/v1/products', headers: store.headers, payload: product(`late-${status}`) });
      expect({ status, code: res.statusCode, body: res.json() }).toMatchObject({ status, code: 403, body: { code: 'store_suspended' } });
      expect(res.json().detail).toMatch(status === 'suspended' ? /suspended/ : /being deleted/);
      expect(await rowsOf(store.id)).toBe(before);
    }
  });

  it.runIf(backend === 'postgres')('a deletion waits for a write already under way, then erases it: no row of the store is left behind', async () => {
    const store = await storeWithKey(`in-flight-${backend}`);
    const url = (t.database as TestDatabase).url;
    const watcher = new pg.Client({ connectionString: url });
    await watcher.connect();
    try {
      // Hold the write after its store is held and before it writes anything.
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let held!: () => void;
      const isHeld = new Promise<void>((resolve) => (held = resolve));
      setAdminWriteStepHook(async (step) => {
        if (step !== 'store_held') return;
        held();
        await released;
      });
      const write = t.app.inject({ method: 'POST', url: '/admin/api/v1/products', headers: store.headers, payload: product('in flight') });
      await isHeld;
      setAdminWriteStepHook(undefined);
      const deletion = deleteStore(t.database.db, store.id);
      let deletionDone = false;
      void deletion.then(() => (deletionDone = true));
      // The deletion's status change waits on the write's hold of the store's row.
      for (let i = 0; ; i++) {
        const { rows } = await watcher.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE 'update "stores"%'`,
        );
        if (rows[0]!.n > 0) break;
        expect(deletionDone, 'the deletion finished while a write of its store was under way').toBe(false);
        if (i > 600) throw new Error('the deletion never waited on the write');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      release();
      const res = await write;
      expect(res.statusCode, res.body).toBe(201);
      await deletion;
      expect(await rowsOf(store.id)).toBe(0);
      const { rows } = await watcher.query('SELECT 1 FROM stores WHERE id = $1', [store.id]);
      expect(rows).toEqual([]);
    } finally {
      await watcher.end();
    }
  });
});
