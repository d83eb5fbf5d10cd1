/**
 * Reading by index only (db/index-reads.ts): code in `readingByIndex` runs its statements on a
 * connection whose planner settings say no sequential and no bitmap scans, set by the statement that
 * switches the connection's store scope as it is taken (db/store-scope.ts), and every other code gets
 * a connection with PostgreSQL's defaults back, in its own store scope. Given a caller's transaction,
 * the settings hold for the rest of that transaction only.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import type { Database } from '../../src/db/schema.ts';
import { readingByIndex, readsByIndex } from '../../src/db/index-reads.ts';
import { asPlatform, inStore } from '../../src/db/store-scope.ts';
import { createStore } from '../../src/stores/store.service.ts';

interface Settings {
  seqscan: string;
  bitmapscan: string;
  role: string;
  store: string;
}

const settings = async (db: Kysely<Database>): Promise<Settings> =>
  (
    await sql<Settings>`SELECT current_setting('enable_seqscan') AS seqscan, current_setting('enable_bitmapscan') AS bitmapscan,
      current_user::text AS role, coalesce(current_setting('store_api.store_id', true), '') AS store`.execute(db)
  ).rows[0]!;

describe.each(backends)('reading by index only (%s)', (backend) => {
  let t: TestApp;
  let db: Kysely<Database>;
  let store: string;

  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = t.database.db;
    store = (await createStore(db, { name: `index reads ${randomUUID()}` })).id;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('switches a connection to the settings and back, keeping its store scope', async () => {
    // Every connection of the pool goes through both modes (taken one after another, LIFO or not).
    for (let round = 0; round < 3; round++) {
      const inside = await asPlatform(() => readingByIndex(db, (d) => Promise.all([settings(d), settings(d), settings(d)])));
      for (const s of inside) expect(s).toMatchObject({ seqscan: 'off', bitmapscan: 'off', role: 'store_api_platform' });
      const outside = await asPlatform(() => Promise.all([settings(db), settings(db), settings(db)]));
      for (const s of outside) expect(s).toMatchObject({ seqscan: 'on', bitmapscan: 'on', role: 'store_api_platform' });
      const ofStore = await inStore(store, () => readingByIndex(db, (d) => settings(d)));
      expect(ofStore).toMatchObject({ seqscan: 'off', bitmapscan: 'off', role: 'store_api_tenant', store });
      const ofStoreOutside = await inStore(store, () => settings(db));
      expect(ofStoreOutside).toMatchObject({ seqscan: 'on', bitmapscan: 'on', role: 'store_api_tenant', store });
    }
    expect(readsByIndex()).toBe(false);
  });

  it('a transaction begun reading by index reads so throughout', async () => {
    const seen = await asPlatform(() =>
      readingByIndex(db, (d) =>
        d.transaction().execute(async (trx) => {
          const first = await settings(trx);
          await sql`SELECT 1`.execute(trx);
          return [first, await settings(trx)];
        }),
      ),
    );
    for (const s of seen) expect(s).toMatchObject({ seqscan: 'off', bitmapscan: 'off' });
  });

  it("given a caller's transaction, sets the settings for the rest of it only", async () => {
    const seen = await asPlatform(() =>
      db.transaction().execute(async (trx) => {
        const before = await settings(trx);
        const during = await readingByIndex<Database, Settings>(trx, settings);
        return { before, during, after: await settings(trx) };
      }),
    );
    expect(seen.before).toMatchObject({ seqscan: 'on', bitmapscan: 'on' });
    expect(seen.during).toMatchObject({ seqscan: 'off', bitmapscan: 'off' });
    expect(seen.after).toMatchObject({ seqscan: 'off', bitmapscan: 'off' });
    const next = await asPlatform(() => Promise.all([settings(db), settings(db)]));
    for (const s of next) expect(s).toMatchObject({ seqscan: 'on', bitmapscan: 'on' });
  });
});
